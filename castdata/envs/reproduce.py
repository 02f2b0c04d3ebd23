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
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from castdata.envs.clock import episode_clock
from castdata.envs.database import EpisodeDatabase
from castdata.envs.domain import Domain, Task, ToolResult
from castdata.records import Trajectory, UserToolCall

EXCERPT = 200
BASE = "base"  # the fingerprint of a record equal to the shared base database


@dataclass(frozen=True)
class ReplayedCall:
    """One executed tool call of a transcript: where, what, and the result next to the recorded one."""

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
    """The outcome of replaying a transcript: the end database and the first result that did not reproduce."""

    db: EpisodeDatabase
    calls: list[ReplayedCall] = field(default_factory=list)
    first_mismatch: ReplayedCall | None = None
    renamed_fields: set[str] = field(default_factory=set)

    @property
    def reproduced(self) -> bool:
        """Whether every recorded tool result was reproduced."""
        return self.first_mismatch is None


def changed_records(before: dict, after: dict) -> dict:
    """The records whose fingerprint differs between two `EpisodeDatabase.changes()` maps (to the new one)."""
    return {k: after.get(k, BASE) for k in before.keys() | after.keys() if before.get(k, BASE) != after.get(k, BASE)}


def record_value(db: EpisodeDatabase, record: tuple[str, str]) -> Any:
    """A private copy of one record's current value (None when the record does not exist)."""
    table, key = record
    return plain(db[table][key]) if key in db[table] else None


def plain(value: Any) -> Any:
    """A record as plain JSON data (tau2 keeps records as pydantic models)."""
    return json.loads(json.dumps(value, default=lambda item: item.model_dump(mode="json")))


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


def tool_calls(messages: list[dict[str, Any]]) -> Iterator[tuple[int, str, Any]]:
    """(message index, tool name, arguments) of the first tool call of every assistant turn."""
    for step, message in enumerate(messages):
        if message["role"] == "assistant" and message.get("tool_calls"):
            function = message["tool_calls"][0]["function"]
            yield step, function["name"], function["arguments"]


def replay_transcript(
    domain: Domain,
    messages: list[dict[str, Any]],
    extra: frozenset[str] = frozenset(),
    skip: frozenset[int] = frozenset(),
    task: Task | None = None,
    user_calls: list[UserToolCall] | tuple[UserToolCall, ...] = (),
) -> Reproduction:
    """Execute every tool call of `messages` (except at the steps in `skip`: calls that never ran) on a fresh
    database in `task`'s initial state under the episode clock, with the user's own calls where they happened (those
    recorded up to the end of `messages`), comparing each result with the recorded one."""
    reproduction = Reproduction(domain.new_database(task))
    state = reproduction.db.changes()  # the initial state: a write's changes are its own
    users = sorted(user_calls, key=lambda call: call.step)
    with episode_clock():
        for step, name, arguments in tool_calls(messages):
            while users and users[0].step <= step:
                state = _user_call(domain, reproduction, users.pop(0), state)
            if step in skip:
                continue
            after = messages[step + 1] if step + 1 < len(messages) else None
            recorded = after.get("content") or "" if after is not None and after["role"] == "tool" else None
            executed = name not in extra
            result = domain.execute(reproduction.db, name, arguments) if executed else ToolResult(recorded or "", True)
            changed, values = {}, {}
            if executed and domain.tool_kind(name) == "write":
                changed, values, state = _changes(reproduction.db, state)
            _compare(reproduction, ReplayedCall(step, name, arguments, result, recorded, executed, changed, values))
        while users and users[0].step <= len(messages):
            state = _user_call(domain, reproduction, users.pop(0), state)
    return reproduction


def _changes(db: EpisodeDatabase, state: dict) -> tuple[dict, dict, dict]:
    """(the records changed since `state`, their values, the new state)."""
    after = db.changes()
    changed = changed_records(state, after)
    return changed, {record: record_value(db, record) for record in changed}, after


def _user_call(domain: Domain, reproduction: Reproduction, call: UserToolCall, state: dict) -> dict:
    """Run one of the user's own recorded calls (dual control); returns the state after it."""
    result = domain.execute(reproduction.db, call.name, call.arguments, "user")
    changed, values, state = _changes(reproduction.db, state)
    _compare(
        reproduction,
        ReplayedCall(call.step, call.name, call.arguments, result, call.content, True, changed, values, "user"),
    )
    return state


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
