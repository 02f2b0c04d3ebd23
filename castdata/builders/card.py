"""The dataset card: `README.md` rendered from `cards/README.md.jinja` and the dataset's `castdata.json` manifest.

The card starts with the Hub's YAML front matter (configs with their data files per split, license, task
categories, tags, pretty name, size category). The templates live in the top-level `cards/` folder, which the
package reaches as `castdata/cards` (a link in the source tree, copied into wheels as package data).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
import yaml
from datasets import Json, List, Value

from castdata.builders.features import CONFIGS
from castdata.builders.splits import SPLITS
from castdata.builders.writer import shard_glob
from castdata.label.schema import CATEGORIES

CARD = "README.md"
TEMPLATE = "README.md.jinja"
TASK_CATEGORIES = ["text-generation", "text-classification"]
TAGS = ["agents", "tool-calling", "tau-bench", "critic", "process-reward-model", "sft", "dpo", "trl", "castdata"]
_SIZES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
)


def templates_dir() -> Path:
    """Where the card templates are, in a source checkout and in an installed package alike."""
    return Path(str(files("castdata") / "cards"))


def type_name(feature: Any) -> str:
    """A feature type as the card's schema tables print it, e.g. `list<struct{name: string, kwargs: json}>`."""
    if isinstance(feature, Json):
        return "json"
    if isinstance(feature, Value):
        return feature.dtype
    if isinstance(feature, List):
        return f"list<{type_name(feature.feature)}>"
    return "struct{" + ", ".join(f"{name}: {type_name(sub)}" for name, sub in feature.items()) + "}"


def size_category(rows: int) -> str:
    """The Hub's `size_categories` value for a row count."""
    return next((name for limit, name in _SIZES if rows < limit), "n>10M")


def front_matter(manifest: dict) -> dict:
    """The Hub metadata: one config per built config, one data_files entry per split that has rows."""
    configs = [
        {
            "config_name": config,
            "data_files": [{"split": split, "path": shard_glob(config, split)} for split in SPLITS if split in splits],
        }
        for config, splits in manifest["configs"].items()
    ]
    largest = max(
        (sum(entry["rows"] for entry in splits.values()) for splits in manifest["configs"].values()), default=0
    )
    return {
        "pretty_name": manifest["pretty_name"],
        "license": manifest["license"],
        "language": ["en"],
        "task_categories": TASK_CATEGORIES,
        "tags": TAGS,
        "size_categories": [size_category(largest)],
        "configs": configs,
    }


def render_card(manifest: dict, release: dict | None = None) -> str:
    """The card of a dataset; `release` ({"repo", "version"}) fills in the exact loading lines when publishing."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["yaml"] = lambda value: yaml.safe_dump(value, sort_keys=False, allow_unicode=True)
    categories = manifest["stats"]["labels"]["categories"]
    totals = {name: sum(counts.get(name, 0) for counts in categories.values()) for name in CATEGORIES}
    schemas = {
        config: {column: type_name(feature) for column, feature in CONFIGS[config].items()}
        for config in manifest["configs"]
    }
    return env.get_template(TEMPLATE).render(
        m=manifest,
        front_matter=front_matter(manifest),
        schemas=schemas,
        splits=SPLITS,
        categories=CATEGORIES,
        category_totals={name: total for name, total in totals.items() if total},
        max_k=max((len(row["pass_k"]) for row in manifest["stats"]["pass_k"]), default=0),
        release=release,
    )
