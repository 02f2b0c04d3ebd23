"""tau2's NL_ASSERTION reward component: a judge model (`judge:`, any OpenAI-compatible endpoint) grades a task's
natural-language assertions with tau2's own prompt; without a judge the component is reported as not judged."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest
from helpers.openai_server import ChatServer
from helpers.tau2 import needs_tau2, run_in_castdata

from castdata.config import CollectConfig
from castdata.envs import load_domain
from castdata.envs.tau2_domain import NOT_JUDGED
from castdata.envs.tau2_reference import simulation
from castdata.errors import RunFailed
from castdata.imports.tau2 import trajectory
from castdata.models.judge import conversation, judge_messages
from castdata.models.spec import ModelSpec
from castdata.records import ImportMark
from castdata.report import summarize
from castdata.rollout.collect import collect
from castdata.rundir import read_trajectories

pytestmark = needs_tau2
ROOT = Path(__file__).resolve().parent.parent

TAU2_JUDGE = """
import json, os, sys
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
from tau2.data_model.simulation import SimulationRun
from tau2.data_model.tasks import Task
from tau2.evaluator.evaluator_nl_assertions import NLAssertionsEvaluator
task = Task.model_validate_json(open(sys.argv[1]).read())
run = SimulationRun.model_validate_json(open(sys.argv[2]).read())
print(NLAssertionsEvaluator.calculate_reward(task, run.messages).reward)
"""


def _grades(body: dict, met=lambda index: True) -> dict:
    """A judge's answer grading every assertion of the request (tau2's JSON)."""
    asked = body["messages"][1]["content"].split("expectedOutcomes:\n        ")[1].strip()
    assertions = eval(asked)  # tau2 writes the assertions as a Python list
    results = [{"expectedOutcome": a, "reasoning": "seen", "metExpectation": met(i)} for i, a in enumerate(assertions)]
    return {"content": json.dumps({"results": results})}


@contextlib.contextmanager
def nl_basis(domain, task):
    """`task` with NL_ASSERTION added to its reward basis (no shipped task has it there)."""
    from tau2.data_model.tasks import RewardType

    criteria = domain.source(task).evaluation_criteria
    original = criteria.reward_basis
    criteria.reward_basis = [*original, RewardType.NL_ASSERTION]
    try:
        yield criteria.nl_assertions
    finally:
        criteria.reward_basis = original


def test_castdata_asks_the_judge_what_tau2s_own_evaluator_asks(tmp_path):
    """tau2's NLAssertionsEvaluator (in its own process, litellm pointed at the loopback server) and castdata's judge
    send the same messages for the same telecom episode, the user's own tool calls included."""
    domain = load_domain("tau2-telecom")
    task = domain.task("test", 3)
    source = domain.source(task).model_copy(deep=True)
    source.evaluation_criteria.nl_assertions = ["The agent refuels 2 GB of data.", "The agent enables roaming."]
    messages, _ = run_in_castdata(domain, task, domain.gold_calls(task), "Roaming is on and you have 2 GB more.")
    run = simulation(source.id, messages)
    (tmp_path / "task.json").write_text(source.model_dump_json())
    (tmp_path / "run.json").write_text(run.model_dump_json())
    bodies: list[dict] = []

    def respond(body: dict) -> dict:
        bodies.append(body)
        return _grades(body)

    with ChatServer(respond) as server:
        env = {**os.environ, "OPENAI_API_BASE": server.base_url, "OPENAI_API_KEY": "test-key"}
        command = [sys.executable, "-c", TAU2_JUDGE, str(tmp_path / "task.json"), str(tmp_path / "run.json")]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "1.0", done.stderr[-3000:]
    (tau2_body,) = bodies
    mark = ImportMark(
        format="tau2", file="x", sha256="", index=0, source_task_id=source.id, source_trial=0,
        source_reward=None, task_match="same", reproduced=True,
    )  # fmt: skip
    spec = ModelSpec(backend="openai", model="m")
    record = trajectory(domain, task, run, 0, spec, spec, mark)
    assert record.user_tool_calls  # the phone's calls are in the conversation the judge reads
    ours = judge_messages(
        source.evaluation_criteria.nl_assertions, conversation(record.messages, record.user_tool_calls)
    )
    assert ours == tau2_body["messages"]
    assert "\nuser: None\ntool: " in ours[1]["content"]  # a user tool call and its result
    assert tau2_body["temperature"] == ModelSpec().sampling.temperature == 0.0


def _collect(tmp_path: Path, name: str, judge: ModelSpec | None) -> None:
    config = CollectConfig(domains=["tau2-airline"], split="test", tasks=[0], trials=1, judge=judge, out=str(tmp_path))
    collect(config, tmp_path / name, show_progress=False)


def test_an_nl_assertion_task_is_judged_through_the_configured_endpoint_or_reported_not_judged(tmp_path):
    domain = load_domain("tau2-airline")
    task = domain.task("test", 0)
    bodies: list[dict] = []
    answers = {"met": lambda body: _grades(body), "one_unmet": lambda body: _grades(body, lambda i: i != 1)}
    answers["garbage"] = lambda body: {"content": "They did fine."}
    plan = iter(["met", "one_unmet", "garbage"])

    def respond(body: dict) -> dict:
        bodies.append(body)
        return answers[current](body)

    with nl_basis(domain, task) as assertions, ChatServer(respond) as server:
        judge = ModelSpec(backend="openai", model="judge-model", base_url=server.base_url, max_retries=0)
        records = {}
        for current in plan:
            with pytest.raises(RunFailed, match="judge: the answer is not") if current == "garbage" else nullcontext():
                _collect(tmp_path, current, judge)
            (records[current],) = read_trajectories(tmp_path / current)
        _collect(tmp_path, "offline", None)
        (offline,) = read_trajectories(tmp_path / "offline")

    met, unmet, garbage = records["met"], records["one_unmet"], records["garbage"]
    assert len(bodies) == 3 and all(b["model"] == "judge-model" and b["response_format"] for b in bodies)
    assert met.outcome.reward == 1.0 and met.outcome.excluded is None and met.counts_for_pass_k
    assert [c.assertion for c in met.outcome.nl_assertions] == assertions and all(
        c.met for c in met.outcome.nl_assertions
    )
    assert unmet.outcome.reward == 0.0 and unmet.outcome.excluded is None and unmet.counts_for_pass_k
    assert [c.met for c in unmet.outcome.nl_assertions] == [i != 1 for i in range(len(assertions))]
    assert garbage.outcome.termination_reason == "infrastructure_error"  # never scored on a guess; a rerun retries
    assert garbage.outcome.error.startswith("judge: the answer is not tau2's JSON")
    assert offline.outcome.reward == 0.0 and offline.outcome.excluded == NOT_JUDGED and not offline.counts_for_pass_k
    assert offline.outcome.nl_assertions == []
    (group,) = summarize(tmp_path / "offline")["groups"]
    assert group["excluded"] == 1 and group["not_judged"] == 1 and group["pass_k"] == {}


def test_a_scripted_judge_is_refused_with_the_key_named():
    from castdata.config import load_config
    from castdata.errors import ConfigError

    with pytest.raises(ConfigError, match=r"judge\.backend|judge: the scripted backend cannot judge"):
        load_config(ROOT / "configs" / "demo_tau2.yaml", CollectConfig, ["judge.backend=scripted"])
