"""Streaming Parquet output: `{config}/{split}-{i:05d}-of-{n:05d}.parquet`, zstd, rows buffered in small batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from datasets import Features

from castdata.builders.features import TableEncoder

PARQUET_OPTIONS = {"compression": "zstd"}
BATCH_ROWS = 256


def shard_glob(config: str, split: str) -> str:
    """The data_files pattern of one config and split, relative to the dataset root."""
    return f"{config}/{split}-*.parquet"


class _Split:
    """The open shard and pending rows of one split."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.writer: pq.ParquetWriter | None = None
        self.in_shard = 0
        self.shards: list[Path] = []


class ConfigWriter:
    """Writes one config's rows, split by split, into shards of at most `shard_rows` rows."""

    def __init__(self, root: Path, config: str, features: Features, shard_rows: int) -> None:
        self.folder, self.encode, self.shard_rows = root / config, TableEncoder(features), shard_rows
        self._splits: dict[str, _Split] = {}

    def add(self, split: str, row: dict[str, Any]) -> None:
        """Queue one row for `split`."""
        state = self._splits.setdefault(split, _Split())
        state.rows.append(row)
        if len(state.rows) >= min(BATCH_ROWS, self.shard_rows - state.in_shard):
            self._flush(split, state)

    def _flush(self, split: str, state: _Split) -> None:
        if not state.rows:
            return
        table = self.encode(state.rows)
        if state.writer is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"{split}-{len(state.shards):05d}.partial"
            state.shards.append(path)
            state.writer = pq.ParquetWriter(path, table.schema, **PARQUET_OPTIONS)
        state.writer.write_table(table)
        state.in_shard += len(state.rows)
        state.rows = []
        if state.in_shard >= self.shard_rows:
            state.writer.close()
            state.writer, state.in_shard = None, 0

    def close(self) -> dict[str, list[Path]]:
        """Flush and close every shard; returns the final shard paths of each split that has rows."""
        done = {}
        for split, state in self._splits.items():
            self._flush(split, state)
            if state.writer is not None:
                state.writer.close()
            count = len(state.shards)
            done[split] = [
                path.rename(path.with_name(f"{split}-{i:05d}-of-{count:05d}.parquet"))
                for i, path in enumerate(state.shards)
            ]
        return done
