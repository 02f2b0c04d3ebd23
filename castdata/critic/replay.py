"""The scripted critic stand-in (`critic: {backend: scripted, model: replay-critic}`): a privileged oracle.

A SIMULATION for demos and tests, like the noisy-oracle agent. It judges only writes, by replaying tool calls
on fresh databases with the task's gold solution at hand (which no real critic knows). A write stands in for
an outstanding gold write: the same call if one is outstanding, else the next one in the gold order. It is
`valid` when, with the other outstanding gold writes done after it, the episode still ends in the gold
database. Earlier writes are matched the same way (one that failed the test matched nothing).
"""

from __future__ import annotations

from typing import Any

from castdata.critic.guard import Critique
from castdata.messages import first_call, tool_turns
from castdata.models.base import EpisodeContext
from castdata.records import Action

VALID = Critique(verdict="valid", text="The action is consistent with the user's request.")
INVALID = Critique(
    verdict="invalid",
    text="This write would leave the account in a state the user did not ask for. Re-check the tool and every "
    "argument against what the user asked for and what the tools returned.",
)


class ReplayCritic:
    """Flags a proposed write after which the gold end state is out of reach (privileged replay)."""

    async def judge(self, ctx: EpisodeContext, messages: list[dict[str, Any]], proposed: dict[str, Any]) -> Critique:
        call = first_call(proposed)
        if call is None or ctx.domain.tool_kind(call.name) != "write":
            return VALID
        if not isinstance(call.arguments, dict):
            return INVALID
        outstanding = [a for a in ctx.task.actions if ctx.domain.tool_kind(a.name) == "write"]
        done: list[Action] = []
        for _, executed in tool_turns(messages):
            if ctx.domain.tool_kind(executed.name) == "write":
                self._stand_in(ctx, done, executed.action, outstanding)
            done.append(executed.action)
        return VALID if self._stand_in(ctx, done, call.action, outstanding) else INVALID

    def _stand_in(self, ctx: EpisodeContext, done: list[Action], write: Action, outstanding: list[Action]) -> bool:
        """Whether `write`, after `done`, stands in for an outstanding gold write (then removed from `outstanding`)."""
        gold = write if write in outstanding else next(iter(outstanding), None)
        rest = list(outstanding)
        if gold is not None:
            rest.remove(gold)
        if not ctx.domain.reaches_gold([*done, write, *rest], ctx.task):
            return False
        outstanding[:] = rest
        return True

    async def aclose(self) -> None:
        return None
