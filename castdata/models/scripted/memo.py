"""Per-task memory of the scripted models: what they derive from a task alone is derived once per process."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def per_task(function: Callable[..., T]) -> Callable[..., T]:
    """`function(domain, task, *rest)` remembered per domain and task object (and hashable `rest`); the result is
    shared, so it must be treated as read-only. Tasks are keyed by identity: a task's gold actions are compared by
    identity too (the oracle's privileged checks), so an equal task from elsewhere gets its own result."""
    entries: dict[tuple[Any, ...], tuple[Any, Any, T]] = {}

    @functools.wraps(function)
    def remembered(domain: Any, task: Any, *rest: Any) -> T:
        key = (id(domain), id(task), *rest)
        found = entries.get(key)
        if found is None or found[0] is not domain or found[1] is not task:  # the pair holds the ids in use
            found = entries[key] = (domain, task, function(domain, task, *rest))
        return found[2]

    return remembered
