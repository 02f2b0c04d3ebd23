"""Attempts of a worker: Ray reruns a worker task whose process died, and the rerun is a new attempt. Actors
that hand out things (work units, permits) track what each attempt holds; when a worker's new attempt begins,
what its dead attempts held comes back, and calls from a superseded attempt get nothing."""

from __future__ import annotations

from typing import Generic, TypeVar

Held = TypeVar("Held")
Holder = tuple[int, str]  # (worker, attempt)


class AttemptLedger(Generic[Held]):
    """What each live worker attempt holds; `give_back` says how a dead attempt's holding is returned."""

    def __init__(self) -> None:
        self.live: dict[int, str] = {}  # worker -> its current attempt
        self.held: dict[Holder, Held] = {}

    def begin(self, worker: int, attempt: str) -> None:
        """`attempt` of `worker` starts: what its earlier attempts held comes back."""
        for holder in [h for h in self.held if h[0] == worker and h[1] != attempt]:
            self.give_back(self.held.pop(holder))
        self.live[worker] = attempt

    def is_live(self, worker: int, attempt: str) -> bool:
        """Whether `attempt` is still the current attempt of `worker`."""
        return self.live.get(worker) == attempt

    def end(self, worker: int, attempt: str) -> None:
        """The attempt is over: whatever it still holds comes back."""
        if (worker, attempt) in self.held:
            self.give_back(self.held.pop((worker, attempt)))

    def give_back(self, held: Held) -> None:
        raise NotImplementedError
