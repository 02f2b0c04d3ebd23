"""Agreement of a labelled run with human judgements of its episodes (a golden set).

A judgements file has one JSON line per episode: `{episode, outcome: failure|success, annotations: [...]}`.
The first annotation is the reference; later ones are independent second opinions.
- a failure's annotation: `first_error_step` (message index of the first decisive agent error, or null) and
  `cause` (`agent`, or `user` / `task` when no agent action is to blame);
- a success's annotation: `violations`, the agent turns that truly break the policy (`[{step, reason}]`).

For each failed episode the labeler's first critical error is `exact` (the reference step), `exact_other` (a
second annotator's step), `adjacent` (one agent turn away), `wrong`, or `none` (no step blamed); where the humans
blame no agent action, it is `no_blame` (right) or `user_fault_blamed` (wrong). For successes, every `invalid`
label is a flag, true when some annotator lists its step.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from castdata.errors import InputError
from castdata.label.schema import Label


@dataclass
class Agreement:
    """The agreement table, the false-alarm rate on successes and each signal's precision."""

    failures: Counter = field(default_factory=Counter)
    successes: int = 0
    successes_flagged: int = 0
    false_alarms: int = 0  # successful episodes with a flag no annotator calls a violation
    flags: int = 0
    true_flags: int = 0
    signals: dict[str, Counter] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def first_error_accuracy(self) -> float:
        """Share of failed episodes whose first error is the reference step, or rightly none."""
        total = sum(self.failures.values())
        return (self.failures["exact"] + self.failures["no_blame"]) / total if total else 0.0

    @property
    def flag_precision(self) -> float:
        """Share of `invalid` flags in successful episodes that an annotator calls a true violation."""
        return self.true_flags / self.flags if self.flags else 1.0

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return {
            "failures": dict(self.failures),
            "first_error_accuracy": round(self.first_error_accuracy, 4),
            "successes": self.successes,
            "successes_flagged": self.successes_flagged,
            "false_alarms": self.false_alarms,
            "flags": self.flags,
            "true_flags": self.true_flags,
            "flag_precision": round(self.flag_precision, 4),
            "signals": {name: dict(counts) for name, counts in sorted(self.signals.items())},
        }


def read_judgements(path: Path) -> dict[str, dict[str, Any]]:
    """Human judgements by episode id; InputError naming the file and line when one is malformed."""
    found = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            found[row["episode"]] = row
            row["annotations"][0]
        except (ValueError, KeyError, IndexError, TypeError) as err:
            raise InputError(f"{path}:{number}: not a judgement: {type(err).__name__} {err}") from None
    return found


def _agent_turns(labels: list[Label]) -> list[int]:
    return sorted(label.step for label in labels)


def _failure_class(reference: dict, others: list[dict], blamed: int | None, turns: list[int]) -> str:
    step = reference.get("first_error_step") if reference.get("cause", "agent") == "agent" else None
    if step is None:
        return "no_blame" if blamed is None else "user_fault_blamed"
    if blamed is None:
        return "none"
    if blamed == step:
        return "exact"
    if any(o.get("first_error_step") == blamed and o.get("cause", "agent") == "agent" for o in others):
        return "exact_other"
    if step in turns and blamed in turns and abs(turns.index(step) - turns.index(blamed)) == 1:
        return "adjacent"
    return "wrong"


def agreement(judgements: dict[str, dict[str, Any]], labels: dict[str, list[Label]]) -> Agreement:
    """Score the labels of each judged episode (by trajectory id) against the judgements."""
    result = Agreement()
    for episode, judged in judgements.items():
        episode_labels = labels.get(episode)
        if episode_labels is None:
            raise InputError(f"episode {episode}: judged, but the run has no labels for it")
        reference, others = judged["annotations"][0], judged["annotations"][1:]
        if judged["outcome"] == "failure":
            first = next((label for label in episode_labels if label.first_critical_error), None)
            blamed = None if first is None or any(label.user_fault for label in episode_labels) else first.step
            verdict = _failure_class(reference, others, blamed, _agent_turns(episode_labels))
            result.failures[verdict] += 1
            if first is not None and blamed is not None:
                signal = first.label_source.signals[0] if first.label_source.signals else "unknown"
                result.signals.setdefault(signal, Counter())[
                    "right" if verdict in ("exact", "exact_other") else "wrong"
                ] += 1
            result.rows.append(
                {
                    "episode": episode,
                    "class": verdict,
                    "human": reference.get("first_error_step"),
                    "labeler": blamed,
                    "signal": first.label_source.signals if first else None,
                }
            )
            continue
        result.successes += 1
        true_steps = {v["step"] for a in judged["annotations"] for v in a.get("violations", [])}
        flagged = [label for label in episode_labels if label.verdict == "invalid"]
        result.successes_flagged += bool(flagged)
        result.false_alarms += any(label.step not in true_steps for label in flagged)
        for label in flagged:
            result.flags += 1
            right = label.step in true_steps
            result.true_flags += right
            for signal in label.label_source.signals:
                result.signals.setdefault(signal, Counter())["right" if right else "wrong"] += 1
            if not right:
                result.rows.append(
                    {
                        "episode": episode,
                        "class": "false_flag",
                        "labeler": label.step,
                        "signal": label.label_source.signals,
                    }
                )
    return result
