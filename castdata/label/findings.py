"""A finding: one signal (replay or policy rule) about one agent action, with its category and severity."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from castdata.records import Action


@dataclass(frozen=True)
class Finding:
    """One signal about the agent action at message `step`.

    `signal` names the check (`replay.*` for outcome signals, `rule.*` for policy rules). `expected` is the
    corrected action as hindsight knows it (it may come from the privileged gold solution: a rationale
    keeps it only when everything in it was visible to the agent).
    """

    step: int
    signal: str
    category: str
    severity: Literal["critical", "minor"]
    expected: Action | None = None
    missing: Action | None = None  # the gold write never made, or the one a wrong proposal should have offered
    wrong: Action | None = None  # for a wrong proposal: the write the user's yes led to

    @property
    def critical(self) -> bool:
        """Whether the finding breaks the episode's outcome."""
        return self.severity == "critical"
