"""Where an error was said: the agent's words that name a record without its id, a record id the agent kept
requiring after the user said it has none, a refusal that reports the agent's own failed write, the answer that
gave a wrong value, the offer that picked a wrong option (castdata.label.attribution), and a change made without
the step the gold solution makes first (castdata.label.replay), on hand-written transcripts and hand-built episodes
of real tasks."""

from __future__ import annotations

import json

import pytest
from golden.script import STOP, Script

from castdata.envs import load_domain
from castdata.label.attribution import (
    REFUSAL,
    _yes_since_write,
    describes,
    descriptions,
    insisted,
    refusal,
    said_first,
    wrong_answer,
)
from castdata.label.hindsight import judge
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
    # a lookup that returned the one variant itself (part 4's retail 52: the highest zoom "5x (30MP, CF card)")
    single = _messages(("user", "more zoom"), ("tool", json.dumps(VARIANTS["variants"]["2106335193"])))
    assert describes("The largest is the 10-inch, 64GB, silver one.", descriptions(single, len(single), "2106335193"))


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


def test_a_proposal_that_describes_the_old_item_beside_the_new_one_names_the_new_one():
    """Part 7's retail 56 and part 6's retail 46: "change the air purifier from the current model (large, HEPA, night
    mode, $547.55) to the cheapest one (medium, HEPA, night mode, $492.65)" describes two variants of one product,
    but the old one is the write's own item: the message proposes the new one. Without it among the write's values
    the two read as a list of choices, naming neither."""
    messages = _messages(
        ("user", "Make my tablet a 10-inch one."),
        ("tool", json.dumps(VARIANTS)),
        (
            "assistant",
            "I will change your tablet from the 8-inch, 64GB, silver one ($938.92) to the 10-inch, 64GB, silver one "
            "($903.95). Shall I go ahead (yes/no)?",
        ),
        ("user", "Yes."),
    )
    messages.append(
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "modify", "arguments": {}}}]}
    )
    assert said_first(messages, 5, ["2106335193"], values=("8551474201", "2106335193")) == 3
    assert said_first(messages, 5, ["2106335193"]) == 5


def test_requiring_a_reservation_id_the_user_does_not_have_or_other_details_instead_is_a_refusal():
    messages = _messages(
        ("user", "Please cancel my trip."),
        ("assistant", "Sure, what is your user id and reservation id?"),
        ("user", "I don\u2019t have the reservation ID with me. Can you look it up?"),
        ("assistant", "Unfortunately, I need the reservation ID to proceed with the cancellation."),
        ("user", "ok, bye"),
        ("assistant", "Goodbye!"),
    )
    airline = load_domain("airline")
    assert insisted(messages, len(messages), airline) == 4
    lacks_user_id = [dict(m) for m in messages]
    lacks_user_id[3]["content"] = "I don't have my user ID with me, the reservation ID is HXDUBJ."
    assert insisted(lacks_user_id, len(messages), airline) is None  # the user id is the policy's own requirement

    def then(name: str) -> list[dict]:
        return [*messages[:5], {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": name}}]}]

    looked_up = then("get_user_details")
    assert insisted(looked_up, len(looked_up), airline) is None  # it went on to find the reservation
    transferred = then("transfer_to_human_agents")  # airline 1.2: a hand-off is no lookup
    assert insisted(transferred, len(transferred), airline) == 4
    other_details = [dict(m) for m in messages]  # airline 5.2: asking for dates instead of opening the profile
    other_details[4]["content"] = "No problem! If you can tell me the date of travel, I can help you locate it."
    assert insisted(other_details, len(messages), airline) == 4


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


def test_a_refusal_said_before_the_user_asked_for_the_act_refuses_something_else():
    reservation = {"reservation_id": "FQ8APE", "cabin": "basic_economy", "passengers": [{"first_name": "Ivan"}]}
    messages = _messages(
        ("user", "I need to make a few changes to my trip."),
        ("tool", json.dumps(reservation)),
        ("assistant", "FQ8APE is basic economy: its flights cannot be modified."),
        ("user", "I'd like to change the passenger to myself and add three bags."),
        (
            "assistant",
            "Since it is basic economy, it cannot be modified: you would need to rebook to make these changes.",
        ),
        ("user", "ok"),
    )
    gold = Action(name="update_reservation_passengers", kwargs={"reservation_id": "FQ8APE", "passengers": []})
    assert refusal(messages, len(messages), gold) == 5  # [3] came before the user asked for a passenger change


def _failed_exchange() -> tuple[Script, int]:
    """Retail test task 29: the skateboard exchanged as in gold, then the hose exchange attempted with a wrong call
    (an item change on the pending order that holds the new hose), and the rest refused."""
    ep = Script("retail", 29)
    ep.user("Hi, I'm Isabella Johansson, zip 32286. I want to exchange my skateboard and my garden hose.")
    for action in ep.task.actions[:4]:
        ep.call(action.name, **action.kwargs)
    ep.call("get_order_details", order_id="#W7181492")
    ep.call("get_order_details", order_id="#W2575533")
    skateboard, hose = ep.task.actions[4:]
    ep.say(
        "I will exchange the skateboard in #W3792453 and the hose in #W7181492 for the one in #W2575533. Confirm?",
        "Yes, go ahead with both.",
    )
    ep.call(skateboard.name, **skateboard.kwargs)
    attempt = ep.call(
        "modify_pending_order_items",
        order_id="#W2575533",
        item_ids=hose.kwargs["new_item_ids"],
        new_item_ids=hose.kwargs["item_ids"],
        payment_method_id=hose.kwargs["payment_method_id"],
    )
    ep.say("The skateboard is done, but I am unable to exchange the garden hose. Anything else?", STOP)
    return ep, attempt


def test_a_refusal_that_reports_the_agents_own_failed_write_is_charged_to_that_write():
    ep, attempt = _failed_exchange()
    judged = judge(ep.build())
    first = next(j for j in judged.judgements if j.first_critical_error)
    assert first.step == attempt
    assert "replay.write_missed_gold" in [f.signal for f in first.findings] and "wrong_tool" in first.categories


def test_a_change_the_gold_solution_makes_in_two_steps_made_in_one_skips_the_first():
    ep = Script("airline", 22)  # basic economy: gold moves the cabin to economy first, then changes the flights
    ep.user("Hi, I'm ivan_rossi_8555. I want a nonstop flight on May 21 instead; I'll upgrade to economy.")
    first_step, second_step = [a for a in ep.task.actions if a.name == "update_reservation_flights"]
    for action in ep.task.actions[:3]:
        ep.call(action.name, **action.kwargs)
    ep.say("I will change OWZ4XL to HAT041 in economy. Confirm (yes/no)?", "Yes, please.")
    write = ep.call(second_step.name, **second_step.kwargs)
    ep.say("Done: you are on HAT041 in economy.", STOP)
    judged = judge(ep.build())
    first = next(j for j in judged.judgements if j.first_critical_error)
    found = next(f for f in first.findings if f.critical)
    assert first.step == write and found.signal == "replay.out_of_order" and found.category == "wrong_sequence"
    assert found.expected == first_step  # the step that had to come first, never the agent's own


def test_a_write_the_gold_never_makes_began_at_the_first_offer_that_named_its_flights():
    messages = _messages(
        ("user", "Please upgrade reservation 4NQLHD to business, under $1000 in all."),
        ("tool", json.dumps({"reservation_id": "4NQLHD", "cabin": "economy"})),
        ("assistant", "Your reservation 4NQLHD is in economy."),
        ("user", "Can it be cheaper?"),
        ("assistant", "Business on HAT286 and economy on HAT047 comes to $897. Shall we go with this option?"),
        ("user", "Great, let's proceed."),
        ("assistant", "To confirm, I will update the flights: HAT286 (business), HAT047 (economy), $897. Yes?"),
        ("user", "Yes."),
    )
    write = len(messages)
    topic = ("change", "update", "modify")
    assert said_first(messages, write, ["4NQLHD"], topic, ("HAT286", "HAT047")) == 5
    assert said_first(messages, write, ["4NQLHD"], topic) == 7  # without the flights: the latest offer


@pytest.mark.parametrize("acted_between", [False, True], ids=["asked again", "another write between"])
def test_an_offer_the_user_said_yes_to_and_the_agent_asked_again_began_a_wrong_act(acted_between):
    """Airline 14.0's shape: an offer of "business" for one passenger, a yes, the same change restated with its
    details and a second yes, then a write that upgrades everyone. The first offer carried the error, unless a
    write came between it and the restatement (its yes led to that write, not to this one)."""
    messages = _messages(
        ("user", "Upgrade my reservation YAX4DR to business, $600 at most."),
        ("tool", json.dumps({"reservation_id": "YAX4DR", "cabin": "economy"})),
        ("assistant", "Both passengers cost $1200; upgrading only Noah to business costs $600. Shall I proceed?"),
        ("user", "Yes, let's do that."),
    )
    if acted_between:
        call = {"id": "c1", "type": "function", "function": {"name": "update_reservation_baggages", "arguments": {}}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "bags added"},
        ]
    restated = len(messages)
    messages += _messages(
        ("assistant", "Details: new cabin business, cost $600. Confirm the update (yes/no)?"), ("user", "Yes.")
    )[1:]
    first = said_first(messages, len(messages), ["YAX4DR"], ("change", "update", "modify"), ("business", "HAT235"))
    assert first == (restated if acted_between else 3)


def _hose_dropped(asked_again: bool) -> tuple[Script, int]:
    """Retail test task 29: the user asks for both exchanges; the agent makes the skateboard one, offers "anything
    else?", and answers another question; the hose exchange is never made (or the user asks for it again)."""
    ep = Script("retail", 29)
    ep.user("Hi, I'm Isabella Johansson, zip 32286. Please exchange my skateboard and my garden hose #W7181492.")
    for action in ep.task.actions[:4]:
        ep.call(action.name, **action.kwargs)
    skateboard = ep.task.actions[4]
    ep.say("I will exchange the skateboard in #W3792453. Confirm (yes/no)?", "Yes.")
    ep.call(skateboard.name, **skateboard.kwargs)
    again = " And please exchange my garden hose too." if asked_again else ""
    closing = ep.say("Done. Is there anything else I can help you with?", f"What is the status of #W2575533?{again}")
    ep.call("get_order_details", order_id="#W2575533")
    ep.say("It is pending. Anything else?", STOP)
    return ep, closing


def test_a_change_never_made_was_dropped_at_the_first_closing_message_after_the_user_asked_for_it():
    ep, closing = _hose_dropped(asked_again=False)
    judged = judge(ep.build())
    assert judged.first_error == closing
    ep, closing = _hose_dropped(asked_again=True)
    assert judge(ep.build()).first_error > closing  # asked again: what the agent answered then is what counts


def test_an_output_never_said_was_due_at_the_first_closing_message_after_the_last_gold_call():
    """Retail test task 24 has no gold action, only outputs (the t-shirts' materials): the agent closes without
    them, then answers something else; the error is the first closing message, not the episode's end."""
    ep = Script("retail", 24)
    ep.user("Hi, I'm Sofia Hernandez, email sofia.hernandez3039@example.com. Which t-shirts did I order?")
    ep.call("find_user_id_by_email", email="sofia.hernandez3039@example.com")
    closing = ep.say("Your request is complete. Is there anything else I can help you with?", "What is my address?")
    ep.call("get_user_details", user_id="sofia_hernandez_5364")
    ep.say("652 Laurel Lane, Seattle. Anything else?", STOP)
    assert judge(ep.build()).first_error == closing


def test_a_failing_call_the_gold_solution_makes_once_is_excused_once():
    """Retail test task 64: the gold solution's exchange of a pending order fails, then it modifies the items. The
    agent offers the modification, but repeats the failing exchange: that repeat is the first error."""
    ep = Script("retail", 64)
    ep.user("Hi, I'm James Sanchez, zip 60623. I want to exchange my camera for the best waterproof one.")
    *reads, exchange, modify = ep.task.actions
    for action in reads:
        ep.call(action.name, **action.kwargs)
    ep.say(f"I will exchange the camera in {exchange.kwargs['order_id']}. Confirm (yes/no)?", "Yes.")
    ep.call(exchange.name, **exchange.kwargs)
    ep.say(f"That order is pending: I will modify its items instead: {json.dumps(modify.kwargs)}. Yes?", "Yes.")
    repeat = ep.call(exchange.name, **exchange.kwargs)
    ep.say("Your request is complete. Is there anything else I can help you with?", STOP)
    judged = judge(ep.build())
    assert judged.fault is None and judged.first_error == repeat


@pytest.mark.parametrize("asks_first", [False, True], ids=["return made unasked", "return confirmed"])
def test_an_output_a_write_returns_is_due_at_that_write_when_it_was_made_without_a_yes(asks_first):
    """Retail test task 19: the user wants to know what a return and an exchange each save (54.04, 41.64). The agent
    makes the gold return without listing it for a yes (its result shows the refund, 54.04, seen in the order
    before), then tells only 41.64: the unasked return is the first error; asked and confirmed, the missing
    refund is charged where the agent closed without it."""
    ep = Script("retail", 19)
    ep.user("Hi, Mei Davis, 80217. Return my water bottle, exchange the pet bed and chair; what does each save me?")
    *reads, back = ep.task.actions
    for action in reads:
        ep.call(action.name, **action.kwargs)
    if asks_first:
        ep.say(f"I will return the water bottle: {json.dumps(back.kwargs)}. Confirm (yes/no)?", "Yes.")
    write = ep.call(back.name, **back.kwargs)
    closing = ep.say("Done. The exchanges would save you 41.64. Anything else?", STOP)
    judged = judge(ep.build())
    assert judged.first_error == (closing if asks_first else write)
    first = next(j for j in judged.judgements if j.first_critical_error)
    assert first.categories[0] == ("missed_required_action" if asks_first else "missing_confirmation")


@pytest.mark.parametrize("kind", ["gift card", "paypal"], ids=["a kind the user holds none of", "its own kind"])
def test_a_payment_of_a_kind_never_shown_began_where_the_agent_offered_that_kind(kind):
    """Retail test task 45: the user, who holds only PayPal, asks for the difference on a gift card; the agent says it
    can, gets a yes, and writes a gift card id it made up. Offering a kind of payment the user was never shown to
    hold is the error; an offer that names the user's own kind carries none (then the made-up id is the write's)."""
    ep = Script("retail", 45)
    ep.user("Hi, Daiki Johnson, 80273. Exchange my robotic vacuum in #W9502127 for the bagless canister one.")
    *reads, exchange = ep.task.actions
    for action in reads:
        ep.call(action.name, **action.kwargs)
    said = ep.say(f"I can exchange it and refund the $9.89 difference to your {kind}. Confirm (yes/no)?", "Yes.")
    kwargs = {**exchange.kwargs, "payment_method_id": "gift_card_0000000"}
    write = ep.call(exchange.name, **kwargs)
    ep.say("I could not complete the exchange. Anything else?", STOP)
    assert judge(ep.build()).first_error == (said if kind == "gift card" else write)


def _call(name: str, content: str) -> list[dict]:
    call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": {}}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": content},
    ]


@pytest.mark.parametrize(
    "looked_up_first,reads", [(False, True), (True, True), (False, False)], ids=["before data", "after", "never reads"]
)
def test_an_answer_is_the_first_reply_with_a_number_and_restating_the_policy_before_any_data_is_none(
    looked_up_first, reads
):
    """Airline 44.1's shape: asked how many bags they may take, the agent restates the policy's allowances before
    reading anything, asks for the reservation, reads it, and answers 6 (the right total is 4): the answer is the
    error. The same restatement made after a lookup is an answer about the user's records, and so is it when the
    agent never reads any (held-out airline 44.3: it answered with the policy)."""
    messages = [
        {
            "role": "system",
            "content": "Gold members: 3 free checked bags per economy passenger, 50 dollars per extra bag.",
        }
    ]
    messages += _messages(("user", "How many suitcases can I take? I'm a gold member."))[1:]
    if looked_up_first:
        messages += _call("get_user_details", '{"membership": "regular"}')
    restated = len(messages)
    messages += _messages(
        ("assistant", "As a gold member you get 3 free checked bags per economy passenger, and $50 per extra bag."),
        ("user", "My reservation is JMO1MG."),
    )[1:]
    if reads:
        messages += _call("get_reservation_details", '{"cabin": "economy", "passengers": [{}, {}]}')
    answer = len(messages)
    messages += _messages(("assistant", "You can take 6 free bags in total."), ("user", "Thanks!"))[1:]
    expected = answer if reads and not looked_up_first else restated
    assert wrong_answer(messages, len(messages), "4") == (expected, "misread_observation")


def test_a_request_to_confirm_a_change_is_no_answer_past_the_first_reply():
    """Retail 4's shape: asked how many t-shirt options there are, the agent asks who the user is, looks things up,
    then asks to confirm an item change whose ids are numbers: no answer was given (the output is missing, not
    misread). The first reply itself is judged as it stands, a confirmation request or not."""
    messages = _messages(
        ("user", "How many t-shirt options are available? And change my t-shirts to purple."),
        ("assistant", "Could you give me your name and zip code?"),
        ("user", "Yusuf Rossi, 19122."),
    )
    messages += _call("get_product_details", '{"variants": {}}')
    messages += _messages(
        ("assistant", "I can modify the item 3799046073 to 9647292434. Do you confirm (yes/no)?"), ("user", "Yes.")
    )[1:]
    assert wrong_answer(messages, len(messages), "10") is None
    first_reply = [messages[0], messages[1], *messages[4:]]  # the confirmation request answers the question
    assert wrong_answer(first_reply, len(first_reply), "10") == (4, "misread_observation")


@pytest.mark.parametrize(
    "listed_both", [True, False], ids=["listing set out the right option too", "listing had only the wrong one"]
)
def test_a_wrong_option_picked_after_a_listing_began_at_the_offer_the_user_said_yes_to(listed_both):
    """Airline 3.0's shape: the agent lists one-stop options, offers the fastest-looking one (HAT229, which has no
    economy seat), gets a yes, asks for the payment method, and writes with it (the user's latest turn gave the
    method, no yes). The write carries on from the yes, so the offer is where the error was said; a listing that
    also set out the right option (HAT290 + HAT175) was no error, one that showed only the wrong option began it."""
    ep = Script("airline", 3)
    ep.user("Hi, I'm sofia_kim_7287. Change my Denver to Houston return on May 27 (OBUT9V) to the fastest, economy.")
    ep.call("get_reservation_details", reservation_id="OBUT9V")
    ep.call("search_onestop_flight", origin="DEN", destination="IAH", date="2024-05-27")
    other = " 2. HAT290 + HAT175, 14:00-20:00." if listed_both else ""
    listing = ep.say(f"Options: 1. HAT229 + HAT266, 11:00-16:00.{other} Which one?", "The fastest one, please.")
    offer = ep.say(
        "The fastest is HAT229 + HAT266, 5 hours. Would you like to proceed with this option?",
        "Yes, let's go with economy for this option.",
    )
    ep.say("To update: HAT229 and HAT266 in economy, $239. Which payment method should I use?", "My gift_card_6276644.")
    legs = [("HAT078", "2024-05-27"), ("HAT118", "2024-05-27"), ("HAT229", "2024-05-27"), ("HAT266", "2024-05-27")]
    ep.change_flights("OBUT9V", "economy", legs, "gift_card_6276644")
    ep.say("HAT229 has no economy seat left. Anything else?", STOP)
    assert judge(ep.build()).first_error == (offer if listed_both else listing)


def test_a_failed_write_retried_until_it_went_through_is_no_attempt_at_another_change():
    """Held-out airline 3.3's shape (airline test task 3): the flight change fails on a gift card short of balance
    and goes through on the gold's card; the checked bag the user asked for is never added, and the agent says it
    was. The failed try was the flight change, made good: the bag was dropped where the agent closed."""
    ep = Script("airline", 3)
    ep.user("Hi, I'm sofia_kim_7287. Change my May 27 return on OBUT9V to the fastest flights and add one bag.")
    flights, _never_added = ep.task.actions
    ep.call("get_reservation_details", reservation_id="OBUT9V")
    ep.say(f"I will update the flights: {json.dumps(flights.kwargs['flights'])}. Confirm (yes/no)?", "Yes.")
    ep.call(flights.name, **{**flights.kwargs, "payment_id": "gift_card_7480005"})
    ep.call(flights.name, **flights.kwargs)
    closing = ep.say("Your flights are changed and one checked bag is added. Anything else?", STOP)
    assert judge(ep.build()).first_error == closing


def test_an_upgrade_offered_in_its_own_words_began_the_wrong_change_it_led_to():
    """Held-out airline 14.1's shape (airline test task 14): the agent offers to upgrade only Noah ("Upgrading just
    Noah to business ... $600"), the user says yes, and the write upgrades everyone, a change the gold never makes.
    The offer speaks of the write's act in its own word ("upgrading"), so it is where the error was said."""
    ep = Script("airline", 14)
    ep.user("Hi, I'm chen_lee_6825. Please upgrade everyone on YAX4DR to business, $600 at most, and add 2 bags.")
    for action in ep.task.actions[:4]:
        ep.call(action.name, **action.kwargs)
    ep.say("Upgrading both passengers to business costs $1200.", "Too much. Could you upgrade just Noah within $600?")
    offer = ep.say("Upgrading just Noah to business for both flights will cost exactly $600.", "Yes, please proceed.")
    ep.change_flights("YAX4DR", "business", [("HAT235", "2024-05-18"), ("HAT298", "2024-05-19")], "credit_card_4938634")
    ep.say("Noah is upgraded. Anything else?", STOP)
    assert judge(ep.build()).first_error == offer


@pytest.mark.parametrize("names_both", [True, False], ids=["a plan of two others", "one other: a step"])
def test_a_change_left_out_of_a_plan_that_named_the_others_was_dropped_there(names_both):
    """Held-out airline 30.2's shape (airline test task 30: cancel one flight of each duplicate day, FDZ0T5 and
    HSR97W). The agent reads the profile and every reservation, then reports one duplicate day (PUNERT and HSR97W)
    and offers to cancel one of them: FDZ0T5 was left out there. An offer that names one other reservation alone is a
    step of a plan, so the change is dropped where the agent closed."""
    ep = Script("airline", 30)
    ep.user("Hi, I'm sophia_martin_4574. Do I have several flights booked on the same day? Cancel the duplicates.")
    reads = [a for a in ep.task.actions if a.name.startswith("get_")]
    for action in reads:
        ep.call(action.name, **action.kwargs)
    pair = "PUNERT and HSR97W" if names_both else "HSR97W"
    plan = ep.say(f"You have two flights on May 22: {pair}. Would you like to cancel one of them?", "Cancel HSR97W.")
    ep.say("I will cancel HSR97W. Confirm (yes/no)?", "Yes, please.")
    ep.call("cancel_reservation", reservation_id="HSR97W")
    closing = ep.say("Done. Anything else?", STOP)
    assert judge(ep.build()).first_error == (plan if names_both else closing)


def test_the_plan_that_left_out_the_second_of_two_changes_never_made_is_the_error():
    """Part 1's airline 30.0 (airline test task 30): both gold cancellations are never made. The agent's plan reports
    one duplicate day (SE9KEL and FDZ0T5) and asks whether to make "any changes": HSR97W, the second gold write, was
    left out there, before the later refusal to cancel FDZ0T5 (the first gold write, which has no such plan)."""
    ep = Script("airline", 30)
    ep.user("Hi, I'm sophia_martin_4574. Do I have several flights booked on the same day? Cancel the duplicates.")
    for action in [a for a in ep.task.actions if a.name.startswith("get_")]:
        ep.call(action.name, **action.kwargs)
    plan = ep.say(
        "Your reservations: MFRB94, PUNERT, HSR97W, SE9KEL, FDZ0T5, HTR26G, 5BGGWZ.\n\nYou have two flights on May 17, "
        "under SE9KEL and FDZ0T5. Would you like to make any changes to these reservations?",
        "Yes, cancel FDZ0T5; I keep the one from LAX.",
    )
    ep.say("Unfortunately, I cannot cancel FDZ0T5: it is not eligible for a refund.", "Then transfer me, please.")
    ep.call("transfer_to_human_agents", summary="The user wants to cancel FDZ0T5.")
    assert judge(ep.build()).first_error == plan


def test_a_change_made_where_the_task_needed_a_hand_off_began_where_the_agent_pursued_it():
    """Airline test task 13 (part 1's 13.0 and part 2's 13.3): the user wants the return of a partly flown trip
    rerouted to Las Vegas, which the policy does not allow; the gold solution only transfers. The agent searches
    ATL-LAS and, pressed by the user, changes the flights without a yes: the error began at the search whose result
    brought the flight it wrote, where a careful agent would have handed the user over."""
    ep = Script("airline", 13)
    ep.user("Hi, I'm james_lee_6136. Change my return on XEWRD9 to a nonstop flight from ATL to LAS.")
    ep.call("get_reservation_details", reservation_id="XEWRD9")
    search = ep.call("search_direct_flight", origin="ATL", destination="LAS", date="2024-05-21")
    ep.say("HAT052 leaves ATL at 03:00 for LAS. Shall I change your return to it?", "Please just get it processed.")
    ep.change_flights("XEWRD9", "economy", [("HAT052", "2024-05-21")], "gift_card_4643416")
    ep.say("Your return is now HAT052. Anything else?", STOP)
    judged = judge(ep.build())
    first = next(j for j in judged.judgements if j.first_critical_error)
    assert judged.first_error == search and first.findings[0].signal == "replay.hand_off_needed"


@pytest.mark.parametrize("refused", [True, False], ids=["refused the passenger change", "never spoke of it"])
def test_a_change_never_made_beside_a_wrong_write_on_its_record_was_refused_where_it_was_said(refused):
    """Airline 4.3's shape (airline test task 4): the user asks to put itself on basic economy FQ8APE, upgrade it to
    economy and add 3 bags. The agent says a basic economy booking cannot change passengers (the policy allows it),
    then upgrades with a card the user never chose and adds the bags. The wrong write explains the reservation's
    payments, but not its passengers, which no agent write touched: the gold's passenger change is missing, and the
    refusal is where the episode went wrong. An agent that never spoke of the passengers erred first at the write."""
    ep = Script("airline", 4)
    ep.user("Hi, I'm omar_rossi_1241. Put myself as the passenger on FQ8APE, upgrade it to economy, add 3 bags.")
    ep.call("get_reservation_details", reservation_id="FQ8APE")
    said = "FQ8APE is basic economy, which cannot be modified to change passengers. " if refused else ""
    refusal = ep.say(said + "I can upgrade FQ8APE to economy and add 3 bags. Confirm (yes/no)?", "Yes.")
    legs = [("HAT056", "2024-05-25"), ("HAT138", "2024-05-25")]
    write = ep.change_flights("FQ8APE", "economy", legs, "credit_card_6754990")
    ep.add_bags("FQ8APE", 3, 0, "gift_card_8190333")
    ep.say("Done: economy and 3 bags. Anything else?", STOP)
    assert judge(ep.build()).first_error == (refusal if refused else write)


def test_a_refusal_to_tell_a_balance_the_user_said_it_wanted_to_know_is_the_wrong_answer():
    """Airline 8.2's shape: "I'd like to know the sum of my gift card balances" asks a question without a question
    mark, and the agent's refusal to tell it is the error where the required sum was never said."""
    messages = _messages(
        ("user", "Hi! I would like to know the sum of my gift card balances, please."),
        ("assistant", "I'm unable to provide information about your gift card balances."),
        ("user", "Alright. Then change my reservation to business."),
    )
    assert wrong_answer(messages, len(messages), "327") == (2, "wrong_refusal")


def test_a_reply_that_gives_another_required_output_answers_that_question():
    """Part 5's retail 47: asked for the refund total, the agent gives it ($1,095.55, a required output) and says
    the refund cannot come within 3 days: it answered that question. The remaining total (another required output,
    asked only after a return that never happened) was not refused there."""
    messages = _messages(
        ("user", "Yes, proceed, and I want the refund within 3 days. Can you confirm the total refund amount?"),
        ("assistant", "The total refund is $1,095.55. Unfortunately, I cannot expedite it to within 3 days."),
        ("user", "I really need it sooner."),
    )
    assert wrong_answer(messages, len(messages), "1528.14", ("1095.55",)) is None
    assert wrong_answer(messages, len(messages), "1528.14") == (2, "wrong_refusal")  # no other output given


def test_a_refused_question_whose_answer_came_later_is_no_wrong_answer_of_another_output():
    """Airline 8.1's shape: the agent first refuses to tell the gift card balances, and gives their sum ($327) later;
    the charge on the card, asked for later, was never refused at that first turn (both annotators: "the sums were
    told later, so it was not decisive")."""
    messages = _messages(
        ("user", "Hi, I'd like to know the total of my gift card balances, please."),
        ("assistant", "I'm unable to provide information about your gift card balances."),
        ("user", "Then change my reservation to business. How much will be charged on my card?"),
        ("assistant", "Your gift cards hold $327 in total."),
        ("user", "And the charge on my card?"),
        ("assistant", "The card would be charged $298."),
    )
    assert wrong_answer(messages, len(messages), "1786", ("327",)) == (6, "misread_observation")
    assert wrong_answer(messages, len(messages), "1786") == (2, "wrong_refusal")


def test_saying_a_record_does_not_have_the_asked_for_value_is_the_wrong_answer():
    """Part 5's retail 104: "Can you also give me the tracking number for the cancelled order?" asks to be told a
    value, and "it does not have a tracking number" refuses it (its tool result held one)."""
    messages = _messages(
        ("user", "Thanks! Can you also give me the tracking number for the cancelled order?"),
        ("assistant", "The cancelled order (#W1154986) does not have a tracking number because it was cancelled."),
        ("user", "Got it, thanks."),
    )
    assert wrong_answer(messages, len(messages), "286422338955") == (2, "wrong_refusal")
    assert REFUSAL.search("The order does not have any items left to return.")


def test_a_refusal_is_not_undone_by_the_same_act_on_another_record():
    """Airline 33.2's shape (airline test task 33): after the gold cancellation, the agent says the basic economy
    reservations cannot be upgraded (the policy lets any reservation change cabin) and upgrades another one
    instead: that upgrade goes back on nothing, the refusal stands, and it is where the episode went wrong."""
    ep = Script("airline", 33)
    ep.user("Hi, I'm sophia_silva_7557. Cancel S61CZX, then upgrade my other reservations to business.")
    for action in [a for a in ep.task.actions if a.name.startswith("get_")]:
        ep.call(action.name, **action.kwargs)
    ep.say("I will cancel S61CZX. Confirm (yes/no)?", "Yes.")
    ep.call("cancel_reservation", reservation_id="S61CZX")
    refusal = ep.say(
        "NM1VX1, KC18K6 and H8Q05L are basic economy, which cannot be modified. Shall I upgrade WUNA5K instead?",
        "Yes.",
    )
    ep.say("I will upgrade WUNA5K to business. Confirm (yes/no)?", "Yes.")
    ep.change_flights("WUNA5K", "business", [("HAT271", "2024-05-10"), ("HAT197", "2024-05-11")], "credit_card_4196779")
    ep.say("Anything else?", STOP)
    assert judge(ep.build()).first_error == refusal


@pytest.mark.parametrize("listing_offers", [False, True], ids=["a listing of details", "a listing that offers it"])
def test_a_listing_that_only_shows_the_wrong_record_offers_nothing(listing_offers):
    """Airline 28.3's shape (airline test task 28): the agent lists the user's reservations, I6M8JQ among them (its
    flights are flown), then offers to cancel it with others ("I6M8JQ - can be cancelled"), and cancels it on the
    user's yes. The wrong record is the error; the listing only showed it, and the offer is where it was said. A
    listing whose paragraph on I6M8JQ already offers its cancellation is where it began."""
    ep = Script("airline", 28)
    ep.user("Hi, I'm amelia_davis_8890. Please show me my reservations; I want to cancel some.")
    ep.call("get_reservation_details", reservation_id="I6M8JQ")
    note = " It can be cancelled." if listing_offers else ""
    listing = ep.say(
        f"Your reservations:\n\n1. I6M8JQ: LAS to EWR, economy, insured.{note}\n\n2. UDMOP1: SFO, basic economy.",
        "Cancel all you can.",
    )
    offer = ep.say("I can cancel I6M8JQ (economy with insurance). Proceed (yes/no)?", "Yes.")
    ep.call("cancel_reservation", reservation_id="I6M8JQ")
    ep.say("Done. Anything else?", STOP)
    assert judge(ep.build()).first_error == (listing if listing_offers else offer)


@pytest.mark.parametrize("listed", [2, 0], ids=["the summary listed 2 bags", "it listed none"])
def test_a_confirmation_that_listed_a_wrong_count_is_where_the_error_was_said(listed):
    """Airline 32.2's shape (airline test task 32): the user has no bags, the agent's booking summary lists "Total
    Checked Bags: 2", the user answers "Everything looks good!", and the booking has 2 bags where the gold has none:
    the summary is where the error was said. A summary that listed no bags leaves the write its own error."""
    ep = Script("airline", 32)
    ep.user("Hi, I'm sophia_silva_7557. Book HAT271 ORD to PHL on May 26 for me and Kevin Smith, 2001-04-12.")
    ep.call("get_user_details", user_id="sophia_silva_7557")
    (booking,) = [action for action in ep.task.actions if action.name == "book_reservation"]
    summary = ep.say(
        f"Booking details:\n- Flight: HAT271, May 26, economy\n- Total Checked Bags: {listed}\n- Total Price: $348\n"
        "Please confirm the details to proceed.",
        "Everything looks good! Use the $500 certificate.",
    )
    write = ep.call(booking.name, **{**booking.kwargs, "total_baggages": 2})
    ep.say("Booked. Anything else?", STOP)
    assert judge(ep.build()).first_error == (summary if listed else write)


@pytest.mark.parametrize(
    "claim",
    [
        "There is currently no blue variant available",
        "The blue variant is out of stock",
        "A blue version does not appear in the available options",
        "Model number 9844888101 does not match any product",  # part 7's retail 113
        "Your pending order contains a black XXL crew neck t-shirt, not a small v-neck",  # part 7's retail 3
    ],
)
def test_claims_that_an_option_does_not_exist_are_refusals(claim):
    assert REFUSAL.search(f"{claim} for your earbuds.")


@pytest.mark.parametrize("claims_none", [True, False], ids=["said no blue one exists", "closed without a word"])
def test_a_claim_that_the_asked_for_option_does_not_exist_is_a_refusal(claims_none):
    """Part 4's retail 60 shape (retail test task 60): asked for blue earbuds, the agent fails an email lookup ("I
    couldn't find a user with that email", no answer to anything the user asked to be told), authenticates, reads
    the order, and says there is no blue variant, though the catalogue has one: the change the gold makes is never
    made, and the claim is where the agent refused it. An agent that closes without a word dropped it there."""
    ep = Script("retail", 60)
    ep.user("Hi, I'd like to change the wireless earbuds in my order W5061109 to a blue one. Can you help me?")
    ep.say("I couldn't find a user with the email chen.johnson@gmail.com. Could you give me your name and zip?")
    ep.user("Chen Johnson, 77004.")
    for action in ep.task.actions[:2]:
        ep.call(action.name, **action.kwargs)
    said = "There is currently no blue variant available for your earbuds. " if claims_none else ""
    claim = ep.say(said + "Is there anything else I can help you with?", STOP)
    assert judge(ep.build()).first_error == claim


def test_a_refusal_answers_a_request_to_be_told_a_value_not_a_request_to_act():
    """Asked "can you help me change my earbuds?", a reply that it could not find the user tells no value: it is
    no wrong answer of the price the user had to hear. Asked for the total, a refusal is one."""
    messages = _messages(
        ("user", "Can you help me change my earbuds to blue ones?"),
        ("assistant", "I couldn't find a user with that email. Could you give me your name and zip code?"),
        ("user", "Chen Johnson, 77004."),
    )
    assert wrong_answer(messages, len(messages), "242.92") is None
    asked = _messages(("user", "What is the total I paid?"), ("assistant", "I'm unable to share that."))
    assert wrong_answer(asked, len(asked), "242.92") == (2, "wrong_refusal")
    # part 4's retail 62: a failed lookup of the user is no answer either; the later claim is
    told = _messages(
        ("user", "Can you tell me the price of my bluetooth speaker?"),
        ("assistant", "I couldn't find a user with that email. Could you give me your name and zip code?"),
        ("user", "Chen Johnson, 77004."),
        ("assistant", "I did not find a bluetooth speaker among your orders."),
    )
    assert wrong_answer(told, len(told), "302.67") == (4, "wrong_refusal")


def test_each_wrong_value_is_said_no_earlier_than_the_lookup_that_showed_it():
    """Part 4's retail 58 shape: the one variant shown (9 bar, 2L, automatic) is offered as the only one; then the
    agent reads the order (its result holds the card the write wrongly pays with) and confirms the swap. The item's
    error was said at the offer, which rests on the variant lookup; the card's lookup came later, and it does not
    move the item's error past it."""
    variant = {"item_id": "3709608322", "options": {"pressure": "9 bar", "capacity": "2L", "type": "automatic"}}
    messages = _messages(("user", "I want the same espresso machine with 8 bar pressure."))
    messages += _call("list_product_variants", json.dumps(variant))
    offer = len(messages)
    messages += _messages(
        ("assistant", "The only available variant has 9 bar pressure, a 2L capacity and is automatic."),
        ("user", "Then the 9 bar one, please."),
    )[1:]
    messages += _call(
        "get_order_details", json.dumps({"payment_history": [{"payment_method_id": "credit_card_7455506"}]})
    )
    messages += _messages(
        ("assistant", "You'd like the 9 bar, 2L, automatic version. Confirm (yes/no)?"), ("user", "Yes.")
    )[1:]
    assert said_first(messages, len(messages), ["3709608322", "credit_card_7455506"]) == offer


def test_a_message_that_declines_one_act_and_offers_the_needed_one_is_no_refusal_of_it():
    """Part 4's retail 74 shape: the laptop order is pending, so the agent declines an exchange and offers to modify
    the order instead ("I can help you modify your pending order"): no refusal of the modification the gold makes.
    Its later claim that no i9 laptop exists is one."""
    gold = Action(
        name="modify_pending_order_items",
        kwargs={"order_id": "#W4241221", "item_ids": ["2216662955"], "new_item_ids": ["3265035808"]},
    )
    messages = _messages(("user", "I want to exchange my laptop in #W4241221 for one with an i9 CPU."))
    messages += _call("get_order_details", json.dumps({"order_id": "#W4241221", "status": "pending"}))
    messages += _messages(
        (
            "assistant",
            "Your laptop order is still pending. Exchanges can only be processed for delivered orders. If you'd "
            "like, I can help you modify your pending order to switch to a laptop with an i9 CPU.",
        ),
        ("user", "Yes, please change it to an i9."),
        ("assistant", "There are currently no laptop variants with an i9 processor available for #W4241221."),
        ("user", "Okay, thanks."),
    )[1:]
    assert refusal(messages, len(messages), gold) == 6


@pytest.mark.parametrize("speaks", [False, True], ids=["calls only, to the step limit", "a word to the user between"])
def test_a_loop_of_repeated_calls_the_step_limit_ended_began_at_its_first_repeat(speaks):
    """Part 4's retail 72 shape (retail test task 60 here): after reading the order, the agent calls the same
    product lookup again and again, saying nothing, until the step limit ends the episode with the change never
    made: the loop's first repeat is where it went wrong. An agent that spoke to the user within the calls began its
    silent loop after its last word."""
    ep = Script("retail", 60)
    ep.user("Hi, Chen Johnson, 77004. Please change the earbuds in W5061109 to a blue pair.")
    for action in ep.task.actions[:2]:
        ep.call(action.name, **action.kwargs)
    lookup = ep.task.actions[2]
    ep.call(lookup.name, **lookup.kwargs)
    first_repeat = ep.call(lookup.name, **lookup.kwargs)
    if speaks:
        ep.say("Still checking the variants for you.")
    after_word = ep.call(lookup.name, **lookup.kwargs)
    for _ in range(2):
        ep.call(lookup.name, **lookup.kwargs)
    ep.termination = "max_steps"
    assert judge(ep.build()).first_error == (after_word if speaks else first_repeat)


ADDRESS = Action(name="modify_pending_order_address", kwargs={"order_id": "#W5270061", "city": "Charlotte"})
ITEMS = Action(
    name="modify_pending_order_items",
    kwargs={"order_id": "#W5270061", "item_ids": ["2492465580"], "new_item_ids": ["5917587651"]},
)
ORDER = {
    "order_id": "#W5270061",
    "status": "pending",
    "items": [{"name": "Backpack", "item_id": "2492465580", "options": {"size": "small", "material": "nylon"}}],
}


@pytest.mark.parametrize("then", ["asks to confirm it", "offers a transfer"])
def test_a_refusal_the_agent_then_asks_to_confirm_on_its_record_was_taken_back(then):
    """Part 4's retail 71 shape: listing the orders, the agent states a rule ("You can only modify the shipping
    address for orders that are still pending"), then asks to confirm the address change of the pending order: it
    refused nothing. Retail 85's shape: a later offer to transfer the user "to resolve your exchange request" asks
    to confirm no act ("exchange" holds no "change"), and the refusal stands. A confirmation request may name an
    item the write changes in place of its order."""
    messages = _messages(("user", "I want to update the shipping address of my order."))
    messages += _call("get_order_details", json.dumps(ORDER))
    messages += _messages(
        ("assistant", "Order #W5270061 (pending). You can only modify the shipping address for pending orders."),
        ("user", "Then update #W5270061, please."),
        (
            "assistant",
            "To confirm, you'd like to update the shipping address for order #W5270061 to Charlotte. Is this correct?"
            if then == "asks to confirm it"
            else "Would you like me to transfer you to a human agent to resolve your exchange request for #W5270061?",
        ),
        ("user", "Yes."),
    )[1:]
    assert refusal(messages, len(messages), ADDRESS) == (None if then == "asks to confirm it" else 4)
    items = _messages(("user", "Please change the backpack in my order #W5270061."))
    items += _call("get_order_details", json.dumps(ORDER))
    items += _messages(
        ("assistant", "I'm unable to change #W5270061 right now."),
        ("user", "Please try again: a medium polyester one."),
        ("assistant", "I found one. Shall I proceed to change your backpack to the medium polyester one (yes/no)?"),
    )[1:]
    assert refusal(items, len(items), ITEMS) is None
    items[-1]["content"] = "I found one. Shall I proceed to change it to the medium polyester one (yes/no)?"
    assert refusal(items, len(items), ITEMS) == 4  # names neither the order nor the backpack


def test_a_note_that_a_change_can_be_made_only_once_refuses_nothing():
    """The retail policy's caution ("this action can only be done once") comes with an offer to make the change:
    no refusal of it. The rule the policy states for other orders ("can only be modified if pending") is one."""
    messages = _messages(("user", "I'd like to change the items in my order #W5270061."))
    messages += _call("get_order_details", json.dumps(ORDER))
    messages += _messages(
        ("assistant", "Please note that modifying the items of #W5270061 can only be done once. Which items?"),
        ("user", "The backpack, to a medium polyester one."),
    )[1:]
    assert refusal(messages, len(messages), ITEMS) is None
    messages[4]["content"] = "Order #W5270061 can only be modified while it is pending."
    assert refusal(messages, len(messages), ITEMS) == 4


@pytest.mark.parametrize("refused", ["a return", "this change"])
def test_saying_a_pending_order_cannot_be_returned_refuses_no_change_of_its_items(refused):
    """Part 5's retail 101: asked to return items of a pending order, the agent says "items from pending orders
    cannot be returned": true, and a refusal of a return, not of the change of those items the gold solution
    makes (the user had not asked for other options yet). A message that refuses the change itself is one."""
    messages = _messages(("user", "I want to return the backpack from #W5270061."))
    messages += _call("get_order_details", json.dumps(ORDER))
    claim = (
        "The backpack is part of order #W5270061, which is still pending. Items from pending orders cannot be "
        "returned as they haven't been delivered yet."
        if refused == "a return"
        else "Order #W5270061 is pending, and its items cannot be changed or returned."
    )
    messages += _messages(("assistant", claim), ("user", "But I already got it!"))[1:]
    assert refusal(messages, len(messages), ITEMS) == (None if refused == "a return" else 4)


@pytest.mark.parametrize("names_it", [True, False], ids=["a paragraph names the item", "only a later one does"])
def test_a_paragraph_that_says_an_item_of_the_write_is_unavailable_refuses_the_write(names_it):
    """Part 4's retail 71: without naming the order or the act, the agent says the medium polyester backpack the
    user asked for is "not showing up as available": a refusal of the change to the backpack the order holds. A
    paragraph on what its tool can show ("I'm only able to retrieve a single variant at a time") that asks about
    the backpack in another paragraph refuses nothing."""
    messages = _messages(("user", "Please change the items in my order #W5270061: the backpack to medium polyester."))
    messages += _call("get_order_details", json.dumps(ORDER))
    claim = (
        "The medium polyester backpack you asked for is not showing up as available right now.\n\nAnything else?"
        if names_it
        else "I'm only able to retrieve a single variant at a time.\n\nFor the backpack: is size your main concern?"
    )
    messages += _messages(("assistant", claim), ("user", "Okay."))[1:]
    assert refusal(messages, len(messages), ITEMS) == (4 if names_it else None)


@pytest.mark.parametrize("pursued", [True, False], ids=["pursued, then given up", "refused at once"])
def test_a_failed_try_the_agent_pursued_and_then_gave_up_was_dropped_where_it_gave_up(pursued):
    """Part 4's retail 73 shape (retail test task 73): the return is tried with made-up item ids and fails; the user
    agrees to a lookup, and the agent then says it can only get the toothbrush's id and offers a transfer "to
    complete your return" (a transfer offers no act): the failed try could still be mended, and the refusal is
    where the return was dropped. A refusal said at once, reporting the failed try, charges the try."""
    ep = Script("retail", 73)
    ep.user("Hi, I'm fatima.wilson5721@example.com. I want to return everything I bought except the coffee machine.")
    ep.call("find_user_id_by_email", email="fatima.wilson5721@example.com")
    ep.call("get_user_details", user_id="fatima_wilson_7472")
    ep.say("I will return the toothbrushes, kettle and boots of #W5272531 to your Visa. Confirm (yes/no)?", "Yes.")
    attempt = ep.call(
        "return_delivered_order_items",
        order_id="#W5272531",
        item_ids=["3320557165", "Electric Kettle", "Hiking Boots"],
        payment_method_id="credit_card_6824399",
    )
    if pursued:
        ep.say("I need each item's id to process the return. Shall I look them up?", "Yes, please.")
    refused = ep.say(
        "It appears I'm only able to retrieve the item ID for the Electric Toothbrush, not for the others. Would you "
        "like me to transfer you to a human agent to complete your return?",
        "Yes, please.",
    )
    ep.call("transfer_to_human_agents", summary="Return of three items in #W5272531; item ids unavailable.")
    assert judge(ep.build()).first_error == (refused if pursued else attempt)


@pytest.mark.parametrize("asks", [True, False], ids=["the listing asks to cancel these", "it only lists them"])
def test_a_listing_that_asks_to_go_ahead_with_the_act_on_those_listed_offers_it(asks):
    """Airline 33.1's shape (airline test task 33): the agent lists S61CZX and WUNA5K as the reservations with long
    flights and asks "Would you like to proceed with canceling these reservations?"; on the user's yes it confirms
    both, cancels S61CZX (the gold's own cancellation, so no alternative to WUNA5K) and then WUNA5K, a flown trip
    gold leaves alone. The listing offered the wrong cancellation. A listing that only shows them offers nothing,
    and the confirmation request is where the error was said."""
    ep = Script("airline", 33)
    ep.user("Hi, I'm sophia_silva_7557. Cancel my reservations with flights over 3 hours.")
    ep.call("get_user_details", user_id="sophia_silva_7557")
    for reservation in ("S61CZX", "WUNA5K"):
        ep.call("get_reservation_details", reservation_id=reservation)
    ending = "\n\nWould you like to proceed with canceling these reservations?" if asks else ""
    listing = ep.say(
        "Your reservations with flights over 3 hours:\n\n1. S61CZX: LAX to EWR\n\n2. WUNA5K: ORD to PHL" + ending,
        "Yes, cancel both.",
    )
    confirm = ep.say("To confirm: cancel S61CZX and WUNA5K, reason: change of plan. Shall I proceed?", "Yes.")
    ep.call("cancel_reservation", reservation_id="S61CZX")
    ep.call("cancel_reservation", reservation_id="WUNA5K")
    ep.say("Both are cancelled. Anything else?", STOP)
    assert judge(ep.build()).first_error == (listing if asks else confirm)


def test_an_offer_on_a_condition_the_user_must_meet_is_still_a_refusal():
    """Part 5's retail 39 shape: asked to take the new address from the user's order, the agent says it cannot, and
    "if you can recall the full details of your new address, I can update it for you": the offer waits on what it
    refused to look up, so the message refuses the change. "If you'd like, I can..." offers it (retail 74)."""
    gold = Action(name="modify_user_address", kwargs={"user_id": "fatima_taylor_3452", "city": "Phoenix"})
    messages = _messages(("user", "I moved: please update my address. It is in my latest order."))
    messages += _call("get_user_details", json.dumps({"user_id": "fatima_taylor_3452", "orders": ["#W5285031"]}))
    refused = "Unfortunately, I can't fetch your new address from your order details."
    messages += _messages(
        ("assistant", f"{refused} If you can recall the full details of your new address, I can update it for you."),
        ("user", "I'll check my notes later."),
    )[1:]
    assert refusal(messages, len(messages), gold) == 4
    messages[4]["content"] = f"{refused} If you'd like, I can update your address from the order instead."
    assert refusal(messages, len(messages), gold) is None


def _retried_upgrade(then: str) -> list[dict]:
    """A plan naming the 8-inch tablet, a yes, a payment question and its yes, a failed write, a message (`then`) and
    the user's "Continue.", which is no yes: the write after it carries on the plan."""
    failed = {"role": "tool", "tool_call_id": "c1", "content": "Error: new item not available"}
    messages = _messages(("user", "Upgrade my tablet to the most expensive one."), ("tool", json.dumps(VARIANTS)))
    messages += _messages(
        ("assistant", "Plan: upgrade your tablet to the 8-inch, 64GB, silver one ($938.92). Proceed?"),
        ("user", "Yes, go ahead."),
        ("assistant", "Shall I charge the difference to your gift card?"),
        ("user", "Yes, the gift card."),
    )[1:]
    messages += [*_call("modify_pending_order_items", "")[:1], failed]
    messages += _messages(("assistant", then), ("user", "Continue."))[1:]
    return messages + _call("modify_pending_order_items", "")[:1]


@pytest.mark.parametrize("then", ["That did not go through. Shall I try again?", "The 10-inch one is 2106335193."])
def test_a_write_made_on_no_yes_of_its_own_carries_out_the_plan_the_user_said_yes_to(then):
    """Part 5's retail 20 shape: the upgrade plan offered the wrong kit and the user said yes; a payment question, a
    failed write and "Continue." came between, and the write carried out the plan: the plan is where the error was
    said (a failed write is no write the yes was used up on). A message naming the right item in between ends it."""
    messages = _retried_upgrade(then)
    step = len(messages) - 1
    assert _yes_since_write(messages, step, load_domain("retail"))
    found = said_first(messages, step, ["8551474201"], None, (), ("2106335193",))
    assert found == (3 if then.startswith("That") else step)


@pytest.mark.parametrize("asked_first", [False, True], ids=["asked after the returns", "asked at the start"])
def test_an_output_asked_for_only_after_the_closing_message_is_missed_at_the_wrong_answer(asked_first):
    """Part 5's retail 28 shape (retail test task 28): the returns are made as in gold and the agent closes; only then
    does the user ask to cancel the pending hose, which cancels its whole order, and for the refund total, which
    the agent gives with that order in it ($2537.77, not $918.43). The closing message left nothing out the user
    had asked for: the cancellation offer is where it went wrong. A user who asked for the total at the start was
    owed it when the agent closed."""
    ep = Script("retail", 28)
    total = " How much will I get back in total?" if asked_first else ""
    ep.user(f"Hi, Isabella Johansson, 32286. Return the skateboard, hose, backpack, keyboard and bed.{total}")
    for action in ep.task.actions[:6]:
        ep.call(action.name, **action.kwargs)
    ep.say("I will return those five items to your PayPal. Confirm (yes/no)?", "Yes.")
    for action in ep.task.actions[6:9]:
        ep.call(action.name, **action.kwargs)
    closing = ep.say("All five returns are filed. Anything else?", "Also cancel the hose I just ordered, #W2575533.")
    offer = ep.say("I can cancel the hose in #W2575533. Reason: no longer needed? Confirm (yes/no)?", "Yes.")
    ep.call("cancel_pending_order", order_id="#W2575533", reason="no longer needed")
    ep.say("Done.", "What is the total refund for everything?")
    ep.say("Your total refund is $2537.77.", STOP)
    assert judge(ep.build()).first_error == (closing if asked_first else offer)


@pytest.mark.parametrize("offers", [True, False], ids=["the listing offers to modify", "it only lists the items"])
def test_a_wrong_act_began_at_the_offer_of_it_the_user_said_yes_to(offers):
    """Part 5's retail 34 shape (retail test task 34): the agent lists the pending order's items and offers to
    "modify the order to remove the office items" (the policy allows no such change; the gold changes the address);
    the user says yes, the agent restates the removal with the refund's payment, the user says yes again, and the
    item change is made. The offer the user said yes to is where the wrong act began. A listing that offered
    nothing leaves the restatement as the first offer."""
    ep = Script("retail", 34)
    ep.user("Hi, Noah Patel, 10108. I'd like to drop the office items from my pending order #W1845024.")
    for action in ep.task.actions[:5]:
        ep.call(action.name, **action.kwargs)
    ending = " Would you like me to proceed with modifying the order?" if offers else " What would you like to do?"
    listing = ep.say(
        "Your order holds a Mechanical Keyboard, Headphones and an Office Chair, and hiking gear. We cannot "
        "cancel single items, but we can modify the order to remove the office items." + ending,
        "Yes, let's do it!",
    )
    restated = ep.say("To modify your order, I'll remove the keyboard, headphones and chair. Shall I proceed?", "Yes.")
    ep.call(
        "modify_pending_order_items",
        order_id="#W1845024",
        item_ids=["1340995114", "7493556126", "8323284863"],
        new_item_ids=[],
        payment_method_id="paypal_3169710",
    )
    ep.say("Anything else?", STOP)
    assert judge(ep.build()).first_error == (listing if offers else restated)


@pytest.mark.parametrize("tried_exchange", [True, False], ids=["an exchange tried first", "no try"])
def test_a_wrong_tool_try_later_made_with_the_same_arguments_stands_for_that_write(tried_exchange):
    """Part 5's retail 98 shape (retail test task 98): the agent tries the speaker swap as an exchange (the order is
    pending: it fails), then makes it as the item change it had to be, with the very same arguments, which locks the
    order; the address change after it fails. The try stood for the item change the agent made, not for the address
    change: the item change that came first is the error (`wrong_sequence`, expected: the address change)."""
    ep = Script("retail", 98)
    ep.user("Hi, Yusuf Li, 91148. Swap my speaker for the cheapest green one, and move my LA order to my NYC address.")
    ep.call("find_user_id_by_name_zip", first_name="Yusuf", last_name="Li", zip="91148")
    ep.call("get_order_details", order_id="#W6750959")
    address, items = ep.task.actions
    ep.say("I will swap the speaker in #W6750959 for the green one. Confirm (yes/no)?", "Yes.")
    if tried_exchange:
        ep.call("exchange_delivered_order_items", **items.kwargs)
    write = ep.call(items.name, **items.kwargs)
    ep.call(address.name, **address.kwargs)
    ep.say("The address could not be changed. Anything else?", STOP)
    judged = judge(ep.build())
    first = next(j for j in judged.judgements if j.first_critical_error)
    found = next(f for f in first.findings if f.critical)
    assert first.step == write and found.signal == "replay.blocked_later_write" and found.expected == address


@pytest.mark.parametrize("helper", ["return_all_delivered_order_items", "calculate_refund_total_for_items"])
def test_a_change_tried_with_a_helper_tool_the_domain_lacks_is_charged_at_that_call(helper):
    """Part 6's retail 11 (retail test task 11): an imported agent with its own helper tools returns "all items" of
    each order with `return_all_delivered_order_items`, whose recorded result shows the order still delivered, and
    tells the user the returns were made: the first such call is the error (the wrong tool), not the closing message.
    A helper that only computes (`calculate_refund_total_for_items`) tried no change."""
    ep = Script("retail", 11)
    ep.user("I want to return everything I ordered. I'm mia.garcia2723@example.com.")
    steps = [ep.call(action.name, **action.kwargs) for action in ep.task.actions[:4]]
    ep.say("Shall I return all items of #W5490111 and #W7387996 to their original payment methods?", "Yes.")
    unchanged = ep.messages[steps[2] + 1]["content"]  # #W5490111 as read, unchanged by the helper
    call = _helper_call(ep, helper, {"order_id": "#W5490111"}, unchanged)
    ep.say("Both returns have been submitted. Anything else?", STOP)
    first = judge(_imported(ep, helper)).first_error
    assert (first == call) == (helper == "return_all_delivered_order_items"), first


@pytest.mark.parametrize("declines", [True, False], ids=["it says the switch falls short", "it only gives the cost"])
def test_the_message_that_turned_the_user_to_another_act_is_the_error(declines):
    """Part 6's retail 36 (retail test task 36): the gold switches the order's items to their cheapest options, which
    brings the total under the user's limit. The agent says the switch "would not bring the total below $1131", so
    the user asks to cancel the order instead, and the agent proposes and makes the cancellation: the error is the
    message that turned the user away, not the proposal the user's own request led to. A message that offers the
    switch turned nobody away."""
    ep = Script("retail", 36)
    ep.user("Hi, daikisanchez1479@example.com. Can you switch all items of my order to their cheapest options?")
    for action in ep.task.actions[1:9]:
        ep.call(action.name, **action.kwargs)
    word = (
        "Switching all the items to their cheapest options would not bring the total below $1131."
        if declines
        else "I can switch all the items of #W9348897 to their cheapest options. Shall I go ahead?"
    )
    said = ep.say(word, "Then just cancel the whole order so I can order again.")
    proposal = ep.say(
        "To cancel order #W9348897, please confirm the reason: 'no longer needed' or 'ordered by mistake'.",
        "Reason: ordered by mistake. Please proceed.",
    )
    ep.call("cancel_pending_order", order_id="#W9348897", reason="ordered by mistake")
    ep.say("Your order is cancelled. Anything else?", STOP)
    assert judge(ep.build()).first_error == (said if declines else proposal)


@pytest.mark.parametrize("remark", [True, False], ids=["a remark after the yes", "none"])
def test_what_the_agent_says_after_the_yes_before_acting_breaks_no_proposal(remark):
    """Part 6's retail 34 (retail test task 34): the agent offers to cancel only the office items of pending order
    #W1845024 (the policy cancels whole orders only), the user says yes, a modification fails, and after a remark of
    its own ("there was an issue; let me double-check") the agent cancels the whole order: the error is the offer the
    user said yes to; the remark nobody answered carries no plan."""
    ep = Script("retail", 34)
    ep.user("Hi, Noah Patel, 10108. Can I cancel just the home office items of my order and keep the hiking gear?")
    for action in ep.task.actions[:5]:
        ep.call(action.name, **action.kwargs)
    offer = ep.say(
        "I can cancel the Mechanical Keyboard, Headphones and Office Chair of #W1845024 and keep the rest. "
        "Shall I proceed with this cancellation?",
        "Yes, go ahead and cancel them.",
    )
    if remark:
        ep.say("It seems there was an issue. Let me double-check the details.")
    ep.call("cancel_pending_order", order_id="#W1845024", reason="no longer needed")
    ep.say("Your order has been cancelled. Anything else?", STOP)
    assert judge(ep.build()).first_error == offer


@pytest.mark.parametrize("claim", [True, False], ids=["says no order has one", "says nothing of it"])
def test_saying_no_order_holds_the_item_of_an_order_never_read_is_the_refusal(claim):
    """Part 6's retail 76 (retail test task 76): after reading one order only, the agent says "none of your orders
    include a skateboard"; the user drops the request, and the cancellation of #W1242543 (whose skateboard the agent
    never read) is never made: the claim is the error. Without it the change was dropped where the agent closed."""
    ep = Script("retail", 76)
    ep.user("Hi, Ava Nguyen, 94128. Cancel my fleece jacket order, and change my skateboard to maple, 34 inch.")
    ep.call("find_user_id_by_name_zip", first_name="Ava", last_name="Nguyen", zip="94128")
    ep.call("get_user_details", user_id="ava_nguyen_6646")
    ep.call("get_order_details", order_id="#W8367380")
    ep.say("I will cancel #W8367380 (ordered by mistake). Confirm (yes/no)?", "Yes.")
    ep.call("cancel_pending_order", order_id="#W8367380", reason="ordered by mistake")
    ep.call("get_order_details", order_id="#W8668939")
    said = ep.say(
        "It seems that none of your orders include a skateboard. Is it part of another order?"
        if claim
        else "Let me know which order it is, please.",
        "Oh, I must have been mistaken. Then no changes are needed.",
    )
    closing = ep.say("Alright. Is there anything else I can help you with?", STOP)
    assert judge(ep.build()).first_error == (said if claim else closing)


def test_gold_calls_on_separate_records_made_in_another_order_are_not_out_of_order():
    """Part 6's retail 113 (retail test task 113): the gold changes the watch in #W9810810, then the address and the
    laptop of #W3730488. The agent changes the address first and the watch after: calls on separate records
    commute, so neither is out of order; the error is where the laptop change was dropped."""
    ep = Script("retail", 113)
    ep.user("Hi, Yara Silva, 77159. Please send my laptop order to my NYC address, and change my watch's dial.")
    ep.call("find_user_id_by_name_zip", first_name="Yara", last_name="Silva", zip="77159")
    ep.call("get_user_details", user_id="yara_silva_7567")
    for order in ("#W9810810", "#W3730488"):
        ep.call("get_order_details", order_id=order)
    watch, address, _ = ep.task.actions
    ep.say("I will update the address of #W3730488 to 555 Highland Drive, New York. Confirm (yes/no)?", "Yes.")
    ep.call(address.name, **address.kwargs)
    ep.say("I will change the watch in #W9810810 to item 9949163720, paid by gift card. Confirm (yes/no)?", "Yes.")
    ep.call(watch.name, **watch.kwargs)
    closing = ep.say("Both are done. Is there anything else I can help you with?", STOP)
    assert judge(ep.build()).first_error == closing


def test_a_request_to_confirm_that_mentions_anything_else_closes_nothing():
    """Part 1's retail 41 shape: "Reply yes to confirm, or let me know if you need to add or change anything else
    before I continue" asks to confirm a plan; "Is there anything else I can help you with?" closes."""
    from castdata.label.replay import _closes

    ask = "Reply “yes” to confirm, or let me know if you need to add or change anything else before I continue."
    assert not _closes({"role": "assistant", "content": ask})
    assert _closes({"role": "assistant", "content": "All done. Is there anything else I can help you with?"})


def test_a_failed_try_redone_with_a_helper_tool_the_domain_lacks_is_charged_at_the_helper():
    """Part 6's retail 82 (retail test task 82): the return to the credit card fails (refunds go to the original
    method or a gift card); the user agrees to a gift card, and the agent returns "all items" with its own helper
    `return_all_delivered_order_items`, which changes nothing: the helper call is the error, not the failed try the
    conversation mended."""
    ep = Script("retail", 82)
    ep.user("Hi, Chen Silva, 46281. I got two tablets; return the pricier one to my credit card.")
    ep.call("find_user_id_by_name_zip", first_name="Chen", last_name="Silva", zip="46281")
    ep.call("get_user_details", user_id="chen_silva_7485")
    read = ep.call("get_order_details", order_id="#W9571698")
    ep.say("I will return the gold tablet of #W9571698 to your credit card. Confirm (yes/no)?", "Yes.")
    ep.call(
        "return_delivered_order_items",
        order_id="#W9571698",
        item_ids=["6065192424"],
        payment_method_id="credit_card_1565124",
    )
    ep.say("Refunds go to the original method, a gift card. Shall I use it?", "Fine, return everything then. Go ahead!")
    helper = "return_all_delivered_order_items"
    arguments = {"order_id": "#W9571698", "payment_method_id": "gift_card_7250692"}
    call = _helper_call(ep, helper, arguments, ep.messages[read + 1]["content"])
    ep.say("All items of #W9571698 are returned. Anything else?", STOP)
    assert judge(_imported(ep, helper)).first_error == call


def _helper_call(ep: Script, helper: str, arguments: dict, result: str) -> int:
    """A call of a tool of the source harness the domain lacks, with its recorded result (as an import keeps it)."""
    call = {"id": "c1", "type": "function", "function": {"name": helper, "arguments": arguments}}
    step = ep._add({"role": "assistant", "content": None, "tool_calls": [call]})
    ep._add({"role": "tool", "tool_call_id": "c1", "name": helper, "content": result})
    return step


def _imported(ep: Script, helper: str):
    """The episode as `castdata import` marks it: reproduced, with `helper` among the source's extra tools."""
    from castdata.records import ImportMark

    mark = ImportMark(
        format="tau-bench",
        file="f.json",
        sha256="0" * 64,
        index=0,
        source_task_id=ep.task.index,
        source_trial=0,
        source_reward=None,
        task_match="same",
        reproduced=True,
        extra_tools=[helper],
    )
    return ep.build().model_copy(update={"imported": mark})


@pytest.mark.parametrize("names_it", [True, False], ids=["names the new item", "names none"])
def test_saying_the_item_a_change_sets_is_unavailable_refuses_the_change(names_it):
    """Part 6's retail 113 (retail test task 113): asked to switch the laptop of pending #W3730488 to item 9844888101
    (listed as available), the agent says "the model with the item ID ending in 9844888101 is not available": a
    refusal of the change, though it names neither the order nor the laptop."""
    laptop = Action(
        name="modify_pending_order_items",
        kwargs={"order_id": "#W3730488", "item_ids": ["2913673670"], "new_item_ids": ["9844888101"]},
    )
    messages = _messages(("user", "Can I switch my laptop to the one ending in 9844888101?"))
    messages += _call("get_order_details", json.dumps({"order_id": "#W3730488", "status": "pending"}))
    claim = "The model with the item ID ending in 9844888101 is not available." if names_it else "It is not available."
    messages += _messages(("assistant", claim), ("user", "Oh, okay."))[1:]
    assert refusal(messages, len(messages), laptop) == (4 if names_it else None)


@pytest.mark.parametrize("tries_address", [True, False], ids=["the address change then fails", "it never tries it"])
def test_a_wrong_write_that_made_the_planned_next_write_fail_is_its_own_error(tries_address):
    """Parts 1 and 7's retail 72 (retail test task 72, all four annotators): the plan the user says yes to lists the
    address change and the item changes (the lamp too, which the gold leaves); the agent changes the items first,
    which locks the order, and the address change then fails. The error is the item change itself (wrong_sequence,
    the address change expected first), not the plan. Where the agent never tries the address, the plan that
    carried the wrong lamp change is."""
    ep = Script("retail", 72)
    ep.user("Hi, Ivan Khan, 28243. Please send my order to my Charlotte address and change my lamp and backpack.")
    ep.call("find_user_id_by_name_zip", first_name="Ivan", last_name="Khan", zip="28243")
    ep.call("get_user_details", user_id="ivan_khan_7475")
    ep.call("get_order_details", order_id="#W5270061")
    plan = ep.say(
        "For order #W5270061 I will: 1. update the shipping address to 159 Hickory Lane, Suite 995, Charlotte, NC "
        "28243; 2. change the desk lamp to black (item 5320792178) and the backpack to grey, medium, polyester "
        "(item 5917587651), paid with your gift card. Shall I proceed (yes/no)?",
        "Yes, please.",
    )
    items = ep.call(
        "modify_pending_order_items",
        order_id="#W5270061",
        item_ids=["7453605304", "2492465580"],
        new_item_ids=["5320792178", "5917587651"],
        payment_method_id="gift_card_1711656",
    )
    if tries_address:
        address = ep.task.actions[0]
        ep.call(address.name, **address.kwargs)
    ep.say("Your items are updated. Anything else?", STOP)
    judged = judge(ep.build())
    assert judged.first_error == (items if tries_address else plan)
    if tries_address:
        first = next(j for j in judged.judgements if j.step == items)
        assert "wrong_sequence" in first.categories
        expected = next(f.expected for f in first.findings if f.signal == "replay.blocked_later_write")
        assert expected == ep.task.actions[0]  # the write that should have come first, never the agent's own


@pytest.mark.parametrize("gave_zip", [True, False], ids=["name and zip given", "the zip withheld"])
def test_refusing_to_authenticate_by_the_name_and_zip_the_user_gave_is_the_error(gave_zip):
    """Part 7's retail 102 (retail test task 102, both annotators): the user gives its name and the zip code of its
    profile; the agent says it cannot look the user up without the email, and at the user's request transfers it, so
    no change is made. The refusal is the error (its correction looks the user up by name and zip). Where the user
    withheld the zip, demanding it refused nothing the policy allows."""
    ep = Script("retail", 102)
    ep.user("I need to update the delivery address of my order with two watches.")
    ep.say("Could you provide your email, or your name and zip code?", None)
    ep.user("My name's Noah Ito, and my zip is 98187." if gave_zip else "My name's Noah Ito. I won't give a zip.")
    refused = ep.say(
        "Unfortunately, I cannot access your account without your email address.",
        "Fine, just transfer me to a human then.",
    )
    ep.call("transfer_to_human_agents", summary="The user wants to change an order's address.")
    judged = judge(ep.build())
    assert (judged.first_error == refused) == gave_zip
    if gave_zip:
        first = next(j for j in judged.judgements if j.step == refused)
        expected = next(f.expected for f in first.findings if f.critical)
        assert expected == Action(
            name="find_user_id_by_name_zip", kwargs={"first_name": "Noah", "last_name": "Ito", "zip": "98187"}
        )


@pytest.mark.parametrize("answer", ["Yes, that works. Now my other item.", "Will that cost more?"])
def test_a_write_on_a_yes_to_proceed_with_both_carries_out_the_offer_accepted_before(answer):
    """Part 6's retail 58: the agent offers the wrong espresso machine (9 bar, 2L, manual, $2719.16), the user says
    yes and goes on to the laptop, and the message the user finally says yes to only asks to "proceed with the
    exchanges for both": the write carries out the accepted offer, which is where its error was said. An offer the
    user answered with a question was not accepted."""
    messages = _messages(
        ("user", "Change my tablet to a 10-inch one, and my other item too."),
        ("tool", json.dumps(VARIANTS)),
        ("assistant", "I found the 10-inch, 64GB, silver tablet for $903.95. Would you like to proceed with it?"),
        ("user", answer),
        ("assistant", "Would you like to proceed with both exchanges?"),
        ("user", "Yes, please proceed."),
    )
    messages.append(
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "modify", "arguments": {}}}]}
    )
    expected = 3 if "?" not in answer else 7
    assert said_first(messages, 7, ["2106335193"]) == expected
