"""`castdata collect`: run k trials of every selected task, concurrently, into a resumable run directory."""

from __future__ import annotations

import asyncio
import hashlib
import json
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

from castdata import __version__
from castdata.config import CollectConfig, ConfigError
from castdata.envs import UnknownName, load_domain
from castdata.envs.tau_import import tau_trait_version
from castdata.models import open_backend
from castdata.records import Trajectory
from castdata.rollout.episode import run_episode
from castdata.rollout.store import MANIFEST, RecordWriter, finished_keys, repair, trajectory_file, write_json

EpisodeKey = tuple[str, str, int, int]


class RunDirConflict(RuntimeError):
    """The run directory holds a run made with another configuration."""


@dataclass
class Progress:
    """Counters a progress display (or a test) can watch."""

    total: int = 0
    done: int = 0  # finished episodes, earlier runs included
    ran: int = 0  # episodes run by this process
    successes: int = 0  # of those, reward 1
    started: float = field(default_factory=time.time)


def episode_seed(seed: int, key: EpisodeKey) -> int:
    """A per-episode seed derived from the run seed and the episode key."""
    digest = hashlib.sha256(f"{seed}:{':'.join(map(str, key))}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def plan_episodes(config: CollectConfig) -> list[EpisodeKey]:
    """Every (domain, split, task, trial) the config asks for; raises ConfigError for bad names or ids."""
    keys = []
    try:
        for name in config.domains:
            domain = load_domain(name)
            task_ids = config.task_ids(len(domain.tasks(config.split)))
            keys += [(name, config.split, task_id, trial) for task_id in task_ids for trial in range(config.trials)]
    except UnknownName as err:
        raise ConfigError(str(err)) from None
    return keys


def prepare_run_dir(config: CollectConfig, out: Path, force: bool) -> dict:
    """Create or reopen a run directory; refuse a different config unless `force`. Returns the manifest."""
    manifest_path = out / MANIFEST
    previous = None
    if manifest_path.exists():
        previous = json.loads(manifest_path.read_text())
        if previous.get("config_fingerprint") != config.fingerprint() and not force:
            raise RunDirConflict(
                f"{out}: holds a run with a different config (fingerprint {previous.get('config_fingerprint')} "
                f"!= {config.fingerprint()}); use another --out, or --force to continue into it"
            )
    manifest = {
        "schema": "castdata.run/1",
        "config": config.model_dump(mode="json"),
        "config_fingerprint": config.fingerprint(),
        "versions": {"castdata": __version__, "tau_trait": tau_trait_version(), "python": platform.python_version()},
        "started_at": (previous or {}).get("started_at", time.time()),
        "ended_at": None,
        "counts": (previous or {}).get("counts", {}),
    }
    write_json(manifest_path, manifest)
    for path in (out / "trajectories").glob("*.jsonl"):
        repair(path)
    return manifest


async def collect_async(config: CollectConfig, out: Path, *, force: bool = False, progress: Progress | None = None) -> dict:
    """Run every pending episode of `config` into `out`; returns the final manifest."""
    keys = plan_episodes(config)
    manifest = prepare_run_dir(config, out, force)
    done = finished_keys(out)
    pending = [key for key in keys if key not in done]
    progress = progress or Progress()
    progress.total, progress.done = len(keys), len(keys) - len(pending)
    agent, user = open_backend(config.agent), open_backend(config.user)
    writer = RecordWriter()
    queue: asyncio.Queue[EpisodeKey] = asyncio.Queue()
    for key in pending:
        queue.put_nowait(key)

    async def worker() -> None:
        while not queue.empty():
            key = queue.get_nowait()
            domain = load_domain(key[0])
            record: Trajectory = await run_episode(
                domain,
                domain.task(key[1], key[2]),
                key[3],
                episode_seed(config.seed, key),
                agent,
                user,
                config.agent,
                config.user,
                max_steps=config.max_steps,
                max_errors=config.max_errors,
            )
            writer.append(trajectory_file(out, key[0], key[1]), record.to_json())
            progress.done += 1
            progress.ran += 1
            progress.successes += int(record.outcome.reward == 1.0)

    try:
        await asyncio.gather(*(worker() for _ in range(min(config.concurrency, max(1, len(pending))))))
    finally:
        writer.close()
        await agent.aclose()
        await user.aclose()
    manifest["ended_at"] = time.time()
    manifest["counts"] = {"planned": len(keys), "ran_now": len(pending), "finished": len(finished_keys(out))}
    write_json(out / MANIFEST, manifest)
    return manifest


def collect(config: CollectConfig, out: Path, *, force: bool = False, show_progress: bool = True) -> dict:
    """Synchronous `collect_async` with a rich progress bar (episodes, success rate, episodes/s)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn

    progress = Progress()

    async def main() -> dict:
        job = asyncio.create_task(collect_async(config, out, force=force, progress=progress))
        if not show_progress:
            return await job
        columns = (TextColumn("collect"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
        with Bar(*columns, transient=False) as bar:
            handle = bar.add_task("", total=None)
            while not job.done():
                await asyncio.wait({job}, timeout=0.2)
                elapsed = max(time.time() - progress.started, 1e-9)
                rate = progress.successes / max(1, progress.ran)
                bar.update(handle, total=progress.total, completed=progress.done,
                           description=f"success {rate:.0%} | {progress.ran / elapsed:.1f} ep/s")
        return job.result()

    return asyncio.run(main())
