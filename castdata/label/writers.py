"""Rationale writers other than the programmatic one (a teacher model), kept honest by the verifier.

A writer gets the trajectory and the programmatic label (the draft: hindsight verdict, signals, grounded
evidence) and returns a label with its own rationale. `write_verified` checks each output with
`castdata.label.verify.verify`; a rejected output is retried (the writer gets the rejection reasons as
feedback) up to `retries` times, after which the programmatic draft is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from castdata.label.policy import ClauseTable
from castdata.label.schema import Label
from castdata.label.verify import Rejection, verify
from castdata.records import Trajectory
from castdata.visible import View


class RationaleWriter(Protocol):
    """Writes a rationale for a hindsight label, e.g. a teacher model (`label_source.method = "teacher"`)."""

    name: str

    async def write(self, trajectory: Trajectory, draft: Label, feedback: list[Rejection]) -> Label:
        """A label for the same action as `draft`; `feedback` holds the reasons the previous try was rejected.

        May raise ValueError (e.g. unparseable model output): that try counts as rejected.
        """
        ...


@dataclass
class Written:
    """The label kept for one action, and the rejected tries before it."""

    label: Label
    rejections: list[list[Rejection]] = field(default_factory=list)  # one list per rejected try
    fallback: bool = False  # every try was rejected: the programmatic draft was kept


async def write_verified(
    writer: RationaleWriter, trajectory: Trajectory, draft: Label, view: View, clauses: ClauseTable, retries: int
) -> Written:
    """The writer's label if it passes verification within `retries` retries, else the draft."""
    written = Written(draft)
    feedback: list[Rejection] = []
    for _ in range(retries + 1):
        try:
            candidate = await writer.write(trajectory, draft, feedback)
        except ValueError as err:
            feedback = [Rejection("unparseable", str(err).splitlines()[0] if str(err) else type(err).__name__)]
        else:
            feedback = verify(candidate, draft, view, clauses)
            if not feedback:
                written.label = candidate
                return written
        written.rejections.append(feedback)
    written.fallback = True
    return written
