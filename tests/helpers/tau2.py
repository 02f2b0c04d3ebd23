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
