"""What the agent tells the user about a product's variants, checked against the database in hindsight.

A lookup may show one variant of a product (a generated helper, a truncated result). An agent that reads it as
the whole catalogue tells the user that what they want does not exist:
- "only the size S variant is available" (an **only** claim);
- "the largest size available is 50ml", "the most expensive one available is $200.80" (a **limit** claim);
- "there isn't an available variant with a 10x zoom" (an **absence** claim).

The claim is wrong information at the message that says it when the domain's database holds an available variant
that contradicts it. The contradicting variant (the witness) is the variant the gold solution sets, where it sets
one of that product; otherwise any available variant of it. A claim is read one clause at a time, and only a
clause that speaks of availability ("available", "in stock") and names at least one option value of the product,
or, for an absence claim, "other" variants of the product by name.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from castdata.envs import Domain
from castdata.envs.database import plain
from castdata.label.acts import record_ids
from castdata.messages import is_agent_text
from castdata.records import Action

_CLAUSES = re.compile(r"(?<=[.!?])\s+|\n+|;\s*|,?\s+but\s+|,\s*while\s+|,\s*whereas\s+")
_AVAILABLE = re.compile(r"\b(?:available|in stock|exists?)\b", re.I)
_ONLY = re.compile(r"(?<!not )\bonly\b", re.I)
_NEGATION = re.compile(r"\b(?:no|not|none|unavailable)\b|n't\b|\bout of stock\b", re.I)
_MORE = r"largest|biggest|highest|maximum|max|longest|greatest"
_LESS = r"smallest|lowest|minimum|min|shortest|least"
_PRICE = re.compile(r"\b(under|below|less than|cheaper than|over|above|more than)\s+\$?(\d[\d,]*(?:\.\d+)?)", re.I)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_AMOUNT = re.compile(r"\$(\d[\d,]*(?:\.\d+)?)")
_PRICIEST = re.compile(r"\b(?:most expensive|priciest|highest[- ]priced|costliest)\b", re.I)
_CHEAPEST = re.compile(r"\b(?:cheapest|least expensive|lowest[- ]priced|most affordable)\b", re.I)
_BLANK = {"yes", "no", "none", "n/a", ""}  # option values too common as words to count as said


@dataclass(frozen=True)
class Variant:
    """One variant of a product: its item id, option values, availability and price."""

    item_id: str
    options: tuple[tuple[str, str], ...]
    available: bool
    price: float | None

    def option(self, key: str) -> str | None:
        """The variant's value of option `key`."""
        return dict(self.options).get(key)


@dataclass(frozen=True)
class Product:
    """A product of the domain's catalogue: its id, its name and its variants."""

    product_id: str
    name: str
    variants: tuple[Variant, ...]


@functools.lru_cache(maxsize=8)
def _catalogue(domain: Domain) -> dict[str, Product]:
    """Every product with variants in the domain's initial database, by product id and by each item id."""
    found: dict[str, Product] = {}
    for table in domain.base.tables.values():
        for key in table.blobs:
            value = plain(table.load(key))
            variants = value.get("variants") if isinstance(value, dict) else None
            if not isinstance(variants, dict) or not isinstance(value.get("name"), str):
                continue
            product = Product(
                str(key),
                value["name"],
                tuple(
                    Variant(
                        str(item_id),
                        tuple((str(k), str(v)) for k, v in (variant.get("options") or {}).items()),
                        bool(variant.get("available")),
                        variant.get("price") if isinstance(variant.get("price"), int | float) else None,
                    )
                    for item_id, variant in variants.items()
                    if isinstance(variant, dict)
                ),
            )
            found[product.product_id] = product
            found.update({variant.item_id: product for variant in product.variants})
    return found


def _item_ids(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(item) for item in value]
    return [str(value)] if isinstance(value, str) else []


def record_items(domain: Domain, record: str) -> list[dict[str, Any]]:
    """The items a record (an order) holds in the domain's initial database (hindsight: read or not)."""
    for table in domain.base.tables.values():
        if record in table.blobs:
            value = plain(table.load(record))
            items = value.get("items") if isinstance(value, dict) else None
            return [item for item in items or () if isinstance(item, dict)]
    return []


def products_of(domain: Domain, actions: list[Action]) -> list[Product]:
    """The products the writes act on: of the items they name or set, or, for a write that names none (a
    cancellation), of the items its records hold."""
    catalogue, items = _catalogue(domain), []
    for action in actions:
        named = _item_ids(action.kwargs.get("item_ids")) + _item_ids(action.kwargs.get("new_item_ids"))
        items += named or [str(i.get("item_id")) for r in record_ids(action) for i in record_items(domain, r)]
    found = [catalogue[item] for item in items if item in catalogue]
    return list({product.product_id: product for product in found}.values())


_UNITS = {"ft": "ft|foot|feet", "inch": "inch|inches|in", "hours": "hours?|hrs?", "ml": "ml", "l": "l|liters?|litres?"}
_MEASURE = re.compile(r"(\d+(?:\.\d+)?)\s*-?\s*([a-z]+)", re.I)


def _pattern(value: str) -> str:
    """A pattern for an option value as agents write it: a measure in any of its forms ("4 ft", "4-foot")."""
    measure = _MEASURE.fullmatch(value)
    if measure is None:
        return rf"(?<!\w){re.escape(value)}(?!\w)"
    number, unit = measure.groups()
    return rf"(?<![\w.]){re.escape(number)}\s*-?\s*(?:{_UNITS.get(unit.lower(), re.escape(unit))})\b"


def _said(clause: str, key: str, value: str) -> bool:
    """Whether a clause names an option value (a word of one or two letters only next to its option's name:
    "size S")."""
    if value.lower() in _BLANK:
        return False
    if len(value) <= 2 and _MEASURE.fullmatch(value) is None:
        return bool(re.search(rf"\b{re.escape(key)}\W+{re.escape(value)}\b", clause, re.I))
    return bool(re.search(_pattern(value), clause, re.I))


def _named(clause: str, product: Product) -> dict[str, set[str]]:
    """The option values of the product a clause names, by option."""
    named: dict[str, set[str]] = {}
    for variant in product.variants:
        for key, value in variant.options:
            if _said(clause, key, value):
                named.setdefault(key, set()).add(value)
    return named


def _number(value: str | None) -> float | None:
    found = _NUMBER.search(value or "")
    return float(found.group()) if found else None


def _within_price(clause: str, variant: Variant) -> bool:
    """Whether the variant meets the price bound a clause sets ("under $300"), if it sets one."""
    bound = _PRICE.search(clause)
    if bound is None or variant.price is None:
        return True
    limit = float(bound.group(2).replace(",", ""))
    below = bound.group(1).lower() in ("under", "below", "less than", "cheaper than")
    return variant.price < limit if below else variant.price > limit


def _beyond_limit(clause: str, named: dict[str, set[str]], witness: Variant) -> bool:
    """A limit claim ("the largest size available is 50ml") the witness passes in that option."""
    for key, values in named.items():
        for words, more in ((_MORE, True), (_LESS, False)):
            if not re.search(rf"\b(?:{words})\b(?:\W+\w+){{0,2}}?\W+{re.escape(key)}\b", clause, re.I):
                continue
            claimed = [n for n in (_number(v) for v in values) if n is not None]
            own = _number(witness.option(key))
            if claimed and own is not None and (own > max(claimed) if more else own < min(claimed)):
                return True
    return False


def _beyond_price(clause: str, witness: Variant) -> bool:
    """A price claim ("the most expensive one available is $200.80") the witness's price passes."""
    claimed = [float(amount.replace(",", "")) for amount in _AMOUNT.findall(clause)]
    if not claimed or witness.price is None:
        return False
    if _PRICIEST.search(clause):
        return witness.price > max(claimed)
    return bool(_CHEAPEST.search(clause)) and witness.price < min(claimed)


def _contradicts(clause: str, named: dict[str, set[str]], product: Product, witness: Variant, needed: bool) -> bool:
    """Whether a clause about availability, naming the product's option values `named`, makes a claim about its
    variants that the witness disproves (a price claim only by a variant the gold solution sets, `needed`: the
    cheapest of what the user asked for need not be the cheapest of all)."""
    if not _within_price(clause, witness):
        return False
    if named and (_beyond_limit(clause, named, witness) or (needed and _beyond_price(clause, witness))):
        return True
    if named and _ONLY.search(clause):  # "only size S": the witness matches the rest and differs in one
        return any(
            witness.option(key) not in values
            and all(witness.option(other) in others for other, others in named.items() if other != key)
            for key, values in named.items()
        )
    if not _NEGATION.search(clause):
        return False
    if named:  # "no 10x variant is available": the witness has every value named
        return all(witness.option(key) in values for key, values in named.items())
    # "there are no other available speaker variants"
    return bool(re.search(r"\bother\b", clause, re.I)) and product.name.lower() in clause.lower()


def _disproved(clause: str, product: Product, witnesses: list[Variant], needed: bool) -> bool:
    """Whether one of the witnesses disproves what a clause about availability claims of the product's variants."""
    named = _named(clause, product)  # the clause's option values, read once for every witness
    return any(_contradicts(clause, named, product, witness, needed) for witness in witnesses)


def _names_product(text: str, product: Product) -> bool:
    """Whether a message names the product ("the cycling helmet", "helmets")."""
    return bool(re.search(rf"\b{re.escape(product.name)}", text, re.I))


def _witnesses(product: Product, gold: list[Action]) -> tuple[list[Variant], bool]:
    """The variants the gold solution sets of the product (and True), else every available one (and False)."""
    wanted = {item for action in gold for item in _item_ids(action.kwargs.get("new_item_ids"))}
    chosen = [v for v in product.variants if v.item_id in wanted]
    return [v for v in chosen or product.variants if v.available], bool(chosen)


def false_claim(messages: list[dict[str, Any]], before: int, products: list[Product], gold: list[Action]) -> int | None:
    """The first agent message before `before`, after a tool result showed the product, that tells the user
    something about one of the products' available variants that the database disproves."""
    found = None
    for product in products:
        ids = {product.product_id} | {v.item_id for v in product.variants}
        witnesses, needed = _witnesses(product, gold)
        shown = next(
            (
                i
                for i in range(1, before)
                if messages[i]["role"] == "tool" and any(item in (messages[i]["content"] or "") for item in ids)
            ),
            None,
        )
        if shown is None:
            continue
        for index in range(shown + 1, before if found is None else found):
            text = messages[index]["content"] if is_agent_text(messages[index]) else None
            if not text or not _names_product(text, product):
                continue  # a claim about another product's variants
            unsaid = [w for w in witnesses if w.item_id not in text]
            # a claim speaks of availability, and a question claims nothing
            clauses = [c for c in _CLAUSES.split(text) if "?" not in c and _AVAILABLE.search(c)]
            if any(_disproved(clause, product, unsaid, needed) for clause in clauses):
                found = index
                break
    return found
