"""Retries for remote model calls: exponential backoff with full jitter, `Retry-After` honoured, inside an
`AdaptiveLimiter` slot. What counts as transient is the caller's to say (`classify`)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from castdata.models.base import InfrastructureError
from castdata.models.limits import AdaptiveLimiter
from castdata.redact import redact_error

T = TypeVar("T")


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
            except Exception as err:
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
    raise InfrastructureError(
        f"{what}: gave up after {policy.max_retries + 1} attempts; last error: {_describe(last)}"
    ) from last


def _describe(err: BaseException) -> str:
    """The error in one line for records and logs, naming the operating-system error beneath it (a refused
    connection, an unknown host), with every API key redacted (`castdata.redact`)."""
    text = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    cause = _root_os_error(err)
    if cause is not None and str(cause) not in text:
        text += f" ({type(cause).__name__}: {cause})"
    return redact_error(" ".join(text.split()))


def _root_os_error(err: BaseException) -> OSError | None:
    """The deepest operating-system error beneath `err` (e.g. `ConnectionRefusedError`), if any."""
    found, seen = None, err.__cause__ or err.__context__
    while seen is not None:
        if isinstance(seen, OSError) and not isinstance(seen, TimeoutError):
            found = seen
        seen = seen.__cause__ or seen.__context__
    return found
