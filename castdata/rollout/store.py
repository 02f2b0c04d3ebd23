"""The run directory: `manifest.json` and `trajectories/{domain}.{split}.jsonl` (one record a line).

Each finished episode is appended with a single `write` on an `O_APPEND` descriptor, so a killed process
leaves at most a torn last line, which readers skip and `repair` removes before a resumed run appends again.
Readers keep the latest record (by `ended_at`) of each episode key: a rerun of an `infrastructure_error`
episode supersedes it, whichever file each record is in.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from castdata.errors import InputError
from castdata.records import Trajectory
from castdata.redact import redact

EpisodeKey = tuple[str, str, int, int]

MANIFEST = "manifest.json"
TRAJECTORIES = "trajectories"


def trajectory_file(run_dir: Path, domain: str, split: str) -> Path:
    """Where a domain/split's records go."""
    return run_dir / TRAJECTORIES / f"{domain}.{split}.jsonl"


def repair(path: Path) -> int:
    """Cut a torn last line (no newline) from a JSONL file; returns the number of bytes removed."""
    if not path.exists():
        return 0
    with path.open("rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        chunk = 1 << 16
        end = size
        while end > 0:
            start = max(0, end - chunk)
            handle.seek(start)
            block = handle.read(end - start)
            cut = block.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        else:
            keep = 0
        handle.truncate(keep)
        return size - keep


class RecordWriter:
    """Appends JSON lines atomically (one `write` per record) to per-file O_APPEND descriptors."""

    def __init__(self) -> None:
        self._fds: dict[Path, int] = {}

    def append(self, path: Path, line: str) -> None:
        """Append one record line."""
        fd = self._fds.get(path)
        if fd is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = self._fds[path] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        data = (redact(line) + "\n").encode("utf-8")
        written = os.write(fd, data)
        if written != len(data):  # regular files write whole; anything else is a real I/O problem
            raise OSError(f"{path}: short write ({written} of {len(data)} bytes)")

    def close(self) -> None:
        """Close every descriptor."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def iter_lines(run_dir: Path, folder: str = TRAJECTORIES) -> Iterator[tuple[Path, int, str]]:
    """(file, line number, line) of every complete JSONL line under `run_dir/folder`, files in name order.
    A last line without its newline is a record still being written (or torn by a kill): skipped."""
    for path in sorted((run_dir / folder).glob("*.jsonl")):
        with path.open("r", encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if line.endswith("\n") and line.strip():
                    yield path, number, line


@dataclass(frozen=True)
class _Latest:
    ended_at: float
    path: Any  # a Path, or an fsspec path for a URL run directory
    number: int
    final: bool  # not an infrastructure error


def latest_records(lines: Iterable[tuple[Any, int, str]]) -> dict[EpisodeKey, _Latest]:
    """For each episode key, where its latest record is among `lines` ((file, line number, line) in file
    order): the greatest `ended_at` (then file order) wins, whichever file (a local run's or a Ray unit's)
    holds it."""
    latest: dict[EpisodeKey, _Latest] = {}
    for path, number, line in lines:
        try:
            head = json.loads(line)
            key = (head["domain"], head["split"], head["task_id"], head["trial"])
            found = _Latest(
                head["ended_at"], path, number, head["outcome"]["termination_reason"] != "infrastructure_error"
            )
        except (ValueError, KeyError, TypeError) as err:
            raise InputError(f"{path}:{number}: not a {TRAJECTORIES} record: {type(err).__name__} {err}") from None
        if key not in latest or found.ended_at >= latest[key].ended_at:
            latest[key] = found
    return latest


def iter_trajectories(run_dir: Path) -> Iterator[Trajectory]:
    """The latest record of every episode, in file order, one at a time (a rerun supersedes an
    `infrastructure_error` record)."""
    keep = {(found.path, found.number) for found in latest_records(iter_lines(run_dir)).values()}
    for path, number, line in iter_lines(run_dir):
        if (path, number) in keep:
            try:
                yield Trajectory.model_validate_json(line)
            except ValueError as err:
                raise InputError(f"{path}:{number}: not a {TRAJECTORIES} record: {str(err).splitlines()[0]}") from None


def read_trajectories(run_dir: Path) -> list[Trajectory]:
    """Every episode of a run (its latest record), in file order."""
    return list(iter_trajectories(run_dir))


def finished_keys(run_dir: Path) -> set[EpisodeKey]:
    """Episode keys with a final record (infrastructure errors are not final: a rerun retries them)."""
    return {key for key, found in latest_records(iter_lines(run_dir)).items() if found.final}


def write_json(path: Path, value: Any) -> None:
    """Write JSON atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    tmp.write_text(redact(json.dumps(value, indent=2, sort_keys=True)) + "\n")
    os.replace(tmp, path)
