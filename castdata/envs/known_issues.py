"""Known issues of tau-trait's and tau2-bench's gold solutions, computed by replaying them (nothing is hidden).

Some gold solutions call tools that fail or do not exist (e.g. airline `update_reservation_baggage` for
`update_reservation_baggages`). Such a call changes nothing, so the task is still solvable, but a task
whose gold solution makes no successful write cannot tell a perturbed write from a correct one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from castdata.envs.domain import Domain, Task
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


def gold_issues(domain_name: str, split: str) -> list[GoldIssue]:
    """Every task of a domain/split with a failing gold call or no successful gold write."""
    domain = load_domain(domain_name)
    issues = []
    for task in domain.tasks(split):
        calls = domain.replay(domain.gold_calls(task), task).calls
        failing = tuple(f"{c.action.name}: {c.result.observation[:80]}" for c in calls if not c.result.ok)
        writes = any(c.result.ok and domain.call_kind(c.action.name, c.requestor) == "write" for c in calls)
        scores_zero = (domain_name, split, task.index) in TAU_TRAIT_SCORES_ZERO
        if failing or not writes or scores_zero:
            issues.append(GoldIssue(domain_name, split, task.index, failing, writes, scores_zero))
    return issues


def perturbed_write(domain: Domain, task: Task) -> list[Action] | None:
    """The gold tool calls with one argument of one data-changing write changed (to another value of the same
    shape seen in earlier tool results where possible), choosing, from the last write back, the first change
    that leaves a different database (some arguments are ignored, e.g. a payment id when nothing is charged);
    None if the gold solution has no such write."""
    from castdata.envs.perturb import perturb_arguments

    gold = domain.tool_actions(task.actions)
    replayed = domain.replay(gold, task, track=True)
    visible = "\n".join(c.result.observation for c in domain.replay(domain.gold_calls(task), task).calls)
    for index in reversed(range(len(gold))):
        if domain.tool_kind(gold[index].name) != "write" or not replayed.calls[index].changed:
            continue
        for key in sorted(gold[index].kwargs):
            perturbed = perturb_arguments(gold[index], visible, domain, random.Random(task.index), [key])
            if perturbed is None:
                continue
            candidate = [*gold[:index], perturbed[0], *gold[index + 1 :]]
            if not domain.reaches_gold(candidate, task):
                return candidate
    return None
