"""`castdata collect`: run k trials of every selected task, concurrently, into a resumable run directory."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from castdata.config import CollectConfig
from castdata.critic import open_critic
from castdata.critic.guard import Guard, GuardedBackend
from castdata.envs import load_domain
from castdata.errors import ConfigError, RunFailed, UnknownName
from castdata.models import open_backend
from castdata.models.base import Backend
from castdata.models.probe import probe_endpoints
from castdata.records import Trajectory
from castdata.rollout.runner import Progress, run_counts, run_episodes, run_manifest
from castdata.rundir import EpisodeKey, RecordWriter, RunDir, RunManifest, iter_trajectories


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


def prepare_run_dir(config: CollectConfig, run_dir: RunDir, force: bool) -> RunManifest:
    """Create or reopen a run directory; refuse a different config unless `force`. Returns the manifest."""
    manifest = run_manifest(config, run_dir.manifest(), str(run_dir.where), force)
    run_dir.write_manifest(manifest)
    run_dir.repair()
    return manifest


async def collect_async(
    config: CollectConfig,
    out: Path | str,
    *,
    force: bool = False,
    progress: Progress | None = None,
    limit: int | None = None,
) -> RunManifest:
    """Run every pending episode of `config` (the first `limit` planned, when given) into `out` (a path; with
    `executor: ray` also an fsspec URL); returns the final manifest. Everything is checked before anything is
    written: the plan, the model specs, and each endpoint (`castdata.models.probe`). A run whose every episode
    ended in `infrastructure_error` raises `RunFailed` (after writing its records and manifest)."""
    progress = progress or Progress()
    if config.executor.ray is None and not isinstance(out, Path):
        raise ConfigError(f"out: {out} is a URL; the local executor writes to a path (URLs need `executor: ray`)")
    keys = plan_episodes(config)[:limit]
    agent, user, judge = open_agent(config), open_backend(config.user, "user"), config.open_judge()
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
    _refuse_all_failed(manifest.counts, out)
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
) -> RunManifest:
    run_dir = RunDir(out)
    manifest = prepare_run_dir(config, run_dir, force)
    done = run_dir.finished_keys()
    pending = [key for key in keys if key not in done]
    progress.total, progress.done = len(keys), len(keys) - len(pending)
    writer = RecordWriter()

    def keep(record: Trajectory) -> None:
        writer.append(run_dir.trajectory_file(record.domain, record.split), record.to_json())
        progress.count(record.outcome.reward, record.usage_total())

    try:
        await run_episodes(config, pending, agent, user, keep, judge)
    finally:
        writer.close()
    manifest.ended_at = time.time()
    manifest.counts = run_counts(keys, pending, run_dir.finished_keys())
    run_dir.write_manifest(manifest)
    return manifest


def _refuse_all_failed(counts: dict[str, int], out: Path | str) -> None:
    """`RunFailed` when episodes ran and every one ended in `infrastructure_error`, with the first error."""
    if not counts["ran_now"] or counts["infrastructure_errors"] < counts["ran_now"]:
        return
    records = iter_trajectories(out)
    error = next((r.outcome.error for r in records if r.outcome.termination_reason == "infrastructure_error"), None)
    first = f"; first error: {error}" if error else ""
    ran = counts["ran_now"]
    raise RunFailed(f"all {ran} episodes run into {out} ended in infrastructure_error{first}; rerunning retries them")


def open_agent(config: CollectConfig) -> Backend:
    """The agent backend the episodes run, guarded by the critic when there is one."""
    agent = open_backend(config.agent, "agent")
    if config.critic is None:
        return agent
    return GuardedBackend(agent, Guard(open_critic(config.critic, "critic"), config.guard, config.max_revisions))


def collect(
    config: CollectConfig, out: Path | str, *, force: bool = False, show_progress: bool = True, limit: int | None = None
) -> RunManifest:
    """Synchronous `collect_async` with a rich progress bar (episodes, success rate, tokens, cost, episodes/s)."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    progress = Progress()

    async def main() -> RunManifest:
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
