"""Teacher rationales: a model (`label.teacher`, any backend) rewrites each label's prose and may refine its categories.

The teacher gets critic instructions with the domain policy, the messages the agent saw before the action,
the action, the programmatic label (the draft) and privileged hints (the user's hidden goal, a gold
solution, the outcome and the signals that flagged the action), and is told to use the hints for
understanding only and to cite visible evidence. It answers under a JSON schema (`output_schema`: the
rationale's three fields, evidence, and for invalid labels categories from the taxonomy), which the backends
enforce (OpenAI `response_format`, vLLM guided decoding). `castdata.label.writers.write_verified` checks each
answer with the grounding verifier and retries with the rejection reasons; a reply that is not JSON or not
of the schema is a rejection too (`unparseable`).

Replies are cached in `RUN_DIR/labels/cache/teacher.jsonl`, keyed by the SHA-256 of the teacher (backend,
model, sampling, chat template kwargs: not its address, key or limits), the prompt, the schema and the try
(a retry whose prompt repeats the previous one still gets a fresh sample). Rejected replies are cached too,
so a rerun repeats every try without a single request.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from castdata.label.schema import CATEGORIES, Evidence, Label, Rationale
from castdata.label.verify import Rejection
from castdata.messages import visible_content
from castdata.models import open_backend
from castdata.models.base import Backend
from castdata.models.spec import ModelSpec
from castdata.records import Trajectory
from castdata.rundir import ReplyCache
from castdata.transcript import entry, history

_TEACHER_KEYS = {"backend", "model", "sampling", "chat_template_kwargs"}  # what shapes a reply
_DRAFT_KEYS = {"verdict", "severity", "categories", "policy_refs", "evidence", "rationale", "expected_action"}

INSTRUCTIONS = """You are a critic of a customer-service agent that follows the policy below and calls tools. One action of the agent has already been judged; you write the explanation of that judgement, as JSON.

Write:
- rationale.observed: what the agent did at this step, in one or two sentences.
- rationale.required: what the policy and the conversation so far required of the agent at this point.
- rationale.assessment: begin with the verdict and severity (e.g. "Valid." or "Invalid (critical):") and say why.
- evidence: earlier steps that support the judgement: the step number, its source ("message" for a user or agent message, "tool_result" for a tool's output, "policy" with step null for the policy) and a quote copied exactly from it.
- categories (only when the schema asks for them): the kinds of mistake, from the allowed list.

Rules:
- Keep the draft label's verdict and severity.
- Use only what the agent could see before this action: the policy, the numbered messages and the action itself. The hints are privileged (the agent never saw them): use them to understand what went wrong, but never cite or mention them, and never write an id, email, amount or date that does not appear in the visible messages or the policy.
- Quotes must be exact substrings of the step they cite, and that step must come before the action.

Policy:
"""

_TEXT = {"type": "string"}
_RATIONALE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["observed", "required", "assessment"],
    "properties": {"observed": _TEXT, "required": _TEXT, "assessment": _TEXT},
}
_EVIDENCE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["step", "source", "quote"],
    "properties": {
        "step": {"type": ["integer", "null"]},
        "source": {"enum": ["message", "tool_result", "policy"]},
        "quote": _TEXT,
    },
}


class _Output(BaseModel):
    """The teacher's answer."""

    model_config = ConfigDict(extra="forbid")

    rationale: Rationale
    evidence: list[Evidence]
    categories: list[str] | None = None


def output_schema(draft: Label) -> dict[str, Any]:
    """The JSON schema of the answer: categories (at least one, from the taxonomy) only for an invalid draft."""
    properties: dict[str, Any] = {"rationale": _RATIONALE, "evidence": {"type": "array", "items": _EVIDENCE}}
    if draft.verdict == "invalid":
        properties["categories"] = {"type": "array", "items": {"enum": list(CATEGORIES)}, "minItems": 1}
    return {"type": "object", "additionalProperties": False, "required": list(properties), "properties": properties}


def prompt(trajectory: Trajectory, draft: Label, feedback: list[Rejection]) -> list[dict[str, Any]]:
    """The teacher's messages for one label (`feedback`: why its previous answer was rejected)."""
    messages = trajectory.messages
    privileged = trajectory.privileged
    gold = "; ".join(f"{a.name}({json.dumps(a.kwargs)})" for a in privileged.gold_actions) or "no tool calls"
    outcome = trajectory.outcome
    parts = [
        "Visible conversation before the action:",
        history(messages, 1, draft.step),
        f"\nAction to judge (step {draft.step}):\n{entry(draft.step, messages[draft.step])}",
        f"\nDraft label:\n{json.dumps(draft.model_dump(mode='json', include=_DRAFT_KEYS), indent=1)}",
        "\nPrivileged hints (never cite or mention them):",
        f"- the user's hidden goal: {privileged.instruction}",
        f"- a correct solution: {gold}",
        f"- outputs the agent had to tell the user: {'; '.join(privileged.required_outputs) or 'none'}",
        f"- outcome: reward {outcome.reward}, ended by {outcome.termination_reason}, outputs never said: {'; '.join(outcome.outputs_missing) or 'none'}",
        f"- signals about this action: {', '.join(draft.label_source.signals)}",
    ]
    if feedback:
        parts += [
            "\nYour previous answer was rejected:",
            *(f"- {r.code}: {r.detail}" for r in feedback),
            "Fix every problem listed.",
        ]
    return [
        {"role": "system", "content": INSTRUCTIONS + visible_content(messages[0])},
        {"role": "user", "content": "\n".join(parts)},
    ]


def parse(content: str, draft: Label, teacher_model: str) -> Label:
    """The draft with the teacher's prose, evidence and categories; ValueError for a reply not of the schema."""
    try:
        output = _Output.model_validate_json(content)
    except ValidationError as err:
        first = err.errors()[0]
        if first["type"] == "json_invalid":
            raise ValueError(f"the reply is not JSON: {first['msg']}") from None
        where = ".".join(str(part) for part in first["loc"]) or "reply"
        raise ValueError(f"the reply does not match the schema: {where}: {first['msg']}") from None
    categories = draft.categories
    if draft.verdict == "invalid":
        if not output.categories:
            raise ValueError("the reply does not match the schema: categories: an invalid label needs at least one")
        categories = output.categories
    source = draft.label_source.model_copy(update={"method": "teacher", "teacher_model": teacher_model})
    return draft.model_copy(
        update={
            "rationale": output.rationale,
            "evidence": output.evidence,
            "categories": categories,
            "label_source": source,
        }
    )


class TeacherWriter:
    """A `RationaleWriter` (`castdata.label.writers`) over `open_backend(spec).complete`, with a reply cache.
    The backend opens at the first request the cache cannot answer; `requests` and `cached` count both kinds."""

    def __init__(self, spec: ModelSpec, cache_path: Path) -> None:
        self.spec = spec
        self.name = spec.label
        self.cache = ReplyCache(cache_path)
        self.backend: Backend | None = None
        self.tries: Counter[tuple[str, int]] = Counter()  # per (trajectory, step)
        self.requests = 0
        self.cached = 0

    async def write(self, trajectory: Trajectory, draft: Label, feedback: list[Rejection]) -> Label:
        """The teacher's label for the action of `draft`; ValueError when its reply is not of the schema."""
        messages, schema = prompt(trajectory, draft, feedback), output_schema(draft)
        attempt = self.tries[trajectory.id, draft.step]
        self.tries[trajectory.id, draft.step] += 1
        return parse(await self._reply(messages, schema, attempt), draft, self.name)

    async def _reply(self, messages: list[dict[str, Any]], schema: dict[str, Any], attempt: int) -> str:
        teacher = self.spec.model_dump(mode="json", include=_TEACHER_KEYS)
        key = hashlib.sha256(json.dumps([teacher, messages, schema, attempt], sort_keys=True).encode()).hexdigest()
        content = self.cache.get(key)
        if content is not None:
            self.cached += 1
            return content
        if self.backend is None:
            self.backend = open_backend(self.spec)
        reply = await self.backend.complete(messages, json_schema=schema)
        self.requests += 1
        content = reply.content or ""
        self.cache.put(key, content)
        return content

    async def aclose(self) -> None:
        """Close the backend, if one was opened."""
        if self.backend is not None:
            await self.backend.aclose()
