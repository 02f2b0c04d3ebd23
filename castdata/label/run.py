"""`castdata label RUN_DIR`: the labeling stage.

Reads `RUN_DIR/trajectories/*.jsonl` one record at a time (the last record of each episode, as
`read_trajectories` does), judges every agent action in hindsight, writes its programmatic rationale,
verifies it, optionally has a writer (a teacher model, `castdata.label.teacher`) rewrite it under
verification and adds Monte-Carlo opinions (`castdata.label.montecarlo`), and writes:

- `labels/{domain}.{split}.jsonl`: one `castdata.label/1` record per agent action;
- `labels/policy_clauses.jsonl`: the clause table of every labeled domain (what `policy_refs` cite);
- `labels/interceptions/{domain}.{split}.jsonl`: in a critic-guarded run, hindsight verdicts on every
  interception's rejected proposal and revision (`castdata.label.interceptions`);
- `labels/stats.json`: the statistics (`castdata.label.stats`; `interceptions`: those verdicts counted);
- `labels/cache/teacher.jsonl`: the teacher's replies, so a rerun makes no requests.

With a teacher or MC, `concurrency` episodes are labelled at once; labels are written in file order.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from castdata.config import PipelineConfig, load_config, one_line_error
from castdata.errors import ConfigError, InputError
from castdata.label.hindsight import EpisodeJudgement, judge
from castdata.label.interceptions import label_interceptions
from castdata.label.montecarlo import MCConfig, MonteCarlo
from castdata.label.policy import clause_table
from castdata.label.rationale import programmatic_labels
from castdata.label.schema import Label
from castdata.label.stats import LabelStats
from castdata.label.teacher import TeacherWriter
from castdata.label.verify import verify
from castdata.label.writers import RationaleWriter, Written, write_verified
from castdata.models.spec import ModelSpec
from castdata.records import Trajectory
from castdata.rundir import INTERCEPTIONS, RunDir, parse_line
from castdata.visible import View


class LabelConfig(BaseModel):
    """The `label:` section of the pipeline YAML."""

    model_config = ConfigDict(extra="forbid")

    verifier_retries: int = Field(default=2, ge=0)  # retries of a writer's rationale the verifier rejected
    teacher: ModelSpec | None = None  # a model that rewrites the rationales
    mc: MCConfig | None = None  # Monte-Carlo second opinions
    concurrency: int = Field(default=8, ge=1)  # episodes labelled at once (with a teacher or MC)

    @field_validator("teacher")
    @classmethod
    def _teacher_writes(cls, spec: ModelSpec | None) -> ModelSpec | None:
        if spec is not None and spec.backend == "scripted":
            raise PydanticCustomError(
                "scripted_teacher",
                "the scripted backend cannot write rationales; set backend: openai, vllm or transformers",
            )
        return spec


def load_label_config(path: Path | None, overrides: Iterable[str] = ()) -> LabelConfig:
    """The `label:` section of a pipeline YAML (after `--set` overrides; defaults without a file); raises
    ConfigError naming the key."""
    section = load_config(path, PipelineConfig, overrides).label if path is not None else {}
    try:
        return LabelConfig(**section)
    except ValidationError as err:
        raise ConfigError(f"label.{one_line_error(err, LabelConfig)}") from None


def read_labels(run_dir: Path) -> dict[str, list[Label]]:
    """Every label of a labelled run, by trajectory id, in step order."""
    found: dict[str, list[Label]] = {}
    for path, number, line in RunDir(run_dir).label_lines():
        label = parse_line(Label, path, number, line, "label record")
        found.setdefault(label.trajectory_id, []).append(label)
    return {key: sorted(labels, key=lambda label: label.step) for key, labels in found.items()}


_Labeled = tuple[Trajectory, EpisodeJudgement | None, list[Label], list[Written]]


async def _label_all(
    run_dir: RunDir,
    config: LabelConfig,
    writer: RationaleWriter | None,
    stats: LabelStats,
    keep: Callable[[Trajectory, list[Label]], None],
    on_episode: Callable[[], None],
) -> None:
    """Label every episode, handing `keep` each one's labels in file order."""
    teacher = (
        TeacherWriter(config.teacher, run_dir.teacher_cache())
        if writer is None and config.teacher is not None
        else None
    )
    writer = writer or teacher
    mc = MonteCarlo(config.mc) if config.mc is not None else None

    async def one(trajectory: Trajectory) -> _Labeled:
        episode = judge(trajectory)
        if episode is None:
            return trajectory, None, [], []
        view = View(trajectory)
        labels = programmatic_labels(episode, view)
        clauses = clause_table(trajectory.domain)
        for label in labels:
            stats.verified(verify(label, label, view, clauses))
        mc_steps = mc.select(trajectory, labels) if mc is not None else []  # before the first await: in file order
        written: list[Written] = []
        if writer is not None:
            written = await asyncio.gather(
                *(write_verified(writer, trajectory, draft, view, clauses, config.verifier_retries) for draft in labels)
            )
            labels = [w.label for w in written]
        if mc is not None:
            labels = await mc.annotate(trajectory, labels, mc_steps)
        return trajectory, episode, labels, written

    def count(done: _Labeled) -> None:
        trajectory, episode, labels, written = done
        on_episode()
        if episode is None:
            stats.skip(trajectory)
            return
        for result in written:
            stats.written(result)
        stats.add(episode, labels)
        keep(trajectory, labels)

    pending: deque[asyncio.Future[_Labeled]] = deque()
    try:
        for trajectory in run_dir.iter_trajectories():
            pending.append(asyncio.ensure_future(one(trajectory)))
            if len(pending) >= config.concurrency:
                count(await pending.popleft())
        while pending:
            count(await pending.popleft())
    finally:
        for task in pending:
            task.cancel()
        if teacher is not None:
            await teacher.aclose()
            stats.writer.update(requests=teacher.requests, cached=teacher.cached)
        if mc is not None:
            await mc.aclose()
            stats.mc["rollouts"] += mc.rollouts


def label_run(
    run_dir: Path,
    config: LabelConfig | None = None,
    writer: RationaleWriter | None = None,
    on_episode: Callable[[], None] | None = None,
) -> dict:
    """Label every episode of a run into `RUN_DIR/labels/`; returns the statistics. `on_episode` is called after
    each episode (a progress display)."""
    config = config or LabelConfig()
    run = RunDir(run_dir)
    if not run.exists():
        raise InputError(f"{run_dir}: no such run directory")
    run.require()
    stats = LabelStats(str(run_dir))
    files = run.label_writer()
    domains: list[str] = []

    def keep(trajectory: Trajectory, labels: list[Label]) -> None:
        files.write(trajectory.domain, trajectory.split, (label.to_json() + "\n" for label in labels))
        if trajectory.domain not in domains:
            domains.append(trajectory.domain)

    try:
        asyncio.run(_label_all(run, config, writer, stats, keep, on_episode or (lambda: None)))
        verdicts, interceptions = label_interceptions([t for t in run.iter_trajectories() if t.interceptions])
        for (domain, split), records in verdicts.items():
            files.write(domain, split, (record.to_json() + "\n" for record in records), INTERCEPTIONS)
    except BaseException:
        files.abort()
        raise
    summary = {**stats.to_dict(), "interceptions": interceptions}
    files.commit((c.model_dump_json() + "\n" for name in domains for c in clause_table(name).clauses), summary)
    return summary
