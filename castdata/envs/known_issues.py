"""Known issues of tau-trait's and tau2-bench's gold solutions, computed by replaying them (nothing is hidden).

Some gold solutions call tools that fail or do not exist (e.g. airline `update_reservation_baggage` for
`update_reservation_baggages`). Such a call changes nothing, so the task is still solvable, but a task
whose gold solution makes no successful write cannot tell a perturbed write from a correct one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from castdata.envs.clock import episode_clock
from castdata.envs.domain import RESPOND, Domain, Task
from castdata.envs.load import load_domain
from castdata.records import Action

# Tasks whose gold replay tau-trait's own `calculate_reward` scores 0 (checked in tests/test_envs.py).
TAU_TRAIT_SCORES_ZERO: frozenset[tuple[str, str, int]] = frozenset()


@dataclass(frozen=True)
class GoldIssue:
    """One task whose gold solution has failing calls or no distinguishing write."""

    domain: str
    split: str
    task_id: int
    failing_calls: tuple[str, ...]  # "name: error observation"
    distinguishing_write: bool
    tau_trait_scores_zero: bool


def _replay_with_results(domain: Domain, task: Task):
    """(whether it is a write, action, result) of every gold call (the user's too, in dual control), in order."""
    db = domain.new_database(task)
    with episode_clock():
        for requestor, action in domain.gold_calls(task):
            kind = domain.tool_kind(action.name) if requestor == "assistant" else domain.user_tool_kind(action.name)
            yield kind == "write", action, domain.execute(db, action.name, action.kwargs, requestor)


def gold_issues(domain_name: str, split: str) -> list[GoldIssue]:
    """Every task of a domain/split with a failing gold call or no successful gold write."""
    domain = load_domain(domain_name)
    issues = []
    for task in domain.tasks(split):
        results = list(_replay_with_results(domain, task))
        failing = tuple(f"{a.name}: {r.observation[:80]}" for _, a, r in results if not r.ok)
        writes = any(r.ok and write for write, _, r in results)
        scores_zero = (domain_name, split, task.index) in TAU_TRAIT_SCORES_ZERO
        if failing or not writes or scores_zero:
            issues.append(GoldIssue(domain_name, split, task.index, failing, writes, scores_zero))
    return issues


def _call_changes_data(domain: Domain, actions: list[Action], index: int) -> bool:
    """Whether `actions[index]` changes the database when `actions` are replayed in order."""
    db = domain.new_database()
    with episode_clock():
        for action in actions[:index]:
            domain.execute(db, action.name, action.kwargs)
        before = db.changes()
        domain.execute(db, actions[index].name, actions[index].kwargs)
        return db.changes() != before


def perturbed_write(domain: Domain, task: Task) -> list[Action] | None:
    """The gold tool calls with one argument of one data-changing write changed (to another value of the same
    shape seen in earlier tool results where possible), choosing, from the last write back, the first change
    that leaves a different database (some arguments are ignored, e.g. a payment id when nothing is charged);
    None if the gold solution has no such write."""
    from castdata.envs.database import same_state
    from castdata.envs.perturb import perturb_arguments

    gold = [a for a in task.actions if a.name != RESPOND and domain.tool_kind(a.name) != "transfer"]
    visible = "\n".join(r.observation for _, _, r in _replay_with_results(domain, task))
    target = domain.gold_changes(task.split, task.index)
    for index in reversed(range(len(gold))):
        if domain.tool_kind(gold[index].name) != "write" or not _call_changes_data(domain, gold, index):
            continue
        for key in sorted(gold[index].kwargs):
            perturbed = perturb_arguments(gold[index], visible, domain, random.Random(task.index), [key])
            if perturbed is None:
                continue
            candidate = [*gold[:index], perturbed[0], *gold[index + 1 :]]
            if not same_state(domain.base, domain.replay(candidate).changes(), target):
                return candidate
    return None
