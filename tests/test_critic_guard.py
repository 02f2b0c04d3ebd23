"""The critic guard in the episode loop: intercepted writes never execute, feedback is ephemeral, revisions are bounded,
and the noisy oracle revises its injected mistakes the gold way."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from castdata.critic.guard import Critique, Guard, GuardedBackend
from castdata.critic.replay import ReplayCritic
from castdata.envs import load_domain
from castdata.messages import agent_actions
from castdata.models import open_backend
from castdata.models.feedback import FEEDBACK
from castdata.models.spec import ModelSpec
from castdata.rollout import episode as episode_loop
from castdata.rollout.episode import run_episode

USER = ModelSpec(model="scripted-user")


class AlwaysInvalid:
    """A critic that rejects everything it is shown."""

    async def judge(self, ctx, messages: list[dict[str, Any]], proposed: dict[str, Any]) -> Critique:
        return Critique(verdict="invalid", text="Rejected.")

    async def aclose(self) -> None:
        return None


def episode(task: int, mistakes: dict[str, float], guard: Guard | None, seed: int = 7):
    """One retail test episode of the noisy oracle, guarded or not."""
    domain = load_domain("retail")
    agent_spec = ModelSpec(options={"mistakes": mistakes})
    agent = open_backend(agent_spec)
    if guard is not None:
        agent = GuardedBackend(agent, guard)
    return asyncio.run(
        run_episode(domain, domain.task("test", task), 0, seed, agent, open_backend(USER), agent_spec, USER)
    )


def test_the_database_never_sees_an_intercepted_write(monkeypatch: pytest.MonkeyPatch) -> None:
    executed: list[tuple[str, dict]] = []  # every tool call the episode loop runs on the episode's database
    original = episode_loop._tool_turn

    def spy(domain, db, transcript, reply):
        executed.append((reply.tool_calls[0].name, reply.tool_calls[0].arguments))
        return original(domain, db, transcript, reply)

    monkeypatch.setattr(episode_loop, "_tool_turn", spy)
    unguarded = episode(0, {"wrong_argument": 1.0}, None)
    assert unguarded.outcome.reward == 0.0  # the wrong write breaks the episode
    executed.clear()
    record = episode(0, {"wrong_argument": 1.0}, Guard(ReplayCritic()))

    assert record.interceptions and record.outcome.reward == 1.0
    for interception in record.interceptions:
        call = interception.proposed["tool_calls"][0]["function"]
        assert (call["name"], call["arguments"]) not in executed
        assert (
            record.messages[interception.step]["tool_calls"][0]["function"]
            == interception.revised["tool_calls"][0]["function"]
        )
    assert [m.intercepted for m in record.injected_mistakes] == [True] * len(record.injected_mistakes)


def test_feedback_is_ephemeral_and_revisions_are_bounded() -> None:
    record = episode(0, {}, Guard(AlwaysInvalid(), max_revisions=2))
    writes = [
        step
        for step, action in agent_actions(record.messages)
        if load_domain("retail").tool_kind(action.name) == "write"
    ]

    assert writes and sorted({i.step for i in record.interceptions}) == writes
    for step in writes:
        tries = [i for i in record.interceptions if i.step == step]
        assert [i.attempt for i in tries] == [1, 2, 3]
        assert [i.revised is None for i in tries] == [False, False, True]  # the third proposal executed as it was
        assert tries[0].revised == tries[1].proposed
    assert not any(FEEDBACK in str(m.get("content")) for m in record.messages)
    assert record.outcome.reward == 1.0  # a correct agent re-proposes its correct action


@pytest.mark.parametrize("scope", ["writes", "all"])
def test_the_guard_judges_writes_or_every_action(scope: str) -> None:
    record = episode(0, {}, Guard(AlwaysInvalid(), scope=scope, max_revisions=0))
    judged = {i.step for i in record.interceptions}
    acted = dict(agent_actions(record.messages))
    kinds = {load_domain("retail").tool_kind(acted[step].name) for step in judged}
    assert kinds == ({"write"} if scope == "writes" else {"write", "read", "unknown"})  # `respond` is no tool: unknown
    assert len(judged) == (
        sum(1 for a in acted.values() if load_domain("retail").tool_kind(a.name) == "write")
        if scope == "writes"
        else len(acted)
    )


@pytest.mark.parametrize(
    "kind", ["no_confirmation", "before_auth", "two_tool_calls", "premature_end", "missing_output"]
)
def test_the_oracle_plays_the_gold_way_when_a_mistake_is_sent_back(kind: str) -> None:
    """Every kind of injected mistake has a gold revision (here every action is sent back once)."""
    records = [episode(task, {kind: 1.0}, Guard(AlwaysInvalid(), scope="all", max_revisions=1)) for task in range(6)]
    mistakes = [m for r in records for m in r.injected_mistakes]

    assert mistakes and all(m.intercepted for m in mistakes)
    assert all(r.outcome.reward == 1.0 for r in records)
    assert not any(r.meta[i].violation for r in records for i in range(len(r.messages)))
