"""What the scripted user asks for: its hidden instruction as first-person requests, a goal at a time.

Shared by the scripted user (who says them) and the noisy oracle (who acts only on what was said): both
derive the same goals, identity details and deviation from the task, so the oracle can tell which of its
goals a user turn asked for. A goal is a run of the instruction's sentences about one order (retail's
templated train instructions: "Return #W...", "For #W..., modify ...", "Cancel order #W..."); a prose
instruction is one goal. Sentences that only say who the user is, or how they behave, are not requests.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from castdata.envs import Domain, Task
from castdata.models.scripted.memo import per_task
from castdata.records import Action

_SENTENCE_END = re.compile(r"(?<!\bDr)(?<!\bMr)(?<!\bMs)(?<=[.!?])\s+(?=[A-Z0-9])|(?<=;)\s+(?=(?:For|Return|Cancel) )")
_TEMPLATE = re.compile(r"^(?:For (#\w+),|Return (#\w+)|Cancel order (#\w+))")
_IMPERATIVE = re.compile(r"^(For #\w+, )?(Return|Cancel|Exchange|Modify|Change|exchange|modify|change)\b")
_PERSONA = re.compile(r"^You are (?:[a-z-]+, )*[a-z-]+\.$")
_PRONOUNS = (
    (r"\b[Yy]ou're\b", "I'm"),
    (r"\b[Yy]ou are\b", "I am"),
    (r"\b[Yy]ou'd\b", "I'd"),
    (r"\b[Yy]ou have\b", "I have"),
    (r"\b[Yy]ourself\b", "myself"),
    (r"\byours\b", "mine"),
    (r"\byour\b", "my"),
    (r"\bYour\b", "My"),
    (r"\b(to|for|with|tell|give|ask|help|call) you\b", r"\1 me"),
    (r"\b[Yy]ou\b", "I"),
)
REQUEST_VERBS = ("return", "exchange", "cancel", "modify", "change", "schedule", "reschedule", "book", "update")


@per_task
def identity(domain: Domain, task: Task) -> str:
    """The user's answer when the agent asks who they are: the details its authentication needs."""
    auth = domain.auth_action(task)
    if auth is None:
        return f"Sure, my user id is {task.user_id}."
    details = ", ".join(f"my {key.replace('_', ' ')} is {value}" for key, value in auth.kwargs.items())
    return f"Sure: {details}."


@per_task
def goals(domain: Domain, task: Task) -> tuple[str, ...]:
    """The user's requests in the order it makes them, in the first person (at least one)."""
    names = {part for part in task.user_id.lower().split("_") if part.isalpha()}
    auth = domain.auth_action(task)
    names |= {str(value).lower() for value in (auth.kwargs.values() if auth else ())}
    found: list[tuple[str | None, list[str]]] = []
    for sentence in _SENTENCE_END.split(" ".join(task.instruction.split())):
        sentence = _request_part(sentence, names)
        if not sentence:
            continue
        template = _TEMPLATE.match(sentence)
        key = next((g for g in template.groups() if g), None) if template else None
        if not found or (template and key != found[-1][0]):
            found.append((key, []))
        found[-1][1].append(_first_person(sentence))
    return tuple(" ".join(parts) for _, parts in found) or ("I need some help with my account.",)


def _request_part(sentence: str, names: set[str]) -> str:
    """The part of a sentence that asks for something ("" for who the user is or how it behaves)."""
    if _PERSONA.match(sentence) or sentence.startswith("Your name is"):
        return ""
    words = set(re.findall(r"[\w.@+-]+", sentence.lower()))
    if sentence.startswith(("You ", "Your ")) and words & names:  # "You are X in 19122", "You name is X and ..."
        _, joined, rest = sentence.partition(" and you ")
        return f"You {rest}" if joined else ""
    return sentence


def _first_person(sentence: str) -> str:
    """A sentence of the instruction ("You want to ...", "Return #W1 via ...") as the user says it."""
    sentence = sentence.rstrip(" ;") + ("" if sentence.rstrip(" ;").endswith((".", "?", "!")) else ".")
    imperative = _IMPERATIVE.match(sentence)
    if imperative:
        head = imperative.group(1) or ""
        sentence = f"{head}I'd like to {sentence[len(head)].lower()}{sentence[len(head) + 1 :]}"
    for pattern, replacement in _PRONOUNS:
        sentence = re.sub(pattern, replacement, sentence)
    return sentence


@dataclass(frozen=True, eq=False)
class Deviation:
    """A request the instruction does not make: cancelling another of the user's open records (one object per task:
    compared and hashed by identity)."""

    text: str
    action: Action


@per_task
def deviation(domain: Domain, task: Task) -> Deviation | None:
    """The first open record (a pending order, a scheduled appointment) of the task's user that the gold
    solution leaves alone, as a cancellation request; None when the user has none."""
    touched = {str(value) for action in task.actions for value in action.kwargs.values()}
    for action in _open_records(domain).get(task.user_id, ()):
        record_id = next(iter(action.kwargs.values()))
        if record_id not in touched:
            what = action.name.removeprefix("cancel_").removeprefix("pending_").replace("_", " ")
            return Deviation(f"Actually, I'd also like to cancel my {what} {record_id}.", action)
    return None


@functools.cache
def _open_records(domain: Domain) -> dict[str, list[Action]]:
    """Per owner, the cancellations of its open records: for each `cancel_*` tool keyed by a record id, the
    records of the table holding that id whose status is pending or scheduled."""
    found: dict[str, list[Action]] = {}
    for tool in sorted(domain.catalog.write_tools):
        params = domain.tools[tool].get_info()["function"]["parameters"]
        required = params.get("required", [])
        if not tool.startswith("cancel_") or not required or not required[0].endswith("_id"):
            continue
        if any("enum" not in params["properties"].get(name, {}) for name in required[1:]):
            continue  # a cancellation that needs a free-text detail (a reason) the user would have to give
        key, extra = required[0], {name: params["properties"][name]["enum"][0] for name in required[1:]}
        for table in domain.base.tables.values():
            first = table.load(next(iter(table.blobs))) if table.blobs else None
            if not isinstance(first, dict) or key not in first:
                continue
            for record_id in table.blobs:
                record = table.load(record_id)
                owner = record.get("user_id", record.get("patient_id", record.get("customer_id")))
                if record.get("status") in ("pending", "scheduled") and isinstance(owner, str):
                    found.setdefault(owner, []).append(Action(name=tool, kwargs={key: record_id, **extra}))
    return found
