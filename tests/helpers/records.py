"""Trajectory records made by hand, for tests of the readers (report, the run directory)."""

from __future__ import annotations

from castdata.models.spec import ModelSpec
from castdata.records import Outcome, Privileged, Trajectory, episode_id


def record(
    task_id: int, trial: int, success: bool, reason: str = "user_stop", agent: str = "noisy-oracle", split: str = "test"
) -> Trajectory:
    """A retail episode of three messages, ended at t=1 with `reason`; reward 1 when `success`."""
    return Trajectory(
        id=episode_id("retail", split, task_id, trial),
        domain="retail",
        split=split,
        task_id=task_id,
        trial=trial,
        seed=0,
        agent=ModelSpec(model=agent),
        user=ModelSpec(model="scripted-user"),
        tools=[],
        messages=[
            {"role": "system", "content": "p"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "ok"},
        ],
        meta=[],
        outcome=Outcome(reward=float(success), db_match=success, termination_reason=reason),
        privileged=Privileged(user_id="u", instruction="i", gold_actions=[], required_outputs=[]),
        started_at=0.0,
        ended_at=1.0,
    )
