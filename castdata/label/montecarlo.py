"""Monte-Carlo labels: a second opinion on each hindsight label from continuations of its episode.

For a labelled action at message `step`, the episode is continued K times from the prefix before the action
(`messages[:step]`) and K times from the prefix after it (the action and its tool result), with the
episode's own agent and user models (`run_episode(prefix=...)`). The success rates (Math-Shepherd style)
go into `label_source.mc_success_before/after`; an action whose rate drops by at least `critical_drop` is
critical in the Monte-Carlo opinion, and `label_source.agreement` says whether the hindsight severity
agrees (critical or not). MC labels are noisy: a second opinion, never the verdict.

Actions after the first critical error are skipped (their context is already doomed); `actions: writes`
keeps write tool calls only and `max_labels` caps the labels a run estimates. Continuations that end in
infrastructure or user-simulator errors do not count; a side without any counted continuation leaves the
label unchanged. Prefixes shared by two labels (after a tool call = before the next action) run once.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from castdata.envs import load_domain
from castdata.label.hindsight import SKIPPED_TERMINATIONS
from castdata.label.schema import Label
from castdata.models import open_backend
from castdata.models.base import Backend
from castdata.models.spec import ModelSpec
from castdata.records import Trajectory
from castdata.rollout.episode import run_episode
from castdata.rollout.runner import episode_seed


class MCConfig(BaseModel):
    """The `label.mc` section."""

    model_config = ConfigDict(extra="forbid")

    rollouts: int = Field(ge=1)  # continuations from each side of an action
    actions: Literal["all", "writes"] = "all"  # which actions get an MC opinion (never those after the first error)
    max_labels: int | None = Field(default=None, ge=1)  # cap per run, in file order
    critical_drop: float = Field(default=0.5, gt=0, le=1)  # success-rate drop that makes an action critical
    max_steps: int = Field(default=30, ge=1)  # agent turns a continuation may take after its prefix
    concurrency: int = Field(default=32, ge=1)  # continuations running at once


class MonteCarlo:
    """Adds MC opinions to the labels of a run; open backends are shared and closed by `aclose`."""

    def __init__(self, config: MCConfig) -> None:
        self.config = config
        self.budget = config.max_labels
        self.backends: dict[str, Backend] = {}
        self.slots = asyncio.Semaphore(config.concurrency)
        self.rollouts = 0  # continuations run

    def select(self, trajectory: Trajectory, labels: list[Label]) -> list[int]:
        """The steps of `labels` (one episode's) that get an opinion, spending the budget: call in file order."""
        steps = []
        for label in labels:
            if label.after_first_error:
                continue
            is_write = load_domain(trajectory.domain).tool_kind(label.action.name) == "write"
            if self.config.actions == "writes" and not (is_write or label.first_critical_error):
                continue  # writes, and a first critical error said in a message (a wrong write proposed)
            if self.budget is not None:
                if not self.budget:
                    break
                self.budget -= 1
            steps.append(label.step)
        return steps

    async def annotate(self, trajectory: Trajectory, labels: list[Label], steps: list[int]) -> list[Label]:
        """`labels`, those at `steps` (from `select`) with their MC success rates and agreement."""
        lengths = sorted({n for step in steps for n in (step, _after(trajectory, step))})
        rates = dict(zip(lengths, await asyncio.gather(*(self._success_rate(trajectory, n) for n in lengths))))
        return [
            self._opinion(label, rates[label.step], rates[_after(trajectory, label.step)])
            if label.step in steps
            else label
            for label in labels
        ]

    def _opinion(self, label: Label, before: float | None, after: float | None) -> Label:
        """`label` with the success rates before and after it, and whether their drop agrees with its severity."""
        if before is None or after is None:
            return label
        critical = before - after >= self.config.critical_drop
        update = {
            "mc_success_before": before,
            "mc_success_after": after,
            "agreement": critical == (label.severity == "critical"),
        }
        return label.model_copy(update={"label_source": label.label_source.model_copy(update=update)})

    async def _success_rate(self, trajectory: Trajectory, length: int) -> float | None:
        """The success rate of K continuations of `trajectory.messages[:length]`; None when none counts."""
        domain = load_domain(trajectory.domain)
        task = domain.task(trajectory.split, trajectory.task_id)
        agent, user = self._backend(trajectory.agent), self._backend(trajectory.user)
        prefix = trajectory.messages[:length]
        max_steps = self.config.max_steps + sum(message["role"] == "assistant" for message in prefix)

        async def one(k: int) -> Trajectory:
            async with self.slots:
                seed = episode_seed(trajectory.seed, (trajectory.id, "mc", length, k))
                return await run_episode(
                    domain,
                    task,
                    k,
                    seed,
                    agent,
                    user,
                    trajectory.agent,
                    trajectory.user,
                    max_steps=max_steps,
                    prefix=prefix,
                    prefix_user_calls=trajectory.user_tool_calls,
                )

        records = await asyncio.gather(*(one(k) for k in range(self.config.rollouts)))
        self.rollouts += len(records)
        counted = [r.outcome.reward for r in records if r.outcome.termination_reason not in SKIPPED_TERMINATIONS]
        return sum(counted) / len(counted) if counted else None

    def _backend(self, spec: ModelSpec) -> Backend:
        key = spec.model_dump_json()
        if key not in self.backends:
            self.backends[key] = open_backend(spec)
        return self.backends[key]

    async def aclose(self) -> None:
        """Close the backends opened for the continuations."""
        for backend in self.backends.values():
            await backend.aclose()


def _after(trajectory: Trajectory, step: int) -> int:
    """The length of the prefix that ends with the action at `step` and its tool result."""
    end = step + 1
    while end < len(trajectory.messages) and trajectory.messages[end]["role"] == "tool":
        end += 1
    return end
