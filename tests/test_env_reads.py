"""Remembered read calls (`castdata.envs.reads`): the same observations as running the tool, and never stale."""

from __future__ import annotations

from castdata.envs import load_domain
from castdata.envs.reads import ReadMemo


def _pending_order(domain) -> tuple[str, str]:
    """A pending retail order and its user."""
    table = domain.base.tables["orders"]
    order_id = next(key for key in table.blobs if table.load(key)["status"] == "pending")
    return order_id, table.load(order_id)["user_id"]


def test_a_scan_leaves_the_episode_database_untouched_and_sees_later_changes():
    domain = load_domain("retail")
    user_id = next(iter(domain.base.tables["users"].blobs))
    email = domain.base.tables["users"].load(user_id)["email"]
    db = domain.new_database()
    assert domain.execute(db, "find_user_id_by_email", {"email": email}).observation == user_id
    assert db["users"].touched == {}  # the remembered scan copied no record
    db["users"][user_id]["email"] = "someone.else@example.com"  # a change the scan must see
    assert domain.execute(db, "find_user_id_by_email", {"email": email}).observation == "Error: user not found"
    found = domain.execute(db, "find_user_id_by_email", {"email": "someone.else@example.com"})
    assert found.observation == user_id
    fresh = domain.new_database()  # another episode still gets the base's answer
    assert domain.execute(fresh, "find_user_id_by_email", {"email": email}).observation == user_id


def test_a_lookup_after_a_write_shows_the_write():
    domain = load_domain("retail")
    order_id, _ = _pending_order(domain)
    db = domain.new_database()
    before = domain.execute(db, "get_order_details", {"order_id": order_id}).observation
    assert '"status": "pending"' in before
    cancelled = domain.execute(db, "cancel_pending_order", {"order_id": order_id, "reason": "no longer needed"})
    assert cancelled.ok
    after = domain.execute(db, "get_order_details", {"order_id": order_id}).observation
    assert '"status": "cancelled"' in after
    assert domain.execute(domain.new_database(), "get_order_details", {"order_id": order_id}).observation == before


def test_a_lookup_of_a_missing_record_sees_one_added_later():
    domain = load_domain("retail")
    order_id, _ = _pending_order(domain)
    db = domain.new_database()
    assert domain.execute(db, "get_order_details", {"order_id": "#W0000001"}).observation.startswith("Error")
    db["orders"]["#W0000001"] = {**db["orders"][order_id], "order_id": "#W0000001"}
    assert '"order_id": "#W0000001"' in domain.execute(db, "get_order_details", {"order_id": "#W0000001"}).observation


def test_a_call_that_changes_data_is_never_remembered():
    domain = load_domain("retail")
    memo = ReadMemo(domain.base)
    user_id = next(iter(domain.base.tables["users"].blobs))

    def rename(data, kwargs):
        data["users"][user_id]["name"]["first_name"] = kwargs["name"]
        return data["users"][user_id]["name"]["first_name"]

    db = domain.new_database()
    assert memo.run(db, "rename", {"name": "Zed"}, rename) == "Zed"
    assert db["users"][user_id]["name"]["first_name"] == "Zed"  # it ran on the episode's own database
    again = domain.new_database()
    assert memo.run(again, "rename", {"name": "Zed"}, rename) == "Zed"
    assert again.changes() and domain.new_database().changes() == {}


def test_a_table_replaced_or_added_by_a_tool_is_read_as_it_is():
    domain = load_domain("retail")
    order_id, _ = _pending_order(domain)
    db = domain.new_database()
    assert domain.execute(db, "get_order_details", {"order_id": order_id}).ok
    db["orders"] = {order_id: {**db["orders"][order_id], "status": "lost"}}  # no longer an episode table
    assert '"status": "lost"' in domain.execute(db, "get_order_details", {"order_id": order_id}).observation
    db["extra"] = {}  # a database with other tables than the base's runs every call itself
    assert '"status": "lost"' in domain.execute(db, "get_order_details", {"order_id": order_id}).observation
