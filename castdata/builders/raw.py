"""The `trajectories` and `labels` configs: the records as collected and as labelled, one row each.

Every episode is kept (infrastructure failures and unlabelled episodes too: filter on `outcome` and on the
labels); `privileged` holds what the agent never saw (hidden instruction, gold actions, required outputs).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from castdata.builders.source import Episode


def _where(episode: Episode) -> dict[str, Any]:
    t = episode.trajectory
    return {**episode.identity, "benchmark_split": t.split, "task_id": t.task_id, "trial": t.trial}


def trajectory_row(episode: Episode) -> dict[str, Any]:
    """The episode as one row."""
    record = episode.trajectory.model_dump(
        mode="json", exclude={"schema_", "id", "domain", "split", "task_id", "trial"}
    )
    return {**_where(episode), **record, "user_model": episode.trajectory.user.label}


def label_rows(episode: Episode) -> Iterator[dict[str, Any]]:
    """Every label of the episode, in step order."""
    where = _where(episode)
    for step in sorted(episode.labels or {}):
        label = episode.labels[step]
        yield {
            **where,
            **label.model_dump(
                mode="json", exclude={"schema_", "trajectory_id", "domain", "split", "task_id", "trial"}
            ),
        }
