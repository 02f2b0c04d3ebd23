"""Adaptive concurrency for one endpoint: cut on rate limits, grow back on success (AIMD, as TCP does)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass
class Permit:
    """One call's slot; `generation` says which limit it was admitted under."""

    generation: int


class AdaptiveLimiter:
    """At most `limit` calls in flight. A rate limit halves the limit (once per generation of calls, so a
    burst of 429s cuts once); each success adds `1/limit`, so the limit regains one per window of successes,
    up to `ceiling`. Not bound to an event loop until calls wait on it."""

    def __init__(self, ceiling: int) -> None:
        if ceiling < 1:
            raise ValueError(f"ceiling must be >= 1, got {ceiling}")
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.in_flight = 0
        self.generation = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def capacity(self) -> int:
        """Calls admitted at once now."""
        return max(1, int(self.limit))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Permit]:
        """Hold one slot for the duration of a call."""
        while self.in_flight >= self.capacity:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled():
                    self._wake()  # we were handed a slot we will not use: pass it on
                raise
        self.in_flight += 1
        try:
            yield Permit(self.generation)
        finally:
            self.in_flight -= 1
            self._wake()

    def rate_limited(self, permit: Permit) -> None:
        """A call admitted under `permit` was rate limited: halve the limit, once per generation."""
        if permit.generation == self.generation:
            self.limit = max(1.0, self.limit / 2)
            self.generation += 1

    def succeeded(self) -> None:
        """A call succeeded: grow the limit back towards the ceiling."""
        self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)
        self._wake()

    def _wake(self) -> None:
        free = self.capacity - self.in_flight
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1
