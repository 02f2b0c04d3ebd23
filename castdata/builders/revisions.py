"""Rows from a critic-guarded run's interceptions: critique-aware policy data, and critic data from critic errors.

Every interception carries hindsight verdicts on its rejected proposal and on the agent's revision
(`castdata.label.interceptions`). From them:

- `policy_sft` rows of kind `revision` (`source: critic`): the prefix, then the revision, whose
  `reasoning_content` is the critique of the draft followed by the correction: the critic's own structured
  critique when the labeler's verifier finds it grounded, else the hindsight critique of the draft (a critique
  without structure, such as the replay critic's, cannot be checked);
- `policy_dpo` pairs (`source: critic`): the revision chosen over the rejected proposal.

Both only where hindsight confirms the proposal invalid and the revision valid: a critic's false alarm never
trains the policy. `critic_sft` rows (the hindsight critique of the proposal) come from every judged proposal:
`source: critic` where hindsight agrees with the critic, `critic_error` where it does not (a valid action
rejected); an executed action the critic accepted and hindsight calls invalid is marked `critic_error` in the
ordinary rows (`castdata.builders.critic`).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from castdata.builders import critic
from castdata.builders.policy import critique_reasoning, sft_row
from castdata.builders.source import Episode
from castdata.label.interceptions import InterceptionLabel
from castdata.label.policy import clause_table
from castdata.label.schema import Label, structured_critique
from castdata.label.verify import grounding_problems
from castdata.transcript import describe
from castdata.visible import View


def confirmed(episode: Episode) -> Iterator[InterceptionLabel]:
    """The interceptions of a trainable episode whose proposal hindsight calls invalid and revision valid."""
    if episode.trainable:
        yield from (record for record in episode.interceptions if record.confirmed)


def draft_critique(episode: Episode, record: InterceptionLabel) -> Label:
    """The critique of the rejected draft as a label: the critic's own when it is structured and grounded, else the
    hindsight one."""
    structured = structured_critique(record.critique)
    reference = record.proposal
    if structured is None:
        return reference
    seen = SimpleNamespace(messages=[*episode.trajectory.messages[: record.step], proposal_of(episode, record)])
    fields = structured.model_dump()
    if grounding_problems(fields, reference, View(seen), clause_table(episode.trajectory.domain)):
        return reference
    return Label.model_validate({**reference.model_dump(), **fields})


def proposal_of(episode: Episode, record: InterceptionLabel) -> dict[str, Any]:
    """The rejected proposal of an interception, as the agent emitted it."""
    return _interception(episode, record).proposed


def revision_of(episode: Episode, record: InterceptionLabel) -> dict[str, Any]:
    """The agent's revision after an interception."""
    return _interception(episode, record).revised


def _interception(episode: Episode, record: InterceptionLabel):
    return next(i for i in episode.trajectory.interceptions if (i.step, i.attempt) == (record.step, record.attempt))


def reasoning(episode: Episode, record: InterceptionLabel) -> str:
    """The revision's reasoning: the draft, its critique, then the correction."""
    return "\n".join(
        [
            f"Draft: {describe(proposal_of(episode, record))}",
            critique_reasoning(draft_critique(episode, record)),
            f"Revised: {describe(revision_of(episode, record))}",
        ]
    )


def revision_sft_rows(episode: Episode) -> Iterator[dict[str, Any]]:
    """`policy_sft` rows of kind `revision`: the prefix, then the confirmed revision with its reasoning."""
    trajectory = episode.trajectory
    for record in confirmed(episode):
        revised = {**_message(revision_of(episode, record)), "reasoning_content": reasoning(episode, record)}
        messages = [*trajectory.messages[: record.step], revised]
        yield sft_row(episode, messages, "revision", record.step, thinking=True, source="critic")


def revision_dpo_rows(episode: Episode) -> Iterator[dict[str, Any]]:
    """`policy_dpo` pairs: the confirmed revision chosen over the rejected proposal."""
    trajectory = episode.trajectory
    for record in confirmed(episode):
        yield {
            "prompt": trajectory.messages[: record.step],
            "chosen": [_message(revision_of(episode, record))],
            "rejected": [_message(proposal_of(episode, record))],
            "tools": trajectory.tools,
            "chat_template_kwargs": {"enable_thinking": False},
            **episode.identity,
            "step": record.step,
            "categories": record.proposal.categories,
            "source": "critic",
        }


def interception_critic_rows(episode: Episode, system: str) -> Iterator[dict[str, Any]]:
    """`critic_sft` rows of the judged proposals: the hindsight critique, `source: critic` where hindsight agrees
    with the critic (invalid), `critic_error` where it does not."""
    if not episode.trainable:
        return
    trajectory = episode.trajectory
    for record in episode.interceptions:
        verdict = record.verdict("proposal")
        if verdict is None:
            continue
        prompt = critic.proposal_prompt(trajectory.messages, record.step, proposal_of(episode, record))
        yield critic.row(episode, system, prompt, record.proposal, "critic" if verdict == "invalid" else "critic_error")


def judgements(episode: Episode) -> Iterator[tuple[str, str]]:
    """(critic verdict, hindsight verdict) of every critic judgement hindsight has a verdict on: the rejected
    proposals, and the executed actions the critic accepted."""
    if not episode.trainable:
        return
    for record in episode.interceptions:
        if (verdict := record.verdict("proposal")) is not None:
            yield "invalid", verdict
    labels = {label.step: label for label in episode.training_labels() if label.verdict != "uncertain"}
    for step in sorted(critic.accepted(episode) & labels.keys()):
        yield "valid", labels[step].verdict


def _message(proposed: dict[str, Any]) -> dict[str, Any]:
    """A recorded proposal as a training message (every key the message features know)."""
    return {key: proposed[key] for key in ("role", "content", "tool_calls") if key in proposed}
