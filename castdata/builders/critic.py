"""The `critic_sft` config: (policy + tools, visible history + proposed action) -> structured critique.

One row per labelled action with a `valid` or `invalid` verdict (uncertain labels, labels after the first
critical error and infrastructure failures are left out). The assistant turn is the critique as a JSON
object whose last key is `verdict`, so a critic decodes its reasons before its decision. `source` is
`hindsight`, or `critic_error` for an action a guarding critic accepted and hindsight calls invalid (rows from a
guarded run's rejected proposals: `castdata.builders.revisions`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from castdata.builders.render import emitted
from castdata.builders.source import Episode
from castdata.label.schema import CATEGORIES, Label
from castdata.transcript import describe, history

INSTRUCTIONS = f"""You are a critic of a customer-service agent that talks to a user and calls tools under the \
policy below. Judge the agent's proposed next action using only what the agent could see: the policy, the tools \
and the conversation so far (messages are numbered). Answer with one JSON object with these keys, in this order:
- "categories": the error categories, from: {", ".join(CATEGORIES)} (empty when the action is valid);
- "severity": "critical" (success is no longer reachable), "minor", or "none";
- "policy_refs": the policy clauses involved, as {{"clause_id", "quote"}};
- "evidence": earlier messages or clauses that support the judgement, as {{"step", "source", "quote"}} with an exact quote;
- "rationale": {{"observed", "required", "assessment"}}, short prose;
- "expected_action": the correct action {{"name", "kwargs"}} when the visible context determines it, else null;
- "verdict": "valid" or "invalid"."""

CHAT_TEMPLATE_KWARGS = {"enable_thinking": False}


def system_prompt(context: str) -> str:
    """The critic's system turn: instructions, then the context block (policy with clause ids, tool schemas)."""
    return f"{INSTRUCTIONS}\n\n{context}"


def user_prompt(episode: Episode, step: int) -> str:
    """The visible history before `step` (the agent's system prompt excluded) and the proposed action."""
    return proposal_prompt(episode.trajectory.messages, step, emitted(episode.trajectory, step))


def proposal_prompt(messages: list[dict[str, Any]], step: int, proposed: dict[str, Any]) -> str:
    """The visible history before `step` and `proposed`, the action the agent proposes there."""
    return f"Conversation so far:\n{history(messages, 1, step)}\n\nProposed action [{step}]:\n{describe(proposed)}"


def critique(label: Label) -> str:
    """The structured critique of a label as JSON, `verdict` last."""
    value = {
        "categories": label.categories,
        "severity": label.severity,
        "policy_refs": [ref.model_dump() for ref in label.policy_refs],
        "evidence": [item.model_dump() for item in label.evidence],
        "rationale": label.rationale.model_dump(),
        "expected_action": label.expected_action.model_dump() if label.expected_action else None,
        "verdict": label.verdict,
    }
    return json.dumps(value, ensure_ascii=False)


def accepted(episode: Episode) -> set[int]:
    """The steps whose executed action a guarding critic judged valid (its last judgement there)."""
    last: dict[int, str | None] = {}
    for call in episode.trajectory.critic_calls:
        last[call.step] = call.verdict
    return {step for step, verdict in last.items() if verdict == "valid"}


def row(episode: Episode, system: str, prompt: str, label: Label, source: str) -> dict[str, Any]:
    """One critic SFT row: `prompt` (the user turn) answered with the critique of `label`."""
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": critique(label)},
    ]
    return {
        "messages": messages,
        "chat_template_kwargs": CHAT_TEMPLATE_KWARGS,
        **episode.identity,
        "step": label.step,
        "verdict": label.verdict,
        "severity": label.severity,
        "categories": label.categories,
        "source": source,
    }


def critic_rows(episode: Episode, system: str) -> Iterator[dict[str, Any]]:
    """The critic SFT rows of one episode; `system` is its domain's critic system prompt."""
    missed = accepted(episode)
    for label in episode.training_labels():
        if label.verdict == "uncertain":
            continue
        source = "critic_error" if label.step in missed and label.verdict == "invalid" else "hindsight"
        yield row(episode, system, user_prompt(episode, label.step), label, source)
