"""The cluster's progress counters: workers report each finished episode to one Ray actor, the driver reads
them for its progress bar."""

from __future__ import annotations

from castdata.records import Usage
from castdata.rollout.runner import Progress


class Tally:
    """Progress of one launch (a Ray actor): episodes, successes, tokens, cost, and the process of each worker."""

    def __init__(self) -> None:
        self.progress = Progress()

    def started(self, worker: int, pid: int) -> None:
        """An attempt of `worker` runs in process `pid`."""
        self.progress.workers[worker] = pid

    def ended(self, worker: int, pid: int) -> None:
        """The attempt of `worker` in `pid` is over (a later attempt elsewhere keeps its own entry)."""
        if self.progress.workers.get(worker) == pid:
            del self.progress.workers[worker]

    def count(self, reward: float, usage: Usage) -> None:
        """One finished episode."""
        self.progress.count(reward, usage)

    def snapshot(self) -> Progress:
        """The counters now."""
        return self.progress
