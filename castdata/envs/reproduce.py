"""Replaying a recorded transcript: execute its tool calls on a fresh database and compare each recorded result.

Used by `castdata import` (does castdata's environment reproduce a source file's episode?) and by the labeler
(which writes changed which records). A recorded result reproduces when it equals the replayed one, or when both
are JSON and differ only by field names whose values are equal (an older data version's `province` for today's
`state`): such renames are reported, never hidden. Calls to `extra` tools (tools of the source harness that the
domain lacks, e.g. a no-op `get_input_from_user`) are not executed: their recorded result stands.

The replay starts from the episode's own initial state (`Domain.new_database(task)`: a tau2 task's initialization
actions), and in dual control (`tau2-telecom`) the user's own tool calls (`Trajectory.user_tool_calls`) run where
they happened, among the agent's: a user call recorded at `step` runs before the agent's calls at that message or
later. So every replayed observation and state is the one the episode saw.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from castdata.envs.database import EpisodeDatabase
from castdata.envs.domain import Domain, Replay, Task, ToolResult
from castdata.messages import Call, tool_turns
from castdata.records import Trajectory, UserToolCall

EXCERPT = 200


@dataclass(frozen=True)
class ReplayedCall:
    """One tool call of a transcript: where, what, and the result next to the recorded one."""

    step: int  # message index of the assistant turn (a user call: of the message that came next)
    name: str
    arguments: Any
    result: ToolResult
    recorded: str | None  # the tool message that followed in the transcript, if any
    executed: bool  # False for a call to an extra tool (its recorded result stands)
    changed: dict = field(default_factory=dict)  # for a write: the records it changed, to their new fingerprints
    values: dict = field(default_factory=dict)  # for a write: each changed record's value after it (None: deleted)
    requestor: str = "assistant"  # `user`: a call the user made on its own device (dual control)


@dataclass
class Reproduction:
    """The outcome of replaying a transcript: the replay (its database) and the first result that did not reproduce."""

    replay: Replay
    calls: list[ReplayedCall] = field(default_factory=list)
    first_mismatch: ReplayedCall | None = None
    renamed_fields: set[str] = field(default_factory=set)

    @property
    def db(self) -> EpisodeDatabase:
        """The database at the end of the replay."""
        return self.replay.db

    @property
    def reproduced(self) -> bool:
        """Whether every recorded tool result was reproduced."""
        return self.first_mismatch is None


def _renames(recorded: Any, replayed: Any, path: str, found: set[str]) -> bool:
    """Whether two JSON values are equal up to renamed dict fields with equal values (renames go to `found`)."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        if len(recorded) != len(replayed):
            return False
        for (old, a), (new, b) in zip(recorded.items(), replayed.items()):
            if old != new and (old in replayed or new in recorded):
                return False
            if not _renames(a, b, f"{path}.{new}" if path else new, found):
                return False
            if old != new:
                found.add(f"{path + '.' if path else ''}{old}->{new}")
        return True
    if isinstance(recorded, list) and isinstance(replayed, list):
        return len(recorded) == len(replayed) and all(_renames(a, b, path, found) for a, b in zip(recorded, replayed))
    return recorded == replayed


def same_observation(recorded: str, replayed: str, renamed: set[str] | None = None) -> bool:
    """Whether a recorded tool result is reproduced by the replayed one (renamed fields are added to `renamed`)."""
    if recorded == replayed:
        return True
    try:
        a, b = json.loads(recorded), json.loads(replayed)
    except ValueError:
        return False
    found: set[str] = set()
    if not _renames(a, b, "", found):
        return False
    if renamed is not None:
        renamed |= found
    return True


def calls_in_order(
    messages: list[dict[str, Any]], user_calls=(), skip: frozenset[int] = frozenset()
) -> list[tuple[int, str, Call | UserToolCall]]:
    """(step, requestor, call) of every tool call of a transcript in the order they ran: the agent's (except at
    the steps in `skip`) and the user's own (dual control, those recorded up to its end), a user's call recorded
    at a step before the agent's there."""
    agent = [(step, 1, "assistant", call) for step, call in tool_turns(messages) if step not in skip]
    users = [(call.step, 0, "user", call) for call in user_calls if call.step <= len(messages)]
    return [(step, requestor, call) for step, _, requestor, call in sorted(agent + users, key=lambda c: c[:2])]


def replay_transcript(
    domain: Domain,
    messages: list[dict[str, Any]],
    extra: frozenset[str] = frozenset(),
    skip: frozenset[int] = frozenset(),
    task: Task | None = None,
    user_calls: list[UserToolCall] | tuple[UserToolCall, ...] = (),
) -> Reproduction:
    """Replay every tool call of `messages` (`Domain.replay`, except at the steps in `skip`: calls that never ran)
    from `task`'s initial state, with the user's own calls where they happened (those recorded up to the end of
    `messages`), comparing each result with the recorded one."""
    order = calls_in_order(messages, user_calls, skip)
    run = [(requestor, call.action) for _, requestor, call in order if requestor == "user" or call.name not in extra]
    reproduction = Reproduction(domain.replay(run, task=task, track=True))
    executed = iter(reproduction.replay.calls)
    for step, requestor, call in order:
        if requestor == "user":
            done = next(executed)
            replayed = ReplayedCall(
                step, call.name, call.arguments, done.result, call.content, True, done.changed, done.values, "user"
            )
        else:
            after = messages[step + 1] if step + 1 < len(messages) else None
            recorded = after.get("content") or "" if after is not None and after["role"] == "tool" else None
            if call.name in extra:
                replayed = ReplayedCall(
                    step, call.name, call.arguments, ToolResult(recorded or "", True), recorded, False
                )
            else:
                done = next(executed)
                replayed = ReplayedCall(
                    step, call.name, call.arguments, done.result, recorded, True, done.changed, done.values
                )
        _compare(reproduction, replayed)
    return reproduction


def _compare(reproduction: Reproduction, call: ReplayedCall) -> None:
    """Add a replayed call; the first whose result differs from the recorded one is the first mismatch."""
    reproduction.calls.append(call)
    if (
        call.recorded is not None
        and reproduction.first_mismatch is None
        and not same_observation(call.recorded, call.result.observation, reproduction.renamed_fields)
    ):
        reproduction.first_mismatch = call


def replay_record(domain: Domain, trajectory: Trajectory, before: int | None = None) -> Reproduction:
    """Replay a trajectory record's tool calls (those before message `before`, all without it) from its task's
    initial state, the user's own calls included: an import's extra tools keep their recorded results, and
    malformed calls, which never ran, are skipped."""
    extra = frozenset(trajectory.imported.extra_tools if trajectory.imported else ())
    skip = frozenset(step for step, meta in enumerate(trajectory.meta) if meta.violation == "malformed_tool_call")
    task = domain.task(trajectory.split, trajectory.task_id)
    messages = trajectory.messages[:before]
    return replay_transcript(domain, messages, extra, skip, task, trajectory.user_tool_calls)
