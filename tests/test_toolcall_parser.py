"""The Qwen3/hermes `<tool_call>` parser: several calls, surrounding text, think blocks, broken JSON."""

from __future__ import annotations

import pytest

from castdata.models.toolcall_parser import json_object, parse_tool_calls, split_reasoning

ORDER = '{"name": "get_order_details", "arguments": {"order_id": "#W1"}}'
USER = '{"name": "find_user_id_by_email", "arguments": {"email": "a@b.c"}}'

# text -> (content, [(name, arguments, raw_arguments)], reasoning); raw_arguments None: not checked
CASES = {
    "plain text": ("Hello, how can I help?", ("Hello, how can I help?", [], None)),
    "empty": ("", ("", [], None)),
    "one call": (f"<tool_call>\n{ORDER}\n</tool_call>", ("", [("get_order_details", {"order_id": "#W1"}, None)], None)),
    "two calls": (
        f"<tool_call>\n{USER}\n</tool_call>\n<tool_call>\n{ORDER}\n</tool_call>",
        (
            "",
            [("find_user_id_by_email", {"email": "a@b.c"}, None), ("get_order_details", {"order_id": "#W1"}, None)],
            None,
        ),
    ),
    "text around": (
        f"Let me check.\n<tool_call>{ORDER}</tool_call>\nOne moment.",
        ("Let me check.\n\nOne moment.", [("get_order_details", {"order_id": "#W1"}, None)], None),
    ),
    "think block": (
        f"<think>\nThe user wants order status.\n</think>\n\n<tool_call>\n{ORDER}\n</tool_call>",
        ("", [("get_order_details", {"order_id": "#W1"}, None)], "The user wants order status."),
    ),
    "empty think then text": ("<think>\n\n</think>\n\nSure.", ("Sure.", [], "")),
    "think closed only (template opened it)": ("I should greet.\n</think>\nHi!", ("Hi!", [], "I should greet.")),
    "think cut off": ("<think>\nstill thinking <tool_call>", ("", [], "still thinking <tool_call>")),
    "tool call inside think is not a call": (
        f"<think>maybe <tool_call>{ORDER}</tool_call>?</think>No call.",
        ("No call.", [], f"maybe <tool_call>{ORDER}</tool_call>?"),
    ),
    "broken json keeps name and raw": (
        '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W1"\n</tool_call>',
        ("", [("get_order_details", None, '{"name": "get_order_details", "arguments": {"order_id": "#W1"')], None),
    ),
    "garbage block": ("<tool_call>not json at all</tool_call>", ("", [("", None, "not json at all")], None)),
    "unterminated block": (f"<tool_call>\n{ORDER}", ("", [("get_order_details", {"order_id": "#W1"}, None)], None)),
    "arguments as a json string": (
        '<tool_call>{"name": "f", "arguments": "{\\"x\\": 1}"}</tool_call>',
        ("", [("f", {"x": 1}, '{"x": 1}')], None),
    ),
    "arguments not an object": (
        '<tool_call>{"name": "f", "arguments": [1, 2]}</tool_call>',
        ("", [("f", None, "[1, 2]")], None),
    ),
    "no arguments": ('<tool_call>{"name": "list_all"}</tool_call>', ("", [("list_all", {}, "{}")], None)),
    "a good call after a broken one": (
        f"<tool_call>{{oops</tool_call><tool_call>{ORDER}</tool_call>",
        ("", [("", None, "{oops"), ("get_order_details", {"order_id": "#W1"}, None)], None),
    ),
}


@pytest.mark.parametrize("text, expected", list(CASES.values()), ids=list(CASES))
def test_parse(text: str, expected: tuple) -> None:
    content, calls, reasoning = expected
    parsed = parse_tool_calls(text)
    assert parsed.content == content
    assert parsed.reasoning == reasoning
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [(name, args) for name, args, _ in calls]
    for call, (_, _, raw) in zip(parsed.tool_calls, calls):
        if raw is not None:
            assert call.raw_arguments == raw
    assert len({c.id for c in parsed.tool_calls}) == len(parsed.tool_calls)


@pytest.mark.parametrize(
    "raw, expected", [("", {}), ("  ", {}), ('{"a": 1}', {"a": 1}), ("[1]", None), ('{"a": ', None), ("null", None)]
)
def test_json_object(raw: str, expected: dict | None) -> None:
    assert json_object(raw) == expected


def test_split_reasoning_without_think_is_identity() -> None:
    assert split_reasoning("no thoughts here") == (None, "no thoughts here")
