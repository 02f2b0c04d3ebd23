"""The numbers a dataset card reports, computed from the written Parquet files (so they match the data).

Rows per config and split; rows per `source` of the policy and critic configs; label verdicts and error categories
per split (from `labels`); pass^k of every agent model per domain and benchmark split (from `trajectories`,
infrastructure failures excluded); and a guarding critic's precision and recall against hindsight.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from castdata.builders.features import SOURCES
from castdata.label.schema import CATEGORIES
from castdata.report import pass_k_table

PASS_K_DIGITS = 4

Files = dict[str, dict[str, list[Path]]]  # config -> split -> shards


def _read(paths: list[Path], columns: list[str]) -> dict[str, list]:
    tables = [pq.read_table(path, columns=columns).to_pydict() for path in paths]
    return {column: [value for table in tables for value in table[column]] for column in columns}


def _reproduced(imported: str | dict | None) -> bool:
    """Whether an episode counts for pass^k by its `imported` column (JSON text; null for a collected episode)."""
    mark = json.loads(imported) if isinstance(imported, str) else imported
    return mark is None or bool(mark["reproduced"])


def row_counts(files: Files) -> dict[str, dict[str, int]]:
    """Rows per config and split, from the Parquet footers."""
    return {
        config: {
            split: sum(pq.ParquetFile(path).metadata.num_rows for path in paths) for split, paths in splits.items()
        }
        for config, splits in files.items()
    }


def source_counts(files: Files) -> dict[str, dict[str, int]]:
    """Rows per `source` (hindsight, critic, critic_error) of every config that has the column, all splits."""
    found = {}
    for config, splits in files.items():
        paths = [path for split_paths in splits.values() for path in split_paths]
        if paths and "source" in pq.read_schema(paths[0]).names:
            counted = Counter(_read(paths, ["source"])["source"])
            found[config] = {source: counted[source] for source in SOURCES if counted[source]}
    return found


def critic_agreement(judged: Counter[tuple[str, str]]) -> dict | None:
    """A guarding critic's judgements against hindsight, from (critic verdict, hindsight verdict) counts: `invalid`
    is the positive class (precision: the rejections hindsight confirms; recall: the invalid actions rejected).
    None for a run without a critic."""
    if not judged:
        return None
    hits, false_alarms = judged["invalid", "invalid"], judged["invalid", "valid"]
    missed = judged["valid", "invalid"]
    return {
        "judged": sum(judged.values()),
        "rejected": hits + false_alarms,
        "confirmed": hits,
        "false_alarms": false_alarms,
        "missed": missed,
        "precision": round(hits / (hits + false_alarms), PASS_K_DIGITS) if hits + false_alarms else None,
        "recall": round(hits / (hits + missed), PASS_K_DIGITS) if hits + missed else None,
    }


def label_counts(files: Files) -> dict[str, dict[str, dict[str, int]]]:
    """`verdicts` and `categories` (labels citing each category) per split of the `labels` config."""
    verdicts, categories = {}, {}
    for split, paths in files.get("labels", {}).items():
        data = _read(paths, ["verdict", "categories"])
        verdicts[split] = dict(sorted(Counter(data["verdict"]).items()))
        counted = Counter(category for listed in data["categories"] for category in listed)
        categories[split] = {category: counted[category] for category in CATEGORIES if counted[category]}
    return {"verdicts": verdicts, "categories": categories}


def pass_k(files: Files) -> list[dict]:
    """pass^1..pass^n (a list, pass^1 first) per (domain, benchmark split, agent model), n the fewest trials of any
    of its tasks."""
    paths = [path for split_paths in files.get("trajectories", {}).values() for path in split_paths]
    if not paths:
        return []
    data = _read(paths, ["domain", "benchmark_split", "agent_model", "task_id", "outcome", "imported"])
    frame = pl.DataFrame(
        {
            "domain": data["domain"],
            "split": data["benchmark_split"],
            "agent": data["agent_model"],
            "task_id": data["task_id"],
            "success": [outcome["reward"] == 1.0 for outcome in data["outcome"]],
            "termination": [outcome["termination_reason"] for outcome in data["outcome"]],
            "counted": [
                outcome["termination_reason"] != "infrastructure_error"
                and outcome.get("excluded") is None
                and _reproduced(imported)
                for outcome, imported in zip(data["outcome"], data["imported"])
            ],
        }
    )
    found = []
    for (domain, benchmark_split, agent), rows in pass_k_table(frame).group_by("domain", "split", "agent"):
        found.append(
            {
                "domain": domain,
                "benchmark_split": benchmark_split,
                "agent": agent,
                "tasks": int(rows["tasks"][0]),
                "pass_k": [round(float(v), PASS_K_DIGITS) for v in rows.sort("k")["pass_k"]],
            }
        )
    return sorted(found, key=lambda row: (row["domain"], row["benchmark_split"], row["agent"]))
