"""The grounding verifier rejects planted faults; rejected writer (teacher) outputs are retried, then replaced."""

from __future__ import annotations

import asyncio

import pytest
from golden.cases import CASES
from helpers.writers import PlantingWriter

from castdata.label.hindsight import judge
from castdata.label.policy import clause_table
from castdata.label.rationale import programmatic_labels
from castdata.label.schema import Evidence, PolicyRef
from castdata.label.verify import verify
from castdata.label.writers import write_verified
from castdata.visible import View


@pytest.fixture(scope="module")
def wrong_cancel():
    """The wrong-order cancel: its labels, by step, and the view."""
    trajectory, expect = CASES["retail_wrong_order_cancel"]()
    view = View(trajectory)
    labels = {label.step: label for label in programmatic_labels(judge(trajectory), view)}
    return trajectory, view, labels, expect.first_error


def codes(label, reference, view):
    return sorted({r.code for r in verify(label, reference, view, clause_table("retail"))})


def test_programmatic_label_passes(wrong_cancel):
    _, view, labels, first = wrong_cancel
    assert codes(labels[first], labels[first], view) == []


def test_quote_not_in_the_cited_message(wrong_cancel):
    _, view, labels, first = wrong_cancel
    label = labels[first]
    cited = label.evidence[0]
    planted = label.model_copy(
        update={"evidence": [Evidence(step=cited.step, source=cited.source, quote="#W9999999 was requested")]}
    )
    assert codes(planted, label, view) == ["quote_not_found"]


def test_future_step_as_evidence(wrong_cancel):
    trajectory, view, labels, first = wrong_cancel
    label = labels[first]
    after = first + 1  # the cancel's own result
    planted = label.model_copy(
        update={
            "evidence": [Evidence(step=after, source="tool_result", quote=trajectory.messages[after]["content"][:20])]
        }
    )
    assert codes(planted, label, view) == ["evidence_not_before"]


def test_unknown_clause_id(wrong_cancel):
    _, view, labels, first = wrong_cancel
    label = labels[first]
    planted = label.model_copy(
        update={"policy_refs": [PolicyRef(clause_id="retail.cancel-pending-order.9", quote="An order")]}
    )
    assert codes(planted, label, view) == ["unknown_clause"]
    misquoted = label.model_copy(
        update={
            "policy_refs": [
                PolicyRef(clause_id="retail.cancel-pending-order.1", quote="Orders can always be cancelled.")
            ]
        }
    )
    assert codes(misquoted, label, view) == ["clause_quote_mismatch"]


def test_order_id_only_the_gold_actions_contain(wrong_cancel):
    trajectory, view, labels, _ = wrong_cancel
    greeting = labels[2]  # asks for the user's name: no order id has been seen yet
    gold = next(a for a in trajectory.privileged.gold_actions if a.name == "cancel_pending_order")
    assert "#W3361211" in gold.kwargs.values() and not view.seen("#W3361211", 2)
    in_expected = greeting.model_copy(update={"expected_action": gold})
    assert codes(in_expected, greeting, view) == ["ungrounded_identifier"]
    prose = greeting.rationale.model_copy(update={"required": "Cancel order #W3361211 right away."})
    assert codes(greeting.model_copy(update={"rationale": prose}), greeting, view) == ["ungrounded_identifier"]


def test_verdict_contradicting_the_label(wrong_cancel):
    _, view, labels, first = wrong_cancel
    label = labels[first]
    assert codes(label.model_copy(update={"verdict": "valid"}), label, view) == ["verdict_mismatch"]
    assert codes(labels[first - 2].model_copy(update={"verdict": "invalid"}), labels[first - 2], view) == [
        "verdict_mismatch"
    ]


def test_wrong_source_unknown_category_and_other_action(wrong_cancel):
    trajectory, view, labels, first = wrong_cancel
    label = labels[first]
    user_turn = max(step for step in range(first) if trajectory.messages[step]["role"] == "user")
    wrong_source = Evidence(step=user_turn, source="tool_result", quote=trajectory.messages[user_turn]["content"])
    assert codes(label.model_copy(update={"evidence": [wrong_source]}), label, view) == ["wrong_source"]
    assert codes(label.model_copy(update={"categories": ["hallucination"]}), label, view) == ["unknown_category"]
    assert codes(labels[2], label, view) == ["verdict_mismatch", "wrong_action"]


def _write(writer, wrong_cancel, retries):
    trajectory, view, labels, first = wrong_cancel
    return asyncio.run(
        write_verified(writer, trajectory, labels[first], view, clause_table("retail"), retries)
    ), labels[first]


def test_rejected_writer_output_is_retried_with_feedback(wrong_cancel):
    writer = PlantingWriter(bad=1)
    written, draft = _write(writer, wrong_cancel, retries=2)
    assert not written.fallback and written.label.label_source.method == "teacher" and written.label != draft
    assert [[r.code for r in tries] for tries in written.rejections] == [["evidence_not_before"]]
    assert writer.feedback == [[], ["evidence_not_before"]]


@pytest.mark.parametrize("fault,code", [("future", "evidence_not_before"), ("unparseable", "unparseable")])
def test_writer_rejected_every_time_falls_back_to_the_programmatic_label(wrong_cancel, fault, code):
    writer = PlantingWriter(bad=10, fault=fault)
    written, draft = _write(writer, wrong_cancel, retries=2)
    assert written.fallback and written.label == draft and writer.calls == 3
    assert [[r.code for r in tries] for tries in written.rejections] == [[code]] * 3
