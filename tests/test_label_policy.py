"""Policy clauses: stable, documented ids; clause texts are exact quotes of the policy; rule look-ups."""

from __future__ import annotations

import json

import pytest
from helpers.tau2 import needs_tau2

from castdata.envs import DOMAINS, load_domain
from castdata.label.policy import ClauseTable, clause_table, segment
from castdata.visible import View, identifiers

POLICY = """# Shop policy

You help users with orders.

- Authenticate the user first.
- Make one tool call at a time,
  and never talk while calling a tool.

## Cancel order

- Only pending orders can be cancelled.
  - The reason must be given.
- Obtain explicit user confirmation (yes) first.

### Refunds

Refunds take 5 days.
"""


def test_segment_ids_follow_the_documented_scheme():
    clauses = segment("shop", POLICY)
    assert [(c.clause_id, c.text) for c in clauses] == [
        ("shop.intro.1", "You help users with orders."),
        ("shop.intro.2", "Authenticate the user first."),
        ("shop.intro.3", "Make one tool call at a time,\n  and never talk while calling a tool."),
        ("shop.cancel-order.1", "Only pending orders can be cancelled.\n  - The reason must be given."),
        ("shop.cancel-order.2", "Obtain explicit user confirmation (yes) first."),
        ("shop.cancel-order.refunds.1", "Refunds take 5 days."),
    ]
    assert clauses[3].section == "Cancel order" and clauses[5].section == "Cancel order > Refunds"
    assert len({c.policy_sha256 for c in clauses}) == 1


def test_ids_only_move_within_the_edited_section():
    edited = POLICY.replace("- Only pending orders", "- A new first rule.\n- Only pending orders")
    before = {c.text: c.clause_id for c in segment("shop", POLICY)}
    after = {c.text: c.clause_id for c in segment("shop", edited)}
    moved = {text for text in before if before[text] != after[text]}
    assert moved == {
        "Only pending orders can be cancelled.\n  - The reason must be given.",
        "Obtain explicit user confirmation (yes) first.",
    }
    assert segment("shop", edited)[0].policy_sha256 != segment("shop", POLICY)[0].policy_sha256


@pytest.mark.parametrize("domain", [pytest.param(d, marks=needs_tau2) if d.startswith("tau2-") else d for d in DOMAINS])
def test_every_domain_segments_into_exact_unique_quotes(domain):
    table = clause_table(domain)
    assert len(table.clauses) >= 20
    assert len(table.by_id) == len(table.clauses)
    for clause in table.clauses:
        assert clause.text and clause.text in load_domain(domain).policy
        assert clause.clause_id.startswith(f"{domain}.")


def test_known_clause_ids():
    retail = clause_table("retail").by_id
    assert retail["retail.cancel-pending-order.1"].text.startswith(
        "An order can only be cancelled if its status is 'pending'"
    )
    assert retail["retail.modify-pending-order.modify-payment.1"].text.startswith(
        "The user can only choose a single payment method"
    )
    assert clause_table("telehealth").by_id["telehealth.intro.5"].text.startswith("Before taking consequential actions")


@pytest.mark.parametrize(
    "domain,topic,clause_id",
    [
        ("retail", "confirmation", "retail.intro.5"),
        ("retail", "authentication", "retail.intro.2"),
        ("airline", "one_tool_call", "airline.intro.5"),
        ("airline", "authentication", "airline.book-flight.1"),
        ("telehealth", "transfer", "telehealth.intro.8"),
        ("telecom", "authentication", "telecom.customer-privacy.data-protection.2"),
        ("airline", "payment", "airline.modify-flight.6"),
        ("retail", "payment", "retail.modify-pending-order.modify-items.3"),
        ("airline", "flight_change", "airline.modify-flight.2"),
        ("airline", "checked_bags", "airline.book-flight.4"),
    ],
)
def test_rule_topics_find_their_clause(domain, topic, clause_id):
    clause, sentence = clause_table(domain).about(topic)
    assert clause.clause_id == clause_id and sentence in clause.text


def test_topics_a_policy_lacks_and_tool_sections():
    assert clause_table("telecom").about("confirmation") is None
    table = ClauseTable("shop", POLICY)
    assert table.for_tool("cancel_order")[0].clause_id == "shop.cancel-order.1"
    assert table.for_tool("modify_address") is None
    assert (
        clause_table("telehealth").for_tool("cancel_appointment")[0].clause_id
        == "telehealth.modifying-appointments.cancelling-appointments.1"
    )


def test_identifiers_and_their_spellings():
    text = "Order #W2378156 of yusuf_rossi_9620 (yusuf.rossi7301@example.com) cost $1,234.50 on 2024-05-15; 2 items at 14:00."
    assert identifiers(text) == [
        "#W2378156",
        "yusuf_rossi_9620",
        "yusuf.rossi7301@example.com",
        "$1,234.50",
        "2024-05-15",
    ]


def test_view_grounds_identifiers_in_the_prefix_only():
    from golden.cases import CASES

    trajectory, _ = CASES["retail_wrong_order_cancel"]()
    view = View(trajectory)
    calls = [m["tool_calls"][0]["function"]["name"] if m.get("tool_calls") else None for m in trajectory.messages]
    lookup = calls.index("get_user_details")  # its result lists the user's orders
    assert view.ungrounded("cancel #W3361211", lookup) == ["#W3361211"]
    assert view.ungrounded("cancel #W3361211", lookup + 2) == []
    assert view.ungrounded("cancel #W3361211", lookup, also=lookup + 1) == []  # `also`: a step that may be named too
    order = json.loads(trajectory.messages[calls.index("get_order_details") + 1]["content"])
    price = order["items"][0]["price"]
    assert view.ungrounded(f"it cost ${price:,.2f}", len(trajectory.messages)) == []
    assert view.ungrounded("it cost $98,765.43", len(trajectory.messages)) == ["$98,765.43"]
