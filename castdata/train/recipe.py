"""Training recipes (`configs/train/*.yaml`): every knob of a fine-tuning run, checked before anything heavy loads.

A recipe names the hardware it expects, the model, the dataset (a Hub repo pinned to a release tag, or a local
folder made by `castdata build`), LoRA or full fine-tuning, per-row chat-template overrides, and `training:`,
the fields of TRL's `SFTConfig` / `DPOConfig` as they are. `--set KEY=VALUE` overrides any key from the command
line (`--set training.learning_rate=1e-5`, `--set dataset.path=ds --set dataset.repo=null`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from castdata.config import apply_override, load_config, one_line_error
from castdata.errors import ConfigError

RELEASE = re.compile(r"v\d+\.\d+\.\d+|[0-9a-f]{40}")
"""A reproducible Hub revision: a release tag `vX.Y.Z` (as `castdata publish` makes them) or a commit sha."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Section):
    """The base model: a Hub id or a local directory."""

    id: str
    revision: str | None = None
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "bfloat16"
    attn_implementation: str | None = None  # e.g. sdpa, flash_attention_2


class DatasetSection(_Section):
    """A castdata dataset config: `repo` on the Hub at `revision`, or `path`, a local dataset folder."""

    repo: str | None = None
    path: str | None = None
    config: str
    revision: str | None = None
    train_split: str = "train"
    eval_split: str | None = "validation"
    domains: list[str] | None = None  # keep only these domains' rows (e.g. train on retail, hold out telehealth)
    sources: list[Literal["hindsight", "critic", "critic_error"]] | None = None  # keep only rows of these `source`s
    limit: int | None = Field(default=None, ge=1)  # the first N rows of each split (smoke tests)

    @model_validator(mode="after")
    def _source(self) -> DatasetSection:
        from castdata.builders.features import CONFIGS

        if self.config not in CONFIGS:
            raise ValueError(f"config: unknown dataset config {self.config!r}; allowed: {', '.join(CONFIGS)}")
        if (self.repo is None) == (self.path is None):
            raise ValueError("repo: give exactly one of `repo` (a Hub dataset) and `path` (a local dataset folder)")
        if self.repo is not None and not RELEASE.fullmatch(self.revision or ""):
            raise ValueError(
                f"revision: a Hub dataset needs a release tag like v1.0.0 (or a commit sha), got {self.revision!r}"
            )
        return self


class LoraSection(_Section):
    """LoRA adapters (peft) instead of full fine-tuning."""

    r: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0)
    target_modules: str | list[str] = "all-linear"


class Recipe(_Section):
    """One fine-tuning run."""

    hardware: str  # what the recipe expects, e.g. "1x 24 GB GPU (L4, A10G, RTX 4090)"
    model: ModelSection
    dataset: DatasetSection
    lora: LoraSection | None = None  # None: full fine-tuning
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)  # merged over each row's own
    training: dict[str, Any] = Field(default_factory=dict)  # SFTConfig / DPOConfig fields

    @model_validator(mode="after")
    def _training(self) -> Recipe:
        for key, value in self.training.items():
            if key.endswith("_strategy") and value is False:  # YAML reads a bare `no` as false
                self.training[key] = "no"
        if not self.training.get("output_dir"):
            raise ValueError("training.output_dir: required (where the checkpoint is saved)")
        if self.dataset.eval_split is None and self.training.get("eval_strategy", "no") != "no":
            raise ValueError("training.eval_strategy: needs dataset.eval_split (or set eval_strategy: no)")
        return self


def load_recipe(path: str | Path, overrides: list[str] = (), expect: str | None = None) -> Recipe:
    """A validated recipe; `expect` is the dataset config the calling script trains on. Raises ConfigError."""
    raw: dict[str, Any] = load_config(path, _Raw).values
    for assignment in overrides:
        apply_override(raw, assignment)
    try:
        recipe = Recipe(**raw)
    except ValidationError as err:
        raise ConfigError(f"{path}: {_message(err)}") from None
    if expect is not None and recipe.dataset.config != expect:
        raise ConfigError(f"{path}: dataset.config: this script trains on {expect!r}, got {recipe.dataset.config!r}")
    return recipe


def _message(err: ValidationError) -> str:
    """One line naming the key: our validators' messages start with the key below the failing section."""
    first = err.errors()[0]
    if first["type"] != "value_error":
        return one_line_error(err, Recipe)
    where = ".".join(str(part) for part in first["loc"])
    text = str(first["ctx"]["error"])
    return f"{where}.{text}" if where else text


class _Raw(BaseModel):
    """Any mapping (validated as a Recipe after the overrides)."""

    model_config = ConfigDict(extra="allow")

    @property
    def values(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def recipe_from_argv(argv: list[str] | None, expect: str, description: str) -> Recipe:
    """The recipe a training script is started with: `--config PATH [--set KEY=VALUE ...]`. Raises ConfigError."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", required=True, help="A recipe YAML (configs/train/*.yaml).")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="Override a recipe key."
    )
    args = parser.parse_args(argv)
    return load_recipe(args.config, args.overrides, expect)
