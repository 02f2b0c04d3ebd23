"""A dataset folder made by `castdata build`, read from the Parquet files its manifest lists.

Not `datasets.load_dataset(folder, config)`: `datasets` (5.2) caches a local folder under the folder's name,
not its contents, so after a rebuild, or for another build's folder of the same name, it silently returns the
rows it cached first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from castdata.builders.dataset import MANIFEST
from castdata.errors import InputError

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict


def _splits(root: Path, config: str) -> dict:
    manifest = root / MANIFEST
    if not manifest.is_file():
        raise InputError(f"{root}: not a dataset folder made by `castdata build` (no {MANIFEST})")
    splits = json.loads(manifest.read_text())["configs"].get(config)
    if not splits:
        raise InputError(f"{root}: has no config {config!r}")
    return splits


def local_split(root: Path, config: str, split: str) -> Dataset:
    """One split of one config (features, `Json` columns included, come from the files' schema)."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    splits = _splits(root, config)
    if split not in splits:
        raise InputError(f"{root}: config {config!r} has no {split!r} split; it has: {', '.join(splits)}")
    return datasets.Dataset(pa.concat_tables(pq.read_table(root / name) for name in splits[split]["files"]))


def load_local(root: Path, config: str) -> DatasetDict:
    """Every split of one config of a dataset folder."""
    import datasets

    return datasets.DatasetDict({split: local_split(root, config, split) for split in _splits(root, config)})
