"""Pipeline configuration (`castdata collect|run CONFIG.yaml`), validated with one-line errors.

The collection keys sit at the top level; `label`, `build` and `publish` are sections for the later stages.
`critic:` (a model spec), `guard:` and `max_revisions:` guard the agent's actions with a critic
(`castdata.critic.guard`), in `collect`, `run` and `eval` alike.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from castdata.builders.options import BuildOptions
from castdata.errors import ConfigError
from castdata.hub.options import PublishOptions
from castdata.models.spec import ModelSpec
from castdata.scale.options import ExecutorOptions

if TYPE_CHECKING:
    from castdata.models.base import Backend

GUARD_KEYS = ("critic", "guard", "max_revisions")


class CollectConfig(BaseModel):
    """What to collect: which tasks, how many trials, which models."""

    model_config = ConfigDict(extra="forbid")

    domains: list[str] = Field(default_factory=lambda: ["retail"], min_length=1)
    split: str | list[str] = "test"
    tasks: str | list[int] | dict[str, str | list[int]] = "all"
    trials: int = Field(default=4, ge=1)
    agent: ModelSpec = Field(default_factory=ModelSpec)
    user: ModelSpec = Field(default_factory=lambda: ModelSpec(model="scripted-user"))
    judge: ModelSpec | None = None  # tau2's NL_ASSERTION: the model that grades natural-language assertions
    max_steps: int = Field(default=30, ge=1)
    max_errors: int = Field(default=5, ge=0)
    concurrency: int = Field(default=32, ge=1)
    seed: int = 0
    out: str = "runs/demo"
    executor: ExecutorOptions = Field(default_factory=ExecutorOptions)
    critic: ModelSpec | None = None  # a critic guarding the agent's actions (none: unguarded)
    guard: Literal["writes", "all"] = "writes"  # which proposals it judges: every write, or every action
    max_revisions: int = Field(default=2, ge=0)  # revisions an agent gets before its last proposal executes

    @field_validator("tasks")
    @classmethod
    def _tasks_form(cls, value):
        for selection in value.values() if isinstance(value, dict) else [value]:
            if isinstance(selection, str) and selection != "all" and not re.fullmatch(r"\d+-\d+", selection):
                raise ValueError(
                    "must be 'all', a list of task ids, a range 'START-END' (inclusive), or a mapping "
                    "from 'split' or 'domain/split' to one of those"
                )
        return value

    @field_validator("judge")
    @classmethod
    def _judge_grades(cls, spec: ModelSpec | None) -> ModelSpec | None:
        if spec is not None and spec.backend == "scripted":
            raise PydanticCustomError(
                "scripted_judge", "the scripted backend cannot judge; set backend: openai, vllm or transformers"
            )
        return spec

    @model_validator(mode="after")
    def _scripted_options(self):
        from castdata.models.scripted import check_options

        check_options(self.agent, "agent")
        check_options(self.user, "user")
        if self.critic is not None and self.executor.ray is not None:
            raise ValueError("a critic-guarded collection runs on the local executor; remove `executor.ray`")
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
                raise ConfigError(
                    f"tasks: task id {task_id} out of range for {domain}/{split}; allowed: 0..{available - 1}"
                )
        return ids

    def unguarded(self) -> CollectConfig:
        """The same collection without the critic."""
        return CollectConfig(**self.model_dump(include=set(CollectConfig.model_fields) - {"critic"}))

    def open_judge(self) -> Backend | None:
        """The judge backend (`judge:`), or None without one."""
        from castdata.models import open_backend

        return None if self.judge is None else open_backend(self.judge, "judge")

    def endpoints(self) -> dict[str, ModelSpec | None]:
        """The model specs whose endpoints a run needs, by their place in the config (for the endpoint probe)."""
        return {"agent": self.agent, "user": self.user, "critic": self.critic, "judge": self.judge}

    def fingerprint(self) -> str:
        """A hash of everything that determines the episodes (not `out`, `concurrency` or `executor`; without a
        critic, not the guard's keys, and no `judge` key when there is none, so a run keeps the fingerprint it had
        before those keys existed)."""
        unused = (set(GUARD_KEYS) if self.critic is None else set()) | ({"judge"} if self.judge is None else set())
        relevant = self.model_dump(mode="json", exclude={"out", "concurrency", "executor", *unused})
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
    return f"{where}: {first['msg'].removeprefix('Value error, ')} (got {first.get('input')!r})"


def load_config(path: str | Path, model: type[BaseModel] = PipelineConfig, overrides: Iterable[str] = ()) -> Any:
    """Read and validate a YAML config, after `overrides` (`--set KEY=VALUE`); every problem is a `ConfigError`
    naming the file, the line and column where YAML gives them, and the full dotted key."""
    path = Path(path)
    text = read_text(path)
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        where = _at(getattr(err, "problem_mark", None))
        raise ConfigError(f"{path}{where}: not valid YAML: {_yaml_problem(err)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must be a mapping of keys to values (got {type(raw).__name__})")
    for assignment in overrides:
        apply_override(raw, assignment)
    try:
        return model(**raw)
    except ValidationError as err:
        where = _key_mark(text, err.errors()[0]["loc"]) if not overrides else None
        raise ConfigError(f"{path}{_at(where)}: {one_line_error(err, model)}") from None


def read_text(path: Path) -> str:
    """A config file's text; a missing file, a folder, an unreadable or non-UTF-8 file is a `ConfigError`."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except PermissionError:
        raise ConfigError(f"{path}: not readable (permission denied)") from None
    except UnicodeDecodeError as err:
        byte = err.object[err.start]
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{byte:02x} at offset {err.start})") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror or err})") from None


def apply_override(raw: dict[str, Any], assignment: str) -> None:
    """Apply one `--set dotted.key=value` (value parsed as YAML; numbers as JSON reads them) to a raw config."""
    key, sep, value = assignment.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE, e.g. trials=2 or agent.model=gpt-4.1")
    *parents, leaf = key.split(".")
    node = raw
    for part in parents:
        if node.get(part) is None:  # absent, or null (e.g. `lora: null`)
            node[part] = {}
        node = node[part]
        if not isinstance(node, dict):
            raise ConfigError(f"--set {assignment!r}: {part} is not a section")
    try:
        node[leaf] = json.loads(value)  # YAML takes 1e-5 for a string
    except ValueError:
        try:
            node[leaf] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConfigError(f"--set {assignment!r}: the value is not valid YAML") from None


def _yaml_problem(err: yaml.YAMLError) -> str:
    problem = getattr(err, "problem", None)
    context = getattr(err, "context", None)
    return " ".join(part for part in (context, problem) if part) or str(err).splitlines()[0]


def _at(mark: Any) -> str:
    """`:line:column` (1-based) of a PyYAML mark, or nothing."""
    return f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""


def _key_mark(text: str, loc: tuple) -> Any:
    """Where the key at `loc` (a pydantic error location) is written in the YAML text: the mark of the deepest
    part of it that is there (a missing key points at its section)."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    mark = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if found is None:
                break
            mark, node = found[0].start_mark, found[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            mark = node.start_mark
        else:
            break
    return mark
