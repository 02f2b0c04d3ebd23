"""Dataset splits by task: no task is in two splits, and `test` holds only the benchmark's test tasks.

A task is `(domain, benchmark split, task id)`. Benchmark `test` tasks go to `test`; every other task (train
and dev) goes to `validation` when a hash of its key falls under `validation_fraction`, else to `train`.
The hash makes the assignment deterministic and independent of which other tasks a build contains.
"""

from __future__ import annotations

import hashlib

SPLITS = ("train", "validation", "test")


def task_key(domain: str, benchmark_split: str, task_id: int) -> str:
    """The task column: `domain.benchmark_split.task_id`."""
    return f"{domain}.{benchmark_split}.{task_id}"


def split_of(domain: str, benchmark_split: str, task_id: int, validation_fraction: float) -> str:
    """The dataset split of a task."""
    if benchmark_split == "test":
        return "test"
    digest = hashlib.sha256(task_key(domain, benchmark_split, task_id).encode()).digest()
    return "validation" if int.from_bytes(digest[:8], "big") / 2**64 < validation_fraction else "train"
