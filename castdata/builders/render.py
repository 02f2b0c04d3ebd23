"""Messages and compact text renderings shared by the critic, policy and PRM builders.

The compact rendering numbers every message by its index in the trajectory (`[4] agent: tool({...})`), the
same numbers that label evidence cites. Only what the agent saw is rendered: never `privileged`.
"""

from __future__ import annotations

import json
from typing import Any

from castdata.envs import RESPOND
from castdata.label.policy import Clause
from castdata.records import Action, Trajectory
from castdata.visible import visible_content

Message = dict[str, Any]


def describe(message: Message) -> str:
    """One message without its number: `user: ...`, `agent: ...` (tool calls as `name({...})`), `tool name: ...`.

    The text after the prefix is the labeler's `visible_content`, so every evidence quote is a substring of it.
    """
    role = {"assistant": "agent", "tool": f"tool {message.get('name')}"}.get(message["role"], message["role"])
    return f"{role}: {visible_content(message)}"


def history(messages: list[Message], start: int, end: int) -> str:
    """Messages `start..end-1`, one numbered entry each."""
    return "\n".join(f"[{index}] {describe(messages[index])}" for index in range(start, end))


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
    first_id = (message.get("tool_calls") or [{}])[0].get("id")
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
