"""Cluster-wide concurrency per model endpoint: one Ray actor hands out permits, so N workers together keep
to the limit a provider allows (each worker's own adaptive limit still applies inside it).

Each worker has at most `concurrency` requests in flight (one per episode), so an endpoint needs permits only
when `num_workers * concurrency` exceeds its limit. Permits are held by a worker attempt: a worker that dies
cannot give them back, so its rerun reclaims them when it begins (`AttemptLedger`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from castdata.config import CollectConfig
from castdata.models.openai_backend import base_urls
from castdata.scale.attempts import AttemptLedger


class StaleAttempt(RuntimeError):
    """A newer attempt of this worker has begun: this one must stop."""


def endpoint_limits(config: CollectConfig) -> dict[str, int]:
    """The remote endpoints that the workers together could overload, each with its limit (the lowest
    `max_concurrency` among the specs naming it)."""
    limits: dict[str, int] = {}
    for spec in (config.agent, config.user):
        if spec.backend == "openai":
            for url in base_urls(spec):
                limits[url] = min(limits.get(url, spec.max_concurrency), spec.max_concurrency)
    workers = config.executor.ray.num_workers if config.executor.ray else 1
    return {url: limit for url, limit in limits.items() if limit < workers * config.concurrency}


class PermitBroker(AttemptLedger[Counter[str]]):
    """The permit actor (a Ray async actor): a semaphore per endpoint; holds, per worker attempt, its permits."""

    def __init__(self, limits: dict[str, int]) -> None:
        super().__init__()
        self.free = {url: asyncio.Semaphore(limit) for url, limit in limits.items()}

    async def acquire(self, url: str, worker: int, attempt: str) -> bool:
        """Wait for a permit on `url`; False (and no permit) when the attempt was superseded meanwhile."""
        await self.free[url].acquire()
        if not self.is_live(worker, attempt):
            self.free[url].release()
            return False
        self.held.setdefault((worker, attempt), Counter())[url] += 1
        return True

    def release(self, url: str, worker: int, attempt: str) -> None:
        """Give one permit back (ignored when it was reclaimed already)."""
        held = self.held.get((worker, attempt))
        if held and held[url] > 0:
            held[url] -= 1
            self.free[url].release()

    def give_back(self, held: Counter[str]) -> None:
        for url, count in held.items():
            for _ in range(count):
                self.free[url].release()

    def in_use(self) -> dict[str, int]:
        """Permits held now, per endpoint."""
        return dict(sum(self.held.values(), Counter()))


class ClusterPermits:
    """A worker attempt's side of the broker, the backends' `permits` hook: `hold(url)` around each request."""

    def __init__(self, broker: Any, limited: set[str], worker: int, attempt: str) -> None:
        self.broker, self.limited, self.worker, self.attempt = broker, limited, worker, attempt

    @asynccontextmanager
    async def hold(self, url: str) -> AsyncIterator[None]:
        """Hold a permit for `url` (when the broker limits it) while the body runs."""
        if url not in self.limited:
            yield
            return
        if not await self.broker.acquire.remote(url, self.worker, self.attempt):
            raise StaleAttempt(f"worker {self.worker}: attempt {self.attempt} was superseded")
        try:
            yield
        finally:
            self.broker.release.remote(url, self.worker, self.attempt)
