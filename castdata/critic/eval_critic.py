"""`castdata eval-critic CONFIG.yaml DATA`: a critic on labelled actions, against the labels.

DATA is a dataset folder (its `trajectories` and `labels` configs, one split) or a labelled run directory. The
critic judges the actions a `critic_sft` row is made of (valid or invalid labels up to each episode's first
critical error), each from the visible prefix, and the report gives:

- accuracy of the verdict (an unusable answer counts as wrong), precision, recall and F1 of `invalid`;
- first-error localisation: in episodes with a labelled first critical error, how often the first action the
  critic calls invalid with `critical` severity falls on that very action (a critic without structured critiques:
  its first `invalid` verdict);
- grounding: the share of structured critiques the labeler's verifier (`castdata.label.verify`) rejects for
  their evidence, clauses, categories or identifiers (verdict agreement is the accuracy's business).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from castdata.builders.dataset import MANIFEST as DATASET_MANIFEST
from castdata.builders.options import BuildOptions
from castdata.builders.render import emitted
from castdata.builders.source import Episode, iter_episodes
from castdata.builders.splits import split_of
from castdata.critic.guard import Critic, Critique
from castdata.envs import load_domain
from castdata.errors import ConfigError, InputError
from castdata.hub.local import local_split
from castdata.label.policy import clause_table
from castdata.label.schema import Label
from castdata.label.verify import grounding_problems
from castdata.models.base import EpisodeContext
from castdata.records import Trajectory
from castdata.rundir import is_run_dir
from castdata.visible import View


@dataclass
class Judged:
    """One labelled action and the critic's critique of it."""

    episode: Episode
    label: Label
    critique: Critique


def labelled_episodes(data: Path, split: str) -> Iterator[Episode]:
    """The episodes of one split of a dataset folder, or those of a labelled run directory that `castdata build`
    (default options) puts in that split."""
    if is_run_dir(data):
        fraction = BuildOptions().validation_fraction
        return (
            e
            for e in iter_episodes(data)
            if split_of(e.trajectory.domain, e.trajectory.split, e.trajectory.task_id, fraction) == split
        )
    if (data / DATASET_MANIFEST).is_file():
        return _dataset_episodes(data, split)
    raise InputError(f"{data}: neither a run directory nor a castdata dataset folder")


def _dataset_episodes(root: Path, split: str) -> Iterator[Episode]:
    try:
        trajectories, labels = (local_split(root, config, split) for config in ("trajectories", "labels"))
    except ConfigError as err:
        raise InputError(str(err)) from None
    by_episode: dict[str, dict[int, Label]] = {}
    for row in labels:
        fields = {key: value for key, value in row.items() if key in Label.model_fields}
        by_episode.setdefault(row["trajectory_id"], {})[row["step"]] = Label(**fields, split=row["benchmark_split"])
    for row in trajectories:
        fields = {key: value for key, value in row.items() if key in Trajectory.model_fields}
        trajectory = Trajectory(**fields, id=row["trajectory_id"], split=row["benchmark_split"])
        yield Episode(row["run"], trajectory, by_episode.get(trajectory.id))


def cases(episodes: Iterator[Episode], limit: int | None = None) -> list[tuple[Episode, Label]]:
    """The actions to judge: those with a valid or invalid label that may train a verdict, in episode order."""
    found = [(e, label) for e in episodes for label in e.training_labels() if label.verdict != "uncertain"]
    return found[:limit]


async def judge_all(critic: Critic, todo: list[tuple[Episode, Label]], concurrency: int) -> list[Judged]:
    """The critic's critique of every case, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(episode: Episode, label: Label) -> Judged:
        t = episode.trajectory
        domain = load_domain(t.domain)
        ctx = EpisodeContext(domain=domain, task=domain.task(t.split, t.task_id), seed=t.seed)
        async with gate:
            critique = await critic.judge(ctx, t.messages[: label.step], emitted(t, label.step))
        return Judged(episode, label, critique)

    try:
        return list(await asyncio.gather(*(one(e, label) for e, label in todo)))
    finally:
        await critic.aclose()


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def grounding_rejections(judged: Judged) -> set[str]:
    """The verifier's reasons to reject a structured critique's rationale (codes; empty when grounded)."""
    trajectory = judged.episode.trajectory
    structured = judged.critique.structured.model_dump()
    return grounding_problems(structured, judged.label, View(trajectory), clause_table(trajectory.domain))


def _critical(critique: Critique) -> bool:
    """Whether a critique says success is out of reach (an unstructured `invalid` counts)."""
    severity = critique.structured.severity if critique.structured is not None else "critical"
    return critique.verdict == "invalid" and severity == "critical"


def _first_errors(judged: list[Judged]) -> dict:
    """How often the critic's first critical flag in an episode is on its labelled first critical error."""
    flagged: dict[str, int] = {}
    errors: dict[str, int] = {}
    for j in sorted(judged, key=lambda j: j.label.step):
        key = j.episode.trajectory.id
        if _critical(j.critique):
            flagged.setdefault(key, j.label.step)
        if j.label.first_critical_error:
            errors[key] = j.label.step
    located = sum(1 for key, step in errors.items() if flagged.get(key) == step)
    return {"episodes": len(errors), "located": located, "accuracy": _ratio(located, len(errors))}


def metrics(judged: list[Judged]) -> dict:
    """Accuracy, precision/recall/F1 of `invalid`, first-error localisation and grounding failures."""
    said = [(j.label.verdict, j.critique.verdict) for j in judged]
    hits = sum(1 for truth, verdict in said if truth == verdict == "invalid")
    flagged = sum(1 for _, verdict in said if verdict == "invalid")
    support = sum(1 for truth, _ in said if truth == "invalid")
    precision, recall = _ratio(hits, flagged), _ratio(hits, support)
    f1 = round(2 * precision * recall / (precision + recall), 4) if precision and recall else (0.0 if support else None)
    rejected = [grounding_rejections(j) for j in judged if j.critique.structured is not None]
    failing = sum(1 for codes in rejected if codes)
    return {
        "cases": len(judged),
        "accuracy": _ratio(sum(1 for truth, verdict in said if truth == verdict), len(said)),
        "unparseable": sum(1 for _, verdict in said if verdict is None),
        "invalid": {"support": support, "flagged": flagged, "precision": precision, "recall": recall, "f1": f1},
        "first_error": _first_errors(judged),
        "grounding": {
            "checked": len(rejected),
            "failing": failing,
            "rate": _ratio(failing, len(rejected)),
            "reasons": dict(Counter(code for codes in rejected for code in codes)),
        },
    }


def evaluate_critic(
    critic: Critic, data: Path, split: str = "test", limit: int | None = None, concurrency: int = 8
) -> dict:
    """Judge the labelled actions of `data` with `critic` and return the metrics."""
    todo = cases(labelled_episodes(data, split), limit)
    if not todo:
        raise InputError(f"{data}: no labelled actions to judge (split {split!r})")
    return {"data": str(data), "split": split, **metrics(asyncio.run(judge_all(critic, todo, concurrency)))}


def print_metrics(result: dict) -> None:
    """The metrics as a table."""
    from rich.console import Console
    from rich.table import Table

    invalid, first, grounding = result["invalid"], result["first_error"], result["grounding"]
    rows = [
        ("actions judged", str(result["cases"])),
        ("accuracy", _shown(result["accuracy"])),
        ("invalid: precision / recall / F1", " / ".join(_shown(invalid[k]) for k in ("precision", "recall", "f1"))),
        ("invalid: labelled / flagged", f"{invalid['support']} / {invalid['flagged']}"),
        ("first error located", f"{first['located']} of {first['episodes']} ({_shown(first['accuracy'])})"),
        (
            "rationales failing grounding",
            f"{grounding['failing']} of {grounding['checked']} ({_shown(grounding['rate'])})",
        ),
        ("unusable answers", str(result["unparseable"])),
    ]
    table = Table(title=f"critic on {result['data']} ({result['split']})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
