"""The `build:` section of a pipeline config: splits, class balance, card metadata, output."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class BuildOptions(BaseModel):
    """How `castdata build` turns labelled runs into a dataset.

    `critic_balance` applies to the critic's `train` split only (evaluation splits keep the natural rates):
    `downsample` keeps at most `valid_per_invalid` valid rows per invalid row (a deterministic subset),
    `upsample` repeats invalid rows until there is one per `valid_per_invalid` valid rows. The default,
    `upsample` to 3 valid per invalid, keeps every valid row and lifts invalid rows (about 5% of the actions
    of the demo's noisy oracle) to a quarter of the train split, so a critic does not learn to always say valid.
    """

    model_config = ConfigDict(extra="forbid")

    out: str | None = None  # default: RUN_DIR/dataset
    validation_fraction: float = Field(default=0.1, ge=0.0, le=1.0)
    critic_balance: Literal["none", "downsample", "upsample"] = "upsample"
    valid_per_invalid: float = Field(default=3.0, gt=0.0)
    critique_reasoning: bool = True  # corrected actions in policy_sft carry reasoning derived from the critique
    shard_rows: int = Field(default=20_000, ge=1)
    pretty_name: str = "CAST critique dataset"
    license: str = "mit"
