"""Running planned episodes: what both executors (the local one in `castdata.rollout.collect`, Ray's in
`castdata.scale`) share: the per-episode seed, the concurrent episode loop, progress, and the run's manifest."""

from __future__ import annotations

import asyncio
import hashlib
import platform
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field

from castdata.config import CollectConfig
from castdata.envs import load_domain
from castdata.envs.tau2_import import tau2_version
from castdata.envs.tau_import import tau_trait_version
from castdata.errors import RunDirConflict
from castdata.models.base import Backend
from castdata.records import Trajectory, Usage
from castdata.rollout.episode import run_episode
from castdata.rundir import RUN_SCHEMA, EpisodeKey, RunManifest
from castdata.version import __version__


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


def run_manifest(config: CollectConfig, previous: RunManifest | None, where: str, force: bool) -> RunManifest:
    """The manifest of a run (re)started at `where` over the `previous` one; refuses a different config unless `force`."""
    if previous is not None and previous.config_fingerprint != config.fingerprint() and not force:
        raise RunDirConflict(
            f"{where}: holds a run with a different config (fingerprint {previous.config_fingerprint} "
            f"!= {config.fingerprint()}); use another --out, or --force to continue into it"
        )
    versions = {"castdata": __version__, "tau_trait": tau_trait_version(), "python": platform.python_version()}
    if any(name.startswith("tau2-") for name in config.domains):
        versions["tau2"] = tau2_version()
    return RunManifest(
        schema=RUN_SCHEMA,
        config=config.model_dump(mode="json"),
        config_fingerprint=config.fingerprint(),
        versions=versions,
        started_at=(previous.started_at if previous is not None else None) or time.time(),
        ended_at=None,
        counts=previous.counts if previous is not None else {},
    )


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


def run_counts(keys: list[EpisodeKey], pending: list[EpisodeKey], finished: set[EpisodeKey]) -> dict[str, int]:
    """The manifest's counts: episodes planned, run now, finished (of all in the run directory), and those run now
    that ended in `infrastructure_error` (not finished: a rerun retries them)."""
    failed = sum(key not in finished for key in pending)
    return {"planned": len(keys), "ran_now": len(pending), "finished": len(finished), "infrastructure_errors": failed}
