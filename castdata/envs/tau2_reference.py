"""tau2-bench's own episode pieces (`Environment.get_response`, `evaluate_simulation`), for cross-checks and
benchmarks.

tau2's evaluator module imports its registry, hence its agents and litellm: run this in a process of its own
(castdata's own loader never imports any of it). `LITELLM_LOCAL_MODEL_COST_MAP` is set so that importing
litellm fetches nothing from the network.
"""

from __future__ import annotations

import os
from typing import Any

from castdata.records import Action


def simulation(task_id: str, messages: list[Any], number: int = 0, reward: float | None = None) -> Any:
    """A tau2 `SimulationRun` of `messages`, ended by the user, claiming `reward` when given."""
    from tau2.data_model.simulation import RewardInfo, SimulationRun, TerminationReason

    return SimulationRun(
        id=f"sim-{task_id}-{number}",
        task_id=task_id,
        start_time="2025-01-01T00:00:00",
        end_time="2025-01-01T00:01:00",
        duration=60.0,
        termination_reason=TerminationReason.USER_STOP,
        messages=messages,
        trial=number,
        reward_info=None if reward is None else RewardInfo(reward=reward),
    )


def tool_turns(number: int, requestor: str, action: Action, observation: str, error: bool) -> list[Any]:
    """tau2's messages for one tool call: the caller's message with the call, then the tool's result."""
    from tau2.data_model.message import AssistantMessage, ToolCall, ToolMessage, UserMessage

    call = ToolCall(id=f"c{number}", name=action.name, arguments=action.kwargs, requestor=requestor)
    kind = AssistantMessage if requestor == "assistant" else UserMessage
    return [
        kind(role=requestor, content=None, tool_calls=[call]),
        ToolMessage(id=call.id, role="tool", content=observation, requestor=requestor, error=error),
    ]


def evaluate(domain_short: str, source_task: Any, messages: list[Any]) -> float:
    """tau2's own `evaluate_simulation` (ALL), which replays the calls in fresh environments of its own."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    run = simulation(source_task.id, messages)
    return evaluate_simulation(run, source_task, EvaluationType.ALL, solo_mode=False, domain=domain_short).reward


def tau2_episode(domain_short: str, source_task: Any, calls: list[tuple[str, Action]], said: str) -> float:
    """One gold-replay episode entirely in tau2: a fresh environment from its data files, each call through
    `get_response`, then its evaluator."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from tau2.data_model.message import AssistantMessage, ToolCall
    from tau2.registry import registry

    env = registry.get_env_constructor(domain_short)()
    state = source_task.initial_state
    if state is not None:
        env.set_state(state.initialization_data, state.initialization_actions, [])
    messages: list[Any] = []
    for number, (requestor, action) in enumerate(calls):
        response = env.get_response(
            ToolCall(id=f"c{number}", name=action.name, arguments=action.kwargs, requestor=requestor)
        )
        messages += tool_turns(number, requestor, action, response.content or "", response.error)
    messages.append(AssistantMessage(role="assistant", content=said))
    return evaluate(domain_short, source_task, messages)
