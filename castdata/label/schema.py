"""The label record: one agent action's verdict and structured rationale. Schema `castdata.label/1`.

Born in `castdata.label` (hindsight labeler, optional teacher and Monte-Carlo passes), written to
`RUN_DIR/labels/{domain}.{split}.jsonl`, read by `castdata.builders` (critic, policy and PRM datasets).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from castdata.records import Action

LABEL_SCHEMA = "castdata.label/1"

CATEGORIES = (
    "policy_violation",
    "missing_confirmation",
    "auth_violation",
    "info_disclosure",
    "wrong_tool",
    "wrong_argument",
    "schema_error",
    "ungrounded_claim",
    "misread_observation",
    "wrong_refusal",
    "premature_action",
    "wrong_sequence",
    "missed_required_action",
    "premature_termination",
    "unnecessary_transfer",
    "redundant_action",
    "miscommunication",
    "other",
)
# Only a teacher model's rationale (`castdata.label.teacher`) gives these: no rule or replay check finds a disclosed
# detail, a change made before the user asked for it, or an error outside the taxonomy.
TEACHER_CATEGORIES = ("info_disclosure", "premature_action", "other")
# The categories the hindsight labeler (replay, attribution and rules) gives: a scripted mistake kind injects each
# (`castdata.label.stats.KIND_CATEGORY`), and the demo dataset's train split covers them all.
HINDSIGHT_CATEGORIES = tuple(c for c in CATEGORIES if c not in TEACHER_CATEGORIES)

Verdict = Literal["valid", "invalid", "uncertain"]
Severity = Literal["critical", "minor", "none"]
EvidenceSource = Literal["message", "tool_result", "policy"]


class PolicyRef(BaseModel):
    """A cited policy clause (ids from `castdata.label.policy`)."""

    clause_id: str
    quote: str


class Evidence(BaseModel):
    """A pointer to something the agent could see: a message (by index) or a policy clause, with an exact quote."""

    step: int | None  # message index in the trajectory; None for policy evidence
    source: EvidenceSource
    quote: str


class Rationale(BaseModel):
    """Short prose: what the agent did, what was required, and the judgement."""

    observed: str
    required: str
    assessment: str


class LabelSource(BaseModel):
    """Where the verdict came from and how the signals agree."""

    method: Literal["hindsight", "rule", "mc", "teacher"]
    signals: list[str] = Field(default_factory=list)
    teacher_model: str | None = None
    mc_success_before: float | None = None
    mc_success_after: float | None = None
    agreement: bool | None = None


class Label(BaseModel):
    """One agent action of one trajectory, judged."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(default=LABEL_SCHEMA, alias="schema")
    trajectory_id: str
    domain: str
    split: str
    task_id: int
    trial: int
    step: int  # index of the assistant message in trajectory.messages
    action: Action  # the executed tool call, or `respond` with the message text
    verdict: Verdict
    severity: Severity
    categories: list[str] = Field(default_factory=list)
    policy_refs: list[PolicyRef] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    rationale: Rationale
    expected_action: Action | None = None
    label_source: LabelSource
    first_critical_error: bool = False
    after_first_error: bool = False  # context already doomed: not used for the critic's verdict
    user_fault: bool = False  # the episode failed through the simulated user: no verdict of it trains anything
    extra: dict[str, Any] = Field(default_factory=dict)

    def to_json(self) -> str:
        """One JSON line."""
        return self.model_dump_json(by_alias=True)


class CritiqueJSON(BaseModel):
    """The critique a critic writes (the assistant turn of a `critic_sft` row)."""

    categories: list[str]
    severity: Literal["critical", "minor", "none"]
    policy_refs: list[PolicyRef]
    evidence: list[Evidence]
    rationale: Rationale
    expected_action: Action | None
    verdict: Literal["valid", "invalid"]


def critique_schema() -> dict[str, Any]:
    """The JSON schema a critic's answer follows (categories limited to the taxonomy)."""
    schema = CritiqueJSON.model_json_schema()
    schema["properties"]["categories"]["items"] = {"type": "string", "enum": list(CATEGORIES)}
    return schema


def structured_critique(text: str) -> CritiqueJSON | None:
    """The critique object in a critic's answer (the outermost braces, any thinking around them), or None."""
    start, end = text.find("{"), text.rfind("}")
    try:
        return CritiqueJSON.model_validate(json.loads(text[start : end + 1]))
    except (ValueError, ValidationError):
        return None
