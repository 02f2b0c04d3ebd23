"""Payment methods in a conversation: which arguments of a write hold one, and whether a text names one.

A payment method id is `<kind>_<digits>` (`gift_card_8887175`, `credit_card_4421486`, `paypal_3022415`,
`certificate_7473723`); a text names it by the id, by its trailing digits (a card's number), or by its kind in words
("gift card", "the card ending", "PayPal"), or as the method the record was paid with ("refund to the
original payment method").
"""

from __future__ import annotations

import re

from castdata.records import Action

PAYMENT_KEYS = ("payment_method_id", "payment_id", "payment_methods")
PAYMENT_WORDS = {
    "gift_card": ("gift card", "gift-card", "giftcard"),
    "credit_card": ("credit card", "card ending", "visa", "mastercard", "amex", "credit", "card"),
    "paypal": ("paypal",),
    "certificate": ("certificate",),
}
_ORIGINAL = re.compile(  # "refund to the original payment method", "your original payment method will be used"
    r"\b(?:to|via|on|with|using)\s+(?:the\s+|your\s+|my\s+)?(?:original|same)\s+(?:payment|method|card)|"
    r"\b(?:the|your|my)\s+(?:original|same)\s+(?:payment\s+method|method|card)\s+(?:will|would)\s+be\s+"
    r"(?:used|charged|refunded|credited)",
    re.I,
)


def payment_kind(value: str) -> str | None:
    """The kind of a payment method id (`gift_card`, `credit_card`, ...), or None for another value."""
    return next((kind for kind in PAYMENT_WORDS if value.startswith(kind)), None)


def payment_ids(action: Action) -> list[str]:
    """The payment method ids a tool call's arguments hold (a booking's list of methods included)."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str) and payment_kind(value):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for key in PAYMENT_KEYS:
        walk(action.kwargs.get(key))
    return found


def names_a_method(text: str) -> bool:
    """Whether a text names some payment method: an id, a kind in words ("my PayPal"), or the original one."""
    lowered = text.lower()
    return (
        re.search(rf"\b(?:{'|'.join(PAYMENT_WORDS)})_\d+", text) is not None
        or any(word in lowered for words in PAYMENT_WORDS.values() for word in words)
        or _ORIGINAL.search(text) is not None
    )


def names_payment(text: str, payment_id: str) -> bool:
    """Whether a text names a payment method: its id, its trailing digits, its kind in words, or the original one."""
    lowered = text.lower()
    kind = payment_kind(payment_id)
    digits = payment_id.rsplit("_", 1)[-1]
    return (
        payment_id in text
        or (digits.isdigit() and re.search(rf"(?<!\d){digits}(?!\d)", text) is not None)
        or (kind is not None and any(word in lowered for word in PAYMENT_WORDS[kind]))
        or _ORIGINAL.search(text) is not None
    )
