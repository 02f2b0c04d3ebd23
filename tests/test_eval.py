"""`castdata eval`: the noisy oracle without and with the scripted replay critic, side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from castdata.config import CollectConfig
from castdata.critic.eval_policy import REPORT, EvalConfig, run_eval
from castdata.report import summarize
from castdata.rollout.collect import collect
from castdata.rundir import read_trajectories

CASTDATA = [sys.executable, "-m", "castdata.cli"]
COLLECTION = {
    "domains": ["retail", "telehealth"],
    "split": "test",
    "tasks": "0-9",
    "trials": 2,
    "agent": {
        "options": {"mistakes": {"wrong_argument": 0.4, "wrong_tool": 0.3, "no_confirmation": 0.2, "before_auth": 0.2}}
    },
}
REPLAY_CRITIC = {"backend": "scripted", "model": "replay-critic"}


def same_episodes(a: Path, b: Path) -> bool:
    """Whether two runs hold the same episodes (timestamps aside)."""

    def strip(r):
        return r.model_dump(mode="json", exclude={"started_at": True, "ended_at": True, "meta": {"__all__": {"t"}}})

    return [strip(r) for r in read_trajectories(a)] == [strip(r) for r in read_trajectories(b)]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("eval")
    return out, run_eval(EvalConfig(**COLLECTION, critic=REPLAY_CRITIC), out, show_progress=False)


def test_without_the_critic_the_numbers_equal_a_plain_collect_run(evaluated, tmp_path: Path) -> None:
    out, comparison = evaluated
    collect(CollectConfig(**COLLECTION), tmp_path / "plain", show_progress=False)

    assert same_episodes(out / "without_critic", tmp_path / "plain")
    plain = {(g["domain"], k): v for g in summarize(tmp_path / "plain")["groups"] for k, v in g["pass_k"].items()}
    assert {(row["domain"], row["k"]): row["without_critic"] for row in comparison["pass_k"]} == plain


def test_the_critic_intercepts_the_breaking_writes_and_pass_k_rises(evaluated) -> None:
    out, comparison = evaluated
    records = read_trajectories(out / "with_critic")
    breaking = [m for r in records for m in r.injected_mistakes if m.outcome_breaking]

    assert breaking and all(m.intercepted for m in breaking)
    assert all(r.outcome.reward == 1.0 for r in records)  # every other injected mistake kind leaves the outcome intact
    assert comparison["interceptions"]["total"] >= len(breaking) and comparison["interceptions"]["executed_anyway"] == 0
    for row in comparison["pass_k"]:
        assert row["with_critic"] == 1.0 and row["with_critic"] > row["without_critic"]
    stored = json.loads((out / REPORT).read_text())
    assert stored["pass_k"] == comparison["pass_k"]


def acted(message: dict) -> object:
    """What an assistant message does: its (first) tool call, or its text."""
    return message["tool_calls"][0]["function"] if message.get("tool_calls") else message.get("content")


def test_intercepted_proposals_are_recorded_beside_the_executed_transcript(evaluated) -> None:
    out, _ = evaluated
    for record in read_trajectories(out / "with_critic"):
        for interception in record.interceptions:
            executed = record.messages[interception.step]
            assert acted(executed) == acted(interception.revised) != acted(interception.proposed)


def test_eval_cli_prints_pass_k_side_by_side_and_refuses_bad_configs(tmp_path: Path) -> None:
    config = tmp_path / "eval.yaml"
    config.write_text(
        yaml.safe_dump({**COLLECTION, "tasks": "0-1", "critic": REPLAY_CRITIC, "out": str(tmp_path / "out")})
    )
    shown = subprocess.run([*CASTDATA, "eval", str(config), "--quiet"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "without critic" in shown.stdout and "with critic" in shown.stdout and "interceptions:" in shown.stdout

    config.write_text(
        yaml.safe_dump(
            {**COLLECTION, "critic": {"backend": "scripted", "model": "noisy-oracle"}, "out": str(tmp_path / "bad")}
        )
    )
    refused = subprocess.run([*CASTDATA, "eval", str(config), "--quiet"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "critic.model: the scripted critic is 'replay-critic'" in refused.stderr


def test_a_guarded_run_builds_with_its_interceptions(evaluated, tmp_path: Path) -> None:
    from datasets import load_dataset

    from castdata.builders.dataset import build_dataset
    from castdata.label.run import label_run

    out, _ = evaluated
    run = out / "with_critic"
    label_run(run)
    build_dataset([run], tmp_path / "dataset")
    rows = load_dataset(str(tmp_path / "dataset"), "trajectories", split="test")
    stored = {row["task"] + f".{row['trial']}": row for row in rows}
    for record in read_trajectories(run):
        row = stored[f"{record.domain}.{record.split}.{record.task_id}.{record.trial}"]
        assert len(row["interceptions"]) == len(record.interceptions)
        assert [m["intercepted"] for m in row["injected_mistakes"]] == [m.intercepted for m in record.injected_mistakes]
    assert any(row["interceptions"] for row in rows)


def test_the_shipped_eval_config_runs(tmp_path: Path) -> None:
    config = Path(__file__).resolve().parent.parent / "configs" / "eval_demo.yaml"
    command = [*CASTDATA, "eval", str(config), "--out", str(tmp_path), "--limit", "8", "--quiet", "--json"]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert {path.name for path in tmp_path.iterdir()} == {"without_critic", "with_critic", REPORT}
    assert len(read_trajectories(tmp_path / "with_critic")) == 8
