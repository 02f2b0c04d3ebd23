"""The golden set: hand-built trajectories whose first critical error and flagged steps are known."""

from __future__ import annotations

import pytest
from golden.cases import CASES

from castdata.label.hindsight import judge
from castdata.label.policy import clause_table
from castdata.label.rationale import programmatic_labels
from castdata.label.verify import verify
from castdata.visible import View


def test_golden_set_covers_the_issue():
    built = [case() for case in CASES.values()]
    domains = {trajectory.domain for trajectory, _ in built}
    assert len(built) >= 20 and {"retail", "airline", "telehealth"} <= domains
    flagged = {category for _, expect in built for category in expect.flagged.values()}
    assert {
        "wrong_argument",
        "missing_confirmation",
        "auth_violation",
        "premature_termination",
        "missed_required_action",
        "policy_violation",
        "unnecessary_transfer",
        "wrong_tool",
    } <= flagged
    assert any(expect.first_error is None for _, expect in built) and any(expect.first_error for _, expect in built)


@pytest.mark.parametrize("name", sorted(CASES))
def test_labeler_matches_golden_case(name):
    trajectory, expect = CASES[name]()
    assert (trajectory.outcome.reward == 1.0) == (expect.first_error is None)  # the case is built as intended
    episode = judge(trajectory)
    assert episode.first_error == expect.first_error
    judged = [j for j in episode.judgements if expect.first_error is None or j.step <= expect.first_error]
    assert {j.step: j.categories[0] for j in judged if j.verdict == "invalid"} == expect.flagged
    for judgement in judged:
        assert judgement.first_critical_error == (judgement.step == expect.first_error)
        assert judgement.severity == (
            "critical" if judgement.first_critical_error else "minor" if judgement.step in expect.flagged else "none"
        )
    assert all(
        j.after_first_error
        for j in episode.judgements
        if expect.first_error is not None and j.step > expect.first_error
    )
    view = View(trajectory)
    for label in programmatic_labels(episode, view):
        assert verify(label, label, view, clause_table(trajectory.domain)) == [], (label.step, label.rationale)


def _first_error_label(name: str):
    trajectory, _ = CASES[name]()
    episode = judge(trajectory)
    labels = programmatic_labels(episode, View(trajectory))
    return trajectory, next(label for label in labels if label.first_critical_error)


def test_wrong_argument_rationale_names_the_visible_right_value():
    trajectory, label = _first_error_label("retail_wrong_order_cancel")
    assert label.action.name == "respond" and "#W3586556" in label.action.kwargs["content"]  # the wrong proposal
    assert (
        label.expected_action.name == "respond" and '"order_id": "#W3361211"' in label.expected_action.kwargs["content"]
    )
    assert "#W3361211" in label.rationale.required
    value = next(e for e in label.evidence if e.quote == "#W3361211")
    assert (
        value.source == "tool_result"
        and value.step < label.step
        and "#W3361211" in trajectory.messages[value.step]["content"]
    )
    assert [ref.clause_id for ref in label.policy_refs] == ["retail.cancel-pending-order.1"]
    assert label.label_source.signals == ["said.proposal"]


def test_premature_end_expects_a_confirmation_request_not_the_write():
    _, label = _first_error_label("airline_premature_end")
    assert label.expected_action.name == "respond" and "Z7GOZK" in label.expected_action.kwargs["content"]
    assert label.label_source.signals == ["replay.gold_write_missing"]


def test_required_outputs_are_never_quoted():
    trajectory, label = _first_error_label("telehealth_missing_output")
    text = label.model_dump_json()
    assert label.expected_action is None
    assert not any(output in text for output in trajectory.privileged.required_outputs)
