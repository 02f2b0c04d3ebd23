"""Reading labelled runs for the builders: episodes one at a time, each with its labels.

Episodes are streamed as `castdata.rundir` reads them (each episode's latest record, whichever file holds it);
the labels of one `{domain}.{split}` file are held as raw lines until their episode comes by.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from castdata.builders.splits import task_key
from castdata.errors import InputError
from castdata.label.interceptions import InterceptionLabel
from castdata.label.policy import Clause
from castdata.label.schema import Label
from castdata.records import Trajectory
from castdata.rundir import RunDir, RunManifest, parse_line


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


def read_manifest(run_dir: Path) -> RunManifest:
    """The run's manifest; InputError when `run_dir` is not a run directory."""
    return RunDir(run_dir).require_manifest()


def _labels_by_episode(run_dir: RunDir, domain: str, split: str) -> dict[str, dict[int, tuple[str, int, str]]]:
    """Label lines (file, number, text) of one domain/split by trajectory id and step; a later line for the same
    step wins."""
    found: dict[str, dict[int, tuple[str, int, str]]] = {}
    for path, number, line in run_dir.label_lines(domain, split):
        try:
            head = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{path}:{number}: not JSON: {err}") from None
        found.setdefault(head["trajectory_id"], {})[head["step"]] = (path, number, line)
    return found


def read_interception_labels(run_dir: Path | RunDir, domain: str, split: str) -> dict[str, list[InterceptionLabel]]:
    """The hindsight verdicts on the interceptions of one domain/split, by trajectory id (none without a critic)."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    found: dict[str, list[InterceptionLabel]] = {}
    for path, number, line in run.interception_lines(domain, split):
        record = parse_line(InterceptionLabel, path, number, line)
        found.setdefault(record.trajectory_id, []).append(record)
    return found


def iter_episodes(run_dir: Path) -> Iterator[Episode]:
    """Every episode of a run (its latest record, read as `castdata.rundir` reads it) with its labels and the
    verdicts on its interceptions."""
    run = RunDir(run_dir)
    where, labels, intercepted = None, {}, {}
    for trajectory in run.iter_trajectories():
        if (trajectory.domain, trajectory.split) != where:
            where = (trajectory.domain, trajectory.split)
            labels = _labels_by_episode(run, *where)
            intercepted = read_interception_labels(run, *where)
        raw = labels.get(trajectory.id)
        parsed = None if raw is None else {step: parse_line(Label, *raw[step]) for step in sorted(raw)}
        yield Episode(Path(run_dir).name, trajectory, parsed, intercepted.get(trajectory.id, []))


def read_clauses(run_dir: Path) -> dict[str, list[Clause]]:
    """The labeler's policy clause table of a run, by domain, in policy order."""
    clauses: dict[str, list[Clause]] = {}
    for path, number, line in RunDir(run_dir).clause_lines():
        clause = parse_line(Clause, path, number, line)
        clauses.setdefault(clause.domain, []).append(clause)
    return clauses


def read_label_stats(run_dir: Path) -> dict | None:
    """The labeler's statistics of a run (`labels/stats.json`, without its local path), if any."""
    return RunDir(run_dir).label_stats()
