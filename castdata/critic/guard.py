"""The critic guard: every proposed write (or every action) is judged before it executes.

`GuardedBackend` wraps an agent backend. Its sessions pass each proposal the guard covers to the critic; on an
`invalid` verdict the agent is asked again with the proposal and the critique as feedback
(`castdata.models.feedback`), at most `max_revisions` times, after which the last proposal executes as it is.
Only the accepted reply reaches the episode loop, so the database never sees an intercepted action; each
interception is recorded in the trajectory (`Trajectory.interceptions`, collected by the episode loop), and so is
every judgement with its usage (`Trajectory.critic_calls`). An unusable answer (no verdict) sends nothing back: the
proposal executes as the agent made it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from castdata.models.base import AgentSession, Backend, EpisodeContext, Reply, UserSession
from castdata.models.feedback import feedback_messages
from castdata.records import CriticCall, InjectedMistake, Interception, Usage

if TYPE_CHECKING:
    from castdata.label.schema import CritiqueJSON

Scope = Literal["writes", "all"]


@dataclass
class Critique:
    """A critic's judgement of one proposed action. `verdict` is None when the critic's output was unusable."""

    verdict: Literal["valid", "invalid"] | None
    text: str  # what the agent is told when the action is sent back
    structured: CritiqueJSON | None = None  # the structured critique, for critics that write one
    usage: Usage | None = None  # what the critic's call cost (None: no model call)


class Critic(Protocol):
    """Judges a proposed agent action from what the agent has seen (`messages`, the episode's transcript)."""

    async def judge(
        self, ctx: EpisodeContext, messages: list[dict[str, Any]], proposed: dict[str, Any]
    ) -> Critique: ...

    async def aclose(self) -> None: ...


def proposal_message(reply: Reply) -> dict[str, Any]:
    """A reply as the assistant message the agent emitted: every tool call, raw arguments when malformed."""
    if not reply.tool_calls:
        return {"role": "assistant", "content": reply.content or ""}
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": c.raw_arguments if c.arguments is None else c.arguments},
        }
        for c in reply.tool_calls
    ]
    return {"role": "assistant", "content": reply.content or None, "tool_calls": calls}


@dataclass
class Guard:
    """Which proposals a critic judges and how many revisions an agent gets."""

    critic: Critic
    scope: Scope = "writes"
    max_revisions: int = 2

    def covers(self, ctx: EpisodeContext, reply: Reply) -> bool:
        """Whether the critic judges this proposal: every action, or a tool call whose (first) tool writes."""
        if self.scope == "all":
            return True
        return bool(reply.tool_calls) and ctx.domain.tool_kind(reply.tool_calls[0].name) == "write"


def _sum(a: Usage | None, b: Usage | None) -> Usage | None:
    return b if a is None else a if b is None else a + b


class GuardedAgent:
    """An agent session whose proposals pass the guard; `interceptions`, `critic_calls` and `injected` are read by
    the episode loop."""

    def __init__(self, inner: AgentSession, ctx: EpisodeContext, guard: Guard) -> None:
        self.inner, self.ctx, self.guard = inner, ctx, guard
        self.interceptions: list[Interception] = []
        self.critic_calls: list[CriticCall] = []

    @property
    def injected(self) -> list[InjectedMistake]:
        """The wrapped session's injected mistakes (scripted agents)."""
        return self.inner.injected

    def resume(self, messages: list[dict[str, Any]]) -> None:
        """The wrapped session learns the conversation."""
        self.inner.resume(messages)

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        """The agent's accepted reply; its usage counts every proposal of the turn."""
        reply = await self.inner.act(messages, tools)
        tries: list[dict[str, Any]] = []
        attempt = 1
        while self.guard.covers(self.ctx, reply):
            proposed = proposal_message(reply)
            critique = await self.guard.critic.judge(self.ctx, messages, proposed)
            self.critic_calls.append(
                CriticCall(
                    step=len(messages),
                    attempt=attempt,
                    verdict=critique.verdict,
                    critique=critique.text,
                    usage=critique.usage,
                )
            )
            if critique.verdict != "invalid":
                break
            record = Interception(
                step=len(messages),
                attempt=attempt,
                proposed=proposed,
                verdict="invalid",
                critique=critique.text,
                revised=None,
            )
            self.interceptions.append(record)
            if attempt > self.guard.max_revisions:
                break
            tries += feedback_messages(proposed, critique.text)
            revised = await self.inner.act([*messages, *tries], tools)
            revised.usage = _sum(reply.usage, revised.usage)
            record.revised, reply, attempt = proposal_message(revised), revised, attempt + 1
        return reply


class GuardedBackend:
    """An agent backend whose sessions are guarded by a critic; users and completions pass through."""

    def __init__(self, inner: Backend, guard: Guard) -> None:
        self.inner, self.guard = inner, guard

    def agent_session(self, ctx: EpisodeContext) -> GuardedAgent:
        return GuardedAgent(self.inner.agent_session(ctx), ctx, self.guard)

    def user_session(self, ctx: EpisodeContext) -> UserSession:
        return self.inner.user_session(ctx)

    async def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> Reply:
        return await self.inner.complete(messages, json_schema=json_schema)

    async def aclose(self) -> None:
        await self.inner.aclose()
        await self.guard.critic.aclose()
