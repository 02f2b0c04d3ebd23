"""Gold-replay alignment: which agent action broke a failed episode's outcome.

The agent's executed tool calls are replayed on a fresh database, and after each write the records it
changed are compared with the gold solution's replay (privileged, used for the verdict only):

- the first write that moves a record the episode ends with wrong to a state the gold replay never gives
  that record (a wrong value, a wrong record, or a record gold never changes) is critical (`wrong_argument`
  when gold makes a write with the same tool, else `wrong_tool`);
- a gold write never made (its records end wrong, and no write above explains them) is charged to the first
  agent write that aimed at it (the same act, on the same record if one did) and errored or changed nothing, or
  that used other details than the user confirmed (`deviating`: the confirmed order's change made on another
  order); a
  write identical to one of the gold solution's own calls that change nothing is excused. Agent writes are
  never paired with gold writes by their order or by a shared id alone;
- a needed write that failed because an earlier agent write on the same record made it impossible (changing a
  pending order's items before its address locks the order) is charged to that earlier write (`wrong_sequence`,
  expected: the needed write, which had to come first);
- the gold calls made in another order than the gold solution's (the end state differs) are charged to the first
  one made too early (`wrong_sequence`, expected: the call that had to come first), and so is a gold call made
  without the gold solution's earlier call of the same tool on the same existing record (one change in two
  steps, made in one);
- a record a wrong write explains can still lack a gold act the agent never made, on fields no agent write touched
  (the passengers of a reservation whose flights change used the wrong card): that gold write is missing too;
- a needed write never made that the agent tried with a tool of its own harness the domain lacks (an imported
  agent's helper whose name begins with the act, `return_all_delivered_order_items`, called on the record) is
  charged to that call (`replay.extra_tool_attempt`, `wrong_tool`): its result shows nothing changed; so is one
  the agent first tried with the domain's tool and failed, then redid with such a helper;
- a wrong record none of the above explains is charged to where the change was dropped: the agent's first
  closing message ("anything else?") after the user asked for it, when the agent never acted on its record again
  and the user never asked again; else to the action that ended the episode (the expected action: the missing
  write, or asking to confirm it when the user's latest turn was no yes);
- required outputs never said are charged to a write made without the user's yes whose result holds them all,
  when the agent had read them before it (its confirmation request would have said them); else to the agent's
  first closing message ("anything else?") after its last call on the gold path, when no gold write is missing;
  else to the action that ended the episode.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from castdata.envs import Domain
from castdata.envs.database import BASE, plain, record_value
from castdata.envs.reproduce import replay_record
from castdata.label.acts import TARGET_KEYS, id_shape, record_ids, signature, specific_words, topic_words
from castdata.label.findings import Finding
from castdata.label.rules import ask_to_confirm, is_confirmation
from castdata.messages import tool_turns
from castdata.records import Action, Trajectory

Record = tuple[str, str]  # (table, key)


@dataclass(frozen=True)
class Write:
    """One executed write: where, what, whether it succeeded, and the records it changed (to new fingerprints)."""

    step: int
    action: Action
    ok: bool
    changed: dict[Record, str | None]
    values: dict[Record, Any]  # each changed record's value after the write


@dataclass(frozen=True)
class GoldPath:
    """The gold replay: its end state, every state each record passes through, and each write's records."""

    final: dict[Record, str | None]
    states: dict[Record, frozenset]
    writes: tuple[tuple[Action, frozenset[Record]], ...]
    values: dict[Record, Any]  # each changed record's end value
    fields: tuple[frozenset[tuple[Record, str]], ...]  # each write's changed (record, top-level field) pairs


@functools.lru_cache(maxsize=4096)
def _gold_path(domain: Domain, gold_json: str, split: str, index: int) -> GoldPath:
    calls = [(requestor, Action(**raw)) for requestor, raw in json.loads(gold_json)]
    writes = [(requestor, action) for requestor, action in calls if domain.call_kind(action.name, requestor) == "write"]
    replay = domain.replay(writes, task=domain.task(split, index), track=True)  # from tau2's initialization actions
    states: dict[Record, set] = {}
    for call in replay.calls:
        for record, state in call.changed.items():
            states.setdefault(record, {BASE}).add(state)
    final = replay.db.changes()
    values = {record: record_value(replay.db, record) for record in final}
    # the user's own gold writes (dual control) shape the path but are no agent's to pair
    agent_calls = [call for call in replay.calls if call.requestor != "user"]
    path = tuple((call.action, frozenset(call.changed)) for call in agent_calls)
    current: dict[Record, Any] = {}
    fields = []
    for call in replay.calls:
        changed = _changed_fields(domain, current, call.values)
        current.update(call.values)
        if call.requestor != "user":
            fields.append(changed)
    return GoldPath(final, {k: frozenset(v) for k, v in states.items()}, path, values, tuple(fields))


def _changed_fields(domain: Domain, current: dict[Record, Any], values: dict[Record, Any]) -> frozenset:
    """The (record, top-level field) pairs a write changed, from each record's value before it (`current`, else the
    base database's) and after it (`values`)."""
    changed = set()
    for record, after in values.items():
        before = current[record] if record in current else _base_value(domain, record)
        changed |= {(record, f) for f in _differing_fields(before, after)}
    return frozenset(changed)


def _differing_fields(one: Any, other: Any) -> set[str]:
    """The top-level fields two record values differ in (every field of a record created or deleted); a record
    that is no mapping (a list) differs as a whole, the field `""`."""
    if one == other:
        return set()
    if isinstance(one, dict) and isinstance(other, dict):
        return {f for f in one.keys() | other.keys() if one.get(f) != other.get(f)}
    if (isinstance(one, dict) and other is None) or (one is None and isinstance(other, dict)):
        return set((one or other).keys())
    return {""}


def gold_path(domain: Domain, trajectory: Trajectory) -> GoldPath:
    """The gold solution's replay from the task's initial state: the record's gold actions, with the task's own
    user-side gold calls (dual control) at their places (cached per domain, task and gold solution)."""
    task = domain.task(trajectory.split, trajectory.task_id)
    gold, calls = trajectory.privileged.gold_actions, []
    for position, action in enumerate(gold):
        calls += [("user", user.model_dump()) for before, user in task.user_actions if before == position]
        calls.append(("assistant", action.model_dump()))
    calls += [("user", user.model_dump()) for before, user in task.user_actions if before >= len(gold)]
    return _gold_path(domain, json.dumps(calls), task.split, task.index)


def replay_writes(trajectory: Trajectory, domain: Domain) -> tuple[list[Write], dict, bool]:
    """Replay the executed tool calls: (writes, end state, whether every observation matched the record)."""
    reproduction = replay_record(domain, trajectory)
    writes = [
        Write(call.step, Action(name=call.name, kwargs=call.arguments), call.result.ok, call.changed, call.values)
        for call in reproduction.calls
        if call.requestor == "assistant" and domain.tool_kind(call.name) == "write"
    ]
    return writes, reproduction.db.changes(), reproduction.reproduced


def _first_out_of_order(writes: list[Write], gold: GoldPath) -> tuple[Write, Action] | None:
    """The first gold call the agent made before one the gold solution makes earlier on a record they both change,
    with that earlier call: the same changes in another order end in another state (a price difference charged
    twice, a history reordered)."""
    order = {signature(action): index for index, (action, _) in enumerate(gold.writes)}
    made = [(w, order[signature(w.action)]) for w in writes if w.ok and signature(w.action) in order]
    for position, (write, index) in enumerate(made):
        # only an earlier gold call on a record this one changes too: calls on separate records commute
        later = [
            other for _, other in made[position + 1 :] if other < index and gold.writes[other][1] & write.changed.keys()
        ]
        if later:
            return write, gold.writes[min(later)][0]
    return None


def _skipped_first_step(
    domain: Domain, writes: list[Write], gold: GoldPath, unexplained: set
) -> tuple[Write, Action] | None:
    """A gold call the agent made, with the gold solution's earlier call of the same tool on the same record that
    the agent never made (a cabin changed on the old flights before the flights change): one change the policy
    makes in two steps, made in one, skips the step that had to come first (a failed try at that step is an
    error of its own)."""
    made = {signature(w.action) for w in writes if w.ok}
    order = [signature(action) for action, _ in gold.writes]
    for write in writes:
        if not write.ok or signature(write.action) not in order:
            continue
        for earlier, records in gold.writes[: order.index(signature(write.action))]:
            existing = all(_base_value(domain, record) is not None for record in records)  # not a booking
            same_records = existing and bool(records) and records <= set(write.changed)
            tried = any(not w.ok and w.action.name == earlier.name and w.step < write.step for w in writes)
            skipped = signature(earlier) not in made and not tried and records & unexplained
            if earlier.name == write.action.name and same_records and skipped:
                return write, earlier
    return None


def _first_made(writes: list[Write], write: Write, expected: Action | None) -> int:
    """Where a wrong write's error was first made: an earlier failed call of the same tool that already had one of
    its wrong values (the write repeats it), else the write itself."""
    if expected is None or expected.name != write.action.name:
        return write.step
    wrong = {k: v for k, v in write.action.kwargs.items() if expected.kwargs.get(k) != v}
    for earlier in writes:
        if earlier.step >= write.step:
            break
        same = earlier.action.name == write.action.name and any(
            earlier.action.kwargs.get(k) == v for k, v in wrong.items()
        )
        if not earlier.ok and wrong and same:
            return earlier.step
    return write.step


def _sets_gold_values(domain: Domain, current: dict, write: Write, gold: GoldPath, record: Record) -> bool:
    """Whether a write set every field it changed on `record` to the gold end value: it is right, though the record
    ends wrong for another reason (a change still missing)."""
    before = current[record] if record in current else _base_value(domain, record)
    after, target = write.values.get(record), gold.values.get(record)
    if not isinstance(before, dict) or not isinstance(after, dict) or not isinstance(target, dict):
        return False
    fields = [f for f in before.keys() | after.keys() if before.get(f) != after.get(f)]
    return bool(fields) and all(_field_on_gold(before.get(f), after.get(f), target.get(f)) for f in fields)


def _field_on_gold(before: Any, after: Any, target: Any) -> bool:
    """Whether a changed field took its gold end value (for a list such as a payment history: whether every entry
    the write added is in the gold end list)."""
    if isinstance(before, list) and isinstance(after, list) and isinstance(target, list):
        return all(entry in target for entry in after if entry not in before)
    return after == target


def _end_value(domain: Domain, gold: GoldPath, record: Record) -> Any:
    """A record's value at the end of the gold replay."""
    return gold.values[record] if record in gold.values else _base_value(domain, record)


def _base_value(domain: Domain, record: Record) -> Any:
    table = domain.base.tables[record[0]]
    return plain(table.load(record[1])) if record[1] in table.blobs else None


def _attempts(writes: list[Write], gold: GoldPath, deviating: set[int]) -> list[Write]:
    """Writes that errored, changed nothing or deviated from the confirmed details, less those excused: a write
    that changes nothing is excused when the gold solution makes the very same call and it changes nothing there
    either (the gold solution's own failing calls), as many times as the gold solution makes it. Writes are never
    paired with gold writes by their order."""
    failing_gold = Counter(signature(action) for action, records in gold.writes if not records)
    found = []
    for write in writes:
        excused = not write.changed and failing_gold[signature(write.action)] > 0
        if excused:
            failing_gold[signature(write.action)] -= 1
        elif not write.changed or write.step in deviating:
            found.append(write)
    return found


def _aimed_at(write: Write, missing: list[tuple[Action, frozenset]], made: list[Write]) -> Action | None:
    """The missing gold write a failed attempt stood for: the same act on the same record, else another act on
    that record (a wrong tool), else the same act on a wrong record; never a guess by order or by another id. An
    attempt at a gold write the agent `made` after it stood for none: the same act on the same record, differing in
    one argument at most (a retry with the right payment), or another act with the very same arguments (an exchange
    tried on a pending order, then made as the item change it had to be)."""

    def same_record(gold: Action) -> bool:
        keys = [key for key in TARGET_KEYS if key in gold.kwargs]
        return bool(keys) and all(write.action.kwargs.get(key) == gold.kwargs[key] for key in keys)

    same_act = [gold for gold, _ in missing if gold.name == write.action.name]

    def retried(later: Write) -> bool:
        redone = later.action
        keys = set(redone.kwargs) | set(write.action.kwargs)
        differing = [key for key in keys if redone.kwargs.get(key) != write.action.kwargs.get(key)]
        if later.step <= write.step or not same_record(redone):
            return False
        return (redone.name == write.action.name and len(differing) <= 1) or redone.kwargs == write.action.kwargs

    if not any(same_record(g) for g in same_act) and any(retried(g) for g in made):
        return None
    return (
        next((g for g in same_act if same_record(g)), None)
        or next((g for g, _ in missing if same_record(g)), None)
        or (same_act[0] if same_act else None)
    )


def _shares_id(a: Action, b: Action) -> bool:
    return any(key.endswith("_id") and key in b.kwargs and b.kwargs[key] == value for key, value in a.kwargs.items())


def _related(action: Action, records: set, candidates: list[tuple[Action, frozenset]]) -> Action | None:
    """The gold write an agent write was most likely meant to be: same tool on the same record (order,
    reservation), same tool and changed records (a refund also changes the gift card two cancellations share), ..."""
    tests = (
        lambda g, recs: g.name == action.name and bool(record_ids(g)) and record_ids(g) == record_ids(action),
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


def _blocking_write(
    trajectory: Trajectory, domain: Domain, writes: list[Write], before: int, gold: Action
) -> Write | None:
    """The earlier write that made a needed write impossible: the gold write fails after the agent's writes before
    step `before`, and an earlier successful write acted on the same record (it had to come after the gold one)."""
    shared = [w for w in writes if w.step < before and w.ok and _shares_id(w.action, gold)]
    if not shared:
        return None
    still_possible = replay_record(domain, trajectory, before).replay.run(gold).result.ok
    return None if still_possible else shared[0]


def write_category(action: Action, expected: Action | None) -> str:
    """`wrong_tool`; `missed_required_action` for a write that leaves out some of the gold write's items (a
    partial plan); else `wrong_argument`."""
    if expected is None or expected.name != action.name:
        return "wrong_tool"
    lists = [
        (value, expected.kwargs.get(key))
        for key, value in action.kwargs.items()
        if isinstance(value, list) and value != expected.kwargs.get(key)
    ]
    partial = lists and all(
        isinstance(gold, list) and set(map(str, value)) < set(map(str, gold)) for value, gold in lists
    )
    return "missed_required_action" if partial else "wrong_argument"


_CLOSING = re.compile(r"\banything else\b|\bis there (?:something|anything) more\b", re.I)
_ASKS_YES = re.compile(r"\bconfirm|\byes/no\b|\breply .{0,2}yes", re.I)


def _closes(message: dict) -> bool:
    """Whether a message is the agent's offer of more help ("anything else?"), not a request to confirm a plan
    ("Reply yes to confirm, or let me know if you need to change anything else before I continue")."""
    text = message.get("content") or ""
    return message["role"] == "assistant" and _CLOSING.search(text) is not None and not _ASKS_YES.search(text)


def _extra_tool_attempt(trajectory: Trajectory, domain: Domain, gold: Action) -> int | None:
    """The first call of a tool the domain does not have (an imported agent's own helper) whose name begins with the
    needed write's act and whose arguments name its record ("return_all_delivered_order_items" on the order to
    return): the change was tried with a tool that could not make it."""
    words, records = specific_words(gold.name), record_ids(gold)
    return next(
        (
            step
            for step, call in tool_turns(trajectory.messages)
            if domain.tool_kind(call.name) == "unknown"
            and any(call.name.split("_")[0].startswith(word) for word in words)  # its verb: not "calculate_refund_..."
            and records
            and all(record in json.dumps(call.arguments) for record in records)
        ),
        None,
    )


def _left_out_at(trajectory: Trajectory, gold: Action, ending: int) -> int | None:
    """The agent's first message, after a tool result showed the needed change's record among others (a profile's
    reservations), with a paragraph that offers the change's act for several of those others and not for it ("two
    flights on May 22, PUNERT and HSR97W: would you like to cancel one?"), when no call after it acts on that record:
    the plan left it out (an offer for one other record is a step of a plan, not the plan)."""
    messages, wanted = trajectory.messages, record_ids(gold)
    words = (*topic_words(gold.name), "change")  # "would you like to make any changes to these?" offers an act
    among = shown_among(messages, gold, ending)
    if among is None:
        return None
    record, shape, shown, siblings = among
    acted = _calls_on(messages, wanted)
    for index in range(shown + 1, ending):
        if messages[index]["role"] != "assistant" or messages[index].get("tool_calls"):
            continue
        if any(step > index for step in acted):
            return None
        for paragraph in (messages[index].get("content") or "").split("\n\n"):
            others = set(shape.findall(paragraph)) & siblings
            if len(others) > 1 and record not in paragraph and any(word in paragraph.lower() for word in words):
                return index
    return None


def shown_among(messages: list[dict], gold: Action, before: int) -> tuple[str, re.Pattern, int, set[str]] | None:
    """The one record a write acts on, as shown among others: the record's id, the pattern of ids like it
    (`id_shape`), the first tool result before `before` that shows it, and the ids of that shape shown beside it (a
    profile's reservations); None for a write on several records or on one no tool result showed."""
    wanted = record_ids(gold)
    if len(wanted) != 1:
        return None
    record = wanted[0].lstrip("#")
    shape = re.compile(id_shape(record))
    shown = next(
        (i for i in range(1, before) if messages[i]["role"] == "tool" and record in (messages[i]["content"] or "")),
        None,
    )
    if shown is None:
        return None
    return record, shape, shown, set(shape.findall(messages[shown]["content"])) - {record}


def _calls_on(messages: list[dict], records: list[str]) -> list[int]:
    """The steps of the agent's calls that act on one of `records` (name it as their order or reservation id)."""
    return [
        step for step, call in tool_turns(messages) if any(str(call.arguments.get(k)) in records for k in TARGET_KEYS)
    ]


def _dropped_at(trajectory: Trajectory, gold: Action, ending: int) -> int:
    """Where a needed change was dropped: the agent's first closing message ("anything else?") after the user asked
    for the change (its act in its own words, or its record), when no later call of the agent acts on that record
    and the user does not ask for it again (then what the agent answers is what counts); else `ending`, the action
    that ended the episode."""
    messages, words, wanted = trajectory.messages, specific_words(gold.name), record_ids(gold)

    def asks(text: str) -> bool:
        return any(word in text.lower() for word in words) or any(record.lstrip("#") in text for record in wanted)

    asked = next(
        (i for i in range(1, ending) if messages[i]["role"] == "user" and asks(messages[i]["content"] or "")), None
    )
    if asked is None:
        return ending
    touched = _calls_on(messages, wanted)
    for index in range(asked + 1, ending):
        if not _closes(messages[index]):
            continue
        acted = any(step > index for step in touched)
        asked_again = any(m["role"] == "user" and asks(m["content"] or "") for m in messages[index + 1 : ending])
        if not acted and not asked_again:
            return index
    return ending


def _outputs_due_at(trajectory: Trajectory, ending: int) -> int:
    """Where required outputs never said were due: the agent's first closing message ("anything else?") after its
    last call that the gold solution also makes (from the start when it makes none); else `ending`."""
    messages = trajectory.messages
    gold = {signature(action) for action in trajectory.privileged.gold_actions}
    last = max((step for step, call in tool_turns(messages) if signature(call.action) in gold), default=0)
    return next((i for i in range(last + 1, ending) if _closes(messages[i])), ending)


def _unconfirmed_with_outputs(trajectory: Trajectory, writes: list[Write], unconfirmed: frozenset[int]) -> Write | None:
    """The first write made without the user's yes whose result holds every required output never said, each one
    the agent had seen before it: asking to confirm that write would have told them (a return's refund)."""
    messages, outputs = trajectory.messages, trajectory.outcome.outputs_missing

    def text(start: int, stop: int) -> str:
        return "\n".join(m.get("content") or "" for m in messages[start:stop] if m["role"] == "tool")

    for write in writes:
        if write.ok and write.step in unconfirmed:
            result, seen = text(write.step + 1, write.step + 2), text(0, write.step)
            if all(output in result and output in seen for output in outputs):
                return write
    return None


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


def replay_findings(
    trajectory: Trajectory,
    domain: Domain,
    ending: tuple[int, Action],
    deviating: set[int],
    unconfirmed: frozenset[int],
) -> ReplayResult:
    """Critical findings of a failed episode; `ending` is the (step, action) that ended it, `deviating` the
    steps of writes that used other details than the user confirmed, `unconfirmed` those of writes made without
    the user's yes."""
    gold = gold_path(domain, trajectory)
    writes, final, consistent = replay_writes(trajectory, domain)
    wrong = {k for k in final.keys() | gold.final.keys() if final.get(k, BASE) != gold.final.get(k, BASE)}
    consistent = consistent and trajectory.outcome.db_match == (not wrong)
    findings: list[Finding] = []
    explained: set[Record] = set()
    current: dict[Record, Any] = {}
    gold_calls = {signature(action) for action, _ in gold.writes}
    touched: set[tuple[Record, str]] = set()  # the (record, field) pairs the agent's writes changed
    for write in writes:
        touched |= _changed_fields(domain, current, write.values)
        off_path = (
            set()
            if signature(write.action) in gold_calls
            else {  # a gold call is right wherever it comes
                k
                for k, state in write.changed.items()
                if k in wrong
                and state not in gold.states.get(k, {BASE})
                and not _sets_gold_values(domain, current, write, gold, k)
            }
        )
        current.update(write.values)
        if off_path - explained:
            expected = _related(write.action, set(write.changed), list(gold.writes))
            step = _first_made(writes, write, expected)
            findings.append(
                Finding(step, "replay.write_off_gold", write_category(write.action, expected), "critical", expected)
            )
            explained |= off_path
    early = (
        (_first_out_of_order(writes, gold) or _skipped_first_step(domain, writes, gold, wrong - explained))
        if wrong - explained
        else None
    )
    if early is not None:
        write, expected = early
        findings.append(Finding(write.step, "replay.out_of_order", "wrong_sequence", "critical", expected))
        explained |= wrong
    done = {signature(w.action) for w in writes if w.ok}
    # a record a wrong write explains can also lack a gold act the agent never made, on a field no agent write
    # touched (the passengers, never changed, beside a flights change paid with the wrong card)
    untouched = {
        (record, f)
        for record in (explained & wrong if early is None else ())
        for f in _differing_fields(current.get(record), _end_value(domain, gold, record))
        if (record, f) not in touched
    }
    acts = {w.action.name for w in writes}
    partly = {
        signature(g) for (g, _), changed in zip(gold.writes, gold.fields) if changed & untouched and g.name not in acts
    }
    missing = [
        (g, recs)
        for g, recs in gold.writes
        if (recs & (wrong - explained) or signature(g) in partly) and signature(g) not in done
    ]
    gold_calls = {signature(g) for g, _ in gold.writes}
    made = [w for w in writes if w.changed and signature(w.action) in gold_calls]
    tried = [(g, recs) for g, recs in missing if signature(g) not in partly]  # an act never made was never tried
    charged = next(((w, g) for w in _attempts(writes, gold, deviating) if (g := _aimed_at(w, tried, made))), None)
    if charged is not None:
        write, expected = charged
        blocker = None if write.ok else _blocking_write(trajectory, domain, writes, write.step, expected)
        retried = _extra_tool_attempt(trajectory, domain, expected)
        if retried is not None and retried > write.step:  # tried again, with a tool the environment lacks
            findings.append(Finding(retried, "replay.extra_tool_attempt", "wrong_tool", "critical", expected))
        elif blocker is not None:
            findings.append(Finding(blocker.step, "replay.blocked_later_write", "wrong_sequence", "critical", expected))
        else:
            category = write_category(write.action, expected)
            findings.append(Finding(write.step, "replay.write_missed_gold", category, "critical", expected))
        explained |= next(recs for g, recs in missing if g is expected)
    omitted = (wrong - explained).union(*(recs for g, recs in missing if signature(g) in partly))
    for gold_write, records in missing:  # a needed write never made, because an earlier write made it impossible
        blocker = (
            _blocking_write(trajectory, domain, writes, len(trajectory.messages), gold_write)
            if records & omitted
            else None
        )
        if blocker is not None:
            findings.append(
                Finding(blocker.step, "replay.blocked_later_write", "wrong_sequence", "critical", gold_write)
            )
            omitted -= records
    # a change the agent never touched comes first (the other wrong records may follow from the wrong write)
    candidates = [g for g, recs in missing if signature(g) in partly and recs & omitted] or [
        g for g, recs in missing if recs & omitted
    ]
    attempts = [(at, i) for i, g in enumerate(candidates) if (at := _extra_tool_attempt(trajectory, domain, g))]
    if omitted and attempts:  # the change was tried with a tool the environment does not have, which changed nothing
        at, index = min(attempts)
        findings.append(Finding(at, "replay.extra_tool_attempt", "wrong_tool", "critical", candidates[index]))
    elif omitted:
        step, action = ending
        gold_write = candidates[0] if candidates else None
        # the earliest plan that left one of them out, if any did
        left_outs = [(at, i) for i, g in enumerate(candidates) if (at := _left_out_at(trajectory, g, step)) is not None]
        left_out = None
        if left_outs:
            left_out, index = min(left_outs)
            gold_write = candidates[index]
        if gold_write is not None:
            step = left_out if left_out is not None else _dropped_at(trajectory, gold_write, step)
        expected = gold_write
        if expected is not None and not _answered_yes(trajectory, step):
            expected = ask_to_confirm(expected)  # the change was due, but only after the user's yes
        category = "missed_required_action" if left_out is not None else _ending_category(trajectory, domain, action)
        findings.append(Finding(step, "replay.gold_write_missing", category, "critical", expected, gold_write))
    if trajectory.outcome.outputs_missing:
        unasked = _unconfirmed_with_outputs(trajectory, writes, unconfirmed)
        if unasked is not None:
            findings.append(Finding(unasked.step, "replay.output_unconfirmed", "missing_confirmation", "critical"))
        else:
            step = ending[0] if missing else _outputs_due_at(trajectory, ending[0])  # else they came after those
            findings.append(Finding(step, "replay.output_missing", "missed_required_action", "critical"))
    return ReplayResult(findings, consistent)
