"""`castdata collect` with the openai backend for agent and user, against the loopback server.

The server's `Playbook` (`helpers.playbook`) answers every request from the request alone, so retries and faults
cannot change the play, and a faulty run must reach the same rewards as a clean one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.openai_server import ChatServer, FaultPlan
from helpers.playbook import KEY, KEY_ENV, MALFORMED_OBSERVATION, Playbook, write_config
from typer.testing import CliRunner

from castdata.cli import app
from castdata.config import load_config
from castdata.report import summarize
from castdata.rundir import read_trajectories

FAULTS = FaultPlan(
    rate_429=0.07, rate_500=0.07, rate_drop=0.06, rate_malformed=0.08, retry_after_s=0.001, latency_s=0.001, seed=3
)
RETRYABLE = FaultPlan(
    rate_429=0.05, rate_500=0.05, rate_drop=0.05, rate_truncated=0.05, rate_empty=0.05, retry_after_s=0.001, seed=4
)  # 25% of requests fail, every one of them retryable


def collect(config: Path, out: Path) -> None:
    result = CliRunner().invoke(app, ["collect", str(config), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output


def rewards(out: Path) -> dict[tuple, float]:
    return {record.key: record.outcome.reward for record in read_trajectories(out)}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture(scope="module")
def playbook() -> Playbook:
    return Playbook("retail", "test")


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory, playbook: Playbook) -> Path:
    """A fault-free run of the test config."""
    tmp_path = tmp_path_factory.mktemp("clean")
    with pytest.MonkeyPatch.context() as env, ChatServer(playbook) as server:
        env.setenv(KEY_ENV, KEY)
        collect(write_config(tmp_path / "clean.yaml", server), tmp_path / "clean")
        assert server.stats.outcomes["ok"] == server.stats.total
    return tmp_path / "clean"


def test_retryable_faults_change_nothing(tmp_path: Path, playbook: Playbook, clean: Path) -> None:
    with ChatServer(playbook, RETRYABLE) as server:
        collect(write_config(tmp_path / "faulty.yaml", server), tmp_path / "faulty")
        outcomes = dict(server.stats.outcomes)
    assert min(outcomes[kind] for kind in ("429", "500", "drop", "truncated", "empty")) > 0, outcomes
    assert sum(outcomes.values()) - outcomes["ok"] >= 0.1 * sum(outcomes.values())  # 25% planned, over ~130 requests
    assert played(tmp_path / "faulty") == played(clean)


def played(run_dir: Path) -> dict[tuple, tuple[float, str]]:
    """Each episode's reward and messages (tool-call ids, which the server numbers by request, left out)."""
    ids = re.compile(r'"(tool_call_id|id)": "call_\d+_\d+"')
    return {r.key: (r.outcome.reward, ids.sub("", json.dumps(r.messages))) for r in read_trajectories(run_dir)}


def test_faulty_run_matches_clean_run(tmp_path: Path, playbook: Playbook, clean: Path) -> None:
    with ChatServer(playbook, FAULTS) as server:
        collect(write_config(tmp_path / "faulty.yaml", server), tmp_path / "faulty")
        outcomes = dict(server.stats.outcomes)
        assert all(headers["authorization"] == f"Bearer {KEY}" for headers in server.stats.headers)

    clean, faulty = rewards(clean), rewards(tmp_path / "faulty")
    assert len(clean) == 8 and faulty == clean and sorted(set(clean.values())) == [0.0, 1.0]
    assert min(outcomes["429"], outcomes["500"], outcomes["drop"], outcomes["malformed"]) > 0
    records = read_trajectories(tmp_path / "faulty")
    assert all(r.outcome.termination_reason == "user_stop" for r in records)

    # every malformed response is a recorded agent error step, with the raw text, answered by an error observation
    steps = [(r, i) for r in records for i, meta in enumerate(r.meta) if meta.violation == "malformed_tool_call"]
    assert len(steps) == outcomes["malformed"]
    for record, index in steps:
        assert record.messages[index]["role"] == "assistant" and record.meta[index].raw["arguments"]
        assert record.messages[index + 1]["content"].startswith(MALFORMED_OBSERVATION)

    # no API key in any written file
    for path in (tmp_path / "faulty").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_usage_is_summed_per_episode_and_run(tmp_path: Path, playbook: Playbook) -> None:
    with ChatServer(playbook) as server:
        collect(write_config(tmp_path / "config.yaml", server), tmp_path / "run")
    records = read_trajectories(tmp_path / "run")
    for record in records:
        agent_usage = [m.usage for m, msg in zip(record.meta, record.messages) if msg["role"] == "assistant"]
        assert all(u is not None and u.prompt_tokens > 0 and u.cost_usd > 0 for u in agent_usage)
        user_usage = [m.usage for m, msg in zip(record.meta, record.messages) if msg["role"] == "user"]
        assert all(u is not None and u.completion_tokens > 0 and u.cost_usd is None for u in user_usage)
    summary = summarize(tmp_path / "run")
    total = summary["usage"]
    assert total["prompt_tokens"] == sum(r.usage_total().prompt_tokens for r in records)
    assert total["cost_usd"] == pytest.approx(sum(r.usage_total().cost_usd for r in records), abs=1e-6)
    report = CliRunner().invoke(app, ["report", str(tmp_path / "run")])
    assert report.exit_code == 0 and "token usage" in report.output


def test_infrastructure_errors_are_kept_excluded_and_rerun(tmp_path: Path, playbook: Playbook) -> None:
    with ChatServer(playbook, FaultPlan(fail_first_n=10**9)) as server:
        config = write_config(tmp_path / "config.yaml", server, max_retries=1)
        result = CliRunner().invoke(app, ["collect", str(config), "--out", str(tmp_path / "run"), "--quiet"])
        assert result.exit_code == 1, result.output  # every episode failed: the run fails, with one summary line
        assert result.output.startswith("failed: all 8 episodes run into") and len(result.output.splitlines()) == 1
        assert "ended in infrastructure_error; first error:" in result.output
        assert "gave up after 2 attempts" in result.output
        failed = read_trajectories(tmp_path / "run")
        assert len(failed) == 8 and all(r.outcome.termination_reason == "infrastructure_error" for r in failed)
        assert all("gave up after 2 attempts" in r.outcome.error for r in failed)
        (group,) = summarize(tmp_path / "run")["groups"]
        assert (group["episodes"], group["infrastructure_errors"], group["pass_k"]) == (8, 8, {})

        server.faults = FaultPlan()  # the endpoint recovers; the same config reruns the failed episodes
        collect(config, tmp_path / "run")
    rerun = read_trajectories(tmp_path / "run")
    assert len(rerun) == 8 and all(r.counts_for_pass_k for r in rerun)
    (group,) = summarize(tmp_path / "run")["groups"]
    assert group["infrastructure_errors"] == 0 and group["pass_k"][1] > 0


@pytest.mark.parametrize("name", ["openai_example.yaml", "vllm_example.yaml"])
def test_example_configs_validate(name: str) -> None:
    config = load_config(Path(__file__).resolve().parent.parent / "configs" / name)
    assert {config.agent.backend, config.user.backend} <= {"openai", "vllm"}
