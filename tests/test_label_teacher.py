"""Teacher rationales against the loopback OpenAI-compatible server: schema-constrained requests, rejected replies
(not JSON, not of the schema, ungrounded identifiers) retried with feedback, the programmatic fallback, and a cache
that makes reruns free."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from golden.cases import CASES
from helpers.openai_server import ChatServer

from castdata.builders.critic import user_prompt
from castdata.errors import ConfigError
from castdata.label.run import LabelConfig, label_run, load_label_config
from castdata.label.schema import CATEGORIES, Label
from castdata.label.teacher import prompt
from castdata.models.spec import ModelSpec

FALLBACK_ACTION = "I can help with that."  # the success case's greeting: the teacher never gets it right
FIRST_ERROR = 12  # the proposal to cancel the wrong order (#W3586556)
CATEGORIES_REFINED = ["wrong_argument", "misread_observation"]


def teacher_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A stand-in teacher, stateless (so cached reruns are exact): it answers by the action it is asked about
    and by the feedback on its previous try."""
    prompt = body["messages"][1]["content"]
    action = prompt.split("Action to judge (step ")[1].split("\nDraft label:")[0]
    feedback = prompt.split("Your previous answer was rejected:")[1] if "was rejected" in prompt else ""
    schema = body["response_format"]["json_schema"]["schema"]
    answer: dict[str, Any] = {
        "rationale": {
            "observed": "The agent acted on the conversation so far.",
            "required": "Follow the policy.",
            "assessment": "As the draft says.",
        },
        "evidence": [],
    }
    if "categories" in schema["properties"]:
        answer["categories"] = CATEGORIES_REFINED
    if FALLBACK_ACTION in action:
        return {"content": json.dumps({"rationale": {"observed": "incomplete"}})}  # not of the schema, every time
    if action.startswith(f"{FIRST_ERROR})") and "#W3586556" in action:
        if not feedback:
            return {"content": "Invalid: the agent cancelled the wrong order."}  # not JSON
        if "ungrounded_identifier" not in feedback:
            answer["rationale"]["assessment"] = (
                "Invalid (critical): the user wanted order #W0000000 cancelled."  # leaks
            )
        else:
            answer["evidence"] = [
                {"step": FIRST_ERROR - 1, "source": "tool_result", "quote": '"order_id": "#W3586556"'}
            ]
    return {"content": json.dumps(answer)}


def refuse(body: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("a cached rerun must not call the teacher")


@pytest.fixture
def run(tmp_path) -> Path:
    """A run of two hand-built retail episodes: a wrong-order cancel (failed) and a clean cancel."""
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    records = [CASES[name]()[0].to_json() for name in ("retail_wrong_order_cancel", "retail_cancel_success")]
    (run / "trajectories" / "retail.test.jsonl").write_text("".join(r + "\n" for r in records))
    return run


def teacher(server: ChatServer) -> ModelSpec:
    return ModelSpec(backend="openai", model="teacher-model", base_url=server.base_url, max_retries=0)


def labels_of(run: Path) -> dict[tuple[str, int], Label]:
    lines = (run / "labels" / "retail.test.jsonl").read_text().splitlines()
    return {(label.trajectory_id, label.step): label for label in map(Label.model_validate_json, lines)}


def test_the_teacher_sees_the_conversation_as_the_critic_rows_show_it(run):
    label_run(run)
    draft = labels_of(run)[("retail.test.66.0", FIRST_ERROR)]
    trajectory = CASES["retail_wrong_order_cancel"]()[0]
    shown = prompt(trajectory, draft, [])[1]["content"]
    row = user_prompt(SimpleNamespace(trajectory=trajectory), FIRST_ERROR)
    conversation = row.split("Conversation so far:\n")[1].split("\n\nProposed action")[0]
    assert f"Visible conversation before the action:\n{conversation}\n" in shown
    assert conversation.startswith("[1] user: ") and f"\n[{FIRST_ERROR - 1}] tool " in conversation
    assert f"(step {FIRST_ERROR}):\n[{FIRST_ERROR}] agent: " in shown and "] assistant: " not in shown


def test_rejected_replies_are_retried_then_fall_back_and_reruns_are_cached(run):
    programmatic = label_run(run)
    drafts = labels_of(run)
    total = programmatic["labels"]["total"]
    with ChatServer(teacher_reply) as server:
        stats = label_run(run, LabelConfig(teacher=teacher(server), verifier_retries=2))
        requests = server.stats.requests
    writer = stats["verifier"]["writer"]
    assert writer["reasons"] == {"unparseable": 4, "ungrounded_identifier": 1}
    assert writer["rejected_tries"] == 5 and writer["fallbacks"] == 1 and writer["labels"] == total
    assert writer["requests"] == len(requests) == total + 4 and writer["cached"] == 0

    labels = labels_of(run)
    wrong = labels[("retail.test.66.0", FIRST_ERROR)]
    assert wrong.label_source.method == "teacher" and wrong.label_source.teacher_model == "openai:teacher-model"
    assert wrong.categories == CATEGORIES_REFINED and wrong.evidence[0].quote == '"order_id": "#W3586556"'
    assert (
        wrong.verdict == "invalid"
        and wrong.label_source.signals == drafts[("retail.test.66.0", FIRST_ERROR)].label_source.signals
    )
    fallback = labels[("retail.test.69.0", 2)]
    assert fallback == drafts[("retail.test.69.0", 2)] and fallback.label_source.method == "hindsight"
    assert sum(label.label_source.method == "teacher" for label in labels.values()) == total - 1

    asked = [
        r
        for r in requests
        if f"Action to judge (step {FIRST_ERROR})" in r["messages"][1]["content"]
        and "aarav" in r["messages"][1]["content"]
    ]
    assert len(asked) == 3
    prompt = asked[0]["messages"][1]["content"]
    assert "Cancelled. Anything else?" not in prompt  # nothing after the action
    assert "cancel_pending_order" in prompt.split("a correct solution:")[1] and "never cite" in prompt
    assert asked[0]["response_format"]["json_schema"]["schema"]["properties"]["categories"]["items"]["enum"] == list(
        CATEGORIES
    )
    assert "rejected:\n- unparseable: the reply is not JSON" in asked[1]["messages"][1]["content"]
    assert "- ungrounded_identifier: rationale: '#W0000000' was not visible" in asked[2]["messages"][1]["content"]

    files = {p.name: p.read_bytes() for p in (run / "labels").glob("*.jsonl")}
    with ChatServer(refuse) as other:  # another address: the cache key does not hold it
        again = label_run(run, LabelConfig(teacher=teacher(other), verifier_retries=2))
        assert other.stats.total == 0
    assert again["verifier"]["writer"] == {**writer, "requests": 0, "cached": total + 4}
    assert {p.name: p.read_bytes() for p in (run / "labels").glob("*.jsonl")} == files


def test_cli_reports_the_teacher_and_config_errors_are_one_line(run, tmp_path):
    with ChatServer(teacher_reply) as server:
        config = tmp_path / "pipeline.yaml"
        config.write_text(
            f"label:\n  verifier_retries: 0\n  teacher: {{backend: openai, model: t, base_url: '{server.base_url}'}}\n"
        )
        out = subprocess.run(
            [sys.executable, "-m", "castdata.cli", "label", str(run), "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 0, out.stderr
    assert "rationales" in out.stdout and "requests" in out.stdout and "unparseable" in out.stdout
    for section, message in [
        ("teacher: {model: gpt-4o}", "label.teacher: the scripted backend cannot write rationales"),
        ("teacher: {backend: nope}", "label.teacher.backend: Input should be"),
        ("mc: {rollouts: 0}", "label.mc.rollouts: Input should be greater than or equal to 1"),
        ("mc: {rollouts: 2, only: writes}", "label.mc.only: unknown key; allowed: rollouts, actions, max_labels"),
    ]:
        config.write_text(f"label:\n  {section}\n")
        with pytest.raises(ConfigError) as err:
            load_label_config(config)
        assert str(err.value).startswith(message) and "\n" not in str(err.value)
