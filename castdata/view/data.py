"""What `castdata view` shows: the episodes of a run directory or a dataset folder, with their labels, as plain dicts.

`read_episodes` is the only place the view reads files, and it reads them through the existing readers: a run
directory through `castdata.builders.source.iter_episodes` (`castdata.rundir`'s latest-record rule, labels by
domain/split), a dataset folder through `castdata.hub.local.load_local` and
`castdata.critic.eval_critic.labelled_episodes` (its `trajectories` and `labels` configs). Everything else turns one `Episode` into an index row and a page record.

`source` is "imported" for an episode `castdata import` made (its `imported` mark), else "collected";
`user_fault` is set where the labeler found the simulated user (or the task) to blame.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from castdata.builders.source import Episode, iter_episodes
from castdata.errors import InputError
from castdata.label.schema import Label
from castdata.messages import visible_content
from castdata.records import Action
from castdata.rundir import MANIFEST as RUN_MANIFEST
from castdata.rundir import is_run_dir

FILTER_KEYS = ("domain", "split", "outcome", "category", "user_fault", "source", "termination", "agent")
"""Index fields `--filter KEY=VALUE` (and the page's filter menus) select on; `category` matches any invalid label's."""


class UnknownEpisode(InputError):
    """`--episode ID` names no episode of the run or dataset."""


class BadFilter(InputError):
    """A `--filter` that is not KEY=VALUE with a known key."""


def read_episodes(path: Path) -> Iterator[tuple[Episode, str | None]]:
    """Every episode of a run directory or a dataset folder, with its dataset split (None for a run)."""
    path = Path(path)
    if is_run_dir(path):
        return ((episode, None) for episode in iter_episodes(path))
    from castdata.builders.dataset import MANIFEST as DATASET_MANIFEST  # imports datasets and polars: only here

    if (path / DATASET_MANIFEST).is_file():
        from castdata.critic.eval_critic import labelled_episodes
        from castdata.hub.local import load_local

        splits = list(load_local(path, "trajectories"))  # the splits the folder has
        return ((episode, split) for split in splits for episode in labelled_episodes(path, split))
    raise InputError(
        f"{path}: neither a run directory (no {RUN_MANIFEST}) nor a dataset folder (no {DATASET_MANIFEST})"
    )


def parse_filters(specs: Iterable[str]) -> dict[str, set[str]]:
    """`["domain=retail,airline", "outcome=failure"]` -> {key: allowed values}; BadFilter names a bad one."""
    filters: dict[str, set[str]] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        if not sep or not values.strip():
            raise BadFilter(f"--filter {spec!r}: expected KEY=VALUE[,VALUE...]")
        if key not in FILTER_KEYS:
            raise BadFilter(f"--filter {spec!r}: unknown field {key!r}; one of: {', '.join(FILTER_KEYS)}")
        filters.setdefault(key, set()).update(value.strip().lower() for value in values.split(","))
    return filters


def matches(row: dict[str, Any], filters: dict[str, set[str]]) -> bool:
    """Whether an index row passes every filter (values compared as lowercase text)."""
    for key, allowed in filters.items():
        values = row["categories"] if key == "category" else [row[key]]
        if not {_text(value) for value in values} & allowed:
            return False
    return True


def _text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value).lower()


def _first_error(labels: list[Label]) -> Label | None:
    """The first critical error, else the first invalid label."""
    invalid = [label for label in labels if label.verdict == "invalid"]
    return next((label for label in invalid if label.first_critical_error), invalid[0] if invalid else None)


def index_row(episode: Episode, dataset_split: str | None) -> dict[str, Any]:
    """The episode's row in the index."""
    t = episode.trajectory
    labels = list((episode.labels or {}).values())
    first = _first_error(labels)
    return {
        "id": t.id,
        "run": episode.run,
        "domain": t.domain,
        "split": t.split,
        "dataset_split": dataset_split,
        "task": t.task_id,
        "trial": t.trial,
        "agent": t.agent.label,
        "reward": t.outcome.reward,
        "outcome": "success" if t.outcome.reward >= 1.0 else "failure",
        "termination": t.outcome.termination_reason,
        "labelled": episode.labels is not None,
        "invalid": sum(label.verdict == "invalid" for label in labels),
        "category": first.categories[0] if first is not None and first.categories else "",
        "categories": sorted({c for label in labels if label.verdict == "invalid" for c in label.categories}),
        "user_fault": any(label.user_fault for label in labels),
        "source": "imported" if t.imported is not None else "collected",
    }


def action_text(action: Action | dict[str, Any] | None) -> str | None:
    """An action as the agent would have written it: the text of `respond`, else `name(arguments JSON)`."""
    if action is None:
        return None
    action = Action.model_validate(action)
    if action.name == "respond":
        return str(action.kwargs.get("content", ""))
    return f"{action.name}({json.dumps(action.kwargs)})"


def badge(label: Label) -> str:
    """The verdict badge: valid, critical, minor (both invalid), uncertain, or after (after the first error)."""
    if label.after_first_error:
        return "after"
    if label.verdict == "invalid":
        return "critical" if label.severity == "critical" else "minor"
    return label.verdict


def _label(label: Label) -> dict[str, Any]:
    source = label.label_source
    return {
        "badge": badge(label),
        "verdict": label.verdict,
        "severity": label.severity,
        "first": label.first_critical_error,
        "categories": label.categories,
        "rationale": label.rationale.model_dump(),
        "policy_refs": [ref.model_dump() for ref in label.policy_refs],
        "evidence": [item.model_dump() for item in label.evidence],
        "expected": action_text(label.expected_action),
        "method": source.method,
        "signals": source.signals,
        "teacher": source.teacher_model,
        "mc": None if source.mc_success_before is None else [source.mc_success_before, source.mc_success_after],
    }


def _kind(message: dict[str, Any]) -> str:
    role = message["role"]
    if role == "assistant":
        return "call" if message.get("tool_calls") else "agent"
    return {"tool": "result"}.get(role, role)


def page_record(episode: Episode) -> dict[str, Any]:
    """Everything the episode page shows: messages as the agent saw them, labels by step, interceptions and the
    privileged block."""
    t = episode.trajectory
    violations = [meta.violation for meta in t.meta] + [None] * (len(t.messages) - len(t.meta))
    return {
        "messages": [
            {"kind": _kind(m), "name": m.get("name"), "text": visible_content(m), "violation": violation}
            for m, violation in zip(t.messages, violations)
        ],
        "labels": {step: _label(label) for step, label in (episode.labels or {}).items()},
        "interceptions": [
            {
                "step": i.step,
                "attempt": i.attempt,
                "proposed": visible_content(i.proposed),
                "verdict": i.verdict,
                "critique": i.critique,
                "revised": None if i.revised is None else visible_content(i.revised),
            }
            for i in t.interceptions
        ],
        "outcome": t.outcome.model_dump(),
        "user": t.user.label,
        "seed": t.seed,
        "privileged": {
            "user_id": t.privileged.user_id,
            "instruction": t.privileged.instruction,
            "gold_actions": [action_text(action) for action in t.privileged.gold_actions],
            "required_outputs": t.privileged.required_outputs,
            "injected_mistakes": [m.model_dump() for m in t.injected_mistakes],
        },
    }
