"""Where an error was said: the agent's words that name a record without its id, and a record id the agent kept
requiring after the user said it has none (castdata.label.attribution), on hand-written transcripts."""

from __future__ import annotations

import json

from castdata.label.attribution import describes, descriptions, insisted, refusal, said_first
from castdata.records import Action

VARIANTS = {
    "name": "Tablet",
    "variants": {
        "8551474201": {
            "item_id": "8551474201",
            "options": {"screen size": "8-inch", "storage": "64GB", "color": "silver"},
            "price": 938.92,
        },
        "2106335193": {
            "item_id": "2106335193",
            "options": {"screen size": "10-inch", "storage": "64GB", "color": "silver"},
            "price": 903.95,
        },
    },
}


def _messages(*turns: tuple[str, str]) -> list[dict]:
    return [{"role": "system", "content": "policy"}] + [{"role": role, "content": text} for role, text in turns]


def test_an_item_is_named_by_its_options_or_price_and_a_list_of_choices_names_none():
    messages = _messages(("user", "return my tablet"), ("tool", json.dumps(VARIANTS)))
    described = descriptions(messages, len(messages), "8551474201")
    assert (("8-inch", "64gb", "silver"), [("903.95",), ("10-inch", "64gb", "silver")]) in described
    assert describes("Your tablet (8-inch, 64GB, silver) can be returned.", described)
    assert describes("The refund is $938.92.", described)
    assert not describes("Your tablet (8-inch, 64GB) can be returned.", described)  # one option short: ambiguous
    assert not describes("Choose: 8-inch, 64GB, silver; or 10-inch, 64GB, silver.", described)  # choices offered
    assert not describes("Your 18-inch silver 64GB tablet", described)  # "8-inch" inside another word


def test_a_wrong_write_is_charged_to_the_first_message_that_described_its_item():
    messages = _messages(
        ("user", "I want to return a tablet"),
        ("tool", json.dumps(VARIANTS)),
        ("assistant", "Your order has one tablet (8-inch, 64GB, silver)."),
        ("user", "ok"),
        ("assistant", "Shall I return the $938.92 tablet? (yes/no)"),
        ("user", "yes"),
    )
    messages.append(
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "return", "arguments": {}}}]}
    )
    assert said_first(messages, 7, ["8551474201"]) == 3
    messages[3]["content"] = "Your order has a tablet."  # the run of messages that name it starts later
    assert said_first(messages, 7, ["8551474201"]) == 5


def test_requiring_a_reservation_id_the_user_does_not_have_is_a_refusal():
    messages = _messages(
        ("user", "Please cancel my trip."),
        ("assistant", "Sure, what is your user id and reservation id?"),
        ("user", "I don\u2019t have the reservation ID with me. Can you look it up?"),
        ("assistant", "Unfortunately, I need the reservation ID to proceed with the cancellation."),
        ("user", "ok, bye"),
        ("assistant", "Goodbye!"),
    )
    assert insisted(messages, len(messages)) == 4
    lacks_user_id = [dict(m) for m in messages]
    lacks_user_id[3]["content"] = "I don't have my user ID with me, the reservation ID is HXDUBJ."
    assert insisted(lacks_user_id, len(messages)) is None  # the user id is the policy's own requirement
    looked_up = [
        *messages[:5],
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_user_details", "arguments": {}}}],
        },
    ]
    assert insisted(looked_up, len(looked_up)) is None  # it went on to find the reservation


def test_saying_only_pending_orders_can_be_cancelled_of_an_order_never_opened_is_a_refusal():
    profile = {"user_id": "olivia", "orders": ["#W9373487", "#W5481803"]}
    messages = _messages(
        ("user", "Hi, I am olivia."),
        ("tool", json.dumps(profile)),
        ("user", "Can you also cancel the boot and the kettle?"),
        ("assistant", "I do not see any pending orders for a boot or a kettle. Only pending orders can be cancelled."),
        ("user", "ok"),
    )
    gold = Action(name="cancel_pending_order", kwargs={"order_id": "#W5481803", "reason": "no longer needed"})
    assert refusal(messages, len(messages), gold) == 4
    messages[4]["content"] = "Your boot and kettle order is on its way."
    assert refusal(messages, len(messages), gold) is None


def test_a_search_on_a_date_the_user_never_said_is_where_a_wrong_booking_began():
    results = [{"flight_number": "HAT212", "date": "2024-05-20"}, {"flight_number": "HAT033", "date": "2024-05-20"}]
    search = {
        "name": "search_direct_flight",
        "arguments": {"origin": "JFK", "destination": "DTW", "date": "2024-05-20"},
    }
    messages = _messages(("user", "Please move my return to the 19th."))
    messages += [{"role": "assistant", "content": "", "tool_calls": [{"function": search}]}]
    messages += _messages(("tool", json.dumps(results)), ("assistant", "HAT212 or HAT033?"), ("user", "HAT212, yes."))[
        1:
    ]
    tokens = ["HAT212", "2024-05-20"]
    assert said_first(messages, len(messages), tokens) == 2
    messages[1]["content"] = "Please move my return to May 20th."  # the user's own date: nothing wrong in searching it
    assert said_first(messages, len(messages), tokens) != 2
