"""Gold-replay alignment: which agent action broke a failed episode's outcome.

The agent's executed tool calls are replayed on a fresh database, and after each write the records it
changed are compared with the gold solution's replay (privileged, used for the verdict only):

- the first write that moves a record the episode ends with wrong to a state the gold replay never gives
  that record (a wrong value, a wrong record, or a record gold never changes) is critical (`wrong_argument`
  when gold makes a write with the same tool, else `wrong_tool`);
- a gold write never made (its records end wrong) is charged to the first agent write that aims at it
  (same tool, or a shared `*_id` argument) and either errored or changed nothing, or used other details
  than the user confirmed (`deviating`: e.g. the confirmed order's change made on another order, which the
  gold solution happens to change too); an attempt standing for one of the gold solution's own calls that
  change nothing (its failing calls) is excused;
- a needed write that failed because an earlier agent write on the same record made it impossible (changing a
  pending order's items before its address locks the order) is charged to that earlier write (`wrong_sequence`,
  expected: the needed write, which had to come first);
- a wrong record none of the above explains is charged to the action that ended the episode (the expected
  action: the missing write, or asking to confirm it when the user's latest turn was no yes);
- required outputs never said are charged to the action that ended the episode.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from castdata.envs import Domain
from castdata.envs.clock import episode_clock
from castdata.envs.reproduce import BASE, changed_records, replay_transcript
from castdata.label.findings import Finding
from castdata.label.rules import ask_to_confirm, is_confirmation
from castdata.records import Action, Trajectory

Record = tuple[str, str]  # (table, key)


@dataclass(frozen=True)
class Write:
    """One executed write: where, what, whether it succeeded, and the records it changed (to new fingerprints)."""

    step: int
    action: Action
    ok: bool
    changed: dict[Record, str | None]


@dataclass(frozen=True)
class GoldPath:
    """The gold replay: its end state, every state each record passes through, and each write's records."""

    final: dict[Record, str | None]
    states: dict[Record, frozenset]
    writes: tuple[tuple[Action, frozenset[Record]], ...]


@functools.lru_cache(maxsize=4096)
def _gold_path(domain: Domain, gold_json: str) -> GoldPath:
    db = domain.new_database()
    states: dict[Record, set] = {}
    writes = []
    before: dict = {}
    with episode_clock():
        for raw in json.loads(gold_json):
            action = Action(**raw)
            if domain.tool_kind(action.name) != "write":
                continue
            domain.execute(db, action.name, action.kwargs)
            after = db.changes()
            changed = changed_records(before, after)
            for record, state in changed.items():
                states.setdefault(record, {BASE}).add(state)
            writes.append((action, frozenset(changed)))
            before = after
    return GoldPath(before, {k: frozenset(v) for k, v in states.items()}, tuple(writes))


def gold_path(domain: Domain, gold: list[Action]) -> GoldPath:
    """The gold solution's replay (cached per domain and gold solution)."""
    return _gold_path(domain, json.dumps([a.model_dump() for a in gold]))


def replay_writes(trajectory: Trajectory, domain: Domain) -> tuple[list[Write], dict, bool]:
    """Replay the executed tool calls: (writes, end state, whether every observation matched the record)."""
    skip = frozenset(step for step, meta in enumerate(trajectory.meta) if meta.violation == "malformed_tool_call")
    reproduction = replay_transcript(domain, trajectory.messages, _extra_tools(trajectory), skip)
    writes = [
        Write(call.step, Action(name=call.name, kwargs=call.arguments), call.result.ok, call.changed)
        for call in reproduction.calls
        if domain.tool_kind(call.name) == "write"
    ]
    return writes, reproduction.db.changes(), reproduction.reproduced


def _attempts(writes: list[Write], gold: GoldPath, deviating: set[int]) -> list[Write]:
    """Writes that errored, changed nothing or deviated from the confirmed details, less those excused.

    Agent writes are paired in order with gold writes (an identical one, else the next with the same tool,
    else the next one); a write that changes nothing, paired with a gold call that changes nothing either (the gold
    solution's own failing calls), loses nothing against gold and is excused.
    """
    unpaired = list(gold.writes)
    found = []
    for write in writes:
        pair = next((g for g in unpaired if _signature(g[0]) == _signature(write.action)), None)
        pair = pair or next((g for g in unpaired if g[0].name == write.action.name), None)
        pair = pair or (unpaired[0] if unpaired else None)
        if pair is not None:
            unpaired.remove(pair)
        excused = pair is not None and not pair[1] and not write.changed
        if (not write.changed or write.step in deviating) and not excused:
            found.append(write)
    return found


def _signature(action: Action) -> str:
    return json.dumps(action.model_dump(), sort_keys=True)


def _shares_id(a: Action, b: Action) -> bool:
    return any(key.endswith("_id") and key in b.kwargs and b.kwargs[key] == value for key, value in a.kwargs.items())


def _related(action: Action, records: set, candidates: list[tuple[Action, frozenset]]) -> Action | None:
    """The gold write an agent write was most likely meant to be: same tool and records, same tool and id, ..."""
    tests = (
        lambda g, recs: g.name == action.name and bool(recs & records),
        lambda g, recs: g.name == action.name and _shares_id(action, g),
        lambda g, recs: g.name == action.name,
        lambda g, recs: bool(recs & records),
        lambda g, recs: _shares_id(action, g),
    )
    for test in tests:
        for gold, recs in candidates:
            if test(gold, recs):
                return gold
    return None


def _blocking_write(trajectory: Trajectory, domain: Domain, writes: list[Write], attempt: Write, gold: Action) -> Write | None:
    """The earlier write that made a needed write impossible: the attempt failed, the gold write fails too after
    the agent's writes before the attempt, and an earlier successful write acted on the same record."""
    if attempt.ok:
        return None
    shared = [w for w in writes if w.step < attempt.step and w.ok and _shares_id(w.action, gold)]
    if not shared:
        return None
    reproduction = replay_transcript(domain, trajectory.messages[: attempt.step], _extra_tools(trajectory))
    with episode_clock():
        still_possible = domain.execute(reproduction.db, gold.name, gold.kwargs).ok
    return None if still_possible else shared[0]


def _extra_tools(trajectory: Trajectory) -> frozenset[str]:
    return frozenset(trajectory.imported.extra_tools if trajectory.imported else ())


def _write_category(action: Action, expected: Action | None) -> str:
    return "wrong_argument" if expected is not None and expected.name == action.name else "wrong_tool"


def _answered_yes(trajectory: Trajectory, step: int) -> bool:
    last_user = next((m for m in reversed(trajectory.messages[:step]) if m["role"] == "user"), None)
    return last_user is not None and is_confirmation(last_user.get("content") or "")


def _ending_category(trajectory: Trajectory, domain: Domain, action: Action) -> str:
    if domain.tool_kind(action.name) == "transfer":
        gold_transfers = any(domain.tool_kind(a.name) == "transfer" for a in trajectory.privileged.gold_actions)
        return "premature_termination" if gold_transfers else "unnecessary_transfer"
    return "premature_termination" if trajectory.outcome.termination_reason == "user_stop" else "missed_required_action"


@dataclass(frozen=True)
class ReplayResult:
    """The critical findings of a failed episode, and whether the replay reproduced the record."""

    findings: list[Finding]
    consistent: bool


def replay_findings(trajectory: Trajectory, domain: Domain, ending: tuple[int, Action], deviating: set[int]) -> ReplayResult:
    """Critical findings of a failed episode; `ending` is the (step, action) that ended it, `deviating` the
    steps of writes that used other details than the user confirmed."""
    gold = gold_path(domain, trajectory.privileged.gold_actions)
    writes, final, consistent = replay_writes(trajectory, domain)
    wrong = {k for k in final.keys() | gold.final.keys() if final.get(k, BASE) != gold.final.get(k, BASE)}
    consistent = consistent and trajectory.outcome.db_match == (not wrong)
    findings: list[Finding] = []
    explained: set[Record] = set()
    for write in writes:
        off_path = {k for k, state in write.changed.items() if k in wrong and state not in gold.states.get(k, {BASE})}
        if off_path - explained:
            expected = _related(write.action, set(write.changed), list(gold.writes))
            findings.append(Finding(write.step, "replay.write_off_gold", _write_category(write.action, expected), "critical", expected))
            explained |= off_path
    done = {_signature(w.action) for w in writes if w.ok}
    missing = [(g, recs) for g, recs in gold.writes if recs & wrong and _signature(g) not in done]
    charged = next(((w, g) for w in _attempts(writes, gold, deviating) if (g := _related(w.action, set(), missing)) is not None), None)
    if charged is not None:
        write, expected = charged
        blocker = _blocking_write(trajectory, domain, writes, write, expected)
        if blocker is not None:
            findings.append(Finding(blocker.step, "replay.blocked_later_write", "wrong_sequence", "critical", expected))
        else:
            category = _write_category(write.action, expected)
            findings.append(Finding(write.step, "replay.write_missed_gold", category, "critical", expected))
        explained |= next(recs for g, recs in missing if g is expected)
    omitted = wrong - explained
    if omitted:
        step, action = ending
        gold_write = next((g for g, recs in missing if recs & omitted), None)
        expected = gold_write
        if expected is not None and not _answered_yes(trajectory, step):
            expected = ask_to_confirm(expected)  # the change was due, but only after the user's yes
        category = _ending_category(trajectory, domain, action)
        findings.append(Finding(step, "replay.gold_write_missing", category, "critical", expected, gold_write))
    if trajectory.outcome.outputs_missing:
        findings.append(Finding(ending[0], "replay.output_missing", "missed_required_action", "critical"))
    return ReplayResult(findings, consistent)
