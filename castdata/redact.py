"""API keys are redacted by value: every key castdata reads from the environment is remembered (in memory only),
and each error, record, manifest and log line is cleaned of it before it is shown or written, whatever its shape.
Error text is also cleaned of anything shaped like an OpenAI key (`sk-...`, whole or masked)."""

from __future__ import annotations

import re

MIN_KEY_LENGTH = 6  # shorter values (e.g. "EMPTY" for keyless local servers) would redact ordinary words
REDACTED = "[redacted]"
_SHAPED = re.compile(r"\bsk-[\w*.-]+")
_keys: set[str] = set()


def remember(key: str | None) -> str | None:
    """Note a key's value so that it is redacted from now on; returns it."""
    if key and len(key) >= MIN_KEY_LENGTH:
        _keys.add(key)
    return key


def redact(text: str) -> str:
    """`text` without any remembered key."""
    for key in sorted(_keys, key=len, reverse=True):
        text = text.replace(key, REDACTED)
    return text


def redact_error(text: str) -> str:
    """An error message without any remembered key, nor anything shaped like an OpenAI key."""
    return _SHAPED.sub(f"sk-{REDACTED}", redact(text))
