"""The run directory: its layout, its manifest, and every read and write of its files (nothing else opens them).

```
RUN_DIR/manifest.json                            RunManifest (`castdata.run/1`): config, versions, times, counts
RUN_DIR/pipeline.json                            the finished stages of `castdata run` (castdata.pipeline)
RUN_DIR/trajectories/{domain}.{split}.jsonl      castdata.trajectory/1, one record a line (the local executor)
RUN_DIR/trajectories/{domain}.{split}.unit-*.jsonl   one file per work-unit attempt (castdata.scale)
RUN_DIR/labels/{domain}.{split}.jsonl            castdata.label/1, whichever trajectory files the episodes came from
RUN_DIR/labels/policy_clauses.jsonl              the labeler's policy clause table
RUN_DIR/labels/stats.json                        the labeler's statistics
RUN_DIR/labels/cache/teacher.jsonl               the label teacher's replies (`ReplyCache`)
```

A run directory is a path (local, or a shared file system mounted at the same place on every node) or an fsspec
URL (`s3://`, `gs://`, `file://`, ...): a local path is just another file system. On a path, each record is
appended with a single `write` on an `O_APPEND` descriptor, so a killed process leaves at most a torn last line,
which readers skip and `repair` removes before a resumed run appends again; object stores cannot append, so a
`RecordSink` on a URL writes its records as one object when it closes.

**The latest record wins.** Readers keep, of each episode key, the record with the greatest `ended_at` (then the
later in file order), whichever file holds it: a rerun of an `infrastructure_error` episode supersedes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from fsspec.core import url_to_fs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from castdata.errors import InputError
from castdata.records import Trajectory
from castdata.redact import redact

EpisodeKey = tuple[str, str, int, int]  # (domain, split, task id, trial): what resume and pass^k group by

RUN_SCHEMA = "castdata.run/1"
MANIFEST = "manifest.json"
PIPELINE = "pipeline.json"
TRAJECTORIES = "trajectories"
LABELS = "labels"
CLAUSES_FILE = "policy_clauses.jsonl"
STATS_FILE = "stats.json"
TEACHER_CACHE = "cache/teacher.jsonl"  # under labels/
INTERCEPTIONS = "interceptions"  # under labels/: the hindsight verdicts on a guarded run's interceptions


class RunManifest(BaseModel):
    """`manifest.json`: what made the run. Importers add their own fields (kept as extra fields); a field nobody
    set is not written, so a manifest reads and writes back byte for byte."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    schema_: str = Field(default=RUN_SCHEMA, alias="schema")
    config: dict[str, Any] | None = None  # the collect config (an import's: what it imported)
    config_fingerprint: str | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    started_at: float | None = None
    ended_at: float | None = None
    counts: dict[str, int] = Field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The manifest as written: the schema and every field that was set."""
        return {"schema": self.schema_} | self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def run_location(where: str) -> Path | str:
    """What `out` names: an fsspec URL stays a string, anything else is a local path."""
    return where if "://" in where else Path(where)


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


def write_json(path: Path, value: Any) -> None:
    """Write JSON atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    tmp.write_text(redact(json.dumps(value, indent=2, sort_keys=True)) + "\n")
    os.replace(tmp, path)


def parse_line(model: type[BaseModel], path: Any, number: int, line: str, what: str | None = None) -> Any:
    """One JSON line of a run directory's file as `model`; InputError naming the file and line."""
    try:
        return model.model_validate_json(line)
    except ValueError as err:
        what = what or f"{model.__name__} record"
        raise InputError(f"{path}:{number}: not a {what}: {str(err).splitlines()[0]}") from None


@dataclass(frozen=True)
class _Latest:
    ended_at: float
    path: str
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


class RunDir:
    """The files of one run directory; `where` is a path or a URL (a relative path is resolved here)."""

    def __init__(self, where: str | Path) -> None:
        self.is_url = isinstance(where, str) and "://" in where
        self.fs, self.root = url_to_fs(str(where))
        self.where = where if self.is_url else Path(where)

    @property
    def address(self) -> str:
        """Where every process finds the run directory: its URL, or its absolute path."""
        return str(self.where) if self.is_url else self.root

    def _path(self, *parts: str) -> str:
        return "/".join((self.root, *parts))

    def local(self, *parts: str) -> Path:
        """A file of a run directory on a path (never a URL's)."""
        if self.is_url:
            raise InputError(f"{self.where}: a URL; this step needs a run directory on a path")
        return Path(self._path(*parts))

    def exists(self, *parts: str) -> bool:
        """Whether the run directory (or a file or folder in it) exists."""
        return self.fs.exists(self._path(*parts))

    def require(self, hint: str = "") -> None:
        """InputError unless this run directory has trajectories (`hint` says how to make one)."""
        if not self.fs.isdir(self._path(TRAJECTORIES)):
            raise InputError(f"{self.where}: not a run directory (no {TRAJECTORIES}/ folder{hint})")

    # The manifest

    def manifest(self) -> RunManifest | None:
        """The manifest, or None for a new run; InputError naming the file and field when it is not one."""
        path = self._path(MANIFEST)
        if not self.fs.isfile(path):
            return None
        try:
            return RunManifest.model_validate_json(self.fs.cat_file(path))
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(map(str, first["loc"]))
            raise InputError(f"{path}: not a run manifest: {field + ': ' if field else ''}{first['msg']}") from None

    def require_manifest(self) -> RunManifest:
        """The manifest; InputError when this is not a run directory."""
        manifest = self.manifest()
        if manifest is None:
            raise InputError(f"{self.where}: not a run directory (no {MANIFEST}; make one with `castdata collect`)")
        return manifest

    def write_manifest(self, manifest: RunManifest) -> None:
        """Replace the manifest (atomically on a path; object stores replace whole objects anyway)."""
        if self.is_url:
            self.fs.makedirs(self.root, exist_ok=True)
            self.fs.pipe_file(
                self._path(MANIFEST), (json.dumps(manifest.to_dict(), indent=2, sort_keys=True) + "\n").encode()
            )
        else:
            write_json(self.local(MANIFEST), manifest.to_dict())

    def pipeline_state(self) -> dict[str, Any]:
        """The finished stages of `castdata run` (empty before the first)."""
        path = self._path(PIPELINE)
        return json.loads(self.fs.cat_file(path)) if self.fs.isfile(path) else {}

    def write_pipeline_state(self, state: dict[str, Any]) -> None:
        """Replace `pipeline.json`."""
        write_json(self.local(PIPELINE), state)

    def digest(self, folder: str) -> dict[str, str]:
        """The sha256 of each record file of `folder` (`trajectories` or `labels`), by name."""
        digests = {}
        for path in sorted(self.fs.glob(self._path(folder, "*.jsonl"))):
            sha = hashlib.sha256()
            with self.fs.open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    sha.update(block)
            digests[path.rsplit("/", 1)[-1]] = sha.hexdigest()
        return digests

    # Trajectories

    def trajectory_file(self, domain: str, split: str) -> Path:
        """Where the local executor (and an import) appends a domain/split's records."""
        return self.local(TRAJECTORIES, f"{domain}.{split}.jsonl")

    def lines(self, folder: str = TRAJECTORIES, pattern: str = "*.jsonl") -> Iterator[tuple[str, int, str]]:
        """(file, line number, line) of every complete JSONL line of the files of `folder` named by `pattern`,
        files in name order. A last line without its newline is a record still being written (or torn by a kill):
        skipped."""
        opener = self.fs.open if self.is_url else open  # a plain file reads faster without fsspec's wrapper
        for path in sorted(self.fs.glob(self._path(folder, pattern))):
            with opener(path, "r", encoding="utf-8") as handle:
                for number, line in enumerate(handle, start=1):
                    if line.endswith("\n") and line.strip():
                        yield path, number, line

    def recorded(self, pattern: str = "*.jsonl") -> dict[EpisodeKey, bool]:
        """Each episode key with a record in the trajectory files named by `pattern`: is its latest record final
        (not an infrastructure error, which a later run retries)?"""
        return {key: found.final for key, found in latest_records(self.lines(TRAJECTORIES, pattern)).items()}

    def finished_keys(self) -> set[EpisodeKey]:
        """Episode keys with a final record (infrastructure errors are not final: a rerun retries them)."""
        return {key for key, final in self.recorded().items() if final}

    def iter_trajectories(self) -> Iterator[Trajectory]:
        """The latest record of every episode, in file order, one at a time (none before the first record)."""
        keep = {(found.path, found.number) for found in latest_records(self.lines()).values()}
        for path, number, line in self.lines():
            if (path, number) in keep:
                yield parse_line(Trajectory, path, number, line, f"{TRAJECTORIES} record")

    def sink(self, name: str) -> RecordSink:
        """A writer of the trajectory file `name`, which nobody else writes."""
        return RecordSink(self, self._path(TRAJECTORIES, name))

    def repair(self) -> None:
        """While no process writes: cut the torn tails that killed writers left (paths only)."""
        if not self.is_url:
            for path in self.fs.glob(self._path(TRAJECTORIES, "*.jsonl")):
                repair(Path(path))

    # Labels

    def label_file(self, domain: str, split: str) -> Path:
        """Where the labels of a domain/split go, whichever trajectory files its episodes came from."""
        return self.local(LABELS, f"{domain}.{split}.jsonl")

    def label_lines(self, domain: str | None = None, split: str | None = None) -> Iterator[tuple[str, int, str]]:
        """(file, line number, line) of every label line (of one domain/split when given), files in name order."""
        pattern = f"{domain}.{split}.jsonl" if domain is not None else "*.jsonl"
        for path, number, line in self.lines(LABELS, pattern):
            if not path.endswith("/" + CLAUSES_FILE):
                yield path, number, line

    def interception_lines(self, domain: str, split: str) -> Iterator[tuple[str, int, str]]:
        """(file, line number, line) of the interception verdicts of one domain/split (none without a critic)."""
        return self.lines(f"{LABELS}/{INTERCEPTIONS}", f"{domain}.{split}.jsonl")

    def clause_lines(self) -> Iterator[tuple[str, int, str]]:
        """(file, line number, line) of the labeler's clause table; InputError before the run is labelled."""
        if not self.fs.isfile(self._path(LABELS, CLAUSES_FILE)):
            raise InputError(
                f"{self.where}: no {LABELS}/{CLAUSES_FILE}; label the run first (`castdata label {self.where}`)"
            )
        return self.lines(LABELS, CLAUSES_FILE)

    def label_stats(self) -> dict[str, Any] | None:
        """The labeler's statistics (`labels/stats.json`, without its local path), if any."""
        path = self._path(LABELS, STATS_FILE)
        if not self.fs.isfile(path):
            return None
        return {key: value for key, value in json.loads(self.fs.cat_file(path)).items() if key != "run_dir"}

    def teacher_cache(self) -> Path:
        """Where the label teacher's `ReplyCache` lives, so a relabelling makes no requests."""
        return self.local(LABELS, TEACHER_CACHE)

    def label_writer(self) -> LabelWriter:
        """A writer of a whole labelling pass (which replaces the previous one's files)."""
        return LabelWriter(self.local(LABELS))


class RecordSink:
    """One writer's trajectory file: appended record by record on a path, one object at `close` on a URL."""

    def __init__(self, run_dir: RunDir, path: str) -> None:
        self.run_dir, self.path = run_dir, path
        self.lines: list[str] = []
        self.writer = None if run_dir.is_url else RecordWriter()

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
            self.run_dir.fs.makedirs(self.path.rsplit("/", 1)[0], exist_ok=True)
            self.run_dir.fs.pipe_file(self.path, "".join(self.lines).encode("utf-8"))


class LabelWriter:
    """The label files of one labelling pass: written beside the old ones, each put in place by `commit` (or
    dropped by `abort`), so a labelling killed halfway leaves the previous labels as they were."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self._handles: dict[Path, IO[str]] = {}

    def write(self, domain: str, split: str, lines: Iterable[str], kind: str = "") -> None:
        """Add label lines (each ending in a newline) to a domain/split's file (`kind`: INTERCEPTIONS for the
        verdicts on interceptions)."""
        path = self.folder / kind / f"{domain}.{split}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        if path not in self._handles:
            self._handles[path] = path.with_name(f".{path.name}.{os.getpid()}.tmp").open("w", encoding="utf-8")
        self._handles[path].writelines(lines)

    def abort(self) -> None:
        """Drop what this pass wrote."""
        for handle in self._handles.values():
            handle.close()
            Path(handle.name).unlink(missing_ok=True)

    def commit(self, clauses: Iterable[str], stats: dict[str, Any]) -> None:
        """Put the label files in place, then the clause table (`clauses`: lines) and the statistics."""
        for path, handle in self._handles.items():
            handle.close()
            os.replace(handle.name, path)
        for stale in (self.folder / INTERCEPTIONS).glob("*.jsonl"):  # verdicts of interceptions no longer there
            if stale not in self._handles:
                stale.unlink()
        tmp = self.folder / f".{CLAUSES_FILE}.{os.getpid()}.tmp"
        tmp.write_text("".join(clauses), encoding="utf-8")
        os.replace(tmp, self.folder / CLAUSES_FILE)
        write_json(self.folder / STATS_FILE, stats)


class ReplyCache:
    """Model replies by request key, in a JSON-lines file that only grows (a line cut by a crash is ignored)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.replies: dict[str, str] = {}
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            self.replies[record["key"]] = record["content"]

    def get(self, key: str) -> str | None:
        """The cached reply, or None."""
        return self.replies.get(key)

    def put(self, key: str, content: str) -> None:
        """Keep a reply (appended to the file at once)."""
        self.replies[key] = content
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"key": key, "content": content}) + "\n")


def iter_trajectories(where: str | Path) -> Iterator[Trajectory]:
    """The latest record of every episode of a run, in file order, one at a time."""
    return RunDir(where).iter_trajectories()


def read_trajectories(where: str | Path) -> list[Trajectory]:
    """Every episode of a run (its latest record), in file order."""
    return list(iter_trajectories(where))


def finished_keys(where: str | Path) -> set[EpisodeKey]:
    """Episode keys of a run with a final record."""
    return RunDir(where).finished_keys()


def is_run_dir(path: Path) -> bool:
    """Whether `path` holds a run (its manifest), as opposed to a dataset folder or anything else."""
    return (Path(path) / MANIFEST).is_file()
