"""The training and evaluation splits of a recipe's dataset: a Hub release at its tag, or a local dataset folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from castdata.config import ConfigError
from castdata.train.recipe import Recipe

if TYPE_CHECKING:
    from datasets import Dataset

def local_split(root: Path, config: str, split: str) -> Dataset:
    """One split of one config of a dataset folder made by `castdata build`, read from the Parquet files its
    manifest lists (features, Json columns included, come from the files' schema).

    Not `datasets.load_dataset(folder, config)`: `datasets` caches a local folder under its name, not its contents,
    so a second folder of the same name (say, another build's `dataset`) silently loads the first one's rows.
    """
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    from castdata.build.dataset import MANIFEST

    manifest = root / MANIFEST
    if not manifest.is_file():
        raise ConfigError(f"{root}: not a dataset folder made by `castdata build` (no {MANIFEST})")
    splits = json.loads(manifest.read_text())["configs"].get(config, {})
    if split not in splits:
        raise ConfigError(f"{root}: config {config!r} has no {split!r} split; it has: {', '.join(splits) or 'none'}")
    return datasets.Dataset(pa.concat_tables(pq.read_table(root / name) for name in splits[split]["files"]))


def load_split(recipe: Recipe, split: str) -> Dataset:
    """One split of the recipe's dataset config, filtered to its domains, cut to its limit, with the recipe's
    `chat_template_kwargs` merged over each row's own."""
    import datasets

    source = recipe.dataset
    if source.path is not None:
        try:
            rows = local_split(Path(source.path), source.config, split)
        except ConfigError as err:
            raise ConfigError(f"dataset.path: {err}") from None
    else:
        try:
            rows = datasets.load_dataset(source.repo, source.config, split=split, revision=source.revision)
        except ValueError as err:  # e.g. an unknown split: datasets names the ones there are
            raise ConfigError(f"dataset: {source.repo} ({source.config}, split {split!r}): {str(err).splitlines()[0]}") from None
    if source.domains is not None:
        rows = rows.filter(lambda domain: domain in source.domains, input_columns="domain")
    if source.limit is not None:
        rows = rows.select(range(min(source.limit, len(rows))))
    if recipe.chat_template_kwargs:
        extra = recipe.chat_template_kwargs
        rows = rows.map(lambda kwargs: {"chat_template_kwargs": {**(kwargs or {}), **extra}}, input_columns="chat_template_kwargs")
    if len(rows) == 0:
        raise ConfigError(f"dataset: {source.repo or source.path} ({source.config}, split {split!r}) has no rows for this recipe")
    return rows


def load_splits(recipe: Recipe) -> tuple[Dataset, Dataset | None]:
    """The training split, and the evaluation split when the recipe names one and evaluates."""
    evaluation = recipe.dataset.eval_split
    evaluates = evaluation is not None and recipe.training.get("eval_strategy", "no") != "no"
    return load_split(recipe, recipe.dataset.train_split), (load_split(recipe, evaluation) if evaluates else None)
