"""The scripted user: states its requests from its hidden instruction, a goal at a time, and answers the agent.

It opens with its first goal (`goals.py`), gives the identifying details its instruction gives when asked,
confirms what the agent proposes, states its next goal when offered more help, and ends with `###STOP###`
when it has none left. With `options.mistakes.user_deviation` (a probability per episode) it deviates from
its instruction once, at the end: it asks to cancel another of its open records (`goals.deviation`). The
deviation is recorded in `injected` with step -1; the episode loop sets the step to the user message's index.
"""

from __future__ import annotations

from typing import Any

from castdata.models.base import EpisodeContext, Reply, ToolCall
from castdata.models.dual_control import Phone
from castdata.models.scripted.goals import deviation, goals, identity
from castdata.records import InjectedMistake

USER_MISTAKE_KINDS = ("user_deviation",)  # asks for something its instruction does not say
STOP = "No, that's all. Thank you! ###STOP###"


class ScriptedUser:
    """A deterministic user with a hidden instruction (see the module docstring)."""

    PATIENCE = 3  # consecutive turns it does not understand before giving up

    def __init__(self, ctx: EpisodeContext, mistakes: dict[str, float] | None = None) -> None:
        self.ctx = ctx
        self.goals = goals(ctx.domain, ctx.task)
        self.stated = 0
        self.confused = 0
        self.injected: list[InjectedMistake] = []
        rate = (mistakes or {}).get("user_deviation", 0.0)
        self.deviation = deviation(ctx.domain, ctx.task) if ctx.rng("user").random() < rate else None
        self.phone = Phone(ctx.task)  # dual control: runs the user's gold calls when the agent asks for them

    def resume(self, messages: list[dict[str, Any]]) -> None:
        """Continue a recorded conversation: the goals (and the deviation) its user turns already stated."""
        said = " ".join(m.get("content") or "" for m in messages if m["role"] == "user")
        self.stated = sum(1 for goal in self.goals if goal in said)
        if self.deviation is not None and self.deviation.text in said:
            self.deviation = None
        self.phone.resume(messages)

    def _deviate(self) -> Reply:
        extra, self.deviation = self.deviation, None
        task = self.ctx.task
        breaking = not self.ctx.domain.reaches_gold([*task.actions, extra.action], task)
        self.injected.append(
            InjectedMistake(kind="user_deviation", step=-1, outcome_breaking=breaking, detail=extra.text)
        )
        return Reply(content=extra.text)

    async def reply(self, agent_message: str | None) -> Reply:
        """The user's next message."""
        if agent_message is None:
            self.stated = 1
            return Reply(content=f"Hi! {self.goals[0]}")
        text = agent_message.lower()
        if "anything else" in text:
            if self.stated < len(self.goals):
                self.stated += 1
                return Reply(content=f"Yes, one more thing. {self.goals[self.stated - 1]}")
            return self._deviate() if self.deviation is not None else Reply(content=STOP)
        understood = self._answer(text)
        if understood is not None:
            self.confused = 0
            return understood
        self.confused += 1
        if self.confused >= self.PATIENCE:
            return Reply(content="I don't think we're getting anywhere. ###STOP###")
        return Reply(content="Sorry, I'm not sure what you mean. Can you help me with my request?")

    def _answer(self, text: str) -> Reply | None:
        """The reply to an agent message the user understands: its own tool calls, a yes, its identity; else None."""
        calls = self.phone.calls_for(text)
        if calls:
            return Reply(tool_calls=calls)
        if "confirm" in text or "yes/no" in text:
            return Reply(content="Yes, please proceed.")
        if any(word in text for word in ("email", "zip", "user id", "date of birth", "phone", "your name")):
            return Reply(content=identity(self.ctx.domain, self.ctx.task))
        return None

    async def observe(self, results: list[tuple[ToolCall, str]]) -> Reply:
        """The user's message after running its own tools (dual control)."""
        return await self.phone.observe(results)
