"""The offline default models (`backend: scripted`): a scripted user and a noisy-oracle agent (a simulation).

`goals` (what the user asks for), `user` (the scripted user), `plan` (the gold way, looked up before it is
used), `oracle` (its turns, with injected mistakes); the plausible wrong values it uses are `castdata.envs.perturb`'s.
"""

from __future__ import annotations

from typing import Any

from castdata.errors import ConfigError
from castdata.models.base import EpisodeContext, Reply
from castdata.models.scripted.oracle import MISTAKE_KINDS, NoisyOracleAgent
from castdata.models.scripted.user import USER_MISTAKE_KINDS, ScriptedUser
from castdata.models.spec import ModelSpec


def check_options(spec: ModelSpec, role: str | None = None) -> None:
    """Refuse unknown scripted options of the `role` ("agent", "user"; None: either) model, in one line naming
    the key."""
    if spec.backend != "scripted":
        return
    where = f"{role}.options" if role else "options"
    allowed = ("mistakes", "revise") if role != "user" else ("mistakes",)
    for key in spec.options:
        if key not in allowed:
            raise ConfigError(f"{where}.{key}: unknown option; allowed: {', '.join(allowed)}")
    revise = spec.options.get("revise", 1.0)
    if not isinstance(revise, (int, float)) or isinstance(revise, bool) or not 0.0 <= revise <= 1.0:
        raise ConfigError(f"{where}.revise: must be a probability in [0, 1] (got {revise!r})")
    kinds = {"agent": MISTAKE_KINDS, "user": USER_MISTAKE_KINDS}.get(role, MISTAKE_KINDS + USER_MISTAKE_KINDS)
    for kind, rate in dict(spec.options.get("mistakes") or {}).items():
        if kind not in kinds:
            raise ConfigError(f"{where}.mistakes.{kind}: unknown mistake kind; allowed: {', '.join(kinds)}")
        if not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
            raise ConfigError(f"{where}.mistakes.{kind}: must be a probability in [0, 1] (got {rate!r})")


class ScriptedBackend:
    """`backend: scripted`: sessions for the noisy-oracle agent and the scripted user."""

    def __init__(self, spec: ModelSpec) -> None:
        check_options(spec)
        self.mistakes: dict[str, float] = dict(spec.options.get("mistakes") or {})
        self.revise = float(spec.options.get("revise", 1.0))

    def agent_session(self, ctx: EpisodeContext) -> NoisyOracleAgent:
        return NoisyOracleAgent(ctx, self.mistakes, self.revise)

    def user_session(self, ctx: EpisodeContext) -> ScriptedUser:
        return ScriptedUser(ctx, self.mistakes)

    async def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> Reply:
        raise NotImplementedError("the scripted backend only plays agents and users; use a model backend here")

    async def aclose(self) -> None:
        return None


__all__ = [
    "MISTAKE_KINDS",
    "USER_MISTAKE_KINDS",
    "NoisyOracleAgent",
    "ScriptedBackend",
    "ScriptedUser",
    "check_options",
]
