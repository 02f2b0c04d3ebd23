"""Messages and text blocks shared by the critic, policy and PRM builders: the agent's message as it emitted it,
an action as a message, and the policy-and-tools context. Transcripts render with `castdata.transcript`.
"""

from __future__ import annotations

import json
from typing import Any

from castdata.label.policy import Clause
from castdata.messages import Message, first_call
from castdata.records import RESPOND, Action, Trajectory


def _parsed(raw_arguments: Any) -> Any:
    """Raw tool-call arguments as an object when they are a JSON object, else unchanged."""
    if isinstance(raw_arguments, str):
        try:
            value = json.loads(raw_arguments)
        except json.JSONDecodeError:
            return raw_arguments
        return value if isinstance(value, dict) else raw_arguments
    return raw_arguments


def emitted(trajectory: Trajectory, step: int) -> Message:
    """The agent's message at `step` as it emitted it: every tool call of a turn with a protocol violation
    (the episode executed only the first), with the raw arguments (an object, or the raw text when malformed)."""
    message = trajectory.messages[step]
    raw = trajectory.meta[step].raw
    if not raw:
        return message
    calls = raw if isinstance(raw, list) else [raw]
    first = first_call(message)
    first_id = first.id if first is not None else None
    return {
        "role": "assistant",
        "content": message.get("content"),
        "tool_calls": [
            {
                "id": first_id if i == 0 else None,
                "type": "function",
                "function": {"name": call["name"], "arguments": _parsed(call["arguments"])},
            }
            for i, call in enumerate(calls)
        ],
    }


def action_message(action: Action, step: int, reasoning: str | None = None) -> Message:
    """An action as the assistant message that performs it (`respond` is a plain message)."""
    message: Message = {"role": "assistant", "content": None}
    if action.name == RESPOND:
        message["content"] = str(action.kwargs.get("content", ""))
    else:
        call = {"name": action.name, "arguments": action.kwargs}
        message["tool_calls"] = [{"id": f"call_{step}_0", "type": "function", "function": call}]
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return message


def context_block(clauses: list[Clause], tools: list[dict[str, Any]]) -> str:
    """The domain policy as `[clause id] text` under its section headings, then the tool schemas, as one text block."""
    lines, section = [], None
    for clause in clauses:
        if clause.section != section:
            section = clause.section
            lines.append(f"\n## {section}")
        lines.append(f"[{clause.clause_id}] {clause.text}")
    lines += ["", "# Tools", ""] + [json.dumps(tool, ensure_ascii=False) for tool in tools]
    return "# Policy\n" + "\n".join(lines)
