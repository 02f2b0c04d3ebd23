"""A critic model over any backend's `complete(messages, json_schema=...)`, e.g. a Qwen3 fine-tuned on `critic_sft`.

It sees exactly what a `critic_sft` row shows (the builder's own rendering: `castdata.builders.critic`) and answers
with the structured critique as JSON, `verdict` last; the JSON schema is passed to the backend to constrain it.
"""

from __future__ import annotations

from typing import Any

from castdata.builders import critic as critic_rows
from castdata.builders.render import context_block
from castdata.critic.guard import Critique
from castdata.label.policy import clause_table
from castdata.label.schema import critique_schema, structured_critique
from castdata.models.base import Backend, EpisodeContext


def parse_critique(text: str) -> Critique:
    """A critic's answer as a Critique; verdict None when it holds no valid critique object."""
    structured = structured_critique(text)
    if structured is None:
        return Critique(verdict=None, text=text)
    return Critique(verdict=structured.verdict, text=text[text.find("{") : text.rfind("}") + 1], structured=structured)


class ModelCritic:
    """Judges a proposed action with a critic model."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.schema = critique_schema()
        self._systems: dict[str, str] = {}

    def prompt(
        self, ctx: EpisodeContext, messages: list[dict[str, Any]], proposed: dict[str, Any]
    ) -> list[dict[str, str]]:
        """The critic's messages for `proposed` after `messages`, rendered as the `critic_sft` builder renders them."""
        domain = ctx.domain
        if domain.name not in self._systems:
            context = context_block(clause_table(domain.name).clauses, domain.tool_schemas)
            self._systems[domain.name] = critic_rows.system_prompt(context)
        user = critic_rows.proposal_prompt(messages, len(messages), proposed)  # the proposal carries every call
        return [{"role": "system", "content": self._systems[domain.name]}, {"role": "user", "content": user}]

    async def judge(self, ctx: EpisodeContext, messages: list[dict[str, Any]], proposed: dict[str, Any]) -> Critique:
        reply = await self.backend.complete(self.prompt(ctx, messages, proposed), json_schema=self.schema)
        critique = parse_critique(reply.content or "")
        critique.usage = reply.usage
        return critique

    async def aclose(self) -> None:
        await self.backend.aclose()
