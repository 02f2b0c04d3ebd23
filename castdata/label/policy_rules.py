"""Policy rules that need the data: what a domain's policy allows for one record, read from the policy text.

- **airline cancellation** (policy, "Cancel flight"): the whole trip must be unflown; then a reservation can be
  cancelled within 24 hours of booking, when the airline cancelled a flight of it, or when it is business class;
  otherwise only with travel insurance and a covered reason (health or weather), which the data cannot tell.
- **airline compensation** (policy, "Compensation"): a certificate is never offered proactively, only when the user
  explicitly asks for some compensation.
- **airline flight changes** (policy, "Change flights"): basic economy flights cannot be modified; other
  reservations keep their origin, destination and trip type.
- **airline checked bags** (policy, "Checked bag allowance"): the free bags per passenger, by the booking user's
  membership and the cabin; each extra bag is paid.
- **retail item swaps** (policy, "Modify items", "Exchange delivered order"): each item is swapped for one new item
  of the same product: as many new items as items, no change of product type.

`cancellation(domain, db, reservation_id)` says `allowed`, `forbidden` or `depends` (on the user's reason), or
None when the domain has no such rule or the record is missing. The current time is the one the policy states.
`forbidden_write` says whether a write breaks one of these rules whatever the user says, and `forbidden_writes`
walks a sequence of calls (a gold solution, an agent's) on the task's database.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from castdata.envs import Domain, Task
from castdata.envs.database import plain
from castdata.records import Action

Eligibility = Literal["allowed", "forbidden", "depends"]
_NOW = re.compile(r"current time is (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")


@functools.cache
def policy_time(domain: Domain) -> datetime | None:
    """The current time the domain's policy states, if it states one."""
    found = _NOW.search(domain.policy)
    return datetime.fromisoformat(found.group(1)) if found else None


def _flown(segment: dict[str, Any], flights: Any, now: datetime) -> bool:
    status = (flights.get(segment["flight_number"]) or {}).get("dates", {}).get(segment["date"], {}).get("status")
    return status in ("landed", "flying") or datetime.fromisoformat(segment["date"]) < now.replace(hour=0, minute=0)


def _airline_cancelled(segment: dict[str, Any], flights: Any) -> bool:
    dates = (flights.get(segment["flight_number"]) or {}).get("dates", {})
    return dates.get(segment["date"], {}).get("status") == "cancelled"


_COVERED = re.compile(r"\b(health|sick|ill|illness|medical|hospital|injur\w*|weather|storm|hurricane|snow)\b", re.I)
_NOT_COVERED = re.compile(r"\b(change of plans?|changed my mind|plans? changed|no longer need|other reasons?)\b", re.I)


def cancellation(domain: Domain, db: Any, reservation_id: str, said: str = "") -> Eligibility | None:
    """Whether the policy lets the agent cancel a reservation, on the database `db` (before the cancellation);
    `said` (what the user said) settles an insured reservation's reason when it names one."""
    now = policy_time(domain)
    if domain.name != "airline" or now is None or reservation_id not in db["reservations"]:
        return None
    reservation, flights = db["reservations"][reservation_id], db["flights"]
    if any(_flown(segment, flights, now) for segment in reservation["flights"]):
        return "forbidden"
    booked = datetime.fromisoformat(reservation["created_at"])
    if now - booked <= timedelta(hours=24) or reservation["cabin"] == "business":
        return "allowed"
    if any(_airline_cancelled(segment, flights) for segment in reservation["flights"]):
        return "allowed"
    if reservation.get("insurance") != "yes":
        return "forbidden"
    if _COVERED.search(said):
        return "allowed"
    return "forbidden" if _NOT_COVERED.search(said) else "depends"


_ASKS_COMPENSATION = re.compile(
    r"\b(compensat\w*|certificates?|vouchers?|refund\w*|reimburs\w*|make (?:it|this|that) up)\b", re.I
)


def compensation(domain: Domain, said: str) -> Eligibility | None:
    """Whether the policy lets the agent send a certificate, from what the user said (`said`): only once the user
    asked for compensation; None when the domain has no such rule."""
    if domain.name != "airline":
        return None
    return "allowed" if _ASKS_COMPENSATION.search(said) else "forbidden"


def flight_change(
    domain: Domain, reservation: dict[str, Any], table: Any, flights: Sequence[dict[str, Any]]
) -> Eligibility | None:
    """Whether the policy lets a reservation's flights become `flights` (flight number and date each; `table`: the
    flights): never for basic economy (a cabin change keeps the flights), else only with the same origin,
    destination and trip type."""
    if domain.name != "airline":
        return None
    legs = [(table.get(f.get("flight_number")) or {}) for f in flights]
    if not legs or any("origin" not in leg for leg in legs):
        return None
    current = [(f["flight_number"], f["date"]) for f in reservation["flights"]]
    if [(f.get("flight_number"), f.get("date")) for f in flights] == current:
        return "allowed"  # a cabin change
    if reservation["cabin"] == "basic_economy":
        return "forbidden"
    origin, destination = reservation["origin"], reservation["destination"]
    if reservation["flight_type"] == "one_way":
        same = legs[0]["origin"] == origin and legs[-1]["destination"] == destination
    else:  # a round trip goes out to its destination and comes back
        same = legs[0]["origin"] == legs[-1]["destination"] == origin and any(
            leg["destination"] == destination for leg in legs
        )
    return "allowed" if same else "forbidden"


_ALLOWANCE = re.compile(
    r"If the booking user is an? (\w+) member, (\d+) free checked bags? for each basic economy passenger, (\d+) free "
    r"checked bags? for each economy passenger, and (\d+) free checked bags? for each business passenger",
    re.I,
)


@functools.cache
def _allowances(domain: Domain) -> dict[str, dict[str, int]]:
    """The policy's free checked bags per passenger, by membership and cabin (empty when it states none)."""
    return {
        member.lower(): {"basic_economy": int(basic), "economy": int(economy), "business": int(business)}
        for member, basic, economy, business in _ALLOWANCE.findall(domain.policy)
    }


def paid_bags(domain: Domain, db: Any, user_id: str, cabin: str, passengers: int, total: int) -> int | None:
    """How many of `total` checked bags the policy makes paid, for `passengers` in `cabin` booked by `user_id`;
    None when the policy states no allowance or the user or cabin is unknown."""
    user = db["users"].get(user_id) if "users" in db else None
    free = _allowances(domain).get(str((user or {}).get("membership", "")).lower(), {}).get(cabin)
    return None if free is None else max(0, total - free * passengers)


def forbidden_write(domain: Domain, db: Any, action: Action, cabin: str | None = None) -> bool:
    """Whether the policy forbids a write on the database `db` whatever the user says: a cancellation it forbids
    for every reason, a forbidden flight change, or checked bags charged otherwise than the allowance says (`cabin`:
    the reservation's cabin, when a flight change set another than the stored one)."""
    kwargs = action.kwargs
    if action.name == "cancel_reservation":
        return cancellation(domain, db, kwargs.get("reservation_id", "")) == "forbidden"
    if action.name == "book_reservation":
        passengers, cabin, user = len(kwargs.get("passengers") or []), kwargs.get("cabin", ""), kwargs.get("user_id")
        paid = paid_bags(domain, db, user or "", cabin, passengers, kwargs.get("total_baggages", 0))
        return paid is not None and paid != kwargs.get("nonfree_baggages", 0)
    reservations = db["reservations"] if domain.name == "airline" and "reservations" in db else {}
    reservation = reservations.get(kwargs.get("reservation_id", ""))
    if reservation is None:
        return False
    reservation = {**reservation, "cabin": cabin or reservation["cabin"]}
    if action.name == "update_reservation_flights":
        return flight_change(domain, reservation, db["flights"], kwargs.get("flights") or []) == "forbidden"
    if action.name == "update_reservation_baggages":
        total, nonfree = kwargs.get("total_baggages", 0), kwargs.get("nonfree_baggages", 0)
        paid = paid_bags(
            domain, db, reservation["user_id"], reservation["cabin"], len(reservation["passengers"]), total
        )
        return paid is not None and not paid <= nonfree <= max(paid, reservation.get("nonfree_baggages", 0))
    return False


def cabin_set(earlier: Sequence[Action], reservation_id: Any) -> str | None:
    """The cabin the latest of the `earlier` flight changes of a reservation set (the stored reservation keeps its
    booked cabin), or None."""
    return next(
        (
            action.kwargs["cabin"]
            for action in reversed(earlier)
            if action.name == "update_reservation_flights"
            and action.kwargs.get("reservation_id") == reservation_id
            and "cabin" in action.kwargs
        ),
        None,
    )


def forbidden_writes(domain: Domain, task: Task, actions: list[Action]) -> list[Action]:
    """The writes among `actions`, executed in order on the task's database, that the policy forbids whatever the
    user says (`forbidden_write`), each judged with the cabin an earlier flight change set (`cabin_set`)."""
    replay, found = domain.replay([], task=task), []
    for position, action in enumerate(actions):
        cabin = cabin_set(actions[:position], action.kwargs.get("reservation_id"))
        if forbidden_write(domain, replay.db, action, cabin):
            found.append(action)
        if domain.tool_kind(action.name) == "write":
            replay.run(action)
    return found


@functools.lru_cache(maxsize=1024)
def forbidden_gold_write(domain: Domain, split: str, index: int, gold_json: str) -> Action | None:
    """The gold solution's first write the policy forbids whatever the user says."""
    found = forbidden_writes(domain, domain.task(split, index), [Action(**raw) for raw in json.loads(gold_json)])
    return found[0] if found else None


@functools.cache
def _products_of_items(domain: Domain) -> dict[str, str]:
    """Each item id of a domain's catalogue, with the id of its product (empty for a domain without products)."""
    products = domain.base.tables.get("products")
    if products is None:
        return {}
    found = {}
    for key in products.blobs:
        for item in plain(products.load(key)).get("variants", {}):
            found[item] = key
    return found


def item_swap(domain: Domain, item_ids: Sequence[str], new_item_ids: Sequence[str]) -> Eligibility | None:
    """Whether the policy lets items be swapped for new ones: one new item per item, each of the same product (an
    item left as it is changes nothing); None when the domain has no products or an id is unknown."""
    product = _products_of_items(domain)
    if not product or any(item not in product for item in [*item_ids, *new_item_ids]):
        return None
    if len(item_ids) != len(new_item_ids):
        return "forbidden"
    same = all(product[old] == product[new] for old, new in zip(item_ids, new_item_ids, strict=True))
    return "allowed" if same else "forbidden"
