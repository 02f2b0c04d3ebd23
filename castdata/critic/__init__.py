"""Critics at inference: guarding an agent's actions (`castdata eval`) and evaluating a critic (`castdata eval-critic`).

`open_critic(spec)` gives the critic a model spec names (imports only what that critic needs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from castdata.critic.guard import Critic
    from castdata.models.spec import ModelSpec

REPLAY_CRITIC = "replay-critic"


def open_critic(spec: ModelSpec, where: str = "critic") -> Critic:
    """`backend: scripted, model: replay-critic` is the privileged stand-in; any other spec is a critic model,
    rendered as `critic_sft` rows are (its `chat_template_kwargs` default to the rows' own). A bad spec is a
    `ConfigError` naming `where` (its place in the config)."""
    from castdata.errors import ConfigError

    if spec.backend == "scripted":
        if spec.model != REPLAY_CRITIC:
            raise ConfigError(f"{where}.model: the scripted critic is '{REPLAY_CRITIC}', got {spec.model!r}")
        from castdata.critic.replay import ReplayCritic

        return ReplayCritic()
    from castdata.builders.critic import CHAT_TEMPLATE_KWARGS
    from castdata.critic.model import ModelCritic
    from castdata.models import open_backend

    kwargs = spec.chat_template_kwargs or CHAT_TEMPLATE_KWARGS
    return ModelCritic(open_backend(spec.model_copy(update={"chat_template_kwargs": kwargs}), where))
