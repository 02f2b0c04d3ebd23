"""Class balance of the critic's train split, applied to its written shards (see `BuildOptions`).

Which rows are dropped or repeated depends only on a hash of each row's (run, trajectory, step), so a build
is reproducible and a row's fate does not depend on the order of the runs.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from castdata.builders.writer import BATCH_ROWS, PARQUET_OPTIONS

RowRef = tuple[int, int]  # (shard index, row index)


def _rank(run: str, trajectory_id: str, step: int) -> bytes:
    return hashlib.sha256(f"{run}/{trajectory_id}/{step}".encode()).digest()


def _copies(paths: list[Path], mode: str, valid_per_invalid: float) -> dict[RowRef, int] | None:
    """How many times each row is kept; None when nothing changes."""
    by_verdict: dict[str, list[tuple[bytes, RowRef]]] = {"valid": [], "invalid": []}
    for shard, path in enumerate(paths):
        table = pq.read_table(path, columns=["run", "trajectory_id", "step", "verdict"]).to_pydict()
        for row, (run, trajectory_id, step, verdict) in enumerate(zip(*table.values())):
            by_verdict[verdict].append((_rank(run, trajectory_id, step), (shard, row)))
    valid, invalid = (sorted(by_verdict[v]) for v in ("valid", "invalid"))
    if mode == "none" or not valid or not invalid:
        return None
    if mode == "downsample":
        keep = valid[: min(len(valid), math.floor(valid_per_invalid * len(invalid)))]
        return {ref: 1 for _, ref in keep + invalid}
    target = max(len(invalid), math.ceil(len(valid) / valid_per_invalid))
    base, extra = divmod(target, len(invalid))
    copies = {ref: 1 for _, ref in valid}
    copies.update({ref: base + (i < extra) for i, (_, ref) in enumerate(invalid)})
    return copies


def balance_shards(paths: list[Path], mode: str, valid_per_invalid: float) -> None:
    """Rewrite critic shards in place so valid and invalid rows follow `valid_per_invalid`."""
    copies = _copies(paths, mode, valid_per_invalid)
    if copies is None:
        return
    for shard, path in enumerate(paths):
        partial = path.with_suffix(".partial")
        with pq.ParquetFile(path) as source, pq.ParquetWriter(partial, source.schema_arrow, **PARQUET_OPTIONS) as sink:
            offset = 0
            for batch in source.iter_batches(batch_size=BATCH_ROWS):
                take = [row for row in range(batch.num_rows) for _ in range(copies.get((shard, offset + row), 0))]
                sink.write_table(pa.Table.from_batches([batch]).take(take))
                offset += batch.num_rows
        partial.replace(path)
