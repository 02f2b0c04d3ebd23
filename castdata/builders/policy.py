"""The `policy_sft` and `policy_dpo` configs: what the agent should have done.

policy_sft rows are (a) `success`: a successful episode with no invalid or uncertain label, up to its last
agent turn; (b) `correction`: at a first critical error whose label has an expected action, the prefix
before the error followed by that corrected action. With `critique_reasoning` the corrected action carries
reasoning derived from the critique as `reasoning_content` (what was required, the policy clauses and the
evidence it rests on, and the mistake to avoid), and the row asks the template for thinking.
policy_dpo rows pair the same prefix (`prompt`) with the corrected action (`chosen`, no reasoning) and the
action the agent emitted (`rejected`). These rows are `source: hindsight`; a guarded run adds `revision` rows and
pairs from its critic (`castdata.builders.revisions`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from castdata.builders.render import action_message, emitted
from castdata.builders.source import Episode
from castdata.label.schema import Label


def critique_reasoning(label: Label) -> str:
    """Reasoning before the corrected action, derived from the critique of the wrong one."""
    lines = [label.rationale.required]
    lines += [f'Policy {ref.clause_id}: "{ref.quote}"' for ref in label.policy_refs]
    lines += [f'Message [{item.step}]: "{item.quote}"' for item in label.evidence if item.source != "policy"]
    lines.append(f"A mistake to avoid here: {label.rationale.assessment}")
    return "\n".join(lines)


def corrections(episode: Episode) -> Iterator[Label]:
    """The first-critical-error labels of an episode that carry an expected action."""
    for label in episode.training_labels():
        if label.first_critical_error and label.verdict == "invalid" and label.expected_action is not None:
            yield label


def _clean_success(episode: Episode) -> bool:
    return (
        episode.trainable
        and episode.trajectory.outcome.reward == 1.0
        and all(label.verdict == "valid" for label in episode.labels.values())
    )


def sft_row(
    episode: Episode,
    messages: list[dict[str, Any]],
    kind: str,
    step: int | None,
    thinking: bool,
    source: str = "hindsight",
) -> dict[str, Any]:
    """One policy SFT row: `messages` with the episode's tools; `thinking` asks the template for reasoning."""
    return {
        "messages": messages,
        "tools": episode.trajectory.tools,
        "chat_template_kwargs": {"enable_thinking": thinking},
        **episode.identity,
        "kind": kind,
        "step": step,
        "source": source,
    }


def sft_rows(episode: Episode, critique_aware: bool) -> Iterator[dict[str, Any]]:
    """The policy SFT rows of one episode."""
    trajectory = episode.trajectory
    if _clean_success(episode):
        last = max(i for i, message in enumerate(trajectory.messages) if message["role"] == "assistant")
        yield sft_row(episode, trajectory.messages[: last + 1], "success", None, thinking=False)
    for label in corrections(episode):
        reasoning = critique_reasoning(label) if critique_aware else None
        messages = [*trajectory.messages[: label.step], action_message(label.expected_action, label.step, reasoning)]
        yield sft_row(episode, messages, "correction", label.step, thinking=critique_aware)


def dpo_rows(episode: Episode) -> Iterator[dict[str, Any]]:
    """The policy preference pairs of one episode."""
    trajectory = episode.trajectory
    for label in corrections(episode):
        yield {
            "prompt": trajectory.messages[: label.step],
            "chosen": [action_message(label.expected_action, label.step)],
            "rejected": [emitted(trajectory, label.step)],
            "tools": trajectory.tools,
            "chat_template_kwargs": {"enable_thinking": False},
            **episode.identity,
            "step": label.step,
            "categories": label.categories,
            "source": "hindsight",
        }
