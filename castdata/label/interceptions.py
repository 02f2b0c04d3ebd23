"""Hindsight verdicts on a guarded run's interceptions: the rejected proposal and the revision, each judged.

A proposal a critic sent back never executed, so its episode says nothing about it. Each interception's proposal
and revision are judged by a privileged replay from the same prefix: the transcript before the interception
(`messages[:step]`), then that action, executed by the episode loop, then the gold way to the end (the noisy
oracle without mistakes, resumed: it knows the task's gold solution), with the episode's own user model and seed.
A write that is not a gold call (failed or not) stands in for the next outstanding gold write, as the replay critic
counts it: the gold way does not make that write again. The counterfactual episode is labelled as every episode is (the
hindsight rules and replay, the programmatic rationale, the verifier), and its label at `step` is the verdict.

Written by the label stage to `labels/interceptions/{domain}.{split}.jsonl`, one `castdata.interception_label/1`
record per interception.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from castdata.envs import Domain, load_domain
from castdata.label.hindsight import SKIPPED_TERMINATIONS, judge
from castdata.label.policy import clause_table
from castdata.label.rationale import programmatic_labels
from castdata.label.schema import Label
from castdata.label.verify import verify
from castdata.models import open_backend
from castdata.models.base import Backend, EpisodeContext, Reply, ToolCall
from castdata.models.scripted import NoisyOracleAgent
from castdata.models.spec import ModelSpec
from castdata.records import Action, CriticCall, InjectedMistake, Interception, Trajectory
from castdata.rollout.episode import run_episode
from castdata.visible import View

INTERCEPTION_SCHEMA = "castdata.interception_label/1"
MAX_STEPS = 30  # agent turns the gold way may take after the prefix
GOLD_WAY = ModelSpec(model="noisy-oracle")  # the counterfactual episodes' agent: the proposal, then the gold way


class InterceptionLabel(BaseModel):
    """The hindsight verdicts on one interception: its rejected proposal and the agent's revision."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(default=INTERCEPTION_SCHEMA, alias="schema")
    trajectory_id: str
    step: int
    attempt: int
    critique: str  # what the critic told the agent
    proposal: Label | None  # None: the counterfactual episode says nothing (e.g. the simulated user failed)
    revision: Label | None  # None as well when `max_revisions` was reached (the proposal executed)
    rejected: dict[str, list[str]] = Field(default_factory=dict)  # the verifier's codes, by "proposal"/"revision"

    def verdict(self, part: str) -> str | None:
        """The hindsight verdict on the "proposal" or the "revision" when it may train anything: None when there is
        none, it is uncertain, the verifier rejected it, or the counterfactual episode's first critical error came
        before it (`after_first_error`) or through the simulated user (`user_fault`)."""
        label: Label | None = getattr(self, part)
        if label is None or label.after_first_error or label.user_fault or self.rejected.get(part):
            return None
        return label.verdict if label.verdict != "uncertain" else None

    @property
    def confirmed(self) -> bool:
        """Hindsight confirms the critic and the agent: the proposal invalid and the revision valid."""
        return self.verdict("proposal") == "invalid" and self.verdict("revision") == "valid"

    def to_json(self) -> str:
        """One JSON line."""
        return self.model_dump_json(by_alias=True)


def proposal_reply(proposed: dict[str, Any]) -> Reply:
    """A recorded proposal (an assistant message, raw arguments kept when malformed) as the reply that made it."""
    calls = []
    for index, call in enumerate(proposed.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        parsed = arguments if isinstance(arguments, dict) else None
        raw = json.dumps(arguments) if parsed is not None else str(arguments)
        calls.append(ToolCall(call.get("id") or f"call_{index}", call["function"]["name"], parsed, raw))
    return Reply(content=proposed.get("content"), tool_calls=calls)


def standing_in(domain: Domain, gold: list[Action], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each write that is no outstanding gold call (failed or not) replaced by the next outstanding
    gold write: the attempt it was, so that a resumed gold way does not make that write again."""
    outstanding = [a for a in gold if domain.tool_kind(a.name) == "write"]
    result = []
    for message in messages:
        calls = (message.get("tool_calls") or []) if message["role"] == "assistant" else []
        if calls and domain.tool_kind(calls[0]["function"]["name"]) == "write":
            function = calls[0]["function"]
            action = Action(name=function["name"], kwargs=function["arguments"])
            if action in outstanding:
                outstanding.remove(action)
            elif outstanding:
                stand = outstanding.pop(0)
                call = {**calls[0], "function": {"name": stand.name, "arguments": stand.kwargs}}
                message = {**message, "tool_calls": [call]}
        result.append(message)
    return result


class _ThenGoldWay:
    """An agent session that first makes a given proposal, then plays the gold way from what happened."""

    def __init__(self, ctx: EpisodeContext, proposal: Reply) -> None:
        self.ctx, self.proposal = ctx, proposal
        self.gold = NoisyOracleAgent(ctx, {})
        self.resumed = False
        self.injected: list[InjectedMistake] = []  # a counterfactual injects nothing, and no critic guards it
        self.interceptions: list[Interception] = []
        self.critic_calls: list[CriticCall] = []

    def resume(self, messages: list[dict[str, Any]]) -> None:
        """Nothing to do at the prefix: the proposal comes first, and the gold way resumes from what followed it."""

    async def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Reply:
        if self.proposal is not None:
            reply, self.proposal = self.proposal, None
            return reply
        if not self.resumed:
            self.gold.resume(standing_in(self.ctx.domain, list(self.ctx.task.actions), messages))
            self.resumed = True
        return await self.gold.act(messages, tools)


class _Counterfactual:
    """The agent backend of one counterfactual episode (only `agent_session` is used)."""

    def __init__(self, proposal: Reply) -> None:
        self.proposal = proposal

    def agent_session(self, ctx: EpisodeContext) -> _ThenGoldWay:
        return _ThenGoldWay(ctx, self.proposal)


def counterfactual_label(trajectory: Trajectory, counterfactual: Trajectory, step: int) -> tuple[Label | None, list]:
    """The label of the action at `step` of a counterfactual episode, and the verifier's rejection codes."""
    episode = judge(counterfactual)
    if episode is None:
        return None, []
    view = View(counterfactual)
    label = next((label for label in programmatic_labels(episode, view) if label.step == step), None)
    if label is None:
        return None, []
    return label, [r.code for r in verify(label, label, view, clause_table(trajectory.domain))]


class InterceptionLabeler:
    """Judges interceptions by counterfactual episodes; user backends are shared and closed by `aclose`."""

    def __init__(self) -> None:
        self.users: dict[str, Backend] = {}
        self.episodes = 0  # counterfactual episodes run

    async def run(self, trajectory: Trajectory, step: int, action: dict[str, Any]) -> Trajectory:
        """The episode that makes `action` after `messages[:step]` and then goes the gold way."""
        domain = load_domain(trajectory.domain)
        key = trajectory.user.model_dump_json()
        if key not in self.users:
            self.users[key] = open_backend(trajectory.user, "user")
        prefix = trajectory.messages[:step]
        self.episodes += 1
        return await run_episode(
            domain,
            domain.task(trajectory.split, trajectory.task_id),
            trajectory.trial,
            trajectory.seed,
            _Counterfactual(proposal_reply(action)),
            self.users[key],
            GOLD_WAY,
            trajectory.user,
            max_steps=MAX_STEPS + sum(message["role"] == "assistant" for message in prefix),
            prefix=prefix,
        )

    async def label(self, trajectory: Trajectory, interception: Interception) -> InterceptionLabel:
        """The hindsight verdicts on one interception of `trajectory`."""
        verdicts: dict[str, Label | None] = {}
        rejected: dict[str, list[str]] = {}
        for part, action in (("proposal", interception.proposed), ("revision", interception.revised)):
            if action is None:
                verdicts[part] = None
                continue
            counterfactual = await self.run(trajectory, interception.step, action)
            verdicts[part], rejected[part] = counterfactual_label(trajectory, counterfactual, interception.step)
        return InterceptionLabel(
            trajectory_id=trajectory.id,
            step=interception.step,
            attempt=interception.attempt,
            critique=interception.critique,
            proposal=verdicts["proposal"],
            revision=verdicts["revision"],
            rejected=rejected,
        )

    async def aclose(self) -> None:
        """Close the user backends."""
        for backend in self.users.values():
            await backend.aclose()


def judged(trajectory: Trajectory) -> bool:
    """Whether a trajectory's interceptions get verdicts: it says something about the agent (as `judge` decides)."""
    return trajectory.outcome.termination_reason not in SKIPPED_TERMINATIONS and trajectory.counts_for_pass_k


def label_interceptions(trajectories: list[Trajectory]) -> tuple[dict[tuple[str, str], list[InterceptionLabel]], dict]:
    """Judge every interception of `trajectories`: the verdicts by (domain, split), and their statistics."""
    labeler = InterceptionLabeler()
    found: dict[tuple[str, str], list[InterceptionLabel]] = {}

    async def main() -> None:
        try:
            for trajectory in trajectories:
                if not judged(trajectory):
                    continue
                where = (trajectory.domain, trajectory.split)
                for interception in trajectory.interceptions:
                    found.setdefault(where, []).append(await labeler.label(trajectory, interception))
        finally:
            await labeler.aclose()

    asyncio.run(main())
    every = [record for records in found.values() for record in records]
    return found, {
        "total": len(every),
        "proposals": dict(Counter(r.verdict("proposal") or "none" for r in every)),
        "revisions": dict(Counter(r.verdict("revision") or "none" for r in every)),
        "confirmed": sum(r.confirmed for r in every),
        "rejected_by_verifier": sum(1 for r in every if any(r.rejected.values())),
        "counterfactual_episodes": labeler.episodes,
    }
