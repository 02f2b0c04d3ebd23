"""The run directory: `manifest.json` and `trajectories/{domain}.{split}.jsonl` (one record a line).

Each finished episode is appended with a single `write` on an `O_APPEND` descriptor, so a killed process
leaves at most a torn last line, which `repair` removes before a resumed run appends again. Readers keep
the last record of each episode key (a rerun of an `infrastructure_error` episode supersedes it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from castdata.records import Trajectory

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
        data = (line + "\n").encode("utf-8")
        written = os.write(fd, data)
        if written != len(data):  # regular files write whole; anything else is a real I/O problem
            raise OSError(f"{path}: short write ({written} of {len(data)} bytes)")

    def close(self) -> None:
        """Close every descriptor."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def iter_lines(run_dir: Path, folder: str = TRAJECTORIES) -> Iterator[tuple[Path, int, str]]:
    """(file, line number, line) of every JSONL line under `run_dir/folder`, files in name order."""
    for path in sorted((run_dir / folder).glob("*.jsonl")):
        with path.open("r", encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    yield path, number, line


def read_trajectories(run_dir: Path) -> list[Trajectory]:
    """Every episode of a run (the last record per episode key), in file order."""
    latest: dict[tuple, Trajectory] = {}
    for path, number, line in iter_lines(run_dir):
        try:
            record = Trajectory.model_validate_json(line)
        except ValueError as err:
            raise ValueError(f"{path}:{number}: not a {TRAJECTORIES} record: {str(err).splitlines()[0]}") from None
        latest.pop(record.key, None)
        latest[record.key] = record
    return list(latest.values())


def finished_keys(run_dir: Path) -> set[tuple[str, str, int, int]]:
    """Episode keys with a final record (infrastructure errors are not final: a rerun retries them)."""
    final: dict[tuple, bool] = {}
    for _, _, line in iter_lines(run_dir):
        head = json.loads(line)
        key = (head["domain"], head["split"], head["task_id"], head["trial"])
        final[key] = head["outcome"]["termination_reason"] != "infrastructure_error"
    return {key for key, done in final.items() if done}


def write_json(path: Path, value: Any) -> None:
    """Write JSON atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
