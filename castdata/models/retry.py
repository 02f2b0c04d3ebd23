"""Retries for remote model calls: exponential backoff with full jitter, `Retry-After` honoured, inside an
`AdaptiveLimiter` slot. What counts as transient is the caller's to say (`classify`)."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from castdata.models.base import InfrastructureError
from castdata.models.limits import AdaptiveLimiter

T = TypeVar("T")
_SECRET = re.compile(r"\bsk-[\w*.-]+")  # API keys, whole or masked, as error bodies quote them


@dataclass(frozen=True)
class Transient:
    """A failure worth retrying; `retry_after_s` is the server's own wait, when it sent one."""

    rate_limited: bool = False
    retry_after_s: float | None = None


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait: attempt n (0-based) waits up to `base_s * 2**n`, at most `max_s`."""

    max_retries: int
    base_s: float = 1.0
    max_s: float = 60.0
    timeout_s: float | None = None  # hard bound on one attempt

    def delay(self, attempt: int, failure: Transient, rng: random.Random) -> float:
        """Seconds to wait before the next attempt."""
        if failure.retry_after_s is not None:
            return min(self.max_s, max(0.0, failure.retry_after_s))
        return rng.uniform(0.0, min(self.max_s, self.base_s * 2**attempt))


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    limiter: AdaptiveLimiter,
    classify: Callable[[BaseException], Transient | None],
    what: str,
    rng: random.Random | None = None,
) -> T:
    """`await call()` until it succeeds; a permanent failure, or the last transient one, is an `InfrastructureError`."""
    rng = rng or random.Random()
    for attempt in range(policy.max_retries + 1):
        async with limiter.slot() as permit:
            try:
                result = await asyncio.wait_for(call(), policy.timeout_s)
            except Exception as err:  # noqa: BLE001 - classified below
                failure = Transient() if isinstance(err, asyncio.TimeoutError) else classify(err)
                if failure is None:
                    raise InfrastructureError(f"{what}: {_describe(err)}") from err
                if failure.rate_limited:
                    limiter.rate_limited(permit)
                last = err
            else:
                limiter.succeeded()
                return result
        if attempt < policy.max_retries:
            await asyncio.sleep(policy.delay(attempt, failure, rng))
    raise InfrastructureError(f"{what}: gave up after {policy.max_retries + 1} attempts; last error: {_describe(last)}") from last


def _describe(err: BaseException) -> str:
    """The error in one line for records and logs, with anything that looks like an API key redacted."""
    return _SECRET.sub("sk-[redacted]", f"{type(err).__name__}: {err}" if str(err) else type(err).__name__)
