"""The oracle's gold-way plan: the gold solution as a careful agent plays it, simulated on a scratch database.

The plan follows the user's goals (`goals.py`): the steps for a goal come after the user turn that asks for
it, and each goal ends with a message that hands back to the user. Before each call and message, the
planner makes the lookups a careful agent makes, so that every identifier it uses was seen in a user turn
or a tool result before: the user's profile after authentication, the record a write changes (order,
appointment, ...) before the write, and, for any identifier still unseen, the one lookup whose result shows
it (`Lookups`). Reads never change the data, so rewards stay those of the gold solution. A task's plan is
deterministic: it is made once per task (and deviation) and process, and its steps are shared, read-only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from castdata.envs import RESPOND, Domain, Task
from castdata.envs.clock import episode_clock
from castdata.models.dual_control import due, phone_requests
from castdata.models.scripted.goals import Deviation, goals, identity
from castdata.models.scripted.memo import per_task
from castdata.records import Action
from castdata.visible import identifiers

ANYTHING_ELSE = "Is there anything else I can help you with?"
_SKIPPED_READS = frozenset({"think", "calculate"})
_AMOUNT = re.compile(r'"?(amount|copay|price|total)[\w ]*"?\s*:\s*\$?(\d+\.\d+)', re.IGNORECASE)


@dataclass(frozen=True)
class Step:
    """One step of the plan: `say` a message, `read` or `write` (a confirmation question, then the call), or
    `end` a goal (`value`: a (name, value) from its last write's result the message tells the user)."""

    kind: str
    goal: int
    text: str = ""
    action: Action | None = None
    reveals: tuple[str, ...] = ()  # for a lookup: the identifiers it was made to find
    value: tuple[str, str] | None = None
    ok: bool = True  # for a call: its result was no error (some gold solutions look up what does not exist)


def greeting(domain: Domain) -> str:
    return f"I'd be happy to help. To get started, could you please provide {domain.catalog.auth_hint}?"


def confirmation(action: Action) -> str:
    what = action.name.replace("_", " ")
    return (
        f"I can {what} with these details: {json.dumps(action.kwargs)}. Do you confirm that I should proceed (yes/no)?"
    )


def end_text(value: tuple[str, str] | None, outputs: tuple[str, ...] = ()) -> str:
    """The message that ends a goal: what the last write's result says, the required outputs, an offer."""
    parts = [f"Done: the {value[0]} on record is {value[1]}." if value else "Your request is complete."]
    if outputs:
        parts.append(f"Here is the information you asked for: {'; '.join(outputs)}.")
    return " ".join([*parts, ANYTHING_ELSE])


def amount_on_record(observation: str) -> tuple[str, str] | None:
    """The last (name, non-zero amount) a write's result shows (`("amount", "49.67")`), as written there."""
    found = [pair for pair in _AMOUNT.findall(observation) if pair[1].strip("0.")]
    return (found[-1][0].lower(), found[-1][1]) if found else None


class Lookups:
    """Finds the read call, with arguments already seen, whose result shows an identifier (privileged: it tries
    the candidates on a scratch database); remembers what the simulated episode has seen so far."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self.db = domain.new_database()
        self.seen: list[str] = []  # user turns and tool results, in order
        self.done: set[tuple[str, str]] = set()
        self.readers = [
            (name, params[0] if params else None)
            for name in sorted(domain.tools)
            if domain.tool_kind(name) == "read" and name not in domain.catalog.auth_tools and name not in _SKIPPED_READS
            for params in [domain.tools[name].get_info()["function"]["parameters"].get("required", [])]
            if len(params) <= 1
        ]

    def visible(self, token: str) -> bool:
        return any(token in text for text in self.seen)

    def execute(self, action: Action) -> str:
        with episode_clock():
            observation = self.domain.execute(self.db, action.name, action.kwargs).observation
        self.done.add((action.name, json.dumps(action.kwargs, sort_keys=True)))
        self.seen.append(observation)
        return observation

    def made(self, action: Action) -> bool:
        return (action.name, json.dumps(action.kwargs, sort_keys=True)) in self.done

    def reader(self, name_of_param: str, value: str) -> Action | None:
        """The read tool that takes exactly this parameter (`get_order_details(order_id)`), called with `value`."""
        for name, param in self.readers:
            if param == name_of_param and name.startswith("get_"):
                return Action(name=name, kwargs={param: value})
        return None

    def revealing(self, token: str) -> Action | None:
        """A read call with seen arguments (most recently seen first) whose result shows `token`."""
        values = list(dict.fromkeys(v for text in reversed(self.seen) for v in identifiers(text)))
        with episode_clock():
            for name, param in self.readers:
                for value in [None] if param is None else values:
                    action = Action(name=name, kwargs={} if param is None else {param: value.lstrip("$")})
                    if not self.made(action) and token in self.domain.execute(self.db, name, action.kwargs).observation:
                        return action
        return None


def write_goals(domain: Domain, task: Task, texts: tuple[str, ...]) -> list[int]:
    """For each gold action, the goal it serves: a write, the first goal from the previous write's on whose text
    names its first identifier (an order id), else any of them; a read, the goal of the next write (the last
    goal after the last write)."""
    gold = [a for a in task.actions if a.name != RESPOND]
    assigned: list[int | None] = []
    current = 0
    for action in gold:
        if domain.tool_kind(action.name) != "write":
            assigned.append(None)
            continue
        values = [str(v) for v in action.kwargs.values() if isinstance(v, str) and any(c.isdigit() for c in v)]
        later = range(current, len(texts))
        first = next((g for g in later if values and values[0] in texts[g]), None)
        current = (
            first if first is not None else next((g for g in later if any(v in texts[g] for v in values)), current)
        )
        assigned.append(current)
    following = len(texts) - 1
    for index in range(len(assigned) - 1, -1, -1):
        if assigned[index] is None:
            assigned[index] = following
        else:
            following = assigned[index]
    return [g for g in assigned if g is not None]


@per_task
def plan(domain: Domain, task: Task, extra: Deviation | None = None) -> tuple[Step, ...]:
    """The gold-way steps of a task (with `extra`, also those of a deviation request, as one more goal)."""
    return tuple(_plan(domain, task, extra))


def _plan(domain: Domain, task: Task, extra: Deviation | None) -> list[Step]:
    texts = goals(domain, task)
    auth = domain.auth_action(task)
    gold = [a for a in task.actions if a.name != RESPOND and a is not auth]
    served = write_goals(domain, task, texts)[-len(gold) :] if gold else []
    planner = _Planner(domain, texts)
    planner.lookups.seen.append(texts[0])
    steps = [Step("say", 0, greeting(domain))]
    planner.lookups.seen.append(identity(domain, task))
    if auth is not None:
        steps.append(planner.call(auth, 0))
        profile = planner.lookups.reader(f"{domain.catalog.user_table[:-1]}_id", task.user_id)
        if profile is not None:
            steps += planner.grounded(profile, 0)
    requests = phone_requests(task)  # dual control: the user's own gold calls, asked for in gold order
    for action, goal in zip(gold, served):
        steps += planner.advance(goal)
        position = next((i for i, a in enumerate(task.actions) if a is action), len(task.actions))
        steps += [Step("say", goal, text) for text in due(requests, position)]
        steps += planner.grounded(action, goal)
    last = len(texts) - 1
    steps += planner.advance(last)
    steps += [Step("say", last, text) for text in due(requests, None)]
    steps += planner.finish(last, task.outputs)
    if extra is not None:
        planner.lookups.seen.append(extra.text)
        planner.goal = last + 1
        steps += planner.grounded(extra.action, last + 1)
        steps += planner.finish(last + 1, ())
    return steps


class _Planner:
    """Builds the steps goal by goal, keeping `Lookups` up to date."""

    def __init__(self, domain: Domain, texts: tuple[str, ...]) -> None:
        self.domain, self.texts = domain, texts
        self.lookups = Lookups(domain)
        self.goal = 0
        self.last_write: str | None = None

    def call(self, action: Action, goal: int, reveals: tuple[str, ...] = ()) -> Step:
        observation = self.lookups.execute(action)
        kind = "write" if self.domain.tool_kind(action.name) == "write" else "read"
        if kind == "write":
            self.last_write = observation
        return Step(kind, goal, action=action, reveals=reveals, ok=not observation.startswith("Error"))

    def ground(self, text: str, goal: int) -> list[Step]:
        """The lookups that show the identifiers of `text` not seen yet."""
        steps = []
        for token in dict.fromkeys(identifiers(text)):
            if not self.lookups.visible(token) and not self.lookups.visible(token.lstrip("$")):
                lookup = self.lookups.revealing(token.lstrip("$"))
                if lookup is not None:
                    steps += self.ground(json.dumps(lookup.kwargs), goal)
                    steps.append(self.call(lookup, goal, reveals=(token,)))
        return steps

    def grounded(self, action: Action, goal: int) -> list[Step]:
        """`action` after the lookups it needs: the records a write changes, then any identifier still unseen."""
        steps = []
        if self.domain.tool_kind(action.name) == "write":
            for key, value in action.kwargs.items():
                reader = self.lookups.reader(key, value) if isinstance(value, str) else None
                if reader is not None and not self.lookups.made(reader) and reader.name != action.name:
                    steps += self.ground(json.dumps(reader.kwargs), goal)
                    steps.append(self.call(reader, goal))
        steps += self.ground(json.dumps(action.kwargs), goal)
        if self.domain.tool_kind(action.name) != "write" and self.lookups.made(action):
            return steps
        return [*steps, self.call(action, goal)]

    def advance(self, goal: int) -> list[Step]:
        """End the goals before `goal`; the user then asks for the next one."""
        steps = []
        while self.goal < goal:
            steps += self.finish(self.goal, ())
            self.goal += 1
            self.lookups.seen.append(self.texts[self.goal])
        return steps

    def finish(self, goal: int, outputs: tuple[str, ...]) -> list[Step]:
        value = amount_on_record(self.last_write or "")
        self.last_write = None
        steps = self.ground(" ".join(outputs), goal)
        return [*steps, Step("end", goal, end_text(value, outputs), value=value)]
