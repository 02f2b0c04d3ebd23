"""The user's or the task's fault (castdata.label.fault), on hand-built episodes of real tasks: a user that
withholds the user id its instruction gives, a gold payment method the instruction never speaks of, a gold
certificate the user never asked for, a record beyond the task the user asked for, an item option the user never
spoke of; and the compensation rule."""

from __future__ import annotations

import pytest
from golden.script import STOP, Script

from castdata.label.hindsight import judge


def _faulted(ep: Script, fault: str) -> bool:
    """Judge a failed episode: whether it is `fault`'s, no agent action blamed (otherwise an agent action is)."""
    judged = judge(ep.build())
    assert not judged.success
    assert (judged.fault is not None) == (judged.first_error is None)
    return judged.fault == fault


def _withholding(gives_it_later: bool, answer: str = "I don't have my user ID with me.") -> Script:
    ep = Script("airline", 3)  # the instruction gives the user id sofia_kim_7287
    ep.user("Hi! I'd like to change the return of my Houston to Denver trip.")
    ep.say("To modify your reservation I need your user ID. Could you provide it?", answer)
    if gives_it_later:
        ep.say("I need the user ID to proceed.", "Oh, found it: sofia_kim_7287.")
    ep.say("Unfortunately, I need the user ID to proceed with any change.", STOP)
    return ep


def _paid_with_paypal(named_in_the_proposal: bool, paypal: str = "paypal_5914760") -> Script:
    ep = Script("retail", 74)  # the instruction names no payment method; the gold pays with credit_card_4466831
    ep.user("Hi, I want to exchange my laptop for one with an i9 CPU, and cancel my other pending order.")
    ep.say("Could you give me your name and zip code?", "Lei Li, 85033.")
    ep.call("find_user_id_by_name_zip", first_name="Lei", last_name="Li", zip="85033")
    ep.call("get_user_details", user_id="lei_li_6575")
    for action in ep.task.actions:
        kwargs = dict(action.kwargs)
        if action.name == "modify_pending_order_items":
            kwargs["payment_method_id"] = paypal
        said = f" with {kwargs}" if named_in_the_proposal else ""
        ep.say(f"I will {action.name.replace('_', ' ')}{said}. Do you confirm (yes/no)?", "Yes, please.")
        ep.call(action.name, **kwargs)
    ep.say("Done. Anything else?", STOP)
    return ep


def _delay_complaint(asks_for_compensation: bool, transfers: bool = False) -> Script:
    """Airline test task 46: the gold solution sends a $50 certificate for a delayed flight; the policy lets the agent
    offer one only when the user explicitly asks for compensation. The agent closes, or (airline 45.2's shape)
    transfers the user to a human before the user could ask."""
    ep = Script("airline", 46)
    ask = " Can I get some compensation for it?" if asks_for_compensation else ""
    ep.user(f"Hi, I'm noah_muller_9847. I'm frustrated with the delayed flight in my last reservation.{ask}")
    for action in ep.task.actions[:3]:
        ep.call(action.name, **action.kwargs)
    if transfers:
        ep.call("transfer_to_human_agents", summary="The user is frustrated about a delayed flight on 4OG6T3.")
    else:
        ep.say("I'm sorry about the delay on 4OG6T3. Is there anything else I can help you with?", STOP)
    return ep


def _upgrade_paid_by_card(reads_the_profile: bool) -> Script:
    """Airline test task 26 (held-out airline 26.3's shape): the user pays "with my credit card ending in 7334". The
    agent charges the card the reservation was paid with, one it never saw the last digits of (its user has two
    cards); read from the profile, that card is shown to end in 5018, not 7334, and the agent made the mistake."""
    ep = Script("airline", 26)
    ep.user("Hi, I'm aarav_ahmed_6699. Please upgrade M20IZO to business, with my credit card ending in 7334.")
    cancel, *reads, upgrade = ep.task.actions
    if reads_the_profile:
        ep.call("get_user_details", user_id="aarav_ahmed_6699")
    for action in reads:
        ep.call(action.name, **action.kwargs)
    ep.say("The upgrade costs $1194 on your card ending in 7334. Confirm (yes/no)?", "Yes.")
    ep.call(upgrade.name, **{**upgrade.kwargs, "payment_id": "credit_card_4959530"})
    ep.say("Done. Anything else?", "Please also cancel NQNU5R, my plans changed.")
    ep.say("I will cancel NQNU5R. Confirm (yes/no)?", "Yes.")
    ep.call(cancel.name, **cancel.kwargs)
    ep.say("Done. Anything else?", STOP)
    return ep


def _extra_cancellation(offered_by_the_agent: bool) -> Script:
    """Retail test task 90: the gold cancels #W9284598; then the user (or the agent, offering it) brings up another
    pending order, #W8661412, which no gold action touches, and the agent cancels it too."""
    ep = Script("retail", 90)
    ep.user("Hi, I'm Emma Kovacs, emma.kovacs2974@example.com. I want to check the camera I just bought.")
    ep.gold()
    if offered_by_the_agent:
        ep.say("Done. Your order #W8661412 is pending too: shall I cancel it as well?", "Sure, cancel #W8661412 too.")
    else:
        ep.say("Done. Anything else?", "Actually, I'd also like to cancel my order #W8661412.")
    ep.call("get_order_details", order_id="#W8661412")
    ep.say('I will cancel #W8661412 with reason "no longer needed". Confirm (yes/no)?', "Yes, please proceed.")
    ep.call("cancel_pending_order", order_id="#W8661412", reason="no longer needed")
    ep.say("Done. Anything else?", STOP)
    return ep


def _extra_cancellation_first() -> Script:
    """Retail test task 90: the user first asks to cancel #W8661412, which no gold action touches (its request, done as
    asked), then the gold cancellation, which the agent makes with another reason than the user gave."""
    ep = Script("retail", 90)
    ep.user("Hi, I'm Emma Kovacs, emma.kovacs2974@example.com. Please cancel my order #W8661412.")
    ep.call("find_user_id_by_email", email="emma.kovacs2974@example.com")
    ep.call("get_order_details", order_id="#W8661412")
    ep.say('I will cancel #W8661412 with reason "ordered by mistake". Confirm (yes/no)?', "Yes, please proceed.")
    ep.call("cancel_pending_order", order_id="#W8661412", reason="ordered by mistake")
    ep.say("Done. Anything else?", "Also cancel #W9284598: I ordered it by mistake.")
    ep.say('I will cancel #W9284598 with reason "no longer needed". Confirm (yes/no)?', "Yes.")
    ep.call("cancel_pending_order", order_id="#W9284598", reason="no longer needed")
    ep.say("Done. Anything else?", STOP)
    return ep


def _bottle_swap(says_red: bool) -> Script:
    """Retail test task 79: the gold swaps the 500ml bottle for the red stainless 1000ml one (the instruction's "other
    bottle you just placed"); the user asks only for 1000ml, and the agent offers the black one, described."""
    ep = Script("retail", 79)
    red = " The red one, please." if says_red else ""
    ep.user(f"Hi, Emma Kovacs, 32190. I'd like my 500ml water bottle swapped for a 1000ml one.{red}")
    ep.call("find_user_id_by_name_zip", first_name="Emma", last_name="Kovacs", zip="32190")
    ep.call("get_order_details", order_id="#W8661412")
    ep.call("get_product_details", product_id="8310926033")
    ep.say("I can swap it for the 1000ml stainless steel bottle in black ($46.51). Confirm (yes/no)?", "Yes.")
    ep.call(
        "modify_pending_order_items",
        order_id="#W8661412",
        item_ids=["3453331371"],
        new_item_ids=["7661609223"],
        payment_method_id="credit_card_7239357",
    )
    ep.say("Done. Anything else?", STOP)
    return ep


def _partial_return(listed: str, asked: str) -> Script:
    """Retail test task 55 (part 5's retail 55 shape): the gold returns all four items of #W4597054; the agent lists
    the order's items (`listed`), the user names the ones to return (`asked`), and the agent returns three."""
    ep = Script("retail", 55)
    ep.user("Hi, I'm Amelia, silva7872@example.com. Money is tight: I want to cancel or return all I can.")
    for action in ep.task.actions[:9]:
        ep.call(action.name, **action.kwargs)
    ep.say(
        f"#W4597054 is delivered: {listed}. #W7773202 (Hiking Boots) is delivered; #W4836353 and #W7342738 are "
        "pending. What would you like to do?",
        f"Cancel both pending orders. Return {asked} from #W4597054, and the Hiking Boots.",
    )
    ep.say("I will cancel #W4836353 and #W7342738 (no longer needed). Confirm (yes/no)?", "Yes.")
    for action in ep.task.actions[9:11]:
        ep.call(action.name, **action.kwargs)
    first, boots = ep.task.actions[11:]
    ep.say(f"I will return {THREE} of #W4597054 and the boots to your gift card. Confirm (yes/no)?", "Yes.")
    ep.call(first.name, **{**first.kwargs, "item_ids": first.kwargs["item_ids"][:3]})
    ep.call(boots.name, **boots.kwargs)
    ep.say("Done. Anything else?", STOP)
    return ep


def _cancel_reason(asked: str) -> Script:
    """Retail test task 69 (part 5's retail 38 shape): the gold cancels #W2417020 as "no longer needed"; the agent's
    request (`asked`) leads to the user's "ordered by mistake", and the order is cancelled with it."""
    ep = Script("retail", 69)
    ep.user("Hi, I'm Emma Smith, zip 10192. Please cancel my laptop order.")
    for action in ep.task.actions[:3]:
        ep.call(action.name, **action.kwargs)
    ep.say(f"I will cancel #W2417020. {asked} Confirm (yes/no)?", "Yes. Reason: ordered by mistake.")
    ep.call("cancel_pending_order", order_id="#W2417020", reason="ordered by mistake")
    ep.say("Done. Anything else?", STOP)
    return ep


def _camera_unsaid(also: str = "") -> Script:
    """Retail test task 100 (part 5's retail 100 shape): the gold exchanges the bike and puzzle, and the camera in
    #W4689314; the agent reads both orders, the user asks for the bike and the puzzle (and says `also`), and the
    agent makes that exchange and closes."""
    ep = Script("retail", 100)
    ep.user(f"Hi, Sofia Li, 78260. I'd like to exchange my bike and my jigsaw puzzle.{also}")
    ep.call("find_user_id_by_name_zip", first_name="Sofia", last_name="Li", zip="78260")
    for order in ("#W4689314", "#W3916020"):
        ep.call("get_order_details", order_id=order)
    bike = ep.task.actions[1]
    ep.say("I will exchange the bicycle and puzzle in #W3916020, paid by Visa. Confirm (yes/no)?", "Yes.")
    ep.call(bike.name, **bike.kwargs)
    ep.say("Done. Anything else?", STOP)
    return ep


ALL_FOUR = "Air Purifier, Smart Watch, Coffee Maker and Water Bottle"
THREE = "the Air Purifier, Smart Watch and Coffee Maker"


@pytest.mark.parametrize(
    ("episode", "fault"),
    [
        (lambda: _withholding(gives_it_later=False), "fault.user_withheld_id"),
        (lambda: _paid_with_paypal(named_in_the_proposal=True), "fault.gold_payment_unspecified"),
        (
            lambda: _withholding(gives_it_later=False, answer="Sorry, I don't have that with me."),
            "fault.user_withheld_id",
        ),
        (lambda: _delay_complaint(asks_for_compensation=False), "fault.gold_against_policy"),
        (lambda: _extra_cancellation(offered_by_the_agent=False), "fault.user_asked"),
        (lambda: _bottle_swap(says_red=False), "fault.user_withheld_detail"),
        (lambda: _partial_return(ALL_FOUR, THREE), "fault.user_left_out_items"),
        (
            lambda: _cancel_reason('Is the reason "no longer needed" or "ordered by mistake"?'),
            "fault.user_chose_option",
        ),
        (lambda: _camera_unsaid(), "fault.user_never_asked"),
    ],
    ids=[
        "user id withheld",
        "payment the instruction never names",
        "user id withheld, asked for it: 'I don't have that'",
        "a gold certificate the user never asked for",
        "a record beyond the task the user named and asked for",
        "an option the user never spoke of picks the gold's item",
        "the user named three of the four items the agent listed",
        "the user chose the other of the two reasons the agent set out",
        "the user never spoke of the camera the gold exchanges",
    ],
)
def test_the_failure_is_the_users_or_the_tasks(episode, fault):
    judged = judge(episode().build())
    assert not judged.success
    assert judged.fault == fault and judged.first_error is None


@pytest.mark.parametrize(
    "episode",
    [
        lambda: _withholding(gives_it_later=True),
        lambda: _paid_with_paypal(named_in_the_proposal=False),
        lambda: _delay_complaint(asks_for_compensation=True),
        lambda: _extra_cancellation(offered_by_the_agent=True),
        lambda: _paid_with_paypal(named_in_the_proposal=True, paypal="paypal_5914761"),
        lambda: _bottle_swap(says_red=True),
        lambda: _delay_complaint(asks_for_compensation=False, transfers=True),
        lambda: _upgrade_paid_by_card(reads_the_profile=False),
        lambda: _upgrade_paid_by_card(reads_the_profile=True),
        lambda: _partial_return("Air Purifier, Smart Watch and Coffee Maker", THREE),
        lambda: _partial_return(ALL_FOUR, "the " + ALL_FOUR),
        lambda: _cancel_reason('I will put the reason as "ordered by mistake".'),
        lambda: _camera_unsaid(" And my camera, to a lower resolution."),
        lambda: _camera_unsaid(" And anything else in my orders that can be swapped."),
    ],
    ids=[
        "the user gave its id, the agent did nothing",
        "a payment the agent never named",
        "compensation asked for, never sent",
        "a record the agent offered",
        "a payment id the agent guessed",
        "the user asked for the gold's color, the agent wrote another",
        "a transfer cut the conversation short before the user could ask",
        "a card named by its digits, charged to one never shown with them",
        "a card named by its digits, charged to one shown with others",
        "the agent never named the fourth item",
        "the user asked for all four",
        "the agent put the reason, never setting out the choice",
        "the user asked for the camera too",
        "the user asked for anything else too",
    ],
)
def test_otherwise_an_agent_action_is_to_blame(episode):
    judged = judge(episode().build())
    assert judged.fault is None and judged.first_error is not None


def test_a_write_the_user_asked_for_is_not_blamed_when_an_agent_error_comes_after_it():
    ep = _extra_cancellation_first()
    judged = judge(ep.build())
    extra = next(
        i for i, m in enumerate(ep.messages) if "#W8661412" in str(m.get("tool_calls") or "") and "cancel" in str(m)
    )
    assert judged.fault is None and judged.first_error > extra


@pytest.mark.parametrize("asks", [False, True], ids=["unasked: a policy violation", "asked: valid"])
def test_a_certificate_sent_without_the_user_asking_is_flagged_even_when_the_episode_succeeds(asks):
    ep = _delay_complaint(asks_for_compensation=asks)
    ep.messages, ep.meta = ep.messages[:-2], ep.meta[:-2]  # before the closing turns
    certificate = ep.task.actions[-1]
    ep.say(f"I can offer a ${certificate.kwargs['amount']} certificate. Confirm (yes/no)?", "Yes, please.")
    step = ep.call(certificate.name, **certificate.kwargs)
    ep.say("Done. Anything else?", STOP)
    judged = judge(ep.build())
    assert judged.success
    signals = [f.signal for j in judged.judgements if j.step == step for f in j.findings]
    assert ("rule.unasked_compensation" in signals) == (not asks)


@pytest.mark.parametrize("cancels_first", [False, True], ids=["the booking alone", "and a forbidden cancellation"])
def test_a_gold_write_no_agent_could_make_is_the_tasks_fault_whatever_else_went_wrong(cancels_first):
    """Airline test task 25: the gold booking gives the passenger a birth date no record holds (1985-04-04; the
    profile says 1981-05-26), so no agent could win the episode: it is the task's fault, and no action is blamed,
    even when the agent also cancelled M20IZO, which the policy forbids (part 3's 25.2: both annotators)."""
    ep = Script("airline", 25)
    ep.user("Hi, I'm aarav_ahmed_6699. Cancel my May 22 JFK to MCO flight, then book JFK to SFO on May 24.")
    ep.call("get_user_details", user_id="aarav_ahmed_6699")
    if cancels_first:
        ep.call("get_reservation_details", reservation_id="M20IZO")
        ep.say("I will cancel M20IZO. Confirm (yes/no)?", "Yes.")
        ep.call("cancel_reservation", reservation_id="M20IZO")
    (booking,) = ep.task.actions
    passenger = {"first_name": "Aarav", "last_name": "Ahmed", "dob": "1981-05-26"}
    ep.say("I will book HAT069 and HAT258 on May 24 for Aarav Ahmed, born 1981-05-26, $290. Confirm (yes/no)?", "Yes.")
    ep.call(booking.name, **{**booking.kwargs, "passengers": [passenger]})
    ep.say("Done. Anything else?", STOP)
    judged = judge(ep.build())
    assert not judged.success
    assert (judged.fault, judged.first_error) == ("fault.gold_unreachable", None)


def test_a_gold_write_every_value_of_which_a_record_holds_is_reachable():
    """Airline test task 3's booking-free gold (a flight change and a bag): every value is in the database or the
    conversation, so an agent that failed it is blamed."""
    ep = Script("airline", 3)
    ep.user("Hi, I'm sofia_kim_7287. Change my May 27 return on OBUT9V to the fastest flights and add one bag.")
    ep.call("get_reservation_details", reservation_id="OBUT9V")
    closing = ep.say("I cannot change these flights. Anything else?", STOP)
    judged = judge(ep.build())
    assert (judged.fault, judged.first_error) == (None, closing)


@pytest.mark.parametrize("said_none_left", [True, False], ids=["the agent said none is available", "it never did"])
def test_a_change_the_user_asked_for_after_its_instructions_condition_failed_is_the_users(said_none_left):
    """Airline test task 27 (part 1's 27.0, part 2's 27.3): the instruction wants M20IZO changed "to a nonstop flight
    if available", and the gold leaves it as it is. The agent says no nonstop flight is available; the user asks for
    the earliest one-stop instead, and the agent makes that change: the user asked beyond its instruction. An agent
    that offers the one-stop without saying the nonstop one is not there made the change on its own."""
    ep = Script("airline", 27)
    ep.user("Hi, I'm aarav_ahmed_6699. Cancel NQNU5R, my plans changed, and change M20IZO to a nonstop flight.")
    cancel = ep.task.actions[0]
    ep.call("get_reservation_details", reservation_id="NQNU5R")
    ep.say("I will cancel NQNU5R. Confirm (yes/no)?", "Yes.")
    ep.call(cancel.name, **cancel.kwargs)
    ep.call("get_reservation_details", reservation_id="M20IZO")
    ep.call("search_direct_flight", origin="JFK", destination="MCO", date="2024-05-22")
    if said_none_left:
        ep.say(
            "Unfortunately, there are no nonstop flights from JFK to MCO that day.",
            "Change it to the earliest one-stop then.",
        )
        ep.say("The earliest is HAT057 + HAT146, $234 more. Confirm (yes/no)?", "Yes.")
    else:
        ep.say(
            "The earliest flights that day are HAT057 + HAT146, $234 more. Shall I change M20IZO?", "Yes, change it."
        )
    ep.change_flights("M20IZO", "economy", [("HAT057", "2024-05-22"), ("HAT146", "2024-05-22")], "credit_card_9074831")
    ep.say("Done. Anything else?", STOP)
    assert _faulted(ep, "fault.user_asked") == said_none_left


@pytest.mark.parametrize("moves_it", [False, True], ids=["refused the new destination", "moved it, on a wrong date"])
def test_a_gold_write_the_policy_forbids_is_the_tasks_fault_unless_the_agent_broke_the_rule_too(moves_it):
    """Airline test task 19 (part 3's 19.2, both annotators): the gold moves the DTW-LGA round trip VA5SGQ onto
    DTW-JFK flights, a change of destination the policy forbids, so an agent that keeps to the policy cannot win. An
    agent that made such a change itself (part 1's 19.0: to JFK, with the return on the wrong date) broke the rule
    too, and its own error is blamed."""
    ep = Script("airline", 19)
    ep.user("Hi, I'm raj_brown_5782. Change VA5SGQ to nonstop flights from DTW to JFK and back, same dates.")
    ep.call("get_reservation_details", reservation_id="VA5SGQ")
    if moves_it:
        ep.say("I will change VA5SGQ to HAT169 (May 17) and HAT212 (May 20). Confirm (yes/no)?", "Yes.")
        legs = [("HAT169", "2024-05-17"), ("HAT212", "2024-05-20")]
        ep.change_flights("VA5SGQ", "economy", legs, "credit_card_8003957")
    ep.say("A flight change cannot change the destination of a reservation. Anything else?", STOP)
    assert _faulted(ep, "fault.gold_against_policy") != moves_it


@pytest.mark.parametrize("nonfree", [0, 1], ids=["added free, as the allowance says", "one charged"])
def test_checked_bags_the_gold_charges_a_gold_member_for_are_the_tasks_fault(nonfree):
    """Airline test task 23 (parts 2 and 3, every annotator): the gold adds 2 bags to HXDUBJ and charges both, but
    its user is a gold member in economy, 3 bags free. An agent that adds them free kept to the policy, and cannot
    win; one that charged a bag broke the allowance itself and is blamed."""
    ep = Script("airline", 23)
    ep.user("Hi, I'm yara_garcia_1905. Please add 2 checked bags to my reservation HXDUBJ.")
    ep.call("get_user_details", user_id="yara_garcia_1905")
    ep.call("get_reservation_details", reservation_id="HXDUBJ")
    ep.say(f"I will add 2 checked bags to HXDUBJ, {nonfree} paid. Confirm (yes/no)?", "Yes.")
    ep.add_bags("HXDUBJ", 2, nonfree, "gift_card_6941833")
    ep.say("Done. Anything else?", STOP)
    assert _faulted(ep, "fault.gold_against_policy") == (not nonfree)


@pytest.mark.parametrize("by_balance", [True, False], ids=["the certificate for $150", "a certificate"])
def test_a_certificate_the_user_named_by_its_balance_is_the_users_choice(by_balance):
    """Airline test task 32 (part 3's 32.3, both annotators): the instruction says nothing of how to pay, and the
    gold pays the $348 booking with the $500 certificate. The user asks to use "the travel certificate for $150"
    and the card ending in 7238 for the rest, and the agent does: the user chose that certificate by its balance
    (it holds two). "A certificate" names neither, and the agent's pick is its own."""
    ep = Script("airline", 32)
    ep.user("Hi, I'm sophia_silva_7557. Book ORD to PHL on May 26, economy, for me and Kevin Smith (2001-04-12).")
    ep.call("get_user_details", user_id="sophia_silva_7557")
    (booking,) = [action for action in ep.task.actions if action.name == "book_reservation"]
    which = "the travel certificate for $150" if by_balance else "a certificate"
    ep.say("HAT271 costs $348 for two. How would you like to pay?", f"Use {which} and my card ending in 7238.")
    ep.say("I will book HAT271 for $348: $150 certificate, $198 card ending 7238. Confirm (yes/no)?", "Yes.")
    split = [{"payment_id": "certificate_3887113", "amount": 150}, {"payment_id": "credit_card_4196779", "amount": 198}]
    ep.call(booking.name, **{**booking.kwargs, "payment_methods": split})
    ep.say("Booked. Anything else?", STOP)
    assert _faulted(ep, "fault.user_chose_payment") == by_balance


@pytest.mark.parametrize("offered_all", [True, False], ids=["offered for all three", "offered for one, others listed"])
def test_a_change_the_user_turned_down_from_an_offer_for_several_records_is_the_users(offered_all):
    """Airline test task 33 (part 3's 33.3, both annotators): the instruction wants every short reservation upgraded
    "wherever possible". The agent cancels S61CZX as the gold does and offers business upgrades for NM1VX1, KC18K6
    and H8Q05L; the user asks for H8Q05L only, so the other two gold upgrades are the user's choice. A message that
    only lists the reservations and offers the upgrade for H8Q05L alone (part 2's 30.2 shape) left the others out
    itself."""
    ep = Script("airline", 33)
    ep.user("Hi, I'm sophia_silva_7557. Cancel my future trips with flights over 3 hours, upgrade the others.")
    reads = [a for a in ep.task.actions if a.name.startswith("get_")]
    for action in reads:
        ep.call(action.name, **action.kwargs)
    ep.say("I will cancel S61CZX. Confirm (yes/no)?", "Yes.")
    ep.call("cancel_reservation", reservation_id="S61CZX")
    if offered_all:
        listing = (
            "Here are the options for upgrading to business class:\n\n1. NM1VX1: $637\n2. KC18K6: $846\n"
            "3. H8Q05L: $237\n\nWhich would you like to upgrade?"
        )
    else:
        listing = (
            "Your reservations:\n\n1. NM1VX1\n2. KC18K6\n3. H8Q05L\n\n"
            "Would you like to upgrade H8Q05L to business for $237?"
        )
    ep.say(listing, "Please upgrade H8Q05L to business.")
    ep.say("I will upgrade H8Q05L to business for $237. Confirm (yes/no)?", "Yes.")
    ep.change_flights("H8Q05L", "business", [("HAT268", "2024-05-24")], "credit_card_4196779")
    ep.say("Done. Anything else?", STOP)
    assert _faulted(ep, "fault.user_declined") == offered_all


@pytest.mark.parametrize(
    "answer, users",
    [
        ("Actually, no need for now. I'll think it over and come back later.", True),
        ("Hmm, I'd rather keep it for now, thanks.", True),
        ("Yes, please go ahead.", False),  # a yes: the agent then left the change undone
    ],
    ids=["put off", "turned down", "said yes"],
)
def test_a_change_the_user_turned_down_when_offered_it_is_the_users(answer, users):
    """Part 3's retail 55 (retail test task 55, both annotators): the agent sets out the gold change itself, its
    record and its act, and asks to go ahead; the simulated user puts it off ("is it okay if I reach out again?") and
    never asks for it again: the change left undone is the user's choice. After a yes, the agent is to blame."""
    ep = Script("retail", 77)  # the gold exchanges the woody 30ml perfume for the woody 100ml one
    ep.user("Hi, Ivan Johnson, 94183. I love my perfume and want the largest size you have.")
    ep.call("find_user_id_by_name_zip", first_name="Ivan", last_name="Johnson", zip="94183")
    ep.call("get_user_details", user_id="ivan_johnson_6036")
    ep.call("get_order_details", order_id="#W1671835")
    ep.call("get_product_details", product_id="6858788497")
    ep.say(
        "I can exchange the perfume in order #W1671835 for the woody 100ml one (item 3399869890), with the "
        "difference refunded to your PayPal. Would you like me to proceed?",
        answer,
    )
    ep.say("Alright. Is there anything else I can help you with?", STOP)
    assert _faulted(ep, "fault.user_declined") == users


@pytest.mark.parametrize(
    "asked",
    [
        "To proceed with your refund for the damaged bicycle, could you please confirm if it was part of order "
        "#W3916020?",
        "The bicycle of order #W3916020 is not available for a refund. I can help you look up your refund options; "
        "would you like me to?",
    ],
    ids=["a question about a fact", "a refusal"],
)
def test_a_question_about_a_fact_or_a_refusal_offers_no_change_to_turn_down(asked):
    """Part 4's retail 53: "to proceed with your refund for the bicycle, could you confirm if it was part of this
    order?" asks about a fact, and part 7's retail 113 refused the change before offering other help; the user's
    answer (no yes) turns down nothing: the change left undone stays the agent's."""
    ep = Script("retail", 53)  # the gold returns the bicycle of #W3916020 to the credit card
    ep.user("Hi, Sofia Li, 78260. My bicycle arrived damaged and I want a refund to my credit card.")
    ep.call("find_user_id_by_name_zip", first_name="Sofia", last_name="Li", zip="78260")
    ep.call("get_order_details", order_id="#W3916020")
    ep.say(asked, "I'm not sure about the order number.")
    ep.say("Then I cannot help with the return. Anything else?", STOP)
    assert not _faulted(ep, "fault.user_declined")


@pytest.mark.parametrize("user_names_it", [True, False], ids=["the user chose the Visa", "the agent did"])
def test_a_gold_write_left_undone_by_a_payment_the_user_chose_follows_from_that_choice(user_names_it):
    """Airline test task 32 (part 2's 32.1, both annotators): the user asks to pay with "the Visa ending in 7238" and
    the agent books with it. The gold pays with the $500 certificate, so besides the booking's payment the user's
    certificate ends unspent: a gold write never made, which follows from the same choice of the user's. Where the
    agent picked the card itself, it is blamed."""
    ep = Script("airline", 32)
    ep.user("Hi, I'm sophia_silva_7557. Book HAT271 ORD to PHL on May 26 for me and Kevin Smith, 2001-04-12.")
    ep.call("get_user_details", user_id="sophia_silva_7557")
    (booking,) = [action for action in ep.task.actions if action.name == "book_reservation"]
    if user_names_it:
        ep.say("Which payment method would you like to use?", "I'd prefer to use the Visa ending in 7238.")
    ep.say("I will book HAT271 for $348 on your Visa ending in 7238. Confirm (yes/no)?", "Yes.")
    ep.call(
        booking.name, **{**booking.kwargs, "payment_methods": [{"payment_id": "credit_card_4196779", "amount": 348}]}
    )
    ep.say("Booked. Anything else?", STOP)
    assert _faulted(ep, "fault.user_chose_payment") == user_names_it


@pytest.mark.parametrize("refuses", [True, False], ids=["the user refused PayPal", "the agent gave up"])
def test_a_change_whose_only_payment_the_user_refused_is_the_users(refuses):
    """Part 5's retail 107 (retail test task 107): the gold exchange pays the difference with PayPal, the user's only
    method; the simulated user says "no, I don't use PayPal" (its instruction never speaks of paying) and asks for a
    transfer. An agent that hands the user over without any such refusal is to blame."""
    ep = Script("retail", 107)
    ep.user("Hi, I need to exchange a T-shirt. My email is sofia.thomas3069@example.com.")
    ep.call("find_user_id_by_email", email="sofia.thomas3069@example.com")
    ep.call("get_user_details", user_id="sofia_thomas_1518")
    ep.call("get_order_details", order_id="#W3388163")
    ep.say(
        "The T-shirt in #W3388163 is red, XXL, cotton. Which size would you like, and may I use your PayPal?",
        "One size smaller, XL, black. And no, I don\u2019t use PayPal." if refuses else "XL in black, please.",
    )
    ep.call("get_product_details", product_id="9523456873")
    ep.say("The black XL costs $4.20 more. How would you like to pay?", "Just transfer me to someone, please.")
    ep.call("transfer_to_human_agents", summary="The user wants to exchange a T-shirt for a black XL.")
    assert _faulted(ep, "fault.user_refused_payment") == refuses


def test_one_choice_put_on_two_items_the_gold_changes_differently_is_the_agents():
    """Part 5's retail 106 (retail test task 106): the order holds two identical glass kettles, and the gold
    exchanges them to two different variants. The user asks for the ceramic gas one, for "the kettle"; the agent
    exchanges both kettles to it: that second choice is the agent's, not a detail the user withheld."""
    ep = Script("retail", 106)
    ep.user("Hi, Aarav Anderson, 19031. I'd like to exchange the tea kettle in #W4316152.")
    ep.call("find_user_id_by_name_zip", first_name="Aarav", last_name="Anderson", zip="19031")
    ep.call("get_order_details", order_id="#W4316152")
    ep.call("get_product_details", product_id="9832717871")
    ep.say(
        "Your glass 2 liters induction kettle can be exchanged. Which variant would you like?",
        "The ceramic, 2 liters, gas one, please.",
    )
    proposal = ep.say(
        "I will exchange your kettle for the ceramic, 2 liters, gas kettle (item 3761330360), paying the difference "
        "with gift_card_7245904. Confirm (yes/no)?",
        "Yes.",
    )
    write = ep.call(
        "exchange_delivered_order_items",
        order_id="#W4316152",
        item_ids=["7292993796", "7292993796"],
        new_item_ids=["3761330360", "3761330360"],
        payment_method_id="gift_card_7245904",
    )
    ep.say("Done. Anything else?", STOP)
    judged = judge(ep.build())
    assert judged.fault is None and judged.first_error in (proposal, write)


def test_a_cancellation_reason_the_user_chose_is_paired_with_the_gold_cancellation_of_its_own_order():
    """Part 6's retail 55 (retail test task 55): both pending orders are cancelled with refunds to the one gift card,
    so the two cancellations change a record in common. The user picks "ordered by mistake" for #W7342738 from the
    two reasons the agent set out (the gold says "no longer needed"): that write is paired with the gold
    cancellation of #W7342738, not of #W4836353, and it is the user's choice; the agent's error is the later return
    it never made."""
    ep = Script("retail", 55)
    ep.user("Hi, I'm silva7872@example.com, or amelia.silva7872@example.com. Cancel or return all I can, please.")
    for action in ep.task.actions[:9]:
        ep.call(action.name, **action.kwargs)
    ep.say(
        'For #W4836353 and #W7342738: is the reason "no longer needed" or "ordered by mistake"? Confirm (yes/no).',
        "Yes: #W4836353 no longer needed, #W7342738 ordered by mistake.",
    )
    ep.call("cancel_pending_order", order_id="#W4836353", reason="no longer needed")
    ep.call("cancel_pending_order", order_id="#W7342738", reason="ordered by mistake")
    closing = ep.say("Both are cancelled. Anything else?", STOP)
    judged = judge(ep.build())
    assert judged.fault is None and judged.first_error == closing  # the returns were dropped there
