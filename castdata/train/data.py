"""The training and evaluation splits of a recipe's dataset: a Hub release at its tag, or a local dataset folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from castdata.errors import ConfigError, InputError
from castdata.hub.local import local_split
from castdata.train.recipe import Recipe

if TYPE_CHECKING:
    from datasets import Dataset


def load_split(recipe: Recipe, split: str) -> Dataset:
    """One split of the recipe's dataset config, filtered to its domains and sources, cut to its limit, with the
    recipe's `chat_template_kwargs` merged over each row's own."""
    import datasets

    source = recipe.dataset
    if source.path is not None:
        try:
            rows = local_split(Path(source.path), source.config, split)
        except InputError as err:
            raise ConfigError(f"dataset.path: {err}") from None
    else:
        try:
            rows = datasets.load_dataset(source.repo, source.config, split=split, revision=source.revision)
        except ValueError as err:  # e.g. an unknown split: datasets names the ones there are
            raise ConfigError(
                f"dataset: {source.repo} ({source.config}, split {split!r}): {str(err).splitlines()[0]}"
            ) from None
    if source.domains is not None:
        rows = rows.filter(lambda domain: domain in source.domains, input_columns="domain")
    if source.sources is not None:
        if "source" not in rows.column_names:
            raise ConfigError(f"dataset.sources: the {source.config} config has no `source` column (an older build)")
        rows = rows.filter(lambda kind: kind in source.sources, input_columns="source")
    if source.limit is not None:
        rows = rows.select(range(min(source.limit, len(rows))))
    if recipe.chat_template_kwargs:
        extra = recipe.chat_template_kwargs
        rows = rows.map(
            lambda kwargs: {"chat_template_kwargs": {**(kwargs or {}), **extra}}, input_columns="chat_template_kwargs"
        )
    if len(rows) == 0:
        raise ConfigError(
            f"dataset: {source.repo or source.path} ({source.config}, split {split!r}) has no rows for this recipe"
        )
    return rows


def load_splits(recipe: Recipe) -> tuple[Dataset, Dataset | None]:
    """The training split, and the evaluation split when the recipe names one and evaluates."""
    evaluation = recipe.dataset.eval_split
    evaluates = evaluation is not None and recipe.training.get("eval_strategy", "no") != "no"
    return load_split(recipe, recipe.dataset.train_split), (load_split(recipe, evaluation) if evaluates else None)
