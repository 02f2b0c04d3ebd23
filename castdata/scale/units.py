"""Work units: the pending episodes of one launch, cut into batches of one domain and split.

A unit's attempts write `trajectories/{domain}.{split}.unit-{launch}-{index}-{attempt}.jsonl`. Names sort after
the local executor's `{domain}.{split}.jsonl`, and launches and attempts sort by time, so a reader that keeps
the last record of an episode keeps the newest (a rerun of an infrastructure error supersedes it).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from itertools import groupby

from castdata.rundir import EpisodeKey


@dataclass(frozen=True)
class WorkUnit:
    """A batch of episodes that one worker runs; `launch` names the collect invocation that planned it."""

    launch: str
    index: int
    keys: tuple[EpisodeKey, ...]

    @property
    def prefix(self) -> str:
        """The start of every record file name of this unit's attempts."""
        domain, split = self.keys[0][:2]
        return f"{domain}.{split}.unit-{self.launch}-{self.index:05d}"

    def attempt_file(self, attempt: str) -> str:
        """The record file of one attempt."""
        return f"{self.prefix}-{attempt}.jsonl"


def new_launch() -> str:
    """A launch id: sortable by time, unique across drivers."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def new_attempt() -> str:
    """An attempt id, sortable by time (a retry sorts after the attempt it replaces)."""
    return f"{time.time_ns():x}"


def plan_units(pending: list[EpisodeKey], size: int, launch: str) -> list[WorkUnit]:
    """Cut `pending` (in order) into units of at most `size` episodes, each of one domain and split."""
    units: list[WorkUnit] = []
    for _, group in groupby(pending, key=lambda key: key[:2]):
        keys = list(group)
        for start in range(0, len(keys), size):
            units.append(WorkUnit(launch, len(units), tuple(keys[start : start + size])))
    return units
