"""What the agent could see: the visible content of each message, and which identifiers it had seen by a step.

The grounding rules are checked against this view: quotes must be substrings of a step's visible content,
and identifiers (order, user, reservation and appointment ids, item ids, emails, amounts, dates) may only
be used where they occur in the policy or in the messages before the judged action.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from castdata.messages import visible_content
from castdata.records import Trajectory

IDENTIFIER = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # email
    r"|\$\s?\d[\d,]*(?:\.\d+)?|\d[\d,]*\.\d+"  # amount
    r"|#?[A-Za-z0-9_-]*\d[A-Za-z0-9_-]*"  # anything with a digit: ids, item numbers, dates
)
_MIN_ID_LENGTH = 4  # shorter digit tokens ("2", "24h") are counts and times, not identifiers
MIN_QUOTE = 3  # a quote shorter than this points at nothing
ADDRESS = re.compile(
    r"\b\d+\s+(?:[A-Z][a-z]+\s+){1,3}(?:Street|St|Avenue|Ave|Road|Rd|Drive|Dr|Lane|Ln|Boulevard|Blvd|Way|Court|Ct|Place|Pl|Highway)\b"
)


def identifiers(text: str, strict: bool = False) -> list[str]:
    """The identifiers in a text, in order (amounts as written, e.g. `$1,234.50`); `strict` keeps short digit
    tokens too and adds street addresses."""
    return list(_identifiers(text, strict))


@functools.lru_cache(maxsize=16384)
def _identifiers(text: str, strict: bool) -> tuple[str, ...]:  # templated texts (rationales, results) repeat
    found = [address for address in ADDRESS.findall(text)] if strict else []
    for match in IDENTIFIER.finditer(text):
        token = match.group(0)
        if strict or "@" in token or "$" in token or "." in token or len(token) >= _MIN_ID_LENGTH:
            found.append(token)
    return tuple(found)


def _spellings(token: str) -> tuple[str, ...]:
    """The ways an identifier can be written in visible content (amounts without `$`, commas, trailing zeros)."""
    if "@" in token or not re.fullmatch(r"\$?\s?[\d,]+(?:\.\d+)?", token):
        return (token,)
    number = token.lstrip("$").strip().replace(",", "")
    return (token, number, repr(float(number)) if "." in number else number)


class View:
    """The visible content of every message of one trajectory (message 0 is the policy)."""

    def __init__(self, trajectory: Trajectory) -> None:
        self.texts = [visible_content(message) for message in trajectory.messages]
        self.roles = [message["role"] for message in trajectory.messages]

    @property
    def policy(self) -> str:
        """The system prompt: the domain policy."""
        return self.texts[0]

    def seen(self, value: str, before: int, also: int | None = None) -> bool:
        """Whether `value` occurs in the messages before step `before` (policy included), or in step `also`."""
        texts = self.texts[:before] + ([self.texts[also]] if also is not None else [])
        return any(value in text for text in texts)

    def last_seen(self, value: str, before: int) -> int | None:
        """The latest step before `before` (the policy excluded) whose visible content contains `value`."""
        for step in range(before - 1, 0, -1):
            if value in self.texts[step]:
                return step
        return None

    def ungrounded(self, text: str, before: int, also: int | None = None, strict: bool = False) -> list[str]:
        """The identifiers in `text` that occur neither in the policy nor before step `before` (nor in step `also`);
        `strict` checks identifiers of any length and street addresses too."""
        return [
            token
            for token in dict.fromkeys(identifiers(text, strict))
            if not any(self.seen(spelling, before, also) for spelling in _spellings(token))
        ]


def said_by_user(messages: list[dict[str, Any]], before: int | None = None) -> str:
    """Everything the user said before message `before` (all of it without), one turn a line."""
    return "\n".join(m.get("content") or "" for m in messages[1:before] if m["role"] == "user")
