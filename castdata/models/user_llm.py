"""The LLM user simulator (tau-bench's design, with tau-trait's persona traits), over any chat backend.

The user model gets the hidden task instruction and the rules (reveal only what is asked and only what the
instruction gives, never invent, `###STOP###` when done or stuck, `###TRANSFER###` when transferred). Roles are
flipped: the agent's messages reach the user model as `user` turns, its own replies are `assistant` turns.
Persona traits (tau-trait's `trait_dict`: impatience, confusion, skeptical, incoherence; level 0-3) are
rendered into the prompt. An empty reply is retried, then ends the episode as `user_error`. It can resume a
recorded conversation (`run_episode(prefix=...)`). In dual-control domains (`tau2-telecom`) it is offered the
user's own tools (the domain's `user_tool_schemas`): a reply may be tool calls, whose results come back to it
as `tool` turns (`observe`) before it says something to the agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from castdata.errors import ConfigError
from castdata.models.base import EpisodeContext, ModelOutputError, Reply, ToolCall
from castdata.records import InjectedMistake, Usage

ChatFn = Callable[..., Awaitable[Reply]]
"""`chat(messages, *, tools=None, json_schema=None, seed=None) -> Reply`: one chat completion."""

USER_ROLE = "You are a user interacting with an agent."
AGENT_GREETING = "Hi! How can I help you today?"
EMPTY_RETRIES = 2
DEVICE_RULE = (
    "- You have tools that act on your own phone. When the agent asks you to check or change something"
    " on it, use them, and ground what you tell the agent on their results.\n"
)

TRAITS: dict[str, tuple[str, str, str]] = {
    "impatience": (
        "You are a little impatient: you like short answers and say so when things drag on.",
        "You are impatient: you push the agent to hurry, complain about extra questions, and keep your messages short.",
        "You are very impatient: you are curt, demand immediate results, and show irritation at every delay or question.",
    ),
    "confusion": (
        "You are sometimes unsure what the agent means and ask it to clarify.",
        "You are often confused: you misunderstand questions, mix up terms, and need things explained again.",
        "You are very confused: you lose track of the conversation, misread questions, and need step-by-step guidance.",
    ),
    "skeptical": (
        "You are a little skeptical: you ask why the agent needs a piece of information before giving it.",
        "You are skeptical: you question the agent's statements and want them justified before you agree.",
        "You are very skeptical: you distrust the agent, challenge its claims, and agree only after convincing reasons.",
    ),
    "incoherence": (
        "Your messages are sometimes a little disorganized.",
        "Your messages are often disorganized: you jump between topics and give details out of order.",
        "Your messages are very disorganized: fragmented sentences, abrupt topic changes, details scattered.",
    ),
}
"""Prompt text per trait for levels 1-3 (level 0: trait absent)."""


def parse_traits(raw: Any) -> dict[str, int]:
    """Validate `options.traits` (trait name -> level 0-3); raises ConfigError naming the bad key or value."""
    if not isinstance(raw, dict):
        raise ConfigError(f"options.traits: must map trait names to levels; allowed traits: {', '.join(TRAITS)}")
    for name, level in raw.items():
        if name not in TRAITS:
            raise ConfigError(f"options.traits: unknown trait '{name}'; allowed: {', '.join(TRAITS)}")
        if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level <= 3:
            raise ConfigError(f"options.traits.{name}: level must be an integer 0-3 (got {level!r})")
    return {name: level for name, level in raw.items() if level}


def user_system_prompt(instruction: str, traits: dict[str, int], device: bool = False) -> str:
    """The user model's system prompt: who it is, its hidden goal, the rules (with `device`: its phone's tools)
    and its persona."""
    persona = "".join(f"- {TRAITS[name][level - 1]}\n" for name, level in traits.items())
    device_rule = DEVICE_RULE if device else ""
    persona_part = f"\nPersona (it shapes how you talk, never the facts you give):\n{persona}" if persona else ""
    return f"""{USER_ROLE}

Instruction: {instruction}

Rules:
- Just generate one line at a time to simulate the user's message.
- Do not give away all the instruction at once. Only provide the information that is necessary for the current step.
- Do not hallucinate information that is not provided in the instruction. For example, if the agent asks for the order id but it is not mentioned in the instruction, do not make up an order id, just say you do not remember or have it.
- If the instruction goal is satisfied, or it cannot be reached, generate '###STOP###' as a standalone message without anything else to end the conversation.
- If you are transferred to another agent or a human, generate '###TRANSFER###' as a standalone message.
{device_rule}- Do not repeat the exact instruction in the conversation. Instead, use your own words to convey the same information.
- Try to make the conversation as natural as possible, and stick to the personalities in the instruction.
{persona_part}"""


class LLMUser:
    """The simulated user of one episode, played by a chat model."""

    def __init__(self, ctx: EpisodeContext, chat: ChatFn, traits: dict[str, int], seed: int | None) -> None:
        self.chat = chat
        self.seed = seed
        self.tools = list(ctx.domain.user_tool_schemas) or None
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": user_system_prompt(ctx.task.instruction, traits, self.tools is not None)},
            {"role": "user", "content": AGENT_GREETING},
        ]
        self.injected: list[InjectedMistake] = []

    def resume(self, messages: list[dict[str, Any]]) -> None:
        """Continue a recorded conversation (the agent's transcript): its user messages and agent messages to the
        user become this model's history, roles flipped; a trailing agent message is left for `reply`."""
        turns = [m for m in messages if m["role"] == "user" or (m["role"] == "assistant" and not m.get("tool_calls"))]
        if turns and turns[-1]["role"] == "assistant":
            turns.pop()
        flipped = [
            {"role": "assistant" if m["role"] == "user" else "user", "content": m["content"] or ""} for m in turns
        ]
        self.messages = self.messages[:2] + flipped

    async def reply(self, agent_message: str | None) -> Reply:
        """The user's next message; `None` opens the conversation (the user model answers the greeting)."""
        if agent_message is not None:
            self.messages.append({"role": "user", "content": agent_message})
        return await self._next()

    async def observe(self, results: list[tuple[ToolCall, str]]) -> Reply:
        """The user's next turn after its own tool calls returned `results` (dual control)."""
        self.messages += [
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
            for call, content in results
        ]
        return await self._next()

    async def _next(self) -> Reply:
        usage = Usage()
        for attempt in range(1 + EMPTY_RETRIES):
            seed = None if self.seed is None else self.seed + attempt
            answer = await self.chat(self.messages, seed=seed, **({"tools": self.tools} if self.tools else {}))
            usage = usage + (answer.usage or Usage())
            text = (answer.content or "").strip()
            if self.tools and answer.tool_calls:
                calls = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments}}
                    for c in answer.tool_calls
                ]
                self.messages.append({"role": "assistant", "content": text or None, "tool_calls": calls})
                return Reply(tool_calls=answer.tool_calls, usage=usage)
            if text:
                self.messages.append({"role": "assistant", "content": text})
                return Reply(content=text, usage=usage)
        raise ModelOutputError("user", f"the user model gave an empty reply {1 + EMPTY_RETRIES} times in a row")
