"""The `executor:` section of a collect config: `local` (one asyncio process, the default) or `ray: {...}`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class RayOptions(BaseModel):
    """Work units as Ray tasks. `address`: None starts a Ray instance on this machine, `auto` joins the cluster
    this node belongs to, `ray://HEAD:10001` connects a remote client. `resources`: what each worker task
    reserves (`CPU`, `GPU`, `memory` in bytes, or custom resource names)."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = None
    num_workers: int = Field(default=4, ge=1)  # work units running at once
    episodes_per_task_batch: int = Field(default=16, ge=1)  # episodes in one work unit (one Ray task)
    resources: dict[str, float] = Field(default_factory=lambda: {"CPU": 1.0})
    max_retries: int = Field(default=3, ge=0)  # reruns of a unit whose worker died

    def task_options(self) -> dict[str, Any]:
        """`ray.remote(...).options(...)` keywords for one worker task."""
        named = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory"}
        options: dict[str, Any] = {"max_retries": self.max_retries}
        options.update({named[k]: v for k, v in self.resources.items() if k in named})
        custom = {k: v for k, v in self.resources.items() if k not in named}
        if custom:
            options["resources"] = custom
        return options


class ExecutorOptions(BaseModel):
    """Where episodes run: `executor: local`, `executor: ray` (defaults) or `executor: {ray: {...}}`."""

    model_config = ConfigDict(extra="forbid")

    ray: RayOptions | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if value == "local":
            return {}
        if value == "ray":
            return {"ray": {}}
        if isinstance(value, str):
            raise ValueError(
                "must be 'local', 'ray', or a mapping {ray: {address, num_workers, episodes_per_task_batch, resources}}"
            )
        return value
