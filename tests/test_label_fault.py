"""The user's or the task's fault (castdata.label.fault), on hand-built episodes of real tasks: a user that
withholds the user id its instruction gives, and a gold payment method the instruction never speaks of."""

from __future__ import annotations

from golden.script import STOP, Script

from castdata.label.hindsight import judge


def _withholding(gives_it_later: bool) -> Script:
    ep = Script("airline", 23)  # the instruction gives the user id yara_garcia_1905
    ep.user("Hi! I'd like to make some changes to my upcoming flight in reservation HXDUBJ.")
    ep.say("To modify your reservation I need your user ID. Could you provide it?", "I don't have my user ID with me.")
    if gives_it_later:
        ep.say("I need the user ID to proceed.", "Oh, found it: yara_garcia_1905.")
    ep.say("Unfortunately, I need the user ID to proceed with any change.", STOP)
    return ep


def test_a_user_that_withholds_the_user_id_its_instruction_gives_is_at_fault():
    episode = judge(_withholding(gives_it_later=False).build())
    assert not episode.success
    assert episode.fault == "fault.user_withheld_id" and episode.first_error is None


def test_once_the_user_gave_its_id_the_agent_that_does_nothing_is_to_blame():
    episode = judge(_withholding(gives_it_later=True).build())
    assert episode.fault is None and episode.first_error is not None


def _paid_with_paypal(named_in_the_proposal: bool) -> Script:
    ep = Script("retail", 74)  # the instruction names no payment method; the gold pays with credit_card_4466831
    ep.user("Hi, I want to exchange my laptop for one with an i9 CPU, and cancel my other pending order.")
    ep.say("Could you give me your name and zip code?", "Lei Li, 85033.")
    ep.call("find_user_id_by_name_zip", first_name="Lei", last_name="Li", zip="85033")
    ep.call("get_user_details", user_id="lei_li_6575")
    for action in ep.task.actions:
        kwargs = dict(action.kwargs)
        if action.name == "modify_pending_order_items":
            kwargs["payment_method_id"] = "paypal_5914760"
        said = f" with {kwargs}" if named_in_the_proposal else ""
        ep.say(f"I will {action.name.replace('_', ' ')}{said}. Do you confirm (yes/no)?", "Yes, please.")
        ep.call(action.name, **kwargs)
    ep.say("Done. Anything else?", STOP)
    return ep


def test_a_payment_the_user_agreed_to_where_the_instruction_names_none_is_the_tasks_fault():
    episode = judge(_paid_with_paypal(named_in_the_proposal=True).build())
    assert not episode.success
    assert episode.fault == "fault.gold_payment_unspecified" and episode.first_error is None


def test_a_payment_the_agent_never_named_is_its_own_error():
    episode = judge(_paid_with_paypal(named_in_the_proposal=False).build())
    assert episode.fault is None and episode.first_error is not None
