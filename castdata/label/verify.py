"""The grounding verifier: mechanical checks every rationale must pass, programmatic or teacher-written.

- every evidence step comes before the judged action, and its source matches the message's role;
- every quote is at least 3 characters long and a substring of the visible content of its step (of the policy,
  for policy evidence);
- every clause id exists, and its quote is a substring of the clause;
- every category is in the taxonomy;
- no identifier (ids, emails, amounts, dates, of any length) nor street address appears in the rationale or the
  expected action unless it occurs in the policy or before the action (both may also restate what the action
  itself contains);
- the expected action is not the action itself;
- the verdict agrees with the hindsight label's, for the same action.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from castdata.label.policy import ClauseTable
from castdata.label.schema import CATEGORIES, Label
from castdata.visible import MIN_QUOTE, View

_SOURCE_ROLES = {"message": ("user", "assistant", "system"), "tool_result": ("tool",)}


@dataclass(frozen=True)
class Rejection:
    """Why a rationale failed verification: a reason code (counted in the statistics) and the detail."""

    code: str
    detail: str


def _evidence(label: Label, view: View) -> list[Rejection]:
    found = []
    for i, item in enumerate(label.evidence):
        where = f"evidence[{i}]"
        if len(item.quote) < MIN_QUOTE:
            found.append(
                Rejection("short_quote", f"{where}: quote {item.quote!r} is shorter than {MIN_QUOTE} characters")
            )
            continue
        if item.source == "policy":
            if item.quote not in view.policy:
                found.append(Rejection("quote_not_found", f"{where}: quote not in the policy"))
            continue
        if item.step is None or not 0 <= item.step < label.step:
            found.append(
                Rejection(
                    "evidence_not_before", f"{where}: step {item.step} is not before the action (step {label.step})"
                )
            )
            continue
        if view.roles[item.step] not in _SOURCE_ROLES[item.source]:
            found.append(
                Rejection(
                    "wrong_source",
                    f"{where}: step {item.step} is a {view.roles[item.step]} message, not a {item.source}",
                )
            )
        if item.quote not in view.texts[item.step]:
            found.append(Rejection("quote_not_found", f"{where}: quote {item.quote[:60]!r} is not in step {item.step}"))
    return found


def _clauses(label: Label, clauses: ClauseTable) -> list[Rejection]:
    found = []
    for ref in label.policy_refs:
        clause = clauses.by_id.get(ref.clause_id)
        if clause is None:
            found.append(Rejection("unknown_clause", f"policy_refs: no clause {ref.clause_id!r}"))
        elif ref.quote not in clause.text:
            found.append(Rejection("clause_quote_mismatch", f"policy_refs: quote is not in clause {ref.clause_id}"))
    return found


def _identifiers(label: Label, view: View) -> list[Rejection]:
    prose = " ".join((label.rationale.observed, label.rationale.required, label.rationale.assessment))
    found = [
        Rejection("ungrounded_identifier", f"rationale: {token!r} was not visible")
        for token in view.ungrounded(prose, label.step, also=label.step, strict=True)
    ]
    if label.expected_action is not None:
        text = json.dumps(label.expected_action.kwargs)
        found += [
            Rejection("ungrounded_identifier", f"expected_action: {token!r} was not visible")
            for token in view.ungrounded(text, label.step, also=label.step, strict=True)
        ]
        if label.expected_action == label.action:
            found.append(Rejection("expected_is_action", "expected_action: the same as the judged action"))
    return found


def verify(label: Label, reference: Label, view: View, clauses: ClauseTable) -> list[Rejection]:
    """Every grounding problem of `label` (empty when it passes); `reference` is the hindsight label of the same action."""
    found = []
    if (label.trajectory_id, label.step, label.action) != (reference.trajectory_id, reference.step, reference.action):
        found.append(
            Rejection(
                "wrong_action",
                f"labels {label.action.name} at step {label.step} of {label.trajectory_id}, not the action at step {reference.step}",
            )
        )
    if label.verdict != reference.verdict:
        found.append(
            Rejection(
                "verdict_mismatch", f"verdict {label.verdict!r} contradicts the hindsight verdict {reference.verdict!r}"
            )
        )
    unknown = [c for c in label.categories if c not in CATEGORIES]
    if unknown:
        found.append(Rejection("unknown_category", f"categories: {', '.join(unknown)} not in the taxonomy"))
    return found + _evidence(label, view) + _clauses(label, clauses) + _identifiers(label, view)


NOT_GROUNDING = frozenset({"verdict_mismatch", "wrong_action"})  # agreement, not grounding


def grounding_problems(critique: dict, reference: Label, view: View, clauses: ClauseTable) -> set[str]:
    """The verifier's reasons to reject a critic's structured critique (its fields, as a dict) of the action
    `reference` labels, for its evidence, clauses, categories or identifiers (codes; empty when grounded)."""
    candidate = Label.model_validate({**reference.model_dump(), **critique})
    return {r.code for r in verify(candidate, reference, view, clauses) if r.code not in NOT_GROUNDING}
