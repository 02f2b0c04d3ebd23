"""What the episode loop needs from a model backend.

A backend (`open_backend`) is shared by all episodes of a run (clients, batching, rate limits). For each
episode it opens sessions: an `AgentSession` that proposes the next agent turn from the messages the agent
sees, and a `UserSession` that plays the simulated user.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from castdata.records import CriticCall, InjectedMistake, Interception, Usage

if TYPE_CHECKING:
    from castdata.envs import Domain, Task


class InfrastructureError(RuntimeError):
    """A model call failed after all retries (rate limits, server faults, timeouts, dropped connections)."""


class ModelOutputError(RuntimeError):
    """A model produced nothing usable (e.g. the user simulator stayed empty after retries)."""

    def __init__(self, role: str, message: str) -> None:
        super().__init__(message)
        self.role = role  # "agent" or "user"


@dataclass
class ToolCall:
    """One tool call as the model emitted it. `arguments` is None when `raw_arguments` is not a JSON object."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str


@dataclass
class Reply:
    """One model turn: text, tool calls, or both (the episode loop decides what is executed)."""

    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None


@dataclass
class EpisodeContext:
    """What a session may know about its episode. Only scripted sessions read `task` (privileged)."""

    domain: Domain
    task: Task
    seed: int

    def rng(self, role: str) -> random.Random:
        """A random stream private to one role of this episode."""
        return random.Random(f"{self.seed}:{role}")


class AgentSession(Protocol):
    """The agent in one episode; the episode loop reads `injected`, `interceptions` and `critic_calls` into the
    record when it ends."""

    injected: list[InjectedMistake]  # the mistakes a scripted agent injected (a model's: none)
    interceptions: list[Interception]  # what a critic intercepted (an unguarded agent's: none)
    critic_calls: list[CriticCall]  # every judgement of the critic that guards it (an unguarded agent's: none)

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply: ...

    def resume(self, messages: list[dict[str, Any]]) -> None:
        """Learn a recorded conversation's first `messages` before the episode continues it."""
        ...


class UserSession(Protocol):
    """The simulated user in one episode: `reply(None)` opens the conversation.

    In dual-control domains a reply may be tool calls on the user's own device; the episode loop runs them and
    hands the results to `observe`, which answers the same way (sessions of other domains need no `observe`).
    """

    injected: list[InjectedMistake]  # the deviations a scripted user injected (a model's: none)

    async def reply(self, agent_message: str | None) -> Reply: ...

    async def observe(self, results: list[tuple[ToolCall, str]]) -> Reply: ...

    def resume(self, messages: list[dict[str, Any]]) -> None:
        """Learn a recorded conversation's first `messages` before the episode continues it."""
        ...


class Backend(Protocol):
    """A model backend shared by the episodes of a run."""

    def agent_session(self, ctx: EpisodeContext) -> AgentSession: ...

    def user_session(self, ctx: EpisodeContext) -> UserSession: ...

    async def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> Reply:
        """One plain chat completion (no tools), e.g. for a teacher or a critic; `json_schema` constrains the output."""
        ...

    async def aclose(self) -> None: ...
