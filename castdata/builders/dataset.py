"""`castdata build`: labelled runs -> a dataset folder (Parquet configs, card, plots, `castdata.json` manifest).

The episodes are streamed once; each row goes to its config's writer in the split of its task. The folder is
built beside `out` and swapped in at the end, so a failed build leaves the previous dataset untouched.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from castdata.builders import critic, plots, revisions, stats
from castdata.builders.balance import balance_shards
from castdata.builders.card import CARD, render_card
from castdata.builders.features import CONFIGS
from castdata.builders.options import BuildOptions
from castdata.builders.policy import dpo_rows, sft_rows
from castdata.builders.prm import prm_rows
from castdata.builders.raw import label_rows, trajectory_row
from castdata.builders.render import context_block
from castdata.builders.source import Episode, iter_episodes, read_clauses, read_label_stats, read_manifest
from castdata.builders.splits import SPLITS, split_of
from castdata.builders.writer import ConfigWriter
from castdata.errors import InputError
from castdata.label.policy import Clause
from castdata.records import Trajectory
from castdata.rundir import RunManifest
from castdata.version import __version__

MANIFEST = "castdata.json"
DATASET_SCHEMA = "castdata.dataset/1"


def file_digest(path: Path) -> dict[str, Any]:
    """sha256 and size of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"sha256": digest.hexdigest(), "bytes": path.stat().st_size}


class _Contexts:
    """Per domain of one run: the critic's system prompt and the PRM prompt (policy clauses + tool schemas)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir, self.clauses = run_dir, read_clauses(run_dir)
        self._by_domain: dict[str, tuple[str, str]] = {}

    def get(self, episode: Episode) -> tuple[str, str]:
        t = episode.trajectory
        if t.domain not in self._by_domain:
            clauses: list[Clause] = self.clauses.get(t.domain, [])
            policy_sha = hashlib.sha256(t.messages[0]["content"].encode()).hexdigest()
            if not clauses or clauses[0].policy_sha256 != policy_sha:
                raise InputError(
                    f"{self.run_dir}: the policy clause table has no clauses for {t.domain}'s policy; relabel the run"
                )
            context = context_block(clauses, t.tools)
            self._by_domain[t.domain] = (critic.system_prompt(context), context)
        return self._by_domain[t.domain]


def _rows(episode: Episode, contexts: _Contexts, options: BuildOptions) -> dict[str, Iterable[dict]]:
    """Every config's rows of one episode."""
    rows: dict[str, Iterable[dict]] = {"trajectories": [trajectory_row(episode)], "labels": label_rows(episode)}
    if episode.trainable:
        system, prm_prompt = contexts.get(episode)
        rows["critic_sft"] = itertools.chain(
            critic.critic_rows(episode, system), revisions.interception_critic_rows(episode, system)
        )
        rows["policy_sft"] = itertools.chain(
            sft_rows(episode, options.critique_reasoning), revisions.revision_sft_rows(episode)
        )
        rows["policy_dpo"] = itertools.chain(dpo_rows(episode), revisions.revision_dpo_rows(episode))
        rows["critic_prm"] = prm_rows(episode, prm_prompt)
    return rows


def _staging(out: Path) -> Path:
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise InputError(f"{out}: exists and is not a castdata dataset; choose another --out")
    staging = out.with_name(f".{out.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def episode_fingerprint(trajectory: Trajectory) -> str:
    """What makes two records the same episode: its key, the agent that played it and what was said."""
    content = [trajectory.key, trajectory.agent.model_dump(mode="json"), trajectory.messages]
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def build_dataset(
    run_dirs: list[Path], out: Path, options: BuildOptions | None = None, on_episode: Callable[[], None] | None = None
) -> dict:
    """Build every config from labelled runs into `out`; returns the manifest (also written as `castdata.json`).
    `on_episode` is called after each episode's rows are written (a progress display)."""
    options = options or BuildOptions()
    names = [run_dir.name for run_dir in run_dirs]
    if len(set(names)) != len(names):
        raise InputError(f"run directories need distinct names (rows cite them): {', '.join(names)}")
    run_manifests = [read_manifest(run_dir) for run_dir in run_dirs]
    staging = _staging(out)
    writers = {
        config: ConfigWriter(staging, config, features, options.shard_rows) for config, features in CONFIGS.items()
    }
    models: dict[str, dict] = {}
    seen: set[str] = set()  # the same episode in two runs (a copied or re-imported run) is built once
    duplicates = 0
    judged: Counter[tuple[str, str]] = Counter()  # (critic verdict, hindsight verdict) of a guarding critic
    for run_dir in run_dirs:
        contexts = _Contexts(run_dir)
        for episode in iter_episodes(run_dir):
            t = episode.trajectory
            fingerprint = episode_fingerprint(t)
            if fingerprint in seen:
                duplicates += 1
                continue
            seen.add(fingerprint)
            for role, spec in (("agent", t.agent), ("user", t.user)):
                models.setdefault(
                    f"{role} {spec.model_dump_json()}",
                    {"role": role, "model": spec.label, "spec": spec.model_dump(mode="json")},
                )
            judged.update(revisions.judgements(episode))
            split = split_of(t.domain, t.split, t.task_id, options.validation_fraction)
            for config, rows in _rows(episode, contexts, options).items():
                for row in rows:
                    writers[config].add(split, row)
            if on_episode is not None:
                on_episode()
    files = {config: shards for config, writer in writers.items() if (shards := writer.close())}
    if "train" in files.get("critic_sft", {}):
        balance_shards(files["critic_sft"]["train"], options.critic_balance, options.valid_per_invalid)
    card_stats = {
        "labels": stats.label_counts(files),
        "pass_k": stats.pass_k(files),
        "sources": stats.source_counts(files),
        "critic": stats.critic_agreement(judged),
    }
    plots.plot_pass_k(card_stats["pass_k"], staging / plots.PASS_K_PNG)
    plots.plot_categories(card_stats["labels"]["categories"], staging / plots.CATEGORIES_PNG)
    manifest = _manifest(staging, files, card_stats, options, run_dirs, run_manifests, list(models.values()))
    manifest["duplicate_episodes"] = duplicates
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    (staging / CARD).write_text(render_card(manifest))
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    return manifest


def _manifest(
    root: Path,
    files: stats.Files,
    card_stats: dict,
    options: BuildOptions,
    run_dirs: list[Path],
    run_manifests: list[RunManifest],
    models: list[dict],
) -> dict:
    """`castdata.json`: configs and their files, the card's statistics, build options, runs, models, file hashes."""
    rows = stats.row_counts(files)
    relative = {
        config: {split: [p.relative_to(root).as_posix() for p in paths] for split, paths in splits.items()}
        for config, splits in files.items()
    }
    every_file = sorted(
        [path for splits in relative.values() for paths in splits.values() for path in paths]
        + [plots.PASS_K_PNG, plots.CATEGORIES_PNG]
    )
    return {
        "schema": DATASET_SCHEMA,
        "pretty_name": options.pretty_name,
        "license": options.license,
        "versions": {
            "castdata": __version__,
            "tau_trait": sorted({m.versions.get("tau_trait", "unknown") for m in run_manifests}),
        },
        "build": options.model_dump(mode="json", exclude={"out"}),
        "configs": {
            config: {
                split: {"rows": rows[config][split], "files": relative[config][split]}
                for split in SPLITS
                if split in relative[config]
            }
            for config in CONFIGS
            if config in relative
        },
        "stats": card_stats,
        "models": sorted(models, key=lambda m: (m["role"], m["model"], json.dumps(m["spec"], sort_keys=True))),
        "runs": [
            {
                "name": run_dir.name,
                **{key: written.get(key) for key in ("config", "config_fingerprint", "versions", "counts", "import")},
                "sources": [
                    {k: src[k] for k in ("name", "sha256", "entries", "imported")} for src in written.get("sources", [])
                ],
                "label_stats": read_label_stats(run_dir),
            }
            for run_dir, written in ((run_dir, m.to_dict()) for run_dir, m in zip(run_dirs, run_manifests))
        ],
        "files": {path: file_digest(root / path) for path in every_file},
    }
