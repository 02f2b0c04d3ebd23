"""What the agent tells the user about a product's variants, checked against retail's database
(castdata.label.catalogue), and where such a false claim puts the first error of a failed episode."""

from __future__ import annotations

import json

import pytest
from golden.script import STOP, Script

from castdata.envs import load_domain
from castdata.label.catalogue import false_claim, products_of
from castdata.label.hindsight import judge
from castdata.records import Action

RETAIL = load_domain("retail")
PERFUME_ORDER = "#W1671835"  # one woody 30ml men's perfume (5081446110); the catalogue has woody 100ml (3399869890)
EXCHANGE = Action(
    name="exchange_delivered_order_items",
    kwargs={
        "order_id": PERFUME_ORDER,
        "item_ids": ["5081446110"],
        "new_item_ids": ["3399869890"],
        "payment_method_id": "paypal_6918118",
    },
)
ONE_VARIANT = {"item_id": "9007697085", "options": {"scent family": "fresh", "size": "50ml"}, "available": True}


def _claim(text: str, gold: list[Action] = (EXCHANGE,), write: Action = EXCHANGE) -> int | None:
    messages = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "I want the largest perfume you have."},
        {"role": "tool", "content": json.dumps(ONE_VARIANT)},  # a lookup that showed one variant
        {"role": "assistant", "content": text},
    ]
    return false_claim(messages, len(messages), products_of(RETAIL, [write]), list(gold))


@pytest.mark.parametrize(
    "text",
    [
        "The largest size currently available for the perfume you ordered is 50ml.",  # a limit
        "Only the 50ml perfume is available right now.",  # only this size
        "Unfortunately, there is no woody perfume in 100 ml available.",  # absence, the measure written apart
        "There are no other perfume variants available at this time.",  # absence of any other
    ],
)
def test_a_claim_the_variant_the_gold_sets_disproves_is_false(text):
    assert _claim(text) == 3


@pytest.mark.parametrize(
    "text",
    [
        "The largest size available for the perfume is 100ml.",  # true: the gold's is not larger
        "The 100ml woody perfume is available for $312.04.",  # says it is there
        "Is there no other perfume size available?",  # a question claims nothing
        "Your perfume is a 30ml woody one.",  # nothing about availability
        "The only headphones available are wired.",  # another product the write does not touch
        "Only the 50ml perfume is available under $300.",  # the gold's variant costs more: the bound holds
    ],
)
def test_a_claim_the_database_bears_out_or_that_says_nothing_of_the_variant_is_not_false(text):
    assert _claim(text) is None


def test_without_a_variant_the_gold_sets_any_available_variant_disproves_a_claim():
    """A cancellation sets no variant (part 6's retail 90: "no 10x camera is available" when one is): any available
    variant of the order's products is the witness, and a true claim ("the 4-foot glass white bookshelf is not
    available", part 6's retail 88) stays true in every form of its measure."""
    cancel = Action(name="cancel_pending_order", kwargs={"order_id": "#W8835847", "reason": "ordered by mistake"})
    shelf = {"role": "tool", "content": json.dumps({"product_id": "8600330539"})}
    for text, false in [
        ("Unfortunately, the 4-foot version in glass and white is currently not available.", False),
        ("Unfortunately, the **4-foot glass bookshelf in white color** is not available.", False),
        ("There is no 4 ft bookshelf available.", True),  # wood, black, 4 ft is
    ]:
        messages = [{"role": "system", "content": "policy"}, shelf, {"role": "assistant", "content": text}]
        found = false_claim(messages, 3, products_of(RETAIL, [cancel]), [cancel])
        assert (found == 2) == false, text


@pytest.mark.parametrize(
    "text, false",
    [
        ("The most expensive shorter bamboo skateboard available is the 31 inch custom one at $200.80.", True),
        ("The most expensive bamboo skateboard available is the 28 inch plain one at $208.60.", False),
        ("The cheapest bamboo skateboard available is the 28 inch graphic one at $180.10.", False),
    ],
)
def test_a_price_claim_the_variant_the_gold_sets_passes_is_false(text, false):
    """Part 7's retail 29: the gold exchanges for the most expensive shorter bamboo skateboard (28 inch, plain,
    $208.60); the agent said it was a $200.80 one. Only the gold's own variant disproves a price claim: without one,
    the cheapest of what the user asked for need not be the cheapest of all."""
    exchange = Action(
        name="exchange_delivered_order_items",
        kwargs={"order_id": "#W3792453", "item_ids": ["4293355847"], "new_item_ids": ["8176740019"]},
    )
    messages = [
        {"role": "system", "content": "policy"},
        {"role": "tool", "content": json.dumps({"product_id": "1968349452"})},
        {"role": "assistant", "content": text},
    ]
    assert (false_claim(messages, 3, products_of(RETAIL, [exchange]), [exchange]) == 2) == false
    cancel = Action(name="cancel_pending_order", kwargs={"order_id": "#W3792453", "reason": "no longer needed"})
    assert false_claim(messages, 3, products_of(RETAIL, [exchange]), [cancel]) is None


def test_a_claim_before_any_tool_result_showed_the_product_is_not_judged():
    messages = [
        {"role": "system", "content": "policy"},
        {"role": "assistant", "content": "The largest perfume available is 50ml."},
    ]
    assert false_claim(messages, 2, products_of(RETAIL, [EXCHANGE]), [EXCHANGE]) is None


@pytest.mark.parametrize("claim", [True, False], ids=["says 50ml is the largest", "says nothing of sizes"])
def test_a_false_word_about_variants_is_the_error_of_the_wrong_exchange_it_led_to(claim):
    """Part 4's retail 77 (retail test task 77): a lookup helper shows one perfume variant (fresh, 50ml); the agent
    tells the user 50ml is the largest size, the user takes it, and the exchange sets it instead of the woody 100ml
    the gold sets. The error is the claim, not the exchange or its confirmation. Without the claim, the error is
    where the agent first offered the wrong variant."""
    ep = Script("retail", 77)
    ep.user("Hi, Ivan Johnson, 94183. I love my perfume and want the largest size you have.")
    ep.call("find_user_id_by_name_zip", first_name="Ivan", last_name="Johnson", zip="94183")
    ep.call("get_order_details", order_id=PERFUME_ORDER)
    said = ep.say(
        "The largest size currently available for the perfume you ordered is 50ml."
        if claim
        else "Your order has a 30ml woody perfume for men.",
        "Then I'd like the 50ml one instead." if claim else "Can I get a bigger one?",
    )
    offer = ep.say(
        "I can exchange your 30ml perfume (item 5081446110) for the 50ml fresh one (item 9007697085), paying the "
        "difference with PayPal. Shall I go ahead (yes/no)?",
        "Yes, please.",
    )
    ep.call(
        "exchange_delivered_order_items",
        order_id=PERFUME_ORDER,
        item_ids=["5081446110"],
        new_item_ids=["9007697085"],
        payment_method_id="paypal_6918118",
    )
    ep.say("Your exchange is submitted.", STOP)
    judged = judge(ep.build())
    assert judged.first_error == (said if claim else offer)
    if claim:
        first = next(j for j in judged.judgements if j.step == said)
        assert [f.signal for f in first.findings if f.critical] == ["said.catalogue"]
