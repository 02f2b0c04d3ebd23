"""The trajectory record: one episode, as collected. Schema `castdata.trajectory/1`.

Born in `castdata.rollout.episode`, written and read back by `castdata.rundir`, read by
`castdata.label`, `castdata.builders` and `castdata.report`.

`messages` are exactly what the agent saw, in OpenAI chat format (assistant `tool_calls[].function.arguments`
is a dict). `meta` runs parallel to `messages` (timestamps, token usage, protocol violations).
`privileged` holds what the agent never sees: the hidden instruction, the gold actions, the required outputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from castdata.models.spec import ModelSpec

if TYPE_CHECKING:
    from castdata.envs.domain import Task

TRAJECTORY_SCHEMA = "castdata.trajectory/1"
RESPOND = "respond"  # the pseudo-action of a message to the user (tau-bench's name)

TerminationReason = Literal[
    "user_stop",
    "agent_stop",  # imported episodes: tau2's agent ended the conversation
    "transfer",
    "max_steps",
    "too_many_errors",
    "agent_error",
    "user_error",
    "infrastructure_error",
]


class Action(BaseModel):
    """A tool call (or the `respond` pseudo-action) by name and keyword arguments."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kwargs: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    """Token usage and latency of one model call."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float | None = None

    def __add__(self, other: Usage) -> Usage:
        """The sum of two usages; the cost is unknown (None) only when both costs are."""
        costs = [c for c in (self.cost_usd, other.cost_usd) if c is not None]
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            latency_s=self.latency_s + other.latency_s,
            cost_usd=sum(costs) if costs else None,
        )


class MessageMeta(BaseModel):
    """Side information for `messages[i]`: when it was made and what it cost.

    `violation` names a protocol violation of the agent turn (`multiple_tool_calls`,
    `tool_call_with_text`, `malformed_tool_call`, `unknown_tool`), with the raw output in `raw`.
    """

    t: float
    usage: Usage | None = None
    violation: str | None = None
    raw: Any = None


NOT_JUDGED = (  # `outcome.excluded` of a tau2 episode whose reward needs a judge and had none
    "NL_ASSERTION not judged: the reward basis has natural-language assertions and no judge model graded them "
    "(set `judge:` to a model spec)"
)


class NLAssertionCheck(BaseModel):
    """A judge model's grade of one natural-language assertion (tau2's NL_ASSERTION reward component)."""

    assertion: str
    met: bool
    justification: str


class Outcome(BaseModel):
    """How the episode ended and how it was scored (tau-bench semantics)."""

    reward: float
    db_match: bool
    outputs_found: list[str] = Field(default_factory=list)
    outputs_missing: list[str] = Field(default_factory=list)
    termination_reason: TerminationReason
    error: str | None = None
    excluded: str | None = None  # why the episode says nothing about the agent (not judged, not reproduced)
    nl_assertions: list[NLAssertionCheck] = Field(default_factory=list)  # tau2 NL_ASSERTION: the judge's grades


class Privileged(BaseModel):
    """What the agent never sees: the user's hidden goal and one gold solution."""

    user_id: str
    instruction: str
    gold_actions: list[Action]
    required_outputs: list[str]
    user_gold_actions: list[Action] = Field(default_factory=list)  # dual control: the user's own gold calls

    @classmethod
    def of(cls, task: Task) -> Privileged:
        """What `task` hides from the agent: its user, instruction, gold solution and required outputs."""
        return cls(
            user_id=task.user_id,
            instruction=task.instruction,
            gold_actions=list(task.actions),
            required_outputs=list(task.outputs),
            user_gold_actions=[action for _, action in task.user_actions],
        )


class UserToolCall(BaseModel):
    """A tool call the simulated user made on its own device (dual control, e.g. `tau2-telecom`).

    The agent never sees it, so it is not in `messages` (which stay exactly what the agent saw, and whose
    assistant turns are the only actions labelled): `step` is the index of the message that came next (in a
    collected episode, the user message the calls led to).
    """

    step: int
    id: str
    name: str
    arguments: dict[str, Any]
    content: str
    ok: bool

    @property
    def action(self) -> Action:
        """The call as an action (to replay it)."""
        return Action(name=self.name, kwargs=self.arguments)


class InjectedMistake(BaseModel):
    """A mistake the scripted noisy-oracle agent made on purpose (ground truth for the labeler)."""

    kind: str
    step: int
    outcome_breaking: bool  # whether executing it breaks the outcome (checked by a privileged replay)
    detail: str = ""
    intercepted: bool = False  # a critic judged it invalid and the agent revised it: it never executed
    revision: Literal["gold", "repeated", "another"] | None = None  # sent back: how the agent revised it


class Interception(BaseModel):
    """A proposed agent action a critic judged invalid before it executed (a config with a `critic:`).

    The transcript (`messages`) keeps only what was executed; rejected proposals and the critic's feedback
    live here. `revised` is the agent's next proposal, or None when `max_revisions` was reached and
    `proposed` executed as it was.
    """

    step: int  # the message index the action takes in `messages`
    attempt: int  # 1 for the turn's first proposal, 2 for its first revision, ...
    proposed: dict[str, Any]  # the assistant message as the agent emitted it (every tool call)
    verdict: str
    critique: str
    revised: dict[str, Any] | None


class CriticCall(BaseModel):
    """One judgement of a guarding critic (`critic:` in a collect or eval config): what it said and what it cost.

    `verdict` is None when the critic's answer was unusable (the proposal then executes as the agent made it).
    """

    step: int  # the message index the judged proposal would take in `messages`
    attempt: int  # as in `Interception`
    verdict: Literal["valid", "invalid"] | None
    critique: str  # the critic's answer (for an unusable one, its raw text)
    usage: Usage | None = None


class Mismatch(BaseModel):
    """The first recorded tool result a replay did not reproduce."""

    step: int  # message index of the tool call
    tool: str
    recorded: str  # excerpts
    replayed: str


class ImportMark(BaseModel):
    """Where an imported episode came from, and whether castdata's environment reproduces it.

    An episode that does not reproduce (a harness that leaked database state between episodes, an older tool
    version) is kept for inspection but never counts for pass^k or training data.
    """

    format: str  # the source format, e.g. `tau-bench`
    file: str  # the source file's name
    sha256: str  # of the source file
    index: int  # position of the entry in the source file
    source_task_id: int | str  # tau2 task ids are strings
    source_trial: int
    source_reward: float | None  # as the file claims: never trusted, recomputed into `outcome`
    task_match: Literal["same", "remapped", "reworded", "unmatched"]
    reproduced: bool
    first_mismatch: Mismatch | None = None
    renamed_fields: list[str] = Field(default_factory=list)  # older field names of equal values (`province->state`)
    extra_tools: list[str] = Field(default_factory=list)  # tools of the source harness the domain lacks
    source_id: str | None = None  # the source's own id of the episode (a tau2 simulation id)


class Trajectory(BaseModel):
    """One episode of one task, one trial."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(default=TRAJECTORY_SCHEMA, alias="schema")
    id: str
    domain: str
    split: str
    task_id: int
    trial: int
    seed: int
    agent: ModelSpec
    user: ModelSpec
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    meta: list[MessageMeta]
    outcome: Outcome
    privileged: Privileged
    injected_mistakes: list[InjectedMistake] = Field(default_factory=list)
    interceptions: list[Interception] = Field(default_factory=list)
    critic_calls: list[CriticCall] = Field(default_factory=list)  # every judgement of a guarding critic
    imported: ImportMark | None = None  # set by `castdata import`; None for collected episodes
    user_tool_calls: list[UserToolCall] = Field(default_factory=list)
    started_at: float
    ended_at: float

    def to_json(self) -> str:
        """One JSON line (no trailing newline)."""
        return self.model_dump_json(by_alias=True)

    @property
    def key(self) -> tuple[str, str, int, int]:
        """The episode key that resume and pass^k group by."""
        return (self.domain, self.split, self.task_id, self.trial)

    def usage_total(self) -> Usage:
        """Token usage, model latency and cost of the whole episode (agent, user and guarding critic together)."""
        return sum((m.usage for m in self.meta if m.usage is not None), self.critic_usage())

    def critic_usage(self) -> Usage:
        """Token usage, latency and cost of the guarding critic's calls."""
        return sum((c.usage for c in self.critic_calls if c.usage is not None), Usage())

    @property
    def counts_for_pass_k(self) -> bool:
        """Infrastructure failures and `outcome.excluded` episodes (not scorable offline) say nothing about the agent,
        and an imported episode castdata's environment does not reproduce cannot be scored: all are excluded from
        pass^k and training."""
        reproduced = self.imported is None or self.imported.reproduced
        return (
            reproduced and self.outcome.termination_reason != "infrastructure_error" and self.outcome.excluded is None
        )


def episode_id(domain: str, split: str, task_id: int, trial: int) -> str:
    """The stable id of an episode within a run."""
    return f"{domain}.{split}.{task_id}.{trial}"
