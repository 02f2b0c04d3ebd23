"""The one text rendering of a transcript: what the teacher, the critic and the builders' rows show.

Every message is numbered by its index in the trajectory (`[4] agent: get_order_details({...})`), the numbers
that label evidence cites; the text after the role is `castdata.messages.visible_content`, so every evidence quote
is a substring of it. Only what the agent saw is rendered: never `privileged`.
"""

from __future__ import annotations

from castdata.messages import Message, visible_content


def describe(message: Message) -> str:
    """One message without its number: `user: ...`, `agent: ...` (tool calls as `name({...})`), `tool name: ...`."""
    role = {"assistant": "agent", "tool": f"tool {message.get('name')}"}.get(message["role"], message["role"])
    return f"{role}: {visible_content(message)}"


def entry(index: int, message: Message) -> str:
    """One numbered message: `[index] role: text`."""
    return f"[{index}] {describe(message)}"


def history(messages: list[Message], start: int, end: int) -> str:
    """Messages `start..end-1`, one numbered entry each."""
    return "\n".join(entry(index, messages[index]) for index in range(start, end))
