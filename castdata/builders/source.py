"""Reading labelled runs for the builders: episodes one at a time, each with its labels.

Episodes are streamed as `castdata.rollout.store` reads them (each episode's latest record, whichever file
holds it); the labels of one `{domain}.{split}` file are held as raw lines until their episode comes by.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from castdata.builders.splits import task_key
from castdata.errors import InputError
from castdata.label.interceptions import InterceptionLabel, interception_file
from castdata.label.policy import Clause
from castdata.label.run import CLAUSES_FILE, LABELS, STATS_FILE, label_file
from castdata.label.schema import Label
from castdata.records import Trajectory
from castdata.rollout.store import MANIFEST, iter_trajectories


@dataclass
class Episode:
    """One episode of one run; `labels` by message index, None when the labeler left the episode out;
    `interceptions`: the hindsight verdicts on a guarded episode's interceptions (`castdata.label.interceptions`)."""

    run: str
    trajectory: Trajectory
    labels: dict[int, Label] | None
    interceptions: list[InterceptionLabel] = field(default_factory=list)

    @property
    def identity(self) -> dict[str, str]:
        """The columns every row of this episode carries (`castdata.builders.features.EPISODE`)."""
        t = self.trajectory
        return {
            "run": self.run,
            "trajectory_id": t.id,
            "task": task_key(t.domain, t.split, t.task_id),
            "domain": t.domain,
            "agent_model": t.agent.label,
        }

    @property
    def trainable(self) -> bool:
        """Labelled, scorable (not an infrastructure failure, not an import that does not reproduce), and not a
        failure the simulated user or the task caused: the others say nothing about the agent."""
        if self.labels is None or not self.trajectory.counts_for_pass_k:
            return False
        return not any(label.user_fault for label in self.labels.values())

    def training_labels(self) -> list[Label]:
        """The labels that may train a verdict: none of a non-trainable episode, none after the first error."""
        if not self.trainable:
            return []
        return [label for label in self.labels.values() if not label.after_first_error]


def read_manifest(run_dir: Path) -> dict:
    """The run's `manifest.json`; InputError when `run_dir` is not a run directory."""
    path = run_dir / MANIFEST
    if not path.is_file():
        raise InputError(f"{run_dir}: not a run directory (no {MANIFEST}; make one with `castdata collect`)")
    return json.loads(path.read_text())


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open("r", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line


def _head(path: Path, number: int, line: str) -> dict:
    try:
        return json.loads(line)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}:{number}: not JSON: {err}") from None


def _parse(model: type, path: Path, number: int, line: str):
    try:
        return model.model_validate_json(line)
    except ValueError as err:
        raise InputError(f"{path}:{number}: not a {model.__name__} record: {str(err).splitlines()[0]}") from None


def _labels_by_episode(path: Path) -> dict[str, dict[int, tuple[int, str]]]:
    """Label lines (number, text) of one file by trajectory id and step; a later line for the same step wins."""
    found: dict[str, dict[int, tuple[int, str]]] = {}
    if path.exists():
        for number, line in _lines(path):
            head = _head(path, number, line)
            found.setdefault(head["trajectory_id"], {})[head["step"]] = (number, line)
    return found


def read_interception_labels(run_dir: Path, domain: str, split: str) -> dict[str, list[InterceptionLabel]]:
    """The hindsight verdicts on the interceptions of one domain/split, by trajectory id (none without a critic)."""
    path = interception_file(run_dir / LABELS, domain, split)
    found: dict[str, list[InterceptionLabel]] = {}
    if path.is_file():
        for number, line in _lines(path):
            record = _parse(InterceptionLabel, path, number, line)
            found.setdefault(record.trajectory_id, []).append(record)
    return found


def iter_episodes(run_dir: Path) -> Iterator[Episode]:
    """Every episode of a run (its latest record, read as `castdata.rollout.store` reads it) with its labels and
    the verdicts on its interceptions."""
    where, labels, label_path, intercepted = None, {}, None, {}
    for trajectory in iter_trajectories(run_dir):
        if (trajectory.domain, trajectory.split) != where:
            where = (trajectory.domain, trajectory.split)
            label_path = label_file(run_dir, *where)
            labels = _labels_by_episode(label_path)
            intercepted = read_interception_labels(run_dir, *where)
        raw = labels.get(trajectory.id)
        parsed = None if raw is None else {step: _parse(Label, label_path, *raw[step]) for step in sorted(raw)}
        yield Episode(run_dir.name, trajectory, parsed, intercepted.get(trajectory.id, []))


def read_clauses(run_dir: Path) -> dict[str, list[Clause]]:
    """The labeler's policy clause table of a run, by domain, in policy order."""
    path = run_dir / LABELS / CLAUSES_FILE
    if not path.is_file():
        raise InputError(f"{run_dir}: no {LABELS}/{CLAUSES_FILE}; label the run first (`castdata label {run_dir}`)")
    clauses: dict[str, list[Clause]] = {}
    for number, line in _lines(path):
        clause = _parse(Clause, path, number, line)
        clauses.setdefault(clause.domain, []).append(clause)
    return clauses


def read_label_stats(run_dir: Path) -> dict | None:
    """The labeler's statistics of a run (`labels/stats.json`, without its local path), if any."""
    path = run_dir / LABELS / STATS_FILE
    if not path.is_file():
        return None
    return {key: value for key, value in json.loads(path.read_text()).items() if key != "run_dir"}
