"""The CPU smoke run (`python train/smoke_cpu.py DATASET_DIR`): each training script for a few steps, on a tiny
random Qwen3 with a tokenizer trained locally on the dataset's own text, from a `castdata build` folder. No GPU,
no download: it proves the recipes, the data and TRL fit together, not that anything learns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RECIPES = {
    "critic_sft": "critic_qwen3_0.6b.yaml",
    "policy_sft": "policy_qwen3_0.6b.yaml",
    "policy_dpo": "policy_dpo_qwen3_0.6b.yaml",
}
"""The recipe each smoke run starts from (every other key of it is kept)."""
SAMPLE_ROWS = 10  # rows per config whose text the tokenizer learns (shorter sequences than bytes)


def tiny_model(dataset: Path, out: Path, split: str = "test") -> Path:
    """A tiny Qwen3 in `out` whose tokenizer also learned the dataset's text (policies, tools, critiques)."""
    from castdata.hub.local import local_split
    from castdata.train.tiny_qwen import build_tiny_qwen3, default_corpus

    corpus = default_corpus()
    for config in ("critic_sft", "policy_sft"):
        rows = local_split(dataset, config, split)
        for row in rows.select(range(0, len(rows), max(1, len(rows) // SAMPLE_ROWS))):
            corpus += [m["content"] for m in row["messages"] if m["content"]]
            corpus += [json.dumps(tool) for tool in row.get("tools") or []]
    return build_tiny_qwen3(out, corpus=corpus, vocab_size=3000)  # the fused loss costs in proportion to the vocabulary


def overrides(model: Path, dataset: Path, out: Path, steps: int = 3, split: str = "test", **more: Any) -> list[str]:
    """`--set` arguments that point a real recipe at the tiny model and a local dataset, for `steps` CPU steps on
    two rows of its telehealth domain (the shorter policy, so the shorter rows)."""
    values = {
        "model.id": str(model),
        "dataset.repo": None,
        "dataset.path": str(dataset),
        "dataset.train_split": split,
        "dataset.eval_split": None,
        "dataset.domains": ["telehealth"],
        "dataset.limit": 2,
        "training.output_dir": str(out),
        "training.max_steps": steps,
        "training.eval_strategy": "no",
        "training.save_strategy": "no",
        "training.logging_steps": 1,
        "training.per_device_train_batch_size": 1,
        "training.gradient_accumulation_steps": 1,
        "training.learning_rate": 1e-3,
        "training.warmup_steps": 0,
        "training.max_length": 6144,
        **more,
    }
    return [part for key, value in values.items() for part in ("--set", f"{key}={json.dumps(value)}")]


def run_smoke(dataset: Path, out: Path, steps: int = 3) -> dict[str, list[float]]:
    """Train each config's script for `steps` steps into `out/<config>`; returns each run's losses."""
    from castdata.train.run import train

    recipes = Path(__file__).resolve().parents[2] / "configs" / "train"
    model = tiny_model(dataset, out / "tiny-qwen3")
    found = {}
    for config, recipe in RECIPES.items():
        trainer = train(config, ["--config", str(recipes / recipe), *overrides(model, dataset, out / config, steps)])
        found[config] = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return found
