"""Collecting, labelling and building on tau2 domains: the scripted oracle, dual control, the LLM user's tools."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.openai_server import ChatServer
from helpers.tau2 import needs_tau2

from castdata.config import CollectConfig
from castdata.critic.eval_policy import EvalConfig, run_eval
from castdata.envs import load_domain
from castdata.models.base import EpisodeContext
from castdata.models.openai_backend import OpenAIBackend
from castdata.models.spec import ModelSpec
from castdata.rollout.collect import collect
from castdata.rundir import read_trajectories

pytestmark = needs_tau2
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["tau2-airline", "tau2-retail", "tau2-telecom"])
def test_oracle_without_mistakes_solves_every_task_and_the_user_runs_its_phone(tmp_path, name):
    config = CollectConfig(domains=[name], split=["train", "test"], trials=1, out=str(tmp_path / "run"))
    collect(config, Path(config.out), show_progress=False)
    records = read_trajectories(Path(config.out))
    domain = load_domain(name)
    assert len(records) == sum(len(domain.tasks(s)) for s in ("train", "test"))
    assert [(r.split, r.task_id, r.outcome) for r in records if r.outcome.reward != 1.0] == []
    for record in records:
        task = domain.task(record.split, record.task_id)
        made = [(c.name, c.arguments) for c in record.user_tool_calls]
        assert made == [(a.name, a.kwargs) for _, a in task.user_actions]  # every user-side gold call, in order
        assert all(c.ok for c in record.user_tool_calls)
        assert not any(m.get("tool_calls") for m in record.messages if m["role"] != "assistant")
        assert all(record.messages[c.step]["role"] == "user" for c in record.user_tool_calls)


def test_demo_config_collects_labels_and_builds_and_labels_only_agent_actions(tmp_path):
    config = yaml.safe_load((ROOT / "configs" / "demo_tau2.yaml").read_text())
    config.update(
        tasks={"tau2-retail/test": "0-3", "tau2-telecom/test": "0-3"},
        trials=1,
        out=str(tmp_path / "run"),
        build={"validation_fraction": 0.2},
    )
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [sys.executable, "-m", "castdata.cli", "run", str(path), "--quiet"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "run" / "dataset" / "README.md").is_file()
    telecom = load_domain("tau2-telecom")
    user_tools = {schema["function"]["name"] for schema in telecom.user_tool_schemas}
    labels = [yaml.safe_load(line) for line in (tmp_path / "run" / "labels" / "tau2-telecom.test.jsonl").open()]
    records = {r.id: r for r in read_trajectories(tmp_path / "run") if r.domain == "tau2-telecom"}
    assert labels and all(label["action"]["name"] not in user_tools for label in labels)
    assert len(labels) == sum(sum(1 for m in r.messages if m["role"] == "assistant") for r in records.values())
    assert any(r.user_tool_calls for r in records.values())


def test_the_llm_user_gets_the_phone_tools_and_sees_their_results():
    domain = load_domain("tau2-telecom")
    bodies: list[dict] = []
    answers = iter(
        [
            {"content": None, "tool_calls": [{"function": {"name": "toggle_airplane_mode", "arguments": {}}}]},
            {"content": "Airplane mode is off now."},
        ]
    )

    def respond(body: dict) -> dict:
        bodies.append(body)
        return next(answers)

    async def main():
        backend = OpenAIBackend(ModelSpec(backend="openai", model="user-model", base_url=server.base_url))
        try:
            user = backend.user_session(EpisodeContext(domain=domain, task=domain.task("test", 0), seed=1))
            first = await user.reply("Please turn airplane mode off on your phone.")
            second = await user.observe([(first.tool_calls[0], "Airplane Mode is now OFF.")])
            return first, second
        finally:
            await backend.aclose()

    with ChatServer(respond) as server:
        first, second = asyncio.run(main())
    assert first.tool_calls[0].name == "toggle_airplane_mode" and second.content == "Airplane mode is off now."
    offered = {t["function"]["name"] for t in bodies[0]["tools"]}
    assert offered == {s["function"]["name"] for s in domain.user_tool_schemas}
    assert "tools that act on your own phone" in bodies[0]["messages"][0]["content"]
    assert bodies[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": first.tool_calls[0].id,
        "name": "toggle_airplane_mode",
        "content": "Airplane Mode is now OFF.",
    }


def test_eval_guards_a_tau2_agent_with_the_replay_critic(tmp_path):
    mistakes = {"wrong_argument": 0.4, "wrong_tool": 0.3, "no_confirmation": 0.2}
    config = EvalConfig(
        domains=["tau2-retail", "tau2-telecom"],
        split="test",
        tasks="0-4",
        trials=1,
        agent={"options": {"mistakes": mistakes}},
        critic={"backend": "scripted", "model": "replay-critic"},
    )
    comparison = run_eval(config, tmp_path, show_progress=False)
    rows = {row["domain"]: row for row in comparison["pass_k"] if row["k"] == 1}
    assert set(rows) == {"tau2-retail", "tau2-telecom"}
    assert all(row["with_critic"] == 1.0 and row["without_critic"] < 1.0 for row in rows.values())
    guarded = read_trajectories(tmp_path / "with_critic")
    assert any(r.interceptions for r in guarded) and any(r.user_tool_calls for r in guarded)
