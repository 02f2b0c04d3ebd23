"""Per-action policy rules (castdata.label.rules, castdata.label.policy_rules): an item swap the policy does not
allow, and an identifier the agent saw only inside an email address, on hand-built episodes of real tasks."""

from __future__ import annotations

import pytest
from golden.script import STOP, Script

from castdata.envs import load_domain
from castdata.label.hindsight import judge
from castdata.label.policy_rules import flight_change, item_swap, paid_bags
from castdata.label.rules import is_confirmation, ungrounded_ids
from castdata.records import Action


def test_an_item_swaps_for_one_new_item_of_the_same_product():
    retail = load_domain("retail")
    camera, cheaper_camera, lamp = "6117189161", "6700049080", "5320792178"  # retail test task 37's order
    assert item_swap(retail, [camera], [cheaper_camera]) == "allowed"
    assert item_swap(retail, [camera, "9851293632"], [cheaper_camera, "9851293632"]) == "allowed"  # one left as is
    assert item_swap(retail, [camera], []) == "forbidden"  # removing an item
    assert item_swap(retail, [camera], [lamp]) == "forbidden"  # another product
    assert item_swap(retail, [camera], ["0000000000"]) is None  # an unknown id: the tool's error, not the rule's
    assert item_swap(load_domain("airline"), [camera], []) is None  # no products


def test_removing_an_item_from_a_pending_order_is_a_policy_violation():
    """Retail test task 37 (golden retail 37.37's shape): to bring the total down, the agent first tries to remove
    the action camera with an empty list of new items, which the policy does not allow (the tool rejects it too),
    then makes the gold change, three items swapped for cheaper options of the same products: that one is allowed.
    The episode succeeds."""
    ep = Script("retail", 37)
    ep.user("Hi, Daiki Sanchez, daikisanchez1479@example.com. My order is over my card's limit; can you lower it?")
    *reads, gold = ep.task.actions
    for action in reads:
        ep.call(action.name, **action.kwargs)
    ep.say("The priciest item is the camera, 481.5. I can remove it from #W9348897. Confirm (yes/no)?", "Yes.")
    removal = ep.call(gold.name, **{**gold.kwargs, "item_ids": ["6117189161"], "new_item_ids": []})
    ep.say(f"I will swap three items for cheaper options instead: {gold.kwargs}. Confirm (yes/no)?", "Yes.")
    swap = ep.call(gold.name, **gold.kwargs)
    ep.say("Done. Anything else?", STOP)
    judged = judge(ep.build())
    assert judged.success

    def signals(step: int) -> list[str]:
        return [f.signal for j in judged.judgements if j.step == step for f in j.findings]

    assert "rule.swap_not_allowed" in signals(removal)
    assert "rule.swap_not_allowed" not in signals(swap)


def test_an_identifier_seen_only_inside_an_email_address_was_guessed():
    """Golden airline 24.0: the user gives only an email; the agent calls get_user_details with the email's local
    part as the user id. Shown as an id of its own, the same value is grounded."""
    lookup = Action(name="get_user_details", kwargs={"user_id": "yara_garcia_1905"})
    assert ungrounded_ids(lookup, "user: my email is yara_garcia_1905@gmail.com") == ["yara_garcia_1905"]
    assert ungrounded_ids(lookup, "user: my user id is yara_garcia_1905.") == []
    assert ungrounded_ids(lookup, 'tool: {"user_id": "yara_garcia_1905"}') == []
    order = Action(name="get_order_details", kwargs={"order_id": "#W9348897"})
    assert ungrounded_ids(order, "user: it is order W9348897") == []
    assert ungrounded_ids(order, 'tool: {"orders": ["#W9348897"]}') == []
    assert ungrounded_ids(order, "tool: #W93488971") == ["#W9348897"]  # inside a longer id


def test_a_reason_that_starts_with_no_is_no_refusal():
    assert is_confirmation("No longer needed. Yes, please cancel.")  # held-out retail 38.38
    assert is_confirmation("No problem, go ahead.", "Shall I proceed?")
    assert is_confirmation("Sure, that works.", "Shall I proceed?")
    assert not is_confirmation("I'm not sure, what are my options?", "Shall I proceed?")
    assert not is_confirmation("No, wait. Yes, I mean the other one.")


def test_everything_looks_good_is_a_yes_to_a_request_to_confirm():
    """Airline 32.2: "Everything looks good!" answers "Please confirm the details" with consent; said unasked, it is
    no yes."""
    assert is_confirmation("Everything looks good! Use the $500 certificate.", "Please confirm the details to proceed.")
    assert not is_confirmation("Everything looks good! Use the $500 certificate.")
    # retail 92.92: the user speaks of its own doing, not of the agent's returns
    assert not is_confirmation("Thanks. I\u2019ll go ahead and start preparing the items.", "Reply yes to confirm.")
    assert is_confirmation("Please go ahead.")


def test_asking_for_the_act_in_so_many_words_answers_a_request_to_confirm():
    """Part 6's retail 31: "No longer needed. Please cancel it." answers "Please confirm if you'd like to proceed with
    the cancellation" with consent; said unasked, or as a question, it is no yes."""
    request = "Please confirm if you'd like to proceed with the cancellation, and let me know the reason."
    assert is_confirmation("No longer needed. Please cancel it.", request)
    assert not is_confirmation("No longer needed. Please cancel it.")
    assert not is_confirmation("Don't cancel it, please cancel the other one.", request)


def test_a_retry_after_a_write_that_failed_is_covered_by_the_same_yes():
    """Held-out airline 26.2's shape (airline test task 26): after the user's yes, the upgrade fails on a payment id
    the agent made up; it looks the profile up and retries with the card's real id. The retry carries on the act the
    user confirmed; a second change on that yes would not."""
    ep = Script("airline", 26)
    ep.user("Hi, I'm aarav_ahmed_6699. Please upgrade M20IZO to business with my credit card ending in 7334.")
    *_, upgrade = ep.task.actions
    ep.call("get_reservation_details", reservation_id="M20IZO")
    ep.say("The upgrade costs $1194 on your card ending in 7334. Confirm (yes/no)?", "Yes, please.")
    guessed = ep.call(upgrade.name, **{**upgrade.kwargs, "payment_id": "credit_card_7334"})
    ep.call("get_user_details", user_id="aarav_ahmed_6699")
    retry = ep.call(upgrade.name, **upgrade.kwargs)
    bags = ep.add_bags("M20IZO", 2, 0, "credit_card_9074831")
    ep.say("Done. Anything else?", STOP)
    judged = judge(ep.build())

    def signals(step: int) -> list[str]:
        return [f.signal for j in judged.judgements if j.step == step for f in j.findings]

    assert ep.messages[guessed + 1]["content"].startswith("Error")
    assert "rule.no_confirmation" not in signals(retry)
    assert "rule.no_confirmation" in signals(bags)


def test_flight_changes_and_paid_bags_follow_the_airline_policy():
    """The airline policy's flight-change rule (basic economy never; else the same origin, destination and trip
    type) and its bag allowance (a gold member in economy: 3 free bags per passenger), on the real database."""
    airline = load_domain("airline")
    db = airline.new_database()
    round_trip = db["reservations"]["VA5SGQ"]  # DTW-LGA and back, economy
    flights = db["flights"]
    same = [{"flight_number": f["flight_number"], "date": f["date"]} for f in round_trip["flights"]]
    assert flight_change(airline, round_trip, flights, same) == "allowed"  # a cabin change keeps the flights
    to_jfk = [{"flight_number": "HAT169", "date": "2024-05-17"}, {"flight_number": "HAT033", "date": "2024-05-19"}]
    assert flight_change(airline, round_trip, flights, to_jfk) == "forbidden"  # another destination
    basic = db["reservations"]["FQ8APE"]  # basic economy, EWR-ORD
    other_day = [{"flight_number": "HAT056", "date": "2024-05-26"}, {"flight_number": "HAT138", "date": "2024-05-26"}]
    assert flight_change(airline, basic, flights, other_day) == "forbidden"
    assert flight_change(airline, {**basic, "cabin": "economy"}, flights, other_day) == "allowed"
    assert paid_bags(airline, db, "yara_garcia_1905", "economy", 1, 2) == 0  # gold member
    assert paid_bags(airline, db, "yara_garcia_1905", "economy", 1, 5) == 2
    assert paid_bags(airline, db, "no_such_user", "economy", 1, 2) is None
    assert flight_change(load_domain("retail"), round_trip, flights, to_jfk) is None


def _signals(judged, step: int) -> list[str]:
    return [f.signal for j in judged.judgements if j.step == step for f in j.findings]


def test_a_flight_change_to_another_destination_is_a_policy_violation_and_a_cabin_change_is_not():
    """Airline test task 19: the user asks to move the DTW-LGA round trip VA5SGQ onto DTW-JFK flights. The agent
    first upgrades the cabin on the same flights (allowed, even for basic economy), then changes the flights to
    JFK (held-out airline 19.0's act, made at the user's request): the policy forbids a change of destination."""
    ep = Script("airline", 19)
    ep.user("Hi, I'm raj_brown_5782. Upgrade VA5SGQ to business, then move it to DTW-JFK nonstop flights.")
    ep.call("get_reservation_details", reservation_id="VA5SGQ")
    ep.say("I will upgrade VA5SGQ to business on its flights. Confirm (yes/no)?", "Yes.")
    same = [("HAT035", "2024-05-17"), ("HAT066", "2024-05-17"), ("HAT002", "2024-05-19"), ("HAT106", "2024-05-20")]
    upgrade = ep.change_flights("VA5SGQ", "business", same, "credit_card_8003957")
    ep.say("I will change VA5SGQ to HAT169 (May 17) and HAT033 (May 19). Confirm (yes/no)?", "Yes.")
    move = ep.change_flights(
        "VA5SGQ", "business", [("HAT169", "2024-05-17"), ("HAT033", "2024-05-19")], "credit_card_8003957"
    )
    ep.say("Done. Anything else?", STOP)
    judged = judge(ep.build())
    assert "rule.change_not_allowed" in _signals(judged, move)
    assert "rule.change_not_allowed" not in _signals(judged, upgrade)


def test_checked_bags_paid_beyond_the_allowance_are_miscounted():
    """Airline test task 23: yara_garcia_1905 is a gold member in economy (3 free bags): adding 2 bags with one paid
    miscounts them; adding them free follows the allowance."""
    ep = Script("airline", 23)
    ep.user("Hi, I'm yara_garcia_1905. Please add 2 checked bags to HXDUBJ, then make it 3.")
    ep.call("get_reservation_details", reservation_id="HXDUBJ")
    steps = []
    for total, nonfree in ((2, 1), (3, 0)):
        ep.say(f"I will set HXDUBJ to {total} checked bags, {nonfree} paid. Confirm (yes/no)?", "Yes.")
        steps.append(ep.add_bags("HXDUBJ", total, nonfree, "gift_card_6941833"))
    ep.say("Done. Anything else?", STOP)
    judged = judge(ep.build())
    assert "rule.bags_miscounted" in _signals(judged, steps[0])
    assert "rule.bags_miscounted" not in _signals(judged, steps[1])


def test_asking_the_agent_to_confirm_is_no_yes():
    """Part 5's retail 59: "Could you confirm the change and let me know the total?" asks the agent to; "I confirm"
    says yes."""
    assert not is_confirmation("Now update the address of #W8268610. Could you confirm the change?", "Anything else?")
    assert not is_confirmation("Can you confirm it will arrive by Friday?")
    assert is_confirmation("I confirm. Reason: ordered by mistake.")


@pytest.mark.parametrize(
    "answer, flagged",
    [
        ('The reason is "no longer needed." Thank you!', False),  # the detail asked for, given
        ("Actually, wait. No longer needed, but let me think first.", True),  # taken back
        ("Which reasons can I choose from?", True),  # no detail the write uses
    ],
)
def test_a_yes_stays_given_through_one_question_for_a_detail_the_user_gives(answer, flagged):
    """Part 4's retail 69 (both annotators: no violation): the user says "yes, I'd like to cancel the order", the agent
    lists the order id and asks for the reason, the user gives it, and the agent cancels: the yes covers the
    cancellation the reason completes. An answer that takes the yes back, or gives no detail the write uses, is none."""
    ep = Script("retail", 69)
    ep.user("Hi, Emma Smith, emma.smith@gmail.com. My laptop order is not delivered; please cancel it.")
    ep.call("find_user_id_by_email", email="emma.smith@gmail.com")
    ep.call("get_order_details", order_id="#W2417020")
    ep.say("Order #W2417020 is pending. Would you like to cancel it?", "Yes, I'd like to go ahead and cancel it.")
    ep.say("To cancel #W2417020, please confirm the reason: 'no longer needed' or 'ordered by mistake'.", answer)
    cancel = ep.call("cancel_pending_order", order_id="#W2417020", reason="no longer needed")
    ep.say("Your order is cancelled. Anything else?", STOP)
    judged = judge(ep.build())
    signals = [f.signal for j in judged.judgements if j.step == cancel for f in j.findings]
    assert ("rule.no_confirmation" in signals) == flagged
