"""A payment method nobody put to the user (castdata.label.rules: `rule.payment_unasked`), on hand-built episodes of
a real task, and how a text names a payment method (castdata.label.payments)."""

from __future__ import annotations

import pytest
from golden.script import STOP, Script

from castdata.label.hindsight import judge
from castdata.label.payments import names_a_method, names_payment, payment_ids
from castdata.records import Action


def test_a_payment_method_is_named_by_its_id_number_kind_or_as_the_original_one():
    assert names_payment("Refund to gift_card_8887175?", "gift_card_8887175")
    assert names_payment("The card 4421486 will be charged.", "credit_card_4421486")
    assert names_payment("I'll refund it to your gift card.", "gift_card_8887175")
    assert names_payment("It goes back to the original payment method.", "gift_card_8887175")
    assert names_payment("Your original payment method will be used for any refund.", "gift_card_8887175")
    assert not names_payment("Since your original payment was $2787, you get $2580 back.", "gift_card_8887175")
    assert not names_payment("Use my PayPal, please.", "gift_card_8887175")
    assert not names_payment("Order 188871750 is pending.", "gift_card_8887175")  # digits inside another number


def test_a_text_names_some_payment_method_by_id_kind_or_as_the_original_one():
    assert names_a_method("Could the refund go to my credit card instead?")
    assert names_a_method("Use gift_card_8887175.")
    assert names_a_method("Just put it back on the original payment method, please.")
    assert not names_a_method("Which flights are they, exactly?")
    assert not names_a_method("I have 0 other questions.")  # a lone digit names no method


def test_the_payment_ids_of_a_call_include_a_bookings_list_of_methods():
    booking = Action(
        name="book_reservation",
        kwargs={"payment_methods": [{"payment_id": "certificate_7473723", "amount": 150}], "cabin": "economy"},
    )
    assert payment_ids(booking) == ["certificate_7473723"]
    assert payment_ids(Action(name="cancel_reservation", kwargs={"reservation_id": "M05KNL"})) == []


@pytest.mark.parametrize(
    "request_text,answer,flagged",
    [
        ("I will change your flights to HAT110 and HAT172, a $2580 refund. Confirm (yes/no)?", "Yes, go ahead.", True),
        (
            "I will change your flights to HAT110 and HAT172 and refund $2580 to your gift card. Confirm (yes/no)?",
            "Yes, go ahead.",
            False,
        ),
        (
            "I will change your flights to HAT110 and HAT172; the $2580 goes back to the original payment method. Confirm?",
            "Yes, go ahead.",
            False,
        ),
        (
            "I will change your flights to HAT110 and HAT172, a $2580 refund. Confirm (yes/no)?",
            "Yes. Put the refund on my gift card.",
            False,
        ),
    ],
    ids=["never put to the user", "named in the request", "the original method", "named by the user"],
)
def test_a_change_that_refunds_to_a_method_nobody_put_to_the_user_is_flagged(request_text, answer, flagged):
    """Airline test task 7 (golden airline 7.2's shape): the flight change's refund goes to the user's gift card, the
    method the reservation was paid with. Choosing it without asking is a minor policy violation (the policy: "the
    agent should ask for the payment or refund method"); the episode still succeeds."""
    ep = Script("airline", 7)
    ep.user("Hi, I'm aarav_garcia_1177. I want my ATL to PHL trip a day later, cheapest economy.")
    ep.call("get_user_details", user_id="aarav_garcia_1177")
    ep.call("get_reservation_details", reservation_id="M05KNL")
    ep.say(request_text, answer)
    change = ep.task.actions[0]
    write = ep.call(change.name, **change.kwargs)
    ep.say("Done. Anything else?", STOP)
    judged = judge(ep.build())
    assert judged.success
    signals = [f.signal for j in judged.judgements if j.step == write for f in j.findings]
    assert ("rule.payment_unasked" in signals) == flagged


@pytest.mark.parametrize(
    "answer, flagged",
    [
        ("Which flights are they, exactly?", False),  # the user took the stated method in
        ("Could the refund go to my credit card instead?", True),  # it asked for another one
    ],
    ids=["answered", "another method asked for"],
)
def test_a_method_the_agent_told_the_user_of_before_the_yes_was_put_to_the_user(answer, flagged):
    """Part 7's retail 1 (both annotators: no violation): the agent says the exchange's difference goes to the card
    on file, the user asks about something else, and then says yes to the change: the card was put to the user. A
    user who asks for another method in answer did not take it in."""
    ep = Script("airline", 7)
    ep.user("Hi, I'm aarav_garcia_1177. I want my ATL to PHL trip a day later, cheapest economy.")
    ep.call("get_user_details", user_id="aarav_garcia_1177")
    ep.call("get_reservation_details", reservation_id="M05KNL")
    ep.say("I can move you to HAT110 and HAT172; the $2580 refund goes to your gift card.", answer)
    ep.say("They are HAT110 and HAT172, a day later. Shall I make the change (yes/no)?", "Yes, go ahead.")
    change = ep.task.actions[0]
    write = ep.call(change.name, **change.kwargs)
    ep.say("Done. Anything else?", STOP)
    judged = judge(ep.build())
    signals = [f.signal for j in judged.judgements if j.step == write for f in j.findings]
    assert ("rule.payment_unasked" in signals) == flagged
