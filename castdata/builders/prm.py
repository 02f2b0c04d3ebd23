"""The `critic_prm` config: TRL's stepwise format (`prompt`, `completions`, `labels`) for process reward models.

One row per trainable episode: `prompt` is the policy (with clause ids) and the tool schemas; step i is what the
agent saw since its previous action (user turns, tool results), then its action i; `labels[i]` is True for a
valid action. Steps stop before the first uncertain label and after the first critical error, so a PRM never
sees the consequences of the action it scores.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from castdata.builders.render import emitted
from castdata.builders.source import Episode
from castdata.transcript import entry, history


def prm_rows(episode: Episode, prompt: str) -> Iterator[dict[str, Any]]:
    """The PRM row of one episode (none when no step qualifies); `prompt` is its domain's context block."""
    trajectory = episode.trajectory
    completions, labels, steps = [], [], []
    previous = 0
    for label in sorted(episode.training_labels(), key=lambda item: item.step):
        if label.verdict == "uncertain":
            break
        seen = history(trajectory.messages, previous + 1, label.step)
        action = entry(label.step, emitted(trajectory, label.step))
        completions.append(f"{seen}\n{action}" if seen else action)
        labels.append(label.verdict == "valid")
        steps.append(label.step)
        previous = label.step
    if steps:
        yield {
            "prompt": prompt,
            "completions": completions,
            "labels": labels,
            **episode.identity,
            "steps": steps,
            "source": "hindsight",
        }
