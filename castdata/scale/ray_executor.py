"""`executor: {ray: ...}`: collection as work units on a Ray cluster.

The driver plans the pending episodes as the local executor does and cuts them into work units. `num_workers`
Ray tasks claim units from the dispatcher until none is left, each running the same asyncio episode loop
(`run_episodes`, `concurrency` episodes at once, refilled from the next unit as soon as one runs dry) against
the configured backends. Every claim of a unit (an attempt) records into a file of its own in the run
directory. Ray reruns a worker task whose process died (`max_retries`); the rerun gets the units its dead
attempt left unfinished back, and skips their episodes that are already recorded. Three actors serve a launch:
the dispatcher, the permit broker (limits per endpoint, cluster-wide) and the tally (the driver's progress bar).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from castdata.config import CollectConfig
from castdata.errors import ConfigError
from castdata.models import open_backend
from castdata.records import Trajectory
from castdata.rollout.runner import Progress, run_counts, run_episodes, run_manifest
from castdata.rundir import EpisodeKey, RecordSink, RunDir, RunManifest
from castdata.scale.dispatch import Dispatcher
from castdata.scale.permits import ClusterPermits, PermitBroker, endpoint_limits
from castdata.scale.tally import Tally
from castdata.scale.units import WorkUnit, new_attempt, new_launch, plan_units

POLL_S = 0.25  # how often the driver refreshes its progress


class WorkerFailed(RuntimeError):
    """A worker failed for good: an error in its episodes, or its process died more often than `max_retries`."""


def import_ray() -> Any:
    """The `ray` module, or a ConfigError that names the extra to install."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "executor.ray: Ray is not installed; install the extra: pip install 'castdata[ray]'"
        ) from None
    return ray


async def collect_on_ray(
    config: CollectConfig, out: Path | str, keys: list[EpisodeKey], *, force: bool, progress: Progress
) -> RunManifest:
    """Run the pending episodes among `keys` (planned from `config`) into `out` (a path every node mounts, or an
    fsspec URL) on Ray; returns the final manifest. Uses the Ray instance this process has joined, else
    `executor.ray.address`."""
    ray = import_ray()
    location = RunDir(out)
    manifest = run_manifest(config, location.manifest(), str(out), force)
    location.write_manifest(manifest)
    location.repair()
    done = location.finished_keys()
    pending = [key for key in keys if key not in done]
    progress.total, progress.done = len(keys), len(keys) - len(pending)
    units = plan_units(pending, config.executor.ray.episodes_per_task_batch, new_launch())
    owned = bool(units) and not ray.is_initialized()
    if owned:
        ray.init(address=config.executor.ray.address)
    try:
        if units:
            await _run_workers(ray, config, location, units, progress)
    finally:
        if owned:
            ray.shutdown()
    location.repair()
    manifest.ended_at = time.time()
    manifest.counts = run_counts(keys, pending, location.finished_keys())
    location.write_manifest(manifest)
    return manifest


async def _run_workers(
    ray: Any, config: CollectConfig, location: RunDir, units: list[WorkUnit], progress: Progress
) -> None:
    """Run the workers until every unit is done, refreshing `progress` from the tally."""
    options = config.executor.ray
    count = min(options.num_workers, len(units))
    limits = endpoint_limits(config)
    waiters = count * config.concurrency + 16  # every episode of every worker may wait on a permit
    dispatcher = ray.remote(Dispatcher).options(num_cpus=0).remote(units)
    broker = ray.remote(PermitBroker).options(num_cpus=0, max_concurrency=waiters).remote(limits)
    tally = ray.remote(Tally).options(num_cpus=0).remote()
    task = ray.remote(run_worker).options(**options.task_options())
    refs = [
        task.remote(config, location.address, index, set(limits), dispatcher, broker, tally) for index in range(count)
    ]
    running = {asyncio.ensure_future(ref): ref for ref in refs}
    earlier = progress.done
    try:
        while running:
            finished, _ = await asyncio.wait(running, timeout=POLL_S, return_when=asyncio.FIRST_COMPLETED)
            for future in finished:
                running.pop(future)
                _raise_failure(future, options.max_retries)
            _show(progress, earlier, await tally.snapshot.remote())
    finally:
        for ref in running.values():
            ray.cancel(ref, force=True)
        for actor in (dispatcher, broker, tally):
            ray.kill(actor)


def _raise_failure(future: asyncio.Future, retries: int) -> None:
    err = future.exception()
    if err is None:
        return
    cause = getattr(err, "cause", None)  # a RayTaskError carries the worker's own exception
    if isinstance(cause, ConfigError):
        raise ConfigError(f"on a Ray worker: {cause}") from None
    raise WorkerFailed(
        f"a worker failed (processes that died were rerun up to {retries} times): {cause or err}"
    ) from err


def _show(progress: Progress, earlier: int, tally: Progress) -> None:
    """Copy the tally's counters into the driver's `progress` (episodes finished before the launch included)."""
    progress.done = earlier + tally.done
    progress.ran, progress.successes, progress.tokens, progress.cost_usd = (
        tally.ran,
        tally.successes,
        tally.tokens,
        tally.cost_usd,
    )
    progress.workers = tally.workers


def run_worker(
    config: CollectConfig, where: Path | str, worker: int, limited: set[str], dispatcher: Any, broker: Any, tally: Any
) -> int:
    """A Ray task: claim units until none is left and run their episodes; returns how many it ran."""
    return asyncio.run(_work(config, RunDir(where), worker, limited, dispatcher, broker, tally))


async def _work(
    config: CollectConfig,
    location: RunDir,
    worker: int,
    limited: set[str],
    dispatcher: Any,
    broker: Any,
    tally: Any,
) -> int:
    attempt, pid = new_attempt(), os.getpid()
    tally.started.remote(worker, pid)
    await broker.begin.remote(worker, attempt)
    await dispatcher.begin.remote(worker, attempt)
    claims = _Claims(location, dispatcher, worker, attempt)
    agent, user = open_backend(config.agent, "agent"), open_backend(config.user, "user")
    judge = config.open_judge()
    permits = ClusterPermits(broker, limited, worker, attempt)
    for backend in (agent, user, judge):
        if hasattr(backend, "permits"):  # the backends of remote endpoints
            backend.permits = permits

    def keep(record: Trajectory) -> None:
        claims.keep(record)
        tally.count.remote(record.outcome.reward, record.usage_total())

    try:
        await run_episodes(config, claims.keys(), agent, user, keep, judge)
    finally:
        claims.close()
        for backend in (agent, user, judge):
            if backend is not None:
                await backend.aclose()
        await broker.end.remote(worker, attempt)
        await tally.ended.remote(worker, pid)  # after this worker's counts: the tally has them all
    return claims.ran


class _Claims:
    """The units one worker attempt has claimed: their record files and the episodes still running."""

    def __init__(self, location: RunDir, dispatcher: Any, worker: int, attempt: str) -> None:
        self.location, self.dispatcher, self.worker, self.attempt = location, dispatcher, worker, attempt
        self.open: dict[int, tuple[RecordSink, int]] = {}  # unit -> (its record file, episodes not recorded yet)
        self.unit_of: dict[EpisodeKey, int] = {}
        self.ran = 0

    async def keys(self) -> AsyncIterator[EpisodeKey]:
        """The episodes to run: those of each claimed unit that its earlier attempts did not record."""
        while (unit := await self.dispatcher.claim.remote(self.worker, self.attempt)) is not None:
            recorded = self.location.recorded(f"{unit.prefix}-*.jsonl")
            todo = [key for key in unit.keys if key not in recorded]
            self.open[unit.index] = (self.location.sink(unit.attempt_file(new_attempt())), len(todo))
            if not todo:
                self._finish(unit.index)
            for key in todo:
                self.unit_of[key] = unit.index
                yield key

    def keep(self, record: Trajectory) -> None:
        """Record one episode into its unit's file; a unit with every episode recorded is finished."""
        index = self.unit_of.pop(record.key)
        sink, left = self.open[index]
        sink.write(record.to_json())
        self.open[index] = (sink, left - 1)
        self.ran += 1
        if left == 1:
            self._finish(index)

    def _finish(self, index: int) -> None:
        sink, _ = self.open.pop(index)
        sink.close()
        self.dispatcher.finish.remote(self.worker, self.attempt, index)

    def close(self) -> None:
        """Close the files of units left unfinished (an error stopped the worker)."""
        for sink, _ in self.open.values():
            sink.close()
