"""Parse Qwen3 / hermes-style model output: `<think>` reasoning, `<tool_call>{json}</tool_call>` blocks, text.

Used by the backends that see raw generated text (vllm, transformers) and, for servers started without a
tool-call parser, by the openai backend. A block whose JSON is broken becomes a `ToolCall` with
`arguments=None` and the raw block text, which the episode loop records as a malformed call.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from castdata.models.base import ToolCall

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')


@dataclass
class ParsedOutput:
    """Generated text split into what the user would read, the tool calls, and the reasoning."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning: str | None = None


def json_object(raw: str) -> dict[str, Any] | None:
    """`raw` decoded when it is a JSON object (an empty string counts as `{}`), else None."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def split_reasoning(text: str) -> tuple[str | None, str]:
    """(reasoning, rest): a `<think>` block, closed or cut off, or text before a lone `</think>`."""
    if THINK_CLOSE in text:
        head, _, rest = text.rpartition(THINK_CLOSE)
        return head.replace(THINK_OPEN, "", 1).strip(), rest
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):  # generation stopped inside the block
        return stripped[len(THINK_OPEN) :].strip(), ""
    return None, text


def _tool_call(block: str) -> ToolCall:
    body = block.strip()
    call_id = f"call_{uuid.uuid4().hex[:24]}"
    try:
        value = json.loads(body)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        found = _NAME.search(body)
        return ToolCall(id=call_id, name=found.group(1) if found else "", arguments=None, raw_arguments=body)
    arguments = value.get("arguments", {})
    if isinstance(arguments, str):  # some models encode the arguments object as a string
        parsed = json_object(arguments)
        return ToolCall(id=call_id, name=value["name"], arguments=parsed, raw_arguments=arguments)
    return ToolCall(
        id=call_id,
        name=value["name"],
        arguments=arguments if isinstance(arguments, dict) else None,
        raw_arguments=json.dumps(arguments),
    )


def parse_tool_calls(text: str) -> ParsedOutput:
    """Split generated text into content (tool-call blocks and reasoning removed), tool calls and reasoning."""
    reasoning, rest = split_reasoning(text)
    calls, kept, position = [], [], 0
    for match in _TOOL_CALL.finditer(rest):
        kept.append(rest[position : match.start()])
        calls.append(_tool_call(match.group(1)))
        position = match.end()
    kept.append(rest[position:])
    return ParsedOutput(content="".join(kept).strip(), tool_calls=calls, reasoning=reasoning)
