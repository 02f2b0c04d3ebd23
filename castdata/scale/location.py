"""A run directory as every worker of a cluster sees it: a path (local, or a shared file system mounted at the
same place on every node) or an fsspec URL (`s3://`, `gs://`, `file://`, ...).

Each work-unit attempt writes its own file, so no two writers ever share one. On a path, records are appended
one `write` each (`store.RecordWriter`), so a killed worker leaves at most a torn last line; on a URL, object
stores cannot append, so an attempt's records are written as one object when it ends. Readers skip a last line
without its newline (a record still being written, or torn), and `repair` cuts torn tails while no worker runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fsspec.core import url_to_fs

from castdata.redact import redact
from castdata.rollout.collect import EpisodeKey
from castdata.rollout.store import MANIFEST, TRAJECTORIES, RecordWriter, latest_records, repair, write_json


def run_location(where: str) -> Path | str:
    """What `out` names: an fsspec URL stays a string, anything else is a local path."""
    return where if "://" in where else Path(where)


class RunLocation:
    """The files of one run directory; `where` is a path or a URL (a relative path is resolved here)."""

    def __init__(self, where: str | Path) -> None:
        self.is_url = isinstance(where, str) and "://" in where
        self.fs, self.root = url_to_fs(str(where))
        self.where = where if self.is_url else self.root

    def _file(self, name: str) -> str:
        return f"{self.root}/{TRAJECTORIES}/{name}"

    def read_manifest(self) -> dict[str, Any] | None:
        """The manifest, or None for a new run."""
        path = f"{self.root}/{MANIFEST}"
        return json.loads(self.fs.cat_file(path)) if self.fs.exists(path) else None

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Replace the manifest (atomically on a path; object stores replace whole objects anyway)."""
        if self.is_url:
            self.fs.makedirs(self.root, exist_ok=True)
            self.fs.pipe_file(
                f"{self.root}/{MANIFEST}", (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
            )
        else:
            write_json(Path(self.root) / MANIFEST, manifest)

    def recorded(self, pattern: str = "*.jsonl") -> dict[EpisodeKey, bool]:
        """Each episode key with a record in the files named by `pattern`: is its last record final (not an
        infrastructure error, which a later run retries)?"""
        return {key: found.final for key, found in latest_records(self._lines(pattern)).items()}

    def _lines(self, pattern: str) -> Iterator[tuple[str, int, str]]:
        """(file, line number, line) of every complete line of the record files named by `pattern`."""
        for path in sorted(self.fs.glob(self._file(pattern))):
            data = self.fs.cat_file(path).decode("utf-8")
            for number, line in enumerate(data[: data.rfind("\n") + 1].splitlines(keepends=True), start=1):
                if line.strip():
                    yield path, number, line

    def finished_keys(self) -> set[EpisodeKey]:
        """Episode keys with a final record."""
        return {key for key, final in self.recorded().items() if final}

    def sink(self, name: str) -> RecordSink:
        """A writer of the record file `name`, which nobody else writes."""
        return RecordSink(self, self._file(name))

    def repair(self) -> None:
        """While no worker writes: cut the torn tails that killed workers left (paths only)."""
        if not self.is_url:
            for path in self.fs.glob(self._file("*.jsonl")):
                repair(Path(path))


class RecordSink:
    """One work-unit attempt's record file: appended record by record on a path, one object at `close` on a URL."""

    def __init__(self, location: RunLocation, path: str) -> None:
        self.location, self.path = location, path
        self.lines: list[str] = []
        self.writer = None if location.is_url else RecordWriter()

    def write(self, line: str) -> None:
        """Add one record line."""
        if self.writer is None:
            self.lines.append(redact(line) + "\n")
        else:
            self.writer.append(Path(self.path), line)

    def close(self) -> None:
        """Finish the file (on a URL: write it, if it has any record)."""
        if self.writer is not None:
            self.writer.close()
        elif self.lines:
            self.location.fs.makedirs(self.path.rsplit("/", 1)[0], exist_ok=True)
            self.location.fs.pipe_file(self.path, "".join(self.lines).encode("utf-8"))
