"""`castdata run CONFIG.yaml`: every stage end to end (publishing to the loopback Hub), resumable stage by stage."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.build import DEMO, hub_env
from helpers.hub_server import HubServer

REPO = "castdata/pipeline"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory):
    with HubServer(tmp_path_factory.mktemp("hub")) as server:
        yield server


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, hub: HubServer):
    """Run `castdata run` on a small demo config with a `publish:` section; returns a runner for reruns."""
    work = tmp_path_factory.mktemp("pipeline")
    config = yaml.safe_load(DEMO.read_text())
    config.update(
        split="test",
        tasks="0-1",
        trials=2,
        out=str(work / "run"),
        build={"validation_fraction": 0.2},
        publish={"repo": REPO, "version": "0.1.0"},
    )
    path = work / "pipeline.yaml"
    path.write_text(yaml.safe_dump(config))
    env = hub_env(hub.url, work / "hf_home", "hf_pipeline_token")

    def run(config_path: Path = path) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "castdata.cli", "run", str(config_path), "--quiet"]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    first = run()
    assert first.returncode == 0, first.stderr[-4000:]
    return work, run, first


def stage_lines(output: str) -> dict[str, str]:
    return dict(
        line.split(": ", 1)
        for line in output.splitlines()
        if line.split(":")[0] in ("collect", "label", "build", "publish")
    )


def test_every_stage_runs_and_publishes(job, hub: HubServer) -> None:
    work, _, first = job
    stages = stage_lines(first.stdout)
    assert list(stages) == ["collect", "label", "build", "publish"]
    assert stages["collect"].startswith("8 of 8 episodes")
    assert (work / "run" / "dataset" / "castdata.json").is_file()
    assert f'load_dataset("{REPO}", "critic_sft", revision="v0.1.0")' in first.stdout
    refs = json.loads((hub.root / "repos" / "datasets" / f"{REPO}.json").read_text())["refs"]
    assert refs["tags"]["v0.1.0"] == refs["heads"]["main"]


def test_a_rerun_skips_finished_stages(job) -> None:
    work, run, _ = job
    again = run()
    assert again.returncode == 0, again.stderr[-4000:]
    assert set(stage_lines(again.stdout).values()) == {"up to date, skipped"}
    shutil.rmtree(work / "run" / "dataset")
    rebuilt = stage_lines(run().stdout)
    assert rebuilt["collect"] == rebuilt["label"] == "up to date, skipped"
    assert rebuilt["build"].startswith(str(work / "run" / "dataset"))
    assert rebuilt["publish"] == "up to date, skipped", "the same inputs build the same files"


def test_a_bad_section_is_one_line(job) -> None:
    work, run, _ = job
    bad = work / "bad.yaml"
    bad.write_text(yaml.safe_dump({**yaml.safe_load((work / "pipeline.yaml").read_text()), "build": {"bogus": 1}}))
    result = run(bad)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    key_line = next(n for n, text in enumerate(bad.read_text().splitlines(), start=1) if text.strip() == "bogus: 1")
    assert line == (
        f"error: {bad}:{key_line}:3: build.bogus: unknown key; allowed: out, validation_fraction, "
        "critic_balance, valid_per_invalid, critique_reasoning, shard_rows, pretty_name, license"
    )
