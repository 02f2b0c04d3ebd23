"""What the model backends (openai, vllm, transformers) share: each implements one `chat` call; from it come
the agent session (one chat call per turn), the LLM user session, `complete`, usage and cost."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from castdata.errors import ConfigError
from castdata.models.base import EpisodeContext, Reply
from castdata.models.spec import ModelSpec
from castdata.models.toolcall_parser import parse_tool_calls
from castdata.models.user_llm import LLMUser, parse_traits
from castdata.records import CriticCall, InjectedMistake, Interception, Usage


@dataclass(frozen=True)
class ChatCall:
    """One chat completion to make: the conversation, the tools offered (None: none), an output schema, a seed."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    json_schema: dict[str, Any] | None = None
    seed: int | None = None


class ChatAgent:
    """The agent of one episode: each turn is one chat call with the domain's tools."""

    def __init__(self, backend: ChatBackend, seed: int | None) -> None:
        self.backend = backend
        self.seed = seed
        self.injected: list[InjectedMistake] = []
        self.interceptions: list[Interception] = []
        self.critic_calls: list[CriticCall] = []

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        return await self.backend.chat(messages, tools=tools, seed=self.seed)

    def resume(self, messages: list[dict[str, Any]]) -> None:
        """Nothing to learn: each turn sends the model the whole conversation."""


class ChatBackend:
    """Base of the chat-model backends: a subclass implements `_complete`. `OPTIONS` lists the `spec.options`
    keys it accepts."""

    OPTIONS: frozenset[str] = frozenset({"traits"})

    def __init__(self, spec: ModelSpec) -> None:
        unknown = sorted(set(spec.options) - self.OPTIONS)
        if unknown:
            allowed = ", ".join(sorted(self.OPTIONS))
            raise ConfigError(f"options.{unknown[0]}: unknown {spec.backend} option; allowed: {allowed}")
        self.spec = spec
        self.traits = parse_traits(spec.options.get("traits", {}))

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        json_schema: dict[str, Any] | None = None,
        seed: int | None = None,
    ) -> Reply:
        """One chat completion; raises `InfrastructureError` when the model cannot be reached."""
        return await self._complete(ChatCall(messages, tools or None, json_schema, seed))

    async def _complete(self, call: ChatCall) -> Reply:
        raise NotImplementedError

    def episode_seed(self, ctx: EpisodeContext) -> int | None:
        """The sampling seed for one episode: `sampling.seed` offset by the episode's seed (trials differ,
        reruns repeat), or None when no seed is set."""
        base = self.spec.sampling.seed
        return None if base is None else (base + ctx.seed) % 2**31

    def agent_session(self, ctx: EpisodeContext) -> ChatAgent:
        return ChatAgent(self, self.episode_seed(ctx))

    def user_session(self, ctx: EpisodeContext) -> LLMUser:
        return LLMUser(ctx, self.chat, self.traits, self.episode_seed(ctx))

    async def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> Reply:
        """One plain completion (no tools), e.g. for a teacher or a critic; `json_schema` constrains the output."""
        return await self.chat(messages, json_schema=json_schema, seed=self.spec.sampling.seed)

    async def aclose(self) -> None:
        return None

    def usage(self, prompt_tokens: int, completion_tokens: int, latency_s: float) -> Usage:
        """A call's usage, priced with the spec's prices per million tokens (None when it has none)."""
        price_in, price_out = self.spec.price_in_per_mtok, self.spec.price_out_per_mtok
        cost = None
        if price_in is not None or price_out is not None:
            cost = (prompt_tokens * (price_in or 0.0) + completion_tokens * (price_out or 0.0)) / 1e6
        return Usage(
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, latency_s=latency_s, cost_usd=cost
        )

    def text_reply(self, text: str, prompt_tokens: int, completion_tokens: int, started: float) -> Reply:
        """The reply in generated text (`<think>` dropped, `<tool_call>` blocks parsed), timed from `started`."""
        parsed = parse_tool_calls(text)
        usage = self.usage(prompt_tokens, completion_tokens, time.perf_counter() - started)
        return Reply(content=parsed.content or None, tool_calls=parsed.tool_calls, usage=usage)


def wire_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages in OpenAI wire format: tool-call arguments as JSON strings (records keep them as dicts).
    Messages with tool calls are copied; the others are passed through unchanged."""
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if calls:
            message = {
                **message,
                "tool_calls": [
                    {**call, "function": {**call["function"], "arguments": _json_text(call["function"]["arguments"])}}
                    for call in calls
                ],
            }
        out.append(message)
    return out


def _json_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
