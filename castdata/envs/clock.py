"""A fixed clock for tools that stamp the current date.

tau-trait's telehealth `cancel_appointment` writes `datetime.now()` into the database, so a correct
episode run on another day than its gold replay would fail the state comparison. castdata replaces the
`datetime` such tool modules imported by `EpisodeClock`, whose `now()` reads a context variable: each
episode (and each gold replay) runs under `episode_clock(...)`, which defaults to `DEFAULT_NOW`.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
from collections.abc import Iterator
from types import ModuleType

DEFAULT_NOW = _dt.datetime(2025, 1, 15, 10, 0, 0)
_now: contextvars.ContextVar[_dt.datetime] = contextvars.ContextVar("castdata_now", default=DEFAULT_NOW)


class EpisodeClock(_dt.datetime):
    """`datetime` whose `now()`/`today()` return the episode's fixed time."""

    @classmethod
    def now(cls, tz: _dt.tzinfo | None = None) -> _dt.datetime:  # type: ignore[override]
        value = _now.get()
        return value.replace(tzinfo=tz) if tz is not None else value

    @classmethod
    def today(cls) -> _dt.datetime:  # type: ignore[override]
        return _now.get()


@contextlib.contextmanager
def episode_clock(now: _dt.datetime = DEFAULT_NOW) -> Iterator[None]:
    """Run the enclosed tool calls with `now` as the current time."""
    token = _now.set(now)
    try:
        yield
    finally:
        _now.reset(token)


def fix_clock(module: ModuleType) -> None:
    """Make a tool module that did `from datetime import datetime` use the episode clock."""
    if getattr(module, "datetime", None) is _dt.datetime:
        module.datetime = EpisodeClock
