"""Checks that a dataset folder is what `castdata build` made and nothing else, before it is published.

The manifest parses; every listed file exists with its recorded size and sha256 and no data file is unlisted;
every Parquet file has its config's schema and the recorded row counts; splits are by task (no task in two
splits, `test` only benchmark test tasks); the card's YAML front matter parses and names every config and split.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from castdata.builders.card import CARD, front_matter
from castdata.builders.dataset import DATASET_SCHEMA, MANIFEST, file_digest
from castdata.builders.features import CONFIGS
from castdata.builders.splits import SPLITS
from castdata.errors import InvalidDataset

DATA_SUFFIXES = (".parquet", ".png")


def read_front_matter(text: str) -> dict:
    """The YAML block at the top of a card; InvalidDataset when it is missing or malformed."""
    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        raise InvalidDataset(f"{CARD}: no YAML front matter (a block between '---' lines at the top)")
    try:
        data = yaml.safe_load(text[4 : text.index("\n---\n", 3)])
    except yaml.YAMLError as err:
        raise InvalidDataset(f"{CARD}: the YAML front matter does not parse: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise InvalidDataset(f"{CARD}: the YAML front matter is not a mapping")
    return data


def _manifest(root: Path) -> dict:
    if not root.is_dir():
        raise InvalidDataset(f"{root}: no such dataset folder")
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except FileNotFoundError:
        raise InvalidDataset(f"{root}: no {MANIFEST}; is this a folder made by `castdata build`?") from None
    except json.JSONDecodeError as err:
        raise InvalidDataset(f"{root / MANIFEST}: not JSON: {err}") from None
    if manifest.get("schema") != DATASET_SCHEMA:
        raise InvalidDataset(f"{root / MANIFEST}: schema is {manifest.get('schema')!r}, expected {DATASET_SCHEMA!r}")
    return manifest


def _check_files(root: Path, manifest: dict) -> None:
    listed = manifest.get("files", {})
    for path, expected in listed.items():
        if not (root / path).is_file():
            raise InvalidDataset(f"{root}: {path} is listed in {MANIFEST} but missing")
        if file_digest(root / path) != expected:
            raise InvalidDataset(
                f"{root}: {path} does not match the sha256 and size in {MANIFEST} (changed after the build?)"
            )
    for path in root.rglob("*"):
        relative = path.relative_to(root).as_posix()
        if path.suffix in DATA_SUFFIXES and relative not in listed:
            raise InvalidDataset(f"{root}: {relative} is not listed in {MANIFEST}")


def _check_configs(root: Path, manifest: dict) -> None:
    task_split: dict[str, str] = {}
    for config, splits in manifest["configs"].items():
        if config not in CONFIGS:
            raise InvalidDataset(f"{MANIFEST}: unknown config {config!r}; known: {', '.join(CONFIGS)}")
        expected_schema = CONFIGS[config].arrow_schema
        for split, entry in splits.items():
            if split not in SPLITS:
                raise InvalidDataset(f"{MANIFEST}: {config} has unknown split {split!r}; allowed: {', '.join(SPLITS)}")
            rows = 0
            for path in entry["files"]:
                if not path.startswith(f"{config}/{split}-") or not path.endswith(".parquet"):
                    raise InvalidDataset(f"{MANIFEST}: {path} is not a {config} {split} data file")
                schema = pq.read_schema(root / path)
                if not schema.equals(expected_schema, check_metadata=False):
                    raise InvalidDataset(f"{path}: its schema is not the {config} schema of this castdata version")
                rows += pq.ParquetFile(root / path).metadata.num_rows
                for task in set(pq.read_table(root / path, columns=["task"])["task"].to_pylist()):
                    _check_task(task, split, task_split, path)
            if rows != entry["rows"]:
                raise InvalidDataset(f"{config}/{split}: {rows} rows in the files, {entry['rows']} in {MANIFEST}")


def _check_task(task: str, split: str, seen: dict[str, str], path: str) -> None:
    if seen.setdefault(task, split) != split:
        raise InvalidDataset(f"{path}: task {task} is in both {seen[task]} and {split}")
    if (task.split(".")[1] == "test") != (split == "test"):
        raise InvalidDataset(f"{path}: task {task} is in {split}, but only benchmark test tasks belong in test")


def _check_card(root: Path, manifest: dict) -> None:
    try:
        text = (root / CARD).read_text()
    except FileNotFoundError:
        raise InvalidDataset(f"{root}: no {CARD} (the dataset card)") from None
    card = read_front_matter(text)
    if card.get("configs") != front_matter(manifest)["configs"]:
        raise InvalidDataset(f"{CARD}: its `configs` do not list exactly the configs and splits of {MANIFEST}")
    for key in ("license", "pretty_name"):
        if not card.get(key):
            raise InvalidDataset(f"{CARD}: the front matter has no {key}")


def validate_dataset(root: Path) -> dict:
    """Validate a dataset folder; returns its manifest, or raises InvalidDataset saying what is wrong."""
    manifest = _manifest(root)
    _check_files(root, manifest)
    _check_configs(root, manifest)
    _check_card(root, manifest)
    return manifest
