"""Which tasks the reference-evaluator parity tests replay: every task of a small split, every `STRIDE`-th task of
a large one (the same tasks on every run), or every task when `CASTDATA_FULL_PARITY=1` (about 15 CPU minutes).

The references (tau-trait's and tau2's own reward code) hash or re-execute the whole database per task, so the full
sweeps alone would be two thirds of the suite's time."""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")
FULL = os.environ.get("CASTDATA_FULL_PARITY") == "1"
STRIDE = 8
SMALL = 20  # a split of at most this many tasks is replayed whole


def sampled(tasks: list[T]) -> list[T]:
    """The tasks of one split a parity test replays."""
    return tasks if FULL or len(tasks) <= SMALL else tasks[::STRIDE]
