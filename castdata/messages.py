"""Typed views of OpenAI-format chat messages: records keep plain dicts on disk, code reads them through these.

An agent turn executes only the first tool call of its message (`castdata.rollout.episode`): `first_call` is the
call a turn made, `tool_turns` every executed call of a transcript, and `agent_actions` every agent action.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from castdata.records import RESPOND, Action

Message = dict[str, Any]


@dataclass(frozen=True)
class Call:
    """One tool call of a message; `arguments` as written (a JSON object in records, anything in a raw proposal)."""

    id: str | None
    name: str
    arguments: Any

    @property
    def action(self) -> Action:
        """The call as an action (its arguments must be a JSON object)."""
        return Action(name=self.name, kwargs=self.arguments)


def _call(raw: dict[str, Any]) -> Call:
    function = raw["function"]
    return Call(raw.get("id"), function["name"], function.get("arguments"))


def calls(message: Message) -> list[Call]:
    """Every tool call of a message, in order (none for a message without)."""
    return [_call(raw) for raw in message.get("tool_calls") or []]


def first_call(message: Message) -> Call | None:
    """The call an agent turn executes: the first tool call of its message, or None for a message without."""
    found = message.get("tool_calls")
    return _call(found[0]) if found else None


def is_agent_text(message: Message) -> bool:
    """Whether a message is the agent speaking to the user (an assistant message without tool calls)."""
    return message["role"] == "assistant" and not message.get("tool_calls")


def tool_turns(messages: list[Message]) -> Iterator[tuple[int, Call]]:
    """(message index, executed call) of every assistant turn with a tool call, in order."""
    for step, message in enumerate(messages):
        call = first_call(message) if message["role"] == "assistant" else None
        if call is not None:
            yield step, call


def call_failed(messages: list[Message], step: int) -> bool:
    """Whether the message at `step` made a tool call whose result (the tool message after it) is an error."""
    after = messages[step + 1] if step + 1 < len(messages) else None
    return (
        bool(messages[step].get("tool_calls"))
        and after is not None
        and after["role"] == "tool"
        and str(after.get("content") or "").startswith("Error")
    )


def agent_actions(messages: list[Message]) -> list[tuple[int, Action]]:
    """Every agent action as (message index, action): a turn's executed tool call, or its message as `respond`."""
    return [
        (
            step,
            call.action if call is not None else Action(name=RESPOND, kwargs={"content": message.get("content") or ""}),
        )
        for step, message in enumerate(messages)
        if message["role"] == "assistant"
        for call in [first_call(message)]
    ]


def visible_content(message: Message) -> str:
    """A message as the agent saw it: its text, then each tool call as `name(arguments JSON)`."""
    parts = [message["content"]] if message.get("content") else []
    parts += [f"{call.name}({json.dumps(call.arguments)})" for call in calls(message)]
    return "\n".join(parts)
