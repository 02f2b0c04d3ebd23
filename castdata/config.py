"""Pipeline configuration (`castdata collect|run CONFIG.yaml`), validated with one-line errors.

The collection keys sit at the top level; `label`, `build` and `publish` are sections for the later stages.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from castdata.build.options import BuildOptions
from castdata.hub.options import PublishOptions
from castdata.errors import ConfigError
from castdata.models.spec import ModelSpec
from castdata.scale.options import ExecutorOptions

if TYPE_CHECKING:
    from castdata.models.base import Backend


class CollectConfig(BaseModel):
    """What to collect: which tasks, how many trials, which models."""

    model_config = ConfigDict(extra="forbid")

    domains: list[str] = Field(default_factory=lambda: ["retail"], min_length=1)
    split: str | list[str] = "test"
    tasks: str | list[int] | dict[str, str | list[int]] = "all"
    trials: int = Field(default=4, ge=1)
    agent: ModelSpec = Field(default_factory=ModelSpec)
    user: ModelSpec = Field(default_factory=lambda: ModelSpec(model="scripted-user"))
    max_steps: int = Field(default=30, ge=1)
    max_errors: int = Field(default=5, ge=0)
    concurrency: int = Field(default=32, ge=1)
    seed: int = 0
    out: str = "runs/demo"
    executor: ExecutorOptions = Field(default_factory=ExecutorOptions)

    @field_validator("tasks")
    @classmethod
    def _tasks_form(cls, value):
        for selection in value.values() if isinstance(value, dict) else [value]:
            if isinstance(selection, str) and selection != "all" and not re.fullmatch(r"\d+-\d+", selection):
                raise ValueError("must be 'all', a list of task ids, a range 'START-END' (inclusive), or a mapping "
                                 "from 'split' or 'domain/split' to one of those")
        return value

    @model_validator(mode="after")
    def _scripted_options(self):
        from castdata.models.scripted import check_options

        check_options(self.agent, "agent")
        check_options(self.user, "user")
        return self

    @property
    def splits(self) -> list[str]:
        """The splits to collect."""
        return [self.split] if isinstance(self.split, str) else list(self.split)

    def selection(self, domain: str, split: str) -> str | list[int] | None:
        """What `tasks` selects for one domain and split; None when a mapping names neither."""
        if not isinstance(self.tasks, dict):
            return self.tasks
        return self.tasks.get(f"{domain}/{split}", self.tasks.get(split))

    def task_ids(self, domain: str, split: str, available: int) -> list[int]:
        """The selected task ids of one domain/split, given how many tasks it has; ConfigError when out of range."""
        selection = self.selection(domain, split)
        if selection is None:
            return []
        if selection == "all":
            return list(range(available))
        if isinstance(selection, str):
            start, end = (int(x) for x in selection.split("-"))
            ids = list(range(start, end + 1))
        else:
            ids = list(selection)
        for task_id in ids:
            if not 0 <= task_id < available:
                raise ConfigError(f"tasks: task id {task_id} out of range for {domain}/{split}; allowed: 0..{available - 1}")
        return ids

    def open_agent(self) -> Backend:
        """The agent backend the episodes run (`castdata eval` wraps it in a critic guard)."""
        from castdata.models import open_backend

        return open_backend(self.agent)

    def fingerprint(self) -> str:
        """A hash of everything that determines the episodes (not `out`, `concurrency` or `executor`)."""
        relevant = self.model_dump(mode="json", exclude={"out", "concurrency", "executor"})
        return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


class PipelineConfig(CollectConfig):
    """`castdata run`: collection plus the label, build and (optional) publish stages."""

    label: dict[str, Any] = Field(default_factory=dict)
    build: BuildOptions = Field(default_factory=BuildOptions)
    publish: PublishOptions | None = None

    def collect_part(self) -> CollectConfig:
        """Just the collection keys."""
        return CollectConfig(**self.model_dump(include=set(CollectConfig.model_fields)))


def one_line_error(err: ValidationError, model: type[BaseModel]) -> str:
    """The first validation error as one line naming the key (and, for an unknown key, the allowed ones)."""
    first = err.errors()[0]
    if first["type"] == "value_error" and not first["loc"] and isinstance(first["ctx"]["error"], ConfigError):
        return str(first["ctx"]["error"])  # a check over several keys names its own key
    where = ".".join(str(p) for p in first["loc"]) or "config"
    if first["type"] == "extra_forbidden":
        parent = first["loc"][:-1]
        fields: Any = model.model_fields
        for part in parent:
            annotation = fields[part].annotation if part in fields else None
            candidates = [annotation, *get_args(annotation)]  # unwrap `Model | None`
            fields = next((c.model_fields for c in candidates if hasattr(c, "model_fields")), {})
        return f"{where}: unknown key; allowed: {', '.join(fields)}"
    return f"{where}: {first['msg']} (got {first.get('input')!r})"


def load_config(path: str | Path, model: type[BaseModel] = PipelineConfig) -> Any:
    """Read and validate a YAML config; every problem is a `ConfigError` naming the key."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}".splitlines()[0]) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must be a mapping of keys to values")
    try:
        return model(**raw)
    except ValidationError as err:
        raise ConfigError(one_line_error(err, model)) from None
