"""Rows longer than `training.max_length` are shortened from the left of their history, never dropped wholesale.

What a row trains on stays whole: the system turn (policy, tools), the proposed action and its critique
(`critic_sft`: the numbered history inside the user turn loses its oldest entries, and says so), the last
assistant turn (`policy_sft`: the oldest turns after the system turn go, so the row restarts at a user turn), the
chosen and rejected answers (`policy_dpo`: the prompt's oldest turns go). A row that cannot fit even with no
history left is dropped and counted; when that is every row, the recipe's `max_length` is the problem.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from castdata.errors import ConfigError

if TYPE_CHECKING:
    from datasets import Dataset

OMITTED = "[earlier messages omitted to fit max_length]"
_HISTORY = re.compile(r"(?s)\A(Conversation so far:\n)(.*?)(\n\nProposed action \[\d+\]:\n.*)\Z")
_ENTRY = re.compile(r"\n(?=\[\d+\] )")


@dataclass
class Fitted:
    """What shortening did to a split."""

    rows: Any  # the Dataset
    shortened: int
    dropped: int


def fit_rows(rows: Dataset, tokenizer: Any, max_length: int | None, config: str) -> Fitted:
    """Shorten the rows of a `config` split that exceed `max_length` tokens (see the module docstring)."""
    if max_length is None:
        return Fitted(rows, 0, 0)
    shorten = {"critic_sft": _shorten_critic, "policy_sft": _shorten_turns, "policy_dpo": _shorten_prompt}[config]

    def length(row: dict[str, Any]) -> int:
        messages = row["messages"] if "messages" in row else row["prompt"] + _longer(row["chosen"], row["rejected"])
        kwargs = row.get("chat_template_kwargs") or {}
        tools = row.get("tools")
        encoded = tokenizer.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=True, **kwargs)
        return len(encoded["input_ids"])

    counts = {"shortened": 0, "dropped": 0}

    def fit(row: dict[str, Any]) -> dict[str, Any]:
        if length(row) <= max_length:
            return {**row, "_fits": True}
        fitted = _fit(row, shorten, lambda candidate: length(candidate) <= max_length)
        counts["shortened" if fitted is not None else "dropped"] += 1
        return {**(fitted or row), "_fits": fitted is not None}

    mapped = rows.map(fit, load_from_cache_file=False)
    kept = mapped.filter(lambda fits: fits, input_columns="_fits").remove_columns("_fits")
    if len(kept) == 0 and len(rows) > 0:
        raise ConfigError(
            f"training.max_length: {max_length} tokens do not hold the system turn and the trained "
            f"answer of any {config} row, even with no history left; raise max_length"
        )
    return Fitted(kept, counts["shortened"], counts["dropped"])


def report(split: str, fitted: Fitted, max_length: int | None) -> None:
    """Say on stderr how many rows of a split were shortened (and dropped) to fit `max_length`."""
    if fitted.shortened or fitted.dropped:
        dropped = f"; {fitted.dropped} dropped (too long even with no history)" if fitted.dropped else ""
        print(
            f"{split}: {fitted.shortened} rows shortened from the left of their history to fit max_length "
            f"{max_length}{dropped}",
            file=sys.stderr,
        )


Shorten = Callable[[dict[str, Any], int], "dict[str, Any] | None"]


def _fit(row: dict[str, Any], shorten: Shorten, fits: Callable[[dict], bool]) -> dict | None:
    """The row with the fewest history items cut that fits (binary search over the number cut), or None."""
    low, high = 1, _items(row, shorten)
    if high == 0 or not fits(shorten(row, high)):
        return None
    while low < high:
        middle = (low + high) // 2
        if fits(shorten(row, middle)):
            high = middle
        else:
            low = middle + 1
    return shorten(row, low)


def _items(row: dict[str, Any], shorten: Shorten) -> int:
    """How many history items the row has to cut (the largest count `shorten` accepts)."""
    count = 0
    while shorten(row, count + 1) is not None:
        count += 1
    return count


def _shorten_critic(row: dict[str, Any], cut: int) -> dict[str, Any] | None:
    """Cut the `cut` oldest numbered entries of the critic row's history; None when it has fewer."""
    system, user, answer = row["messages"]
    match = _HISTORY.match(user["content"])
    entries = _ENTRY.split(match.group(2)) if match and match.group(2) else []
    entries = [entry for entry in entries if entry != OMITTED]
    if cut > len(entries):
        return None
    content = match.group(1) + "\n".join([OMITTED, *entries[cut:]]) + match.group(3)
    return {**row, "messages": [system, {**user, "content": content}, answer]}


def _shorten_turns(row: dict[str, Any], cut: int) -> dict[str, Any] | None:
    """Cut the `cut` oldest turns after the system turn (then up to the next user turn); the last assistant turn
    stays. None when nothing is left to cut."""
    messages = row["messages"]
    cut_messages = _cut_history(messages[:-1], cut)
    return None if cut_messages is None else {**row, "messages": [*cut_messages, messages[-1]]}


def _shorten_prompt(row: dict[str, Any], cut: int) -> dict[str, Any] | None:
    """Cut the `cut` oldest turns of a DPO prompt (after its system turn); None when nothing is left to cut."""
    prompt = _cut_history(row["prompt"], cut)
    return None if prompt is None else {**row, "prompt": prompt}


def _cut_history(messages: list[dict[str, Any]], cut: int) -> list[dict[str, Any]] | None:
    """`messages` without the `cut` oldest turns after the system turn, starting again at a user turn (so no tool
    result loses its call). None when no user turn is left after `cut` turns."""
    head = 1 if messages and messages[0]["role"] == "system" else 0
    start = head + cut
    while start < len(messages) and messages[start]["role"] != "user":
        start += 1
    return None if start >= len(messages) else [*messages[:head], *messages[start:]]


def _longer(chosen: list[dict[str, Any]], rejected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The longer answer of a DPO pair (by text), the one that must fit."""
    return max(chosen, rejected, key=lambda turns: sum(len(str(turn.get("content") or "")) for turn in turns))
