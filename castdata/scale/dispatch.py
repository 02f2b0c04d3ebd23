"""The work-unit queue of a launch (a Ray actor): workers claim units one at a time and report each finished
one; the units a dead worker left unfinished go back to the front of the queue when its rerun begins."""

from __future__ import annotations

from collections import deque

from castdata.scale.attempts import AttemptLedger
from castdata.scale.units import WorkUnit


class Dispatcher(AttemptLedger[dict[int, WorkUnit]]):
    """Hands out the units of a launch; holds, per worker attempt, the units it claimed and has not finished."""

    def __init__(self, units: list[WorkUnit]) -> None:
        super().__init__()
        self.queue = deque(units)

    def claim(self, worker: int, attempt: str) -> WorkUnit | None:
        """The next unit for this attempt, or None when there is none (or the attempt was superseded)."""
        if not self.queue or not self.is_live(worker, attempt):
            return None
        unit = self.queue.popleft()
        self.held.setdefault((worker, attempt), {})[unit.index] = unit
        return unit

    def finish(self, worker: int, attempt: str, unit: int) -> None:
        """Every episode of `unit` is recorded."""
        self.held.get((worker, attempt), {}).pop(unit, None)

    def give_back(self, held: dict[int, WorkUnit]) -> None:
        self.queue.extendleft(reversed(list(held.values())))
