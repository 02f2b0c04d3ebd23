"""`castdata label RUN_DIR`: the labeling stage.

Reads `RUN_DIR/trajectories/*.jsonl` one record at a time (the last record of each episode, as
`read_trajectories` does), judges every agent action in hindsight, writes its programmatic rationale,
verifies it, optionally has a writer (teacher) rewrite it under verification, and writes:

- `labels/{domain}.{split}.jsonl`: one `castdata.label/1` record per agent action;
- `labels/policy_clauses.jsonl`: the clause table of every labeled domain (what `policy_refs` cite);
- `labels/stats.json`: the statistics (`castdata.label.stats`).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from castdata.config import ConfigError, PipelineConfig, _one_line, load_config
from castdata.errors import InputError
from castdata.label.hindsight import judge
from castdata.label.policy import clause_table
from castdata.label.rationale import programmatic_labels
from castdata.label.schema import Label
from castdata.label.stats import LabelStats
from castdata.label.verify import verify
from castdata.label.visible import View
from castdata.label.writers import RationaleWriter, write_verified
from castdata.records import Trajectory
from castdata.rollout.store import TRAJECTORIES, iter_lines, write_json

LABELS = "labels"
CLAUSES_FILE = "policy_clauses.jsonl"
STATS_FILE = "stats.json"
_HEAD = re.compile(r'\{"schema":\s*"[^"]*",\s*"id":\s*"([^"]+)"')


class LabelConfig(BaseModel):
    """The `label:` section of the pipeline YAML."""

    model_config = ConfigDict(extra="forbid")

    verifier_retries: int = Field(default=2, ge=0)  # retries of a writer's rationale the verifier rejected


def load_label_config(path: Path | None) -> LabelConfig:
    """The `label:` section of a pipeline YAML (defaults without one); raises ConfigError naming the key."""
    section = load_config(path, PipelineConfig).label if path is not None else {}
    try:
        return LabelConfig(**section)
    except ValidationError as err:
        raise ConfigError(f"label.{_one_line(err, LabelConfig)}") from None


def _parse(path: Path, number: int, line: str) -> Trajectory:
    try:
        return Trajectory.model_validate_json(line)
    except ValueError as err:
        raise InputError(f"{path}:{number}: not a {TRAJECTORIES} record: {str(err).splitlines()[0]}") from None


def iter_latest(run_dir: Path) -> Iterator[Trajectory]:
    """The last record of each episode, in file order, parsing one record at a time."""
    last: dict[str, tuple[Path, int]] = {}
    for path, number, line in iter_lines(run_dir):
        head = _HEAD.match(line)
        last[head.group(1) if head else _parse(path, number, line).id] = (path, number)
    keep = set(last.values())
    for path, number, line in iter_lines(run_dir):
        if (path, number) in keep:
            yield _parse(path, number, line)


def _check_run_dir(run_dir: Path) -> None:
    if not run_dir.is_dir():
        raise InputError(f"{run_dir}: no such run directory")
    if not (run_dir / TRAJECTORIES).is_dir():
        raise InputError(f"{run_dir}: not a run directory (no {TRAJECTORIES}/ folder)")


async def _rewrite(writer: RationaleWriter, trajectory: Trajectory, drafts: list[Label], view: View, retries: int, stats: LabelStats) -> list[Label]:
    clauses = clause_table(trajectory.domain)
    results = await asyncio.gather(*(write_verified(writer, trajectory, draft, view, clauses, retries) for draft in drafts))
    for written in results:
        stats.written(written)
    return [written.label for written in results]


def label_run(run_dir: Path, config: LabelConfig | None = None, writer: RationaleWriter | None = None) -> dict:
    """Label every episode of a run into `RUN_DIR/labels/`; returns the statistics."""
    run_dir = Path(run_dir)
    config = config or LabelConfig()
    _check_run_dir(run_dir)
    out = run_dir / LABELS
    out.mkdir(exist_ok=True)
    stats = LabelStats(str(run_dir))
    handles: dict[Path, IO[str]] = {}
    domains: list[str] = []
    try:
        for trajectory in iter_latest(run_dir):
            episode = judge(trajectory)
            if episode is None:
                stats.skip(trajectory)
                continue
            view = View(trajectory)
            labels = programmatic_labels(episode, view)
            clauses = clause_table(trajectory.domain)
            for label in labels:
                stats.verified(verify(label, label, view, clauses))
            if writer is not None:
                labels = asyncio.run(_rewrite(writer, trajectory, labels, view, config.verifier_retries, stats))
            stats.add(episode, labels)
            path = out / f"{trajectory.domain}.{trajectory.split}.jsonl"
            if path not in handles:
                handles[path] = path.with_name(f".{path.name}.{os.getpid()}.tmp").open("w", encoding="utf-8")
            handles[path].writelines(label.to_json() + "\n" for label in labels)
            if trajectory.domain not in domains:
                domains.append(trajectory.domain)
    except BaseException:
        for handle in handles.values():
            handle.close()
            Path(handle.name).unlink(missing_ok=True)
        raise
    for path, handle in handles.items():
        handle.close()
        os.replace(handle.name, path)
    clauses_tmp = out / f".{CLAUSES_FILE}.{os.getpid()}.tmp"
    clauses_tmp.write_text("".join(c.model_dump_json() + "\n" for name in domains for c in clause_table(name).clauses), encoding="utf-8")
    os.replace(clauses_tmp, out / CLAUSES_FILE)
    summary = stats.to_dict()
    write_json(out / STATS_FILE, summary)
    return summary
