"""Bad input and dead endpoints: one line, exit 2 (1 for a run whose every episode failed), nothing written, no
key ever shown or stored. The cases are `benchmarks/bad_inputs.py`'s table; the rest are the flows around them."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.openai_server import ChatServer, FaultPlan
from typer.testing import CliRunner

from castdata import __version__
from castdata.cli import app
from castdata.rundir import read_trajectories

_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bad_inputs.py"
_spec = importlib.util.spec_from_file_location("bad_inputs", _SCRIPT)
bad_inputs = sys.modules["bad_inputs"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bad_inputs)
KEY_ENV, KEY = bad_inputs.KEY_ENV, bad_inputs.KEY


@pytest.fixture(scope="module")
def server_url():
    with bad_inputs.loopback_server() as url:
        yield url


def test_there_are_enough_cases() -> None:
    assert len(bad_inputs.cases()) >= 23


@pytest.mark.parametrize("case", bad_inputs.cases(), ids=lambda case: case.name)
def test_bad_input_is_one_line_and_writes_nothing(case, server_url: str) -> None:
    result = bad_inputs.run_case(case, server_url)
    assert not result.traceback, result.output
    assert result.exit_code == case.exit_code, result.output
    assert len(result.output.splitlines()) == 1 and result.output.startswith("error: "), result.output
    assert result.written == []
    assert KEY not in result.output and bad_inputs.WRONG_KEY not in result.output


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def endpoint(url: str, **changes: Any) -> dict:
    return {
        "backend": "openai",
        "model": "m",
        "base_url": url,
        "api_key_env": KEY_ENV,
        "max_retries": 1,
        "options": {"retry_backoff_s": 0.001},
        **changes,
    }


def small(out: Path, **changes: Any) -> dict:
    return {"domains": ["retail"], "split": "test", "tasks": "0-2", "trials": 2, "out": str(out), **changes}


def test_version_and_validate(tmp_path: Path) -> None:
    assert invoke("--version").output.strip() == f"castdata {__version__}"
    config = write(tmp_path / "c.yaml", small(tmp_path / "out"))
    shown = invoke("validate", str(config))
    assert shown.exit_code == 0 and shown.output.startswith("ok: ") and "6 episodes of retail" in shown.output
    assert not (tmp_path / "out").exists()


def test_a_corrected_config_runs_where_the_bad_one_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = write(tmp_path / "bad.yaml", small(tmp_path / "out", agent={"options": {"mistakes": {"wrong_argumnt": 0.5}}}))
    assert invoke("run", str(bad), "--quiet").exit_code == 2
    assert not (tmp_path / "out").exists()
    fixed = {"options": {"mistakes": {"wrong_argument": 0.5}}}
    good = write(tmp_path / "good.yaml", small(tmp_path / "out", agent=fixed))
    done = invoke("run", str(good), "--quiet")
    assert done.exit_code == 0, done.output


def test_run_force_continues_into_a_run_dir_of_another_config(tmp_path: Path) -> None:
    first = write(tmp_path / "first.yaml", small(tmp_path / "out"))
    assert invoke("collect", str(first), "--quiet").exit_code == 0
    second = write(tmp_path / "second.yaml", small(tmp_path / "out", seed=7))
    refused = invoke("run", str(second), "--quiet")
    assert refused.exit_code == 2 and "--force" in refused.output
    forced = invoke("run", str(second), "--quiet", "--force")
    assert forced.exit_code == 0, forced.output
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["config"]["seed"] == 7


def test_limit_runs_the_first_episodes_and_a_rerun_continues(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", small(tmp_path / "out"))
    assert invoke("collect", str(config), "--quiet", "--limit", "3").exit_code == 0
    assert sorted(r.key for r in read_trajectories(tmp_path / "out")) == [
        ("retail", "test", 0, 0),
        ("retail", "test", 0, 1),
        ("retail", "test", 1, 0),
    ]
    assert invoke("collect", str(config), "--quiet").exit_code == 0
    assert len(read_trajectories(tmp_path / "out")) == 6


def test_set_overrides_config_keys(tmp_path: Path) -> None:
    config = write(tmp_path / "c.yaml", small(tmp_path / "out"))
    done = invoke("collect", str(config), "--quiet", "--set", "trials=1", "--set", "tasks=[4]")
    assert done.exit_code == 0, done.output
    assert [r.key for r in read_trajectories(tmp_path / "out")] == [("retail", "test", 4, 0)]


def test_probe_falls_back_to_a_chat_request_without_a_models_route(tmp_path: Path, monkeypatch) -> None:
    with ChatServer(lambda body: {"content": "hi"}, FaultPlan(api_key=KEY, models_route=False)) as server:
        one = small(tmp_path / "out", agent=endpoint(server.base_url), trials=1, tasks=[0], max_steps=1)
        config = write(tmp_path / "c.yaml", one)
        monkeypatch.setenv(KEY_ENV, KEY)
        assert invoke("collect", str(config), "--quiet").exit_code == 0
        ping = server.stats.requests[0]
        assert (ping["messages"], ping["max_completion_tokens"]) == ([{"role": "user", "content": "ping"}], 1)

        monkeypatch.setenv(KEY_ENV, "wrong-but-long-key")
        refused = invoke("collect", str(config), "--quiet", "--out", str(tmp_path / "other"))
        assert refused.exit_code == 2 and f"refused the key in ${KEY_ENV} (HTTP 401)" in refused.output
        assert not (tmp_path / "other").exists()


def test_the_probe_runs_once_per_server_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with ChatServer(lambda body: {"content": "Hello ###STOP###"}, FaultPlan(api_key=KEY)) as server:
        config = small(tmp_path / "out", agent=endpoint(server.base_url), user=endpoint(server.base_url, model="u"))
        done = invoke("collect", str(write(tmp_path / "c.yaml", config)), "--quiet")
        assert done.exit_code == 0, done.output
        assert server.stats.models_requests == 1


@pytest.mark.parametrize("key", ["sk-proj-abc123def456", "plainvalue0123456789", "AKIA/ZX+y=9_shape"])
def test_a_key_of_any_shape_never_lands_in_a_file(key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, key)

    def leaky(body: dict) -> dict:
        raise RuntimeError(f"upstream rejected the credentials {key} for this model")

    with ChatServer(leaky, FaultPlan(api_key=key)) as server:
        config = write(tmp_path / "c.yaml", small(tmp_path / "out", agent=endpoint(server.base_url)))
        failed = invoke("collect", str(config), "--quiet")
    assert failed.exit_code == 1 and len(failed.output.splitlines()) == 1, failed.output
    assert "all 6 episodes run into" in failed.output and "[redacted]" in failed.output and key not in failed.output
    records = read_trajectories(tmp_path / "out")
    assert len(records) == 6 and all("[redacted]" in r.outcome.error for r in records)
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
