"""Small labelled runs for the build, hub and pipeline tests: the offline demo agent, collected and labelled for real."""

from __future__ import annotations

import json
import os
from pathlib import Path

from castdata.config import PipelineConfig, load_config
from castdata.label.run import label_run
from castdata.rollout.collect import collect
from castdata.rundir import RunDir

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "configs" / "demo.yaml"


def demo_config(**changes) -> PipelineConfig:
    """The offline demo config (scripted noisy-oracle agent and scripted user) with some keys changed."""
    return load_config(DEMO, PipelineConfig).model_copy(update=changes)


def labelled_run(run_dir: Path, infrastructure_failure: bool = False, **changes) -> Path:
    """Collect the demo config with `changes` into `run_dir` (plus, optionally, an infrastructure failure), then label it."""
    config = demo_config(**changes)
    collect(config.collect_part(), run_dir, show_progress=False)
    if infrastructure_failure:
        _add_infrastructure_failure(run_dir, config.domains[0], config.splits[0])
    label_run(run_dir)
    return run_dir


def _add_infrastructure_failure(run_dir: Path, domain: str, split: str) -> None:
    """Append a copy of the run's first episode as trial 99, failed on infrastructure."""
    path = RunDir(run_dir).trajectory_file(domain, split)
    record = json.loads(path.read_text().splitlines()[0])
    record["trial"] = 99
    record["id"] = f"{domain}.{split}.{record['task_id']}.99"
    record["outcome"].update(reward=0.0, termination_reason="infrastructure_error", error="HTTP 503")
    with path.open("a") as handle:
        handle.write(json.dumps(record) + "\n")


def hub_env(url: str, home: Path, token: str) -> dict[str, str]:
    """The environment a client process needs to talk to the loopback Hub, with `token` as its Hub token."""
    from helpers.hub_server import configure_hf_env

    saved = dict(os.environ)
    try:
        configure_hf_env(url, home)
        return {**os.environ, "HF_TOKEN": token, "PYTHONPATH": str(ROOT / "tests")}
    finally:
        os.environ.clear()
        os.environ.update(saved)
