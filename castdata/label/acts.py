"""What write tools do, in the words agents use: how a message, a request or a refusal names an act."""

from __future__ import annotations

import json
import re

from castdata.records import Action

# the record a write acts on (`line_id`: a tau2-telecom line)
TARGET_KEYS = ("order_id", "reservation_id", "user_id", "appointment_id", "patient_id", "line_id")


def record_ids(action: Action) -> list[str]:
    """The ids of the records `action` acts on, the user's own id left out (every call of an episode names it)."""
    return [
        str(action.kwargs[key]) for key in TARGET_KEYS if key != "user_id" and isinstance(action.kwargs.get(key), str)
    ]


def signature(action: Action) -> str:
    """An action as a hashable key: its tool and arguments (the same call made twice has one signature)."""
    return json.dumps([action.name, action.kwargs], sort_keys=True)


def id_shape(record: str) -> str:
    """A pattern for record ids like `record`: as many capitals and digits (a reservation's six, an order's W and
    seven digits); an id with other characters keeps them, with its runs of digits generalised."""
    if re.fullmatch(r"[A-Z0-9]+", record):
        return rf"\b[A-Z0-9]{{{len(record)}}}\b"
    return r"\b" + re.sub(r"\d+", lambda digits: rf"\d{{{len(digits.group())}}}", re.escape(record)) + r"\b"


_TOPICS = {  # a fragment of a tool name -> the words agents use for that act
    "cancel": ("cancel",),
    "return": ("return", "refund"),
    "exchange": ("exchange",),
    "modify": ("modify", "change", "update", "switch"),
    "update": ("change", "update", "modify"),
    "book": ("book", "reserv"),
    "flights": ("upgrad", "downgrad", "cabin", "reschedul"),  # a reservation's flights and cabin
    "send_certificate": ("certificate", "compensat", "voucher"),
    "baggage": ("bag",),
    "passenger": ("passenger", "name"),
    "address": ("address",),
    "payment": ("payment", "pay"),
}


_GENERIC = ("modify", "update")


def topic_words(tool: str) -> tuple[str, ...]:
    """The words agents use for what a write tool does (`cancel`, `refund`, `book`, ...)."""
    return tuple(word for key, words in _TOPICS.items() if key in tool for word in words)


def specific_words(tool: str) -> tuple[str, ...]:
    """The words for what sets a write tool's act apart (`passenger` for update_reservation_passengers), without
    the generic "change"/"update" every modifying tool shares; all its words when it has no others."""
    words = tuple(word for key, words in _TOPICS.items() if key in tool and key not in _GENERIC for word in words)
    return words or topic_words(tool)
