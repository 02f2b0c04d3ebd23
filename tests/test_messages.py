"""Typed views of OpenAI-format messages: the executed call of a turn, every agent action, the visible text."""

from __future__ import annotations

from castdata.messages import Call, agent_actions, calls, first_call, is_agent_text, tool_turns, visible_content
from castdata.records import RESPOND, Action

TWO_CALLS = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "get_user", "arguments": {"user_id": "u1"}}},
        {"id": "call_b", "type": "function", "function": {"name": "get_order", "arguments": {"order_id": "#W1"}}},
    ],
}
MESSAGES = [
    {"role": "system", "content": "policy"},
    {"role": "user", "content": "Hi, I am u1."},
    {"role": "assistant", "content": "Let me look."},
    TWO_CALLS,
    {"role": "tool", "tool_call_id": "call_a", "name": "get_user", "content": '{"name": "U"}'},
    {"role": "assistant", "content": None, "tool_calls": []},
]


def test_a_turn_executes_its_first_call_and_every_agent_action_is_listed():
    assert first_call(TWO_CALLS) == Call("call_a", "get_user", {"user_id": "u1"})
    assert [call.name for call in calls(TWO_CALLS)] == ["get_user", "get_order"]
    assert first_call(MESSAGES[2]) is None and calls(MESSAGES[1]) == []
    assert [(step, call.id) for step, call in tool_turns(MESSAGES)] == [(3, "call_a")]
    assert agent_actions(MESSAGES) == [
        (2, Action(name=RESPOND, kwargs={"content": "Let me look."})),
        (3, Action(name="get_user", kwargs={"user_id": "u1"})),
        (5, Action(name=RESPOND, kwargs={"content": ""})),  # an empty turn is an (empty) message
    ]
    assert [is_agent_text(m) for m in MESSAGES] == [False, False, True, False, False, True]


def test_the_visible_content_shows_the_text_and_every_call():
    message = {**TWO_CALLS, "content": "One moment."}
    assert visible_content(message) == 'One moment.\nget_user({"user_id": "u1"})\nget_order({"order_id": "#W1"})'
    assert visible_content(MESSAGES[4]) == '{"name": "U"}'
