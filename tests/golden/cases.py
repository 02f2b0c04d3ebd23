"""The labeler's golden set: hand-built trajectories (retail, airline, telehealth) and what the labeler must find.

Each case returns the trajectory and an `Expect`: the first critical error (message index, or None for a
successful episode) and, for every action that must be flagged at or before it, its first category. Every
other action at or before the first error (every action, in a success) must be valid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from golden.script import STOP, Script

from castdata.records import Trajectory


@dataclass(frozen=True)
class Expect:
    """What the labeler must find."""

    first_error: int | None
    flagged: dict[int, str] = field(default_factory=dict)  # step -> first category


Case = Callable[[], tuple[Trajectory, Expect]]
CASES: dict[str, Case] = {}


def case(function: Case) -> Case:
    """Register a golden case under its function name."""
    CASES[function.__name__] = function
    return function


# -- retail 69: Emma Smith cancels pending order #W2417020 ('no longer needed') ---------------------------
def _emma(authenticate: bool = True) -> Script:
    ep = Script("retail", 69)
    ep.user("Hi, I want to cancel my order #W2417020, I no longer need it.")
    ep.say("I can help with that. Could you give me your first name, last name and zip code?", "Emma Smith, zip 10192.")
    if authenticate:
        ep.call("find_user_id_by_name_zip", first_name="Emma", last_name="Smith", zip="10192")
    ep.call("get_user_details", user_id="emma_smith_8564")
    ep.call("get_order_details", order_id="#W2417020")
    return ep


def _emma_confirm(ep: Script) -> None:
    ep.say("Order #W2417020 is pending. I will cancel it with reason 'no longer needed'. Do you confirm (yes/no)?", "Yes.")


@case
def retail_cancel_success():
    ep = _emma()
    _emma_confirm(ep)
    ep.call("cancel_pending_order", order_id="#W2417020", reason="no longer needed")
    ep.say("Your order is cancelled. Anything else?", STOP)
    return ep.build(), Expect(None)


@case
def retail_write_without_confirmation():
    ep = _emma()
    write = ep.call("cancel_pending_order", order_id="#W2417020", reason="no longer needed")
    ep.say("Your order is cancelled. Anything else?", STOP)
    return ep.build(), Expect(None, {write: "missing_confirmation"})


@case
def retail_access_before_auth():
    ep = Script("retail", 69)
    ep.user("Hi, I want to cancel my order #W2417020, I no longer need it.")
    early = ep.call("get_order_details", order_id="#W2417020")
    ep.say("Could you give me your first name, last name and zip code?", "Emma Smith, zip 10192.")
    ep.call("find_user_id_by_name_zip", first_name="Emma", last_name="Smith", zip="10192")
    ep.call("get_user_details", user_id="emma_smith_8564")
    _emma_confirm(ep)
    ep.call("cancel_pending_order", order_id="#W2417020", reason="no longer needed")
    ep.say("Your order is cancelled. Anything else?", STOP)
    return ep.build(), Expect(None, {early: "auth_violation"})


@case
def retail_two_tool_calls():
    ep = Script("retail", 69)
    ep.user("Hi, I want to cancel my order #W2417020, I no longer need it.")
    ep.say("Could you give me your first name, last name and zip code?", "Emma Smith, zip 10192.")
    ep.call("find_user_id_by_name_zip", first_name="Emma", last_name="Smith", zip="10192")
    raw = [{"name": "get_user_details", "arguments": '{"user_id": "emma_smith_8564"}'}, {"name": "get_order_details", "arguments": '{"order_id": "#W2417020"}'}]
    double = ep.call("get_user_details", violation="multiple_tool_calls", raw=raw, user_id="emma_smith_8564")
    ep.call("get_order_details", order_id="#W2417020")
    _emma_confirm(ep)
    ep.call("cancel_pending_order", order_id="#W2417020", reason="no longer needed")
    ep.say("Your order is cancelled. Anything else?", STOP)
    return ep.build(), Expect(None, {double: "policy_violation"})


@case
def retail_tool_call_with_text():
    ep = _emma()
    _emma_confirm(ep)
    raw = [{"name": "cancel_pending_order", "arguments": '{"order_id": "#W2417020", "reason": "no longer needed"}'}]
    write = ep.call("cancel_pending_order", violation="tool_call_with_text", raw=raw, order_id="#W2417020", reason="no longer needed")
    ep.say("Your order is cancelled. Anything else?", STOP)
    return ep.build(), Expect(None, {write: "policy_violation"})


@case
def retail_wrong_tool():
    ep = _emma()
    _emma_confirm(ep)
    write = ep.call(
        "modify_pending_order_address", order_id="#W2417020", address1="243 Hillcrest Drive", address2="Suite 114",
        city="New York", state="NY", country="USA", zip="10192",
    )
    ep.say("Done. Anything else?", STOP)
    return ep.build(), Expect(write, {write: "wrong_tool"})


@case
def retail_repeated_lookup():
    ep = _emma()
    repeat = ep.call("get_order_details", order_id="#W2417020")  # the same order, unchanged since it was read
    _emma_confirm(ep)
    ep.call("cancel_pending_order", order_id="#W2417020", reason="no longer needed")
    ep.say("Your order is cancelled. Anything else?", STOP)
    return ep.build(), Expect(None, {repeat: "redundant_action"})


@case
def retail_lookup_after_a_write_success():
    ep = _emma()
    _emma_confirm(ep)
    ep.call("cancel_pending_order", order_id="#W2417020", reason="no longer needed")
    ep.call("get_order_details", order_id="#W2417020")  # the order changed: reading it again is no repeat
    ep.say("Your order is cancelled. Anything else?", STOP)
    return ep.build(), Expect(None)


@case
def retail_lookup_again_when_asked_success():
    ep = _emma()
    ep.say("Order #W2417020 is pending.", "Could you check that order once more?")
    ep.call("get_order_details", order_id="#W2417020")  # the user asked: no repeat of the agent's own
    _emma_confirm(ep)
    ep.call("cancel_pending_order", order_id="#W2417020", reason="no longer needed")
    ep.say("Your order is cancelled. Anything else?", STOP)
    return ep.build(), Expect(None)


@case
def retail_failed_write_abandoned():
    ep = _emma()
    ep.say("I will cancel order #W2417020 because you changed your mind. Do you confirm (yes/no)?", "Yes.")
    write = ep.call("cancel_pending_order", order_id="#W2417020", reason="changed my mind")
    ep.say("I could not cancel the order. Anything else?", STOP)
    return ep.build(), Expect(write, {write: "wrong_argument"})


# -- retail 66: Aarav Lee cancels #W3361211; #W3586556 is pending too -------------------------------------
@case
def retail_wrong_order_cancel():
    ep = _aarav_looked_up()
    proposal = ep.say("I will cancel order #W3586556 with reason 'no longer needed'. Do you confirm (yes/no)?", "Yes.")
    ep.call("cancel_pending_order", order_id="#W3586556", reason="no longer needed")
    ep.say("Cancelled. Anything else?", STOP)
    return ep.build(), Expect(proposal, {proposal: "wrong_argument"})  # the wrong order was proposed: the error


def _aarav_looked_up() -> Script:
    """Aarav Lee wants the order with the luggage set (#W3361211) cancelled; both his orders are looked up."""
    ep = Script("retail", 66)
    ep.user("Hi, please cancel my order with the luggage set, I no longer need it.")
    ep.say("Could you give me your first name, last name and zip code?", "Aarav Lee, 85025.")
    ep.call("find_user_id_by_name_zip", first_name="Aarav", last_name="Lee", zip="85025")
    ep.call("get_user_details", user_id="aarav_lee_1982")
    ep.call("get_order_details", order_id="#W3361211")
    ep.call("get_order_details", order_id="#W3586556")
    return ep


# -- retail 0: Yusuf Rossi exchanges a keyboard and a thermostat of delivered order #W2378156 -------------
@case
def retail_wrong_item_exchange():
    ep = Script("retail", 0)
    ep.user("Hi, I want to exchange the keyboard and the thermostat of order #W2378156.")
    ep.say("Could you give me your first name, last name and zip code?", "Yusuf Rossi, 19122.")
    ep.call("find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip="19122")
    ep.call("get_order_details", order_id="#W2378156")
    ep.call("get_product_details", product_id="1656367028")
    ep.call("get_product_details", product_id="4896585277")
    details = "items 1151293680 and 4983901480 for 7706410293 and 4953074738, paid with credit_card_9513926"
    proposal = ep.say(f"I will exchange {details}. Have you listed all items, and do you confirm (yes/no)?", "Yes.")
    ep.call(
        "exchange_delivered_order_items", order_id="#W2378156", item_ids=["1151293680", "4983901480"],
        new_item_ids=["7706410293", "4953074738"], payment_method_id="credit_card_9513926",
    )
    ep.say("The exchange is requested. Anything else?", STOP)
    return ep.build(), Expect(proposal, {proposal: "wrong_argument"})  # the wrong item was proposed: the error


@case
def retail_write_deviates_to_the_wrong_order():
    ep = _aarav_looked_up()
    ep.say("I will cancel order #W3361211 with reason 'no longer needed'. Do you confirm (yes/no)?", "Yes.")
    write = ep.call("cancel_pending_order", order_id="#W3586556", reason="no longer needed")
    ep.say("Cancelled. Anything else?", STOP)
    return ep.build(), Expect(write, {write: "wrong_argument"})  # the right order was proposed: the write erred


# -- retail 40: Isabella Lopez pays order #W4923227 with her visa; must hear '60' and 'mastercard' ---------
def _isabella() -> Script:
    ep = Script("retail", 40)
    ep.user("Hi, how much is on my gift card, and which card paid my recent order?")
    ep.say("Could you give me your email address?", "isabella.lopez3271@example.com")
    ep.call("find_user_id_by_email", email="isabella.lopez3271@example.com")
    ep.call("get_user_details", user_id="isabella_lopez_6490")
    ep.call("get_order_details", order_id="#W4923227")
    ep.say("I will change the payment of order #W4923227 to credit_card_8897086 (visa). Do you confirm (yes/no)?", "Yes.")
    ep.call("modify_pending_order_payment", order_id="#W4923227", payment_method_id="credit_card_8897086")
    return ep


@case
def retail_missing_output():
    ep = _isabella()
    end = ep.say("The payment method is updated. Anything else?", STOP)
    return ep.build(), Expect(end, {end: "missed_required_action"})


@case
def retail_outputs_success():
    ep = _isabella()
    ep.say("Your gift card balance is 60 and the order was paid with your mastercard; it now uses your visa. Anything else?", STOP)
    return ep.build(), Expect(None)


@case
def retail_needed_transfer_success():
    ep = Script("retail", 10)
    ep.user("Hi, I want refunds of two orders to go to each other's payment method.")
    ep.say("Could you give me your email address?", "mia.garcia2723@example.com")
    ep.gold()
    return ep.build(), Expect(None)


# -- airline 1: Olivia Gonzalez cancels reservation Z7GOZK ------------------------------------------------
def _olivia(authenticate: bool = True) -> Script:
    ep = Script("airline", 1)
    ep.user("Hi, I need to cancel my trip from Newark to Houston and back.")
    ep.say("Sure. What is your user id?", "olivia_gonzalez_2305")
    if authenticate:
        ep.call("get_user_details", user_id="olivia_gonzalez_2305")
    ep.call("get_reservation_details", reservation_id="Z7GOZK")
    return ep


def _olivia_cancel(ep: Script, confirm: bool = True) -> int:
    if confirm:
        ep.say("I will cancel reservation Z7GOZK (EWR-IAH-EWR). Do you confirm (yes/no)?", "Yes.")
    return ep.call("cancel_reservation", reservation_id="Z7GOZK")


@case
def airline_cancel_success():
    ep = _olivia()
    _olivia_cancel(ep)
    ep.say("Your reservation is cancelled. Anything else?", STOP)
    return ep.build(), Expect(None)


@case
def airline_write_without_confirmation():
    ep = _olivia()
    write = _olivia_cancel(ep, confirm=False)
    ep.say("Your reservation is cancelled. Anything else?", STOP)
    return ep.build(), Expect(None, {write: "missing_confirmation"})


@case
def airline_lookup_before_the_user_id_is_no_violation():
    ep = Script("airline", 1)
    ep.user("Hi, I need to cancel my trip from Newark to Houston and back, reservation Z7GOZK.")
    ep.call("get_reservation_details", reservation_id="Z7GOZK")
    ep.say("Sure. What is your user id?", "olivia_gonzalez_2305")
    ep.call("get_user_details", user_id="olivia_gonzalez_2305")
    _olivia_cancel(ep)
    ep.say("Your reservation is cancelled. Anything else?", STOP)
    return ep.build(), Expect(None, {})  # airline's policy has no authentication step: nothing to flag


@case
def airline_wrong_reservation_cancel():
    ep = _olivia()
    ep.call("get_reservation_details", reservation_id="K67C4W")
    proposal = ep.say("I will cancel reservation K67C4W. Do you confirm (yes/no)?", "Yes.")
    ep.call("cancel_reservation", reservation_id="K67C4W")
    ep.say("Cancelled. Anything else?", STOP)
    return ep.build(), Expect(proposal, {proposal: "wrong_argument"})  # the error is where it was proposed


# -- telehealth 1: David Martinez books a consultation with Dr. Garcia, 2025-09-22 14:00 --------------------
def _david(authenticate: bool = True) -> Script:
    ep = Script("telehealth", 1)
    ep.user("Hello, I'd like a consultation on Monday 2025-09-22 at 14:00 with Dr. Smith, or else Dr. Garcia.")
    ep.say("Happy to help. Could you give me your email address?", "It's david.martinez@email.com.")
    if authenticate:
        ep.call("find_patient_by_email", email="david.martinez@email.com")
    ep.call("get_provider_details", provider_id="dr_smith_cardiology")
    ep.call("get_provider_details", provider_id="dr_garcia_primary")
    return ep


def _david_schedule(ep: Script, time: str = "14:00", confirm: bool = True, proposed: str | None = None) -> int:
    """Book Dr. Garcia at `time`, after proposing `proposed` (default: `time`) when `confirm`."""
    if confirm:
        ep.say(f"Dr. Smith is not available then. I will book a consultation with Dr. Garcia on 2025-09-22 at {proposed or time}. Confirm (yes/no)?", "Yes.")
    return ep.call(
        "schedule_appointment", patient_id="david_martinez_5678", provider_id="dr_garcia_primary", date="2025-09-22",
        time=time, appointment_type="consultation",
    )


@case
def telehealth_schedule_success():
    ep = _david()
    _david_schedule(ep)
    ep.say("Your appointment is booked. Anything else?", STOP)
    return ep.build(), Expect(None)


@case
def telehealth_access_before_auth():
    ep = _david(authenticate=False)
    early = (len(ep.messages) - 4, len(ep.messages) - 2)  # both provider look-ups
    ep.call("find_patient_by_email", email="david.martinez@email.com")
    _david_schedule(ep)
    ep.say("Your appointment is booked. Anything else?", STOP)
    return ep.build(), Expect(None, {step: "auth_violation" for step in early})


@case
def telehealth_wrong_time():
    ep = _david()
    write = _david_schedule(ep, time="15:00")
    ep.say("Your appointment is booked. Anything else?", STOP)
    proposal = write - 2  # the confirmation request proposed 15:00: the error was said there
    return ep.build(), Expect(proposal, {proposal: "wrong_argument"})


@case
def telehealth_write_deviates_from_the_proposal():
    ep = _david()
    write = _david_schedule(ep, time="15:00", proposed="14:00")
    ep.say("Your appointment is booked. Anything else?", STOP)
    return ep.build(), Expect(write, {write: "wrong_argument"})  # the proposal was right: the write brought the error


@case
def telehealth_write_without_confirmation():
    ep = _david()
    write = _david_schedule(ep, confirm=False)
    ep.say("Your appointment is booked. Anything else?", STOP)
    return ep.build(), Expect(None, {write: "missing_confirmation"})


@case
def telehealth_two_tool_calls():
    ep = Script("telehealth", 1)
    ep.user("Hello, I'd like a consultation on Monday 2025-09-22 at 14:00 with Dr. Smith, or else Dr. Garcia.")
    ep.say("Happy to help. Could you give me your email address?", "It's david.martinez@email.com.")
    ep.call("find_patient_by_email", email="david.martinez@email.com")
    raw = [{"name": "get_provider_details", "arguments": '{"provider_id": "dr_smith_cardiology"}'}, {"name": "get_provider_details", "arguments": '{"provider_id": "dr_garcia_primary"}'}]
    double = ep.call("get_provider_details", violation="multiple_tool_calls", raw=raw, provider_id="dr_smith_cardiology")
    ep.call("get_provider_details", provider_id="dr_garcia_primary")
    _david_schedule(ep)
    ep.say("Your appointment is booked. Anything else?", STOP)
    return ep.build(), Expect(None, {double: "policy_violation"})


# -- telehealth 9: Maria Rodriguez; must hear the copay 45.00 and the link of APPT025 -------------------------
def _maria() -> Script:
    ep = Script("telehealth", 9)
    ep.user("Hi, I'm Maria Rodriguez, born 1990-12-03. I need to sort out my cardiology appointments.")
    ep.gold()
    return ep


@case
def telehealth_missing_output():
    ep = _maria()
    end = ep.say("Everything is done. Anything else?", STOP)
    return ep.build(), Expect(end, {end: "missed_required_action"})


@case
def telehealth_outputs_success():
    ep = _maria()
    ep.say("Your copay is $45.00 and the link is https://telehealth.healthcenter.com/room/APPT025. Anything else?", STOP)
    return ep.build(), Expect(None)


# -- the same mistakes in every domain -------------------------------------------------------------------
def premature_end(opening: Callable[[], Script]) -> Case:
    """The agent says it is done before making the change the user asked for."""

    def build():
        ep = opening()
        end = ep.say("All set. Is there anything else I can help you with?", STOP)
        return ep.build(), Expect(end, {end: "premature_termination"})

    return build


def unneeded_transfer(opening: Callable[[], Script], **kwargs: str) -> Case:
    """The agent hands over to a human a request its own tools handle."""

    def build():
        ep = opening()
        transfer = ep.call(ep.domain.catalog.transfer_tool, **kwargs)
        return ep.build(), Expect(transfer, {transfer: "unnecessary_transfer"})

    return build


for _domain, _opening, _kwargs in (
    ("retail", _emma, {"summary": "The user wants to cancel order #W2417020."}),
    ("airline", _olivia, {"summary": "The user wants to cancel a reservation."}),
    ("telehealth", _david, {"reason": "The patient wants a consultation on 2025-09-22."}),
):
    CASES[f"{_domain}_premature_end"] = premature_end(_opening)
    CASES[f"{_domain}_unneeded_transfer"] = unneeded_transfer(_opening, **_kwargs)
