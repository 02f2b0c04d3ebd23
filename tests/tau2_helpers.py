"""Helpers for the tau2 tests: run tool calls in castdata, and write them down in tau2's own data model."""

from __future__ import annotations

from typing import Any

import pytest

from castdata.envs.tau2_import import INSTALL_HINT, tau2_version

needs_tau2 = pytest.mark.skipif(tau2_version() is None, reason=f"tau2-bench is not installed: {INSTALL_HINT}")


def run_in_castdata(domain, task, calls, said: str) -> tuple[list[Any], float]:
    """Execute `calls` ((requestor, Action)) in castdata, then say `said`: (tau2 messages, castdata's reward)."""
    from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage

    db = domain.new_database(task)
    messages: list[Any] = []
    for number, (requestor, action) in enumerate(calls):
        result = domain.execute(db, action.name, action.kwargs, requestor)
        call = ToolCall(id=f"c{number}", name=action.name, arguments=action.kwargs, requestor=requestor)
        kind = AssistantMessage if requestor == "assistant" else UserMessage
        messages.append(kind(role=requestor, content=None, tool_calls=[call]))
        messages.append(ToolMessage(id=call.id, role="tool", content=result.observation, requestor=requestor,
                                    error=not result.ok))
    messages.append(AssistantMessage(role="assistant", content=said))
    return messages, domain.score(task, db, [said]).reward


def simulation(task_id: str, messages: list[Any], number: int = 0, reward: float | None = None):
    """A tau2 `SimulationRun` of `messages` (ended by the user), with a claimed `reward` when given."""
    from tau2.data_model.simulation import RewardInfo, SimulationRun, TerminationReason

    return SimulationRun(
        id=f"sim-{task_id}-{number}", task_id=task_id, start_time="2025-01-01T00:00:00", end_time="2025-01-01T00:01:00",
        duration=60.0, termination_reason=TerminationReason.USER_STOP, messages=messages, trial=number,
        reward_info=None if reward is None else RewardInfo(reward=reward),
    )


def tau2_reward(domain_short: str, source_task, messages: list[Any]) -> float:
    """tau2's own `evaluate_simulation` (ALL), which replays the calls in fresh environments of its own."""
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    run = simulation(source_task.id, messages)
    return evaluate_simulation(run, source_task, EvaluationType.ALL, solo_mode=False, domain=domain_short).reward
