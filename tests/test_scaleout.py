"""Collection on a local Ray instance (2 CPUs, one per module): the same records as a local run, resume after
a worker is killed mid-unit, fsspec URL run directories, and endpoint limits that hold across workers."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.openai_server import ChatServer, FaultPlan
from helpers.playbook import KEY, KEY_ENV, Playbook, write_config

from castdata.config import CollectConfig
from castdata.models.scripted import MISTAKE_KINDS
from castdata.rollout.collect import collect, collect_async
from castdata.rollout.runner import Progress
from castdata.rundir import read_trajectories

ray = pytest.importorskip("ray")

FOUR_WORKERS = {"num_workers": 4, "resources": {"CPU": 0.5}}


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One Ray instance for the module; workers inherit the test API key from its environment."""
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must stay under 107 bytes
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, KEY)
        ray.init(address="local", num_cpus=2, _temp_dir=temp, include_dashboard=False, log_to_driver=False)
        yield
        ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def playbook() -> Playbook:
    return Playbook("retail", "test")


def demo(out: Path | str, **ray_options: Any) -> CollectConfig:
    """The demo collection: the scripted noisy oracle with mistakes, on Ray when `ray_options` are given."""
    mistakes = {kind: 0.2 for kind in MISTAKE_KINDS}
    executor = {"ray": ray_options} if ray_options else "local"
    return CollectConfig(
        domains=["retail", "telehealth"],
        split="test",
        tasks="0-11",
        trials=2,
        concurrency=4,
        agent={"options": {"mistakes": mistakes}},
        executor=executor,
        out=str(out),
    )


def loopback(tmp_path: Path, server: ChatServer, **values: Any) -> CollectConfig:
    """The openai-backend collection of `test_backend_collect`, with `values` changed."""
    raw = yaml.safe_load(write_config(tmp_path / "loopback.yaml", server).read_text())
    return CollectConfig(**{**raw, **values})


def lines(out: Path) -> list[dict]:
    """Every record line of a run (each must parse: no torn record)."""
    return [
        json.loads(line)
        for path in sorted((out / "trajectories").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def keys(records: list[dict]) -> list[tuple]:
    return [(r["domain"], r["split"], r["task_id"], r["trial"]) for r in records]


def comparable(out: Path) -> list[dict]:
    drop = {"started_at": True, "ended_at": True, "meta": {"__all__": {"t"}}}
    return [r.model_dump(mode="json", exclude=drop) for r in sorted(read_trajectories(out), key=lambda r: r.id)]


def test_four_workers_give_the_records_of_a_local_run(tmp_path: Path) -> None:
    started = time.perf_counter()
    manifest = collect(
        demo(tmp_path / "ray", **FOUR_WORKERS, episodes_per_task_batch=5), tmp_path / "ray", show_progress=False
    )
    collect(demo(tmp_path / "local"), tmp_path / "local", show_progress=False)
    assert manifest.counts == {"planned": 48, "ran_now": 48, "finished": 48, "infrastructure_errors": 0}
    assert comparable(tmp_path / "ray") == comparable(tmp_path / "local")
    assert {r.outcome.reward for r in read_trajectories(tmp_path / "ray")} == {0.0, 1.0}
    written = keys(lines(tmp_path / "ray"))
    assert len(written) == len(set(written)) == 48
    files = {path.name for path in (tmp_path / "ray" / "trajectories").glob("*.jsonl")}
    assert len(files) == 10 and all(".unit-" in name for name in files)  # 2 domains x 24 episodes in units of 5

    again = collect(demo(tmp_path / "ray", **FOUR_WORKERS), tmp_path / "ray", show_progress=False)
    assert again.counts["ran_now"] == 0
    assert {path.name for path in (tmp_path / "ray" / "trajectories").glob("*.jsonl")} == files
    resumed = collect(demo(tmp_path / "local", **FOUR_WORKERS), tmp_path / "local", show_progress=False)
    assert resumed.counts["ran_now"] == 0  # a local run resumes on Ray: the executor is not part of the config
    assert time.perf_counter() - started < 60


def test_url_run_directory(tmp_path: Path) -> None:
    url = f"file://{tmp_path}/run"
    manifest = collect(demo(url, **FOUR_WORKERS, episodes_per_task_batch=8), url, show_progress=False)
    assert manifest.counts == {"planned": 48, "ran_now": 48, "finished": 48, "infrastructure_errors": 0}
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["counts"] == manifest.counts
    collect(demo(tmp_path / "local"), tmp_path / "local", show_progress=False)
    assert comparable(tmp_path / "run") == comparable(tmp_path / "local")


def test_workers_killed_mid_unit_are_rerun_without_duplicates(tmp_path: Path, playbook: Playbook) -> None:
    out = tmp_path / "run"
    progress, failure = Progress(), []
    with ChatServer(playbook, FaultPlan(latency_s=0.02)) as server:
        config = loopback(
            tmp_path,
            server,
            tasks="0-11",
            concurrency=1,
            executor={"ray": {**FOUR_WORKERS, "episodes_per_task_batch": 4}},
        )
        runner = threading.Thread(target=lambda: failure.extend(_run(config, out, progress)))
        runner.start()
        partial = _kill_workers_mid_unit(out, progress, deadline=time.time() + 60)
        runner.join(timeout=90)
    assert not runner.is_alive() and failure == []
    written = keys(lines(out))  # every line parses: the dead workers' torn tails were cut
    assert len(written) == len(set(written)) == 24
    attempts = sorted((out / "trajectories").glob(partial.name.rsplit("-", 1)[0] + "-*.jsonl"))
    assert len(attempts) == 2 and attempts[0] == partial  # the rerun kept the dead attempt's records
    assert all(r.counts_for_pass_k for r in read_trajectories(out))  # no infrastructure error after the kill


def _run(config: CollectConfig, out: Path, progress: Progress) -> list[BaseException]:
    try:
        asyncio.run(collect_async(config, out, progress=progress))
    except BaseException as err:
        return [err]
    return []


def _kill_workers_mid_unit(out: Path, progress: Progress, deadline: float) -> Path:
    """SIGKILL every worker process once a unit of 4 episodes has 1 to 3 recorded; returns that unit's file."""
    while time.time() < deadline:
        for path in (out / "trajectories").glob("*.unit-*.jsonl"):
            if 1 <= path.read_bytes().count(b"\n") < 4 and len(progress.workers) == 4:
                for pid in set(progress.workers.values()):
                    os.kill(pid, signal.SIGKILL)
                return path
        time.sleep(0.005)
    raise AssertionError("no unit was part-way in time")


def test_endpoint_limit_holds_across_workers(tmp_path: Path, playbook: Playbook) -> None:
    with ChatServer(playbook, FaultPlan(latency_s=0.02)) as server:
        config = loopback(
            tmp_path,
            server,
            tasks="0-15",
            concurrency=8,
            executor={"ray": {**FOUR_WORKERS, "episodes_per_task_batch": 8}},
        )
        for role in ("agent", "user"):
            getattr(config, role).max_concurrency = 8
        manifest = collect(config, tmp_path / "run", show_progress=False)
        assert manifest.counts["finished"] == 32
        # 4 workers x 8 episodes want up to 32 requests at once: the limit binds (more than one worker's share)
        # and holds (at most 8); how close the peak comes to 8 depends on the machine's load
        assert 4 < server.stats.max_in_flight <= 8
