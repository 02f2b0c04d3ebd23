"""What an agent sees when a critic sends a proposed action back: the proposal, then the critique as feedback.

The feedback is ephemeral: the agent gets `messages + [proposal, feedback...]` for its next try, but the
episode's transcript keeps only what executed (the interceptions are recorded beside it). A tool-call
proposal gets one `tool` reply per call (OpenAI-compatible servers require one), a text proposal one `system`
message. Every feedback message starts with `FEEDBACK`, so an agent (or `transcript_length`) can tell.
"""

from __future__ import annotations

from typing import Any

from castdata.messages import calls

FEEDBACK = "Not executed: a critic judged this action invalid."


def feedback_messages(proposed: dict[str, Any], critique: str) -> list[dict[str, Any]]:
    """The rejected proposal followed by the critic's feedback, to append to the agent's messages."""
    note = f"{FEEDBACK}\n{critique}\nPropose a revised action."
    proposed_calls = calls(proposed)
    if not proposed_calls:
        return [proposed, {"role": "system", "content": note}]
    replies = [{"role": "tool", "tool_call_id": c.id, "name": c.name, "content": note} for c in proposed_calls]
    return [proposed, *replies]


def is_feedback(message: dict[str, Any]) -> bool:
    """Whether a message is a critic's feedback."""
    return message["role"] in ("tool", "system") and str(message.get("content") or "").startswith(FEEDBACK)


def transcript_length(messages: list[dict[str, Any]]) -> int:
    """How many leading `messages` are the episode's transcript (the rest are rejected proposals and feedback)."""
    end = len(messages)
    while end and is_feedback(messages[end - 1]):
        while end and is_feedback(messages[end - 1]):
            end -= 1
        end -= 1  # the proposal the feedback answers
    return end
