"""`castdata collect`: run k trials of every selected task, concurrently, into a resumable run directory."""

from __future__ import annotations

import asyncio
import hashlib
import json
import platform
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from castdata import __version__
from castdata.config import CollectConfig
from castdata.envs import load_domain
from castdata.envs.tau2_import import tau2_version
from castdata.envs.tau_import import tau_trait_version
from castdata.errors import ConfigError, RunDirConflict, RunFailed, UnknownName
from castdata.models import open_backend
from castdata.models.base import Backend
from castdata.models.probe import probe_endpoints
from castdata.records import Trajectory, Usage
from castdata.rollout.episode import run_episode
from castdata.rollout.store import (
    MANIFEST,
    EpisodeKey,
    RecordWriter,
    finished_keys,
    iter_trajectories,
    repair,
    trajectory_file,
    write_json,
)


@dataclass
class Progress:
    """Counters a progress display (or a test) can watch."""

    total: int = 0
    done: int = 0  # finished episodes, earlier runs included
    ran: int = 0  # episodes run by this run
    successes: int = 0  # of those, reward 1
    tokens: int = 0  # their prompt and completion tokens
    cost_usd: float = 0.0  # their priced cost
    workers: dict[int, int] = field(default_factory=dict)  # cluster executor: worker -> pid of its process
    started: float = field(default_factory=time.time)

    def count(self, reward: float, usage: Usage) -> None:
        """One more finished episode, with its reward and token usage."""
        self.done += 1
        self.ran += 1
        self.successes += int(reward == 1.0)
        self.tokens += usage.prompt_tokens + usage.completion_tokens
        self.cost_usd += usage.cost_usd or 0.0


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
            for split in config.splits:
                if config.selection(name, split) is None:
                    continue
                task_ids = config.task_ids(name, split, len(domain.tasks(split)))
                keys += [(name, split, task_id, trial) for task_id in task_ids for trial in range(config.trials)]
    except UnknownName as err:
        raise ConfigError(str(err)) from None
    return keys


def prepare_run_dir(config: CollectConfig, out: Path, force: bool) -> dict:
    """Create or reopen a run directory; refuse a different config unless `force`. Returns the manifest."""
    manifest_path = out / MANIFEST
    previous = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
    manifest = run_manifest(config, previous, str(out), force)
    write_json(manifest_path, manifest)
    for path in (out / "trajectories").glob("*.jsonl"):
        repair(path)
    return manifest


def run_manifest(config: CollectConfig, previous: dict | None, where: str, force: bool) -> dict:
    """The manifest of a run (re)started at `where` over the `previous` one; refuses a different config unless `force`."""
    if previous is not None and previous.get("config_fingerprint") != config.fingerprint() and not force:
        raise RunDirConflict(
            f"{where}: holds a run with a different config (fingerprint {previous.get('config_fingerprint')} "
            f"!= {config.fingerprint()}); use another --out, or --force to continue into it"
        )
    return {
        "schema": "castdata.run/1",
        "config": config.model_dump(mode="json"),
        "config_fingerprint": config.fingerprint(),
        "versions": {"castdata": __version__, "tau_trait": tau_trait_version(), "python": platform.python_version()}
        | ({"tau2": tau2_version()} if any(name.startswith("tau2-") for name in config.domains) else {}),
        "started_at": (previous or {}).get("started_at", time.time()),
        "ended_at": None,
        "counts": (previous or {}).get("counts", {}),
    }


async def run_episodes(
    config: CollectConfig,
    keys: Iterable[EpisodeKey] | AsyncIterator[EpisodeKey],
    agent: Backend,
    user: Backend,
    keep: Callable[[Trajectory], None],
    judge: Backend | None = None,
) -> None:
    """Run the episodes `keys` (or those an async iterator yields as they come), `config.concurrency` at a time,
    handing each record to `keep` as it finishes; `judge` grades tau2's natural-language assertions."""
    source = keys if isinstance(keys, AsyncIterator) else _each(keys)
    turn = asyncio.Lock()  # one episode slot at a time advances the iterator

    async def worker() -> None:
        while True:
            async with turn:
                key = await anext(source, None)
            if key is None:
                return
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
                judge=judge,
            )
            keep(record)

    await asyncio.gather(*(worker() for _ in range(config.concurrency)))


async def _each(keys: Iterable[EpisodeKey]) -> AsyncIterator[EpisodeKey]:
    for key in keys:
        yield key


async def collect_async(
    config: CollectConfig,
    out: Path | str,
    *,
    force: bool = False,
    progress: Progress | None = None,
    limit: int | None = None,
) -> dict:
    """Run every pending episode of `config` (the first `limit` planned, when given) into `out` (a path; with
    `executor: ray` also an fsspec URL); returns the final manifest. Everything is checked before anything is
    written: the plan, the model specs, and each endpoint (`castdata.models.probe`). A run whose every episode
    ended in `infrastructure_error` raises `RunFailed` (after writing its records and manifest)."""
    progress = progress or Progress()
    if config.executor.ray is None and not isinstance(out, Path):
        raise ConfigError(f"out: {out} is a URL; the local executor writes to a path (URLs need `executor: ray`)")
    keys = plan_episodes(config)[:limit]
    agent, user, judge = config.open_agent(), open_backend(config.user, "user"), config.open_judge()
    try:
        await probe_endpoints(config.endpoints())
        if config.executor.ray is None:
            manifest = await _collect_local(config, out, keys, agent, user, force, progress, judge)
    finally:
        for backend in (agent, user, judge):
            if backend is not None:
                await backend.aclose()
    if config.executor.ray is not None:
        from castdata.scale.ray_executor import collect_on_ray

        manifest = await collect_on_ray(config, out, keys, force=force, progress=progress)
    _refuse_all_failed(manifest["counts"], out)
    return manifest


async def _collect_local(
    config: CollectConfig,
    out: Path,
    keys: list[EpisodeKey],
    agent: Backend,
    user: Backend,
    force: bool,
    progress: Progress,
    judge: Backend | None,
) -> dict:
    manifest = prepare_run_dir(config, out, force)
    done = finished_keys(out)
    pending = [key for key in keys if key not in done]
    progress.total, progress.done = len(keys), len(keys) - len(pending)
    writer = RecordWriter()

    def keep(record: Trajectory) -> None:
        writer.append(trajectory_file(out, record.domain, record.split), record.to_json())
        progress.count(record.outcome.reward, record.usage_total())

    try:
        await run_episodes(config, pending, agent, user, keep, judge)
    finally:
        writer.close()
    manifest["ended_at"] = time.time()
    manifest["counts"] = run_counts(keys, pending, finished_keys(out))
    write_json(out / MANIFEST, manifest)
    return manifest


def run_counts(keys: list[EpisodeKey], pending: list[EpisodeKey], finished: set[EpisodeKey]) -> dict[str, int]:
    """The manifest's counts: episodes planned, run now, finished (of all in the run directory), and those run now
    that ended in `infrastructure_error` (not finished: a rerun retries them)."""
    failed = sum(key not in finished for key in pending)
    return {"planned": len(keys), "ran_now": len(pending), "finished": len(finished), "infrastructure_errors": failed}


def _refuse_all_failed(counts: dict[str, int], out: Path | str) -> None:
    """`RunFailed` when episodes ran and every one ended in `infrastructure_error`, with the first error."""
    if not counts["ran_now"] or counts["infrastructure_errors"] < counts["ran_now"]:
        return
    first = ""
    if isinstance(out, Path):
        records = iter_trajectories(out)
        error = next((r.outcome.error for r in records if r.outcome.termination_reason == "infrastructure_error"), None)
        first = f"; first error: {error}" if error else ""
    ran = counts["ran_now"]
    raise RunFailed(f"all {ran} episodes run into {out} ended in infrastructure_error{first}; rerunning retries them")


def collect(
    config: CollectConfig, out: Path | str, *, force: bool = False, show_progress: bool = True, limit: int | None = None
) -> dict:
    """Synchronous `collect_async` with a rich progress bar (episodes, success rate, tokens, cost, episodes/s)."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    progress = Progress()

    async def main() -> dict:
        job = asyncio.create_task(collect_async(config, out, force=force, progress=progress, limit=limit))
        while show_progress and not progress.total and not job.done():  # no bar before the checks have passed
            await asyncio.wait({job}, timeout=0.05)
        if not show_progress or job.done():
            return await job
        columns = (
            TextColumn("collect"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
        )
        with Bar(*columns, transient=False) as bar:
            handle = bar.add_task("", total=None)
            while not job.done():
                await asyncio.wait({job}, timeout=0.2)
                elapsed = max(time.time() - progress.started, 1e-9)
                rate = progress.successes / max(1, progress.ran)
                workers = f" | {len(progress.workers)} workers" if progress.workers else ""
                bar.update(
                    handle,
                    total=progress.total,
                    completed=progress.done,
                    description=f"success {rate:.0%} | {progress.tokens:,} tokens | ${progress.cost_usd:.2f} | "
                    f"{progress.ran / elapsed:.1f} ep/s{workers}",
                )
        return job.result()

    return asyncio.run(main())
