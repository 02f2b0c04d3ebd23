"""The `critic_sft` config: (policy + tools, visible history + proposed action) -> structured critique.

One row per labelled action with a `valid` or `invalid` verdict (uncertain labels, labels after the first
critical error and infrastructure failures are left out). The assistant turn is the critique as a JSON
object whose last key is `verdict`, so a critic decodes its reasons before its decision.
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
    messages = episode.trajectory.messages
    return (
        f"Conversation so far:\n{history(messages, 1, step)}\n\n"
        f"Proposed action [{step}]:\n{describe(emitted(episode.trajectory, step))}"
    )


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


def critic_rows(episode: Episode, system: str) -> Iterator[dict[str, Any]]:
    """The critic SFT rows of one episode; `system` is its domain's critic system prompt."""
    for label in episode.training_labels():
        if label.verdict == "uncertain":
            continue
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": user_prompt(episode, label.step)},
            {"role": "assistant", "content": critique(label)},
        ]
        yield {
            "messages": messages,
            "chat_template_kwargs": CHAT_TEMPLATE_KWARGS,
            **episode.identity,
            "step": label.step,
            "verdict": label.verdict,
            "severity": label.severity,
            "categories": label.categories,
        }
