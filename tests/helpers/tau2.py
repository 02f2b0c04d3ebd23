"""Helpers for the tau2 tests: run tool calls in castdata and write them down in tau2's own data model."""

from __future__ import annotations

from typing import Any

import pytest

from castdata.envs.tau2_import import INSTALL_HINT, tau2_version

needs_tau2 = pytest.mark.skipif(tau2_version() is None, reason=f"tau2-bench is not installed: {INSTALL_HINT}")


def run_in_castdata(domain, task, calls, said: str) -> tuple[list[Any], float]:
    """Execute `calls` ((requestor, Action)) in castdata, then say `said`: (tau2 messages, castdata's reward)."""
    from tau2.data_model.message import AssistantMessage

    from castdata.envs.tau2_reference import tool_turns

    db = domain.new_database(task)
    messages: list[Any] = []
    for number, (requestor, action) in enumerate(calls):
        result = domain.execute(db, action.name, action.kwargs, requestor)
        messages += tool_turns(number, requestor, action, result.observation, not result.ok)
    messages.append(AssistantMessage(role="assistant", content=said))
    return messages, domain.score(task, db, [said]).reward


def dual_control_record(domain, task, calls, said: str = "Your request is complete."):
    """A castdata record of an episode of `task` that makes `calls` ((requestor, Action)) in order, as the episode
    loop writes it: each agent call an assistant turn and its result (a write after the user's yes to its details);
    each run of user calls, on the user's device, in `user_tool_calls` before the user message it led to; then `said`
    and the user's stop."""
    from castdata.models.scripted.plan import confirmation
    from castdata.records import MessageMeta, Outcome, Privileged, Trajectory, UserToolCall
    from castdata.rollout.episode import STOP

    db = domain.new_database(task)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": domain.policy},
        {"role": "user", "content": "My phone has no service."},
    ]
    user_calls: list[UserToolCall] = []
    for number, (requestor, action) in enumerate(calls):
        result = domain.execute(db, action.name, action.kwargs, requestor)
        if requestor == "user":
            if not user_calls or user_calls[-1].step != len(messages):
                messages.append({"role": "assistant", "content": "Please do this on your phone."})
            user_calls.append(
                UserToolCall(
                    step=len(messages),
                    id=f"u{number}",
                    name=action.name,
                    arguments=action.kwargs,
                    content=result.observation,
                    ok=result.ok,
                )
            )
            if number + 1 == len(calls) or calls[number + 1][0] != "user":
                messages.append({"role": "user", "content": "Done."})
            continue
        if domain.tool_kind(action.name) == "write":
            messages += [{"role": "assistant", "content": confirmation(action)}, {"role": "user", "content": "Yes."}]
        function = {"name": action.name, "arguments": action.kwargs}
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{number}", "type": "function", "function": function}],
            },
            {"role": "tool", "tool_call_id": f"c{number}", "name": action.name, "content": result.observation},
        ]
    messages += [{"role": "assistant", "content": said}, {"role": "user", "content": f"Thanks. {STOP}"}]
    score = domain.score(task, db, [said])
    return Trajectory(
        id=f"{task.domain}.{task.split}.{task.index}.0",
        domain=task.domain,
        split=task.split,
        task_id=task.index,
        trial=0,
        seed=0,
        agent={"backend": "scripted", "model": "test"},
        user={"backend": "scripted", "model": "scripted-user"},
        tools=domain.tool_schemas,
        messages=messages,
        meta=[MessageMeta(t=0.0) for _ in messages],
        outcome=Outcome(
            reward=score.reward,
            db_match=score.db_match,
            outputs_found=list(score.outputs_found),
            outputs_missing=list(score.outputs_missing),
            termination_reason="user_stop",
        ),
        privileged=Privileged.of(task),
        user_tool_calls=user_calls,
        started_at=0.0,
        ended_at=0.0,
    )
