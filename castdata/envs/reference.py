"""tau-trait's own episode loop (`Env.step` + `Env.calculate_reward`), for cross-checks and benchmarks.

This imports tau-trait the normal way (its litellm-based user module included), so it needs
`OPENAI_API_KEY` set at import; `tau_trait_env` sets a placeholder only for the import and removes it again.
Run it in a process of its own: castdata's own loader never needs any of this.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

ENV_CLASSES = {
    "retail": ("tau_trait.envs.retail.env", "MockRetailDomainEnv"),
    "airline": ("tau_trait.envs.airline.env", "MockAirlineDomainEnv"),
    "telecom": ("tau_trait.envs.telecom.env", "MockTelecomDomainEnv"),
    "telehealth": ("tau_trait.envs.telehealth.env", "MockTelehealthDomainEnv"),
}


def tau_trait_env(domain: str, split: str) -> Any:
    """tau-trait's environment for a domain/split, with a human (never called) user, no network."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    placeholder = "OPENAI_API_KEY" not in os.environ
    if placeholder:
        os.environ["OPENAI_API_KEY"] = "placeholder-for-import"
    try:
        module_name, class_name = ENV_CLASSES[domain]
        env_class = getattr(importlib.import_module(module_name), class_name)
        if domain == "telecom" and split == "dev":  # tau-trait's telecom dev module names its list TASKS_TEST
            return _with_tasks(
                env_class(user_strategy="human", user_model="none", task_split="test", task_index=0), domain, split
            )
        return env_class(user_strategy="human", user_model="none", task_split=split, task_index=0)
    finally:
        if placeholder:
            del os.environ["OPENAI_API_KEY"]


def _with_tasks(env: Any, domain: str, split: str) -> Any:
    module = importlib.import_module(f"tau_trait.envs.{domain}.tasks_{split}")
    env.tasks = next(v for k, v in vars(module).items() if k.startswith("TASKS") and isinstance(v, list))
    return env


def tau_trait_reward(env: Any, task_index: int, actions: list[tuple[str, dict]], said: list[str]) -> float:
    """Run tool `actions` through tau-trait's `Env.step`, add the agent's messages, and score with its reward."""
    from tau_trait.types import Action

    env.task_index = task_index
    env.task = env.tasks[task_index]
    env.data = env.data_load_func()
    env.actions = []
    for name, kwargs in actions:
        if name not in env.terminate_tools:
            env.step(Action(name=name, kwargs=kwargs))
    env.actions += [Action(name="respond", kwargs={"content": text}) for text in said]
    return env.calculate_reward().reward
