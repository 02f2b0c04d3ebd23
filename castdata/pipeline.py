"""`castdata run CONFIG.yaml`: collect, label, build and (with a `publish:` section) publish, resumable by stage.

Each finished stage is recorded in `RUN_DIR/pipeline.json` with a key over its inputs (the config section and
the content of the files it reads). A rerun skips every stage whose key is unchanged (and whose output is
still there) and redoes the rest;
collection also resumes inside the stage, episode by episode. The dataset goes to `build.out`, by default
`RUN_DIR/dataset`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from castdata.config import PipelineConfig, load_config
from castdata.rundir import LABELS, TRAJECTORIES, RunDir


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class _Stages:
    """The stage records of one run directory."""

    def __init__(self, run_dir: RunDir, echo: Callable[[str], None]) -> None:
        self.run_dir, self.echo = run_dir, echo
        self.done = run_dir.pipeline_state()

    def run(self, stage: str, key: str, output: Path, work: Callable[[], str]) -> None:
        """Run `work` (which returns a one-line summary) unless `stage` finished with the same key and its
        `output` still exists."""
        if self.done.get(stage, {}).get("key") == key and output.exists():
            self.echo(f"{stage}: up to date, skipped")
            return
        started = time.time()
        summary = work()
        self.done[stage] = {"key": key, "finished_at": time.time(), "seconds": round(time.time() - started, 3)}
        self.run_dir.write_pipeline_state(self.done)
        self.echo(f"{stage}: {summary}")


def check_later_stages(config: PipelineConfig, label_config: Any) -> None:
    """What the label and publish stages need, checked before collection writes anything: the teacher's
    endpoint, and a Hub token."""
    import asyncio

    from castdata.models.probe import probe_endpoints

    asyncio.run(probe_endpoints({"label.teacher": label_config.teacher}))
    if config.publish is not None:
        from castdata.hub.api import require_token

        require_token(config.publish.repo)


def run_pipeline(
    config_path: Path,
    out: Path | None = None,
    *,
    show_progress: bool = False,
    echo: Callable[[str], None] = print,
    force: bool = False,
    limit: int | None = None,
    overrides: Iterable[str] = (),
) -> Path:
    """Run every stage of a pipeline config (with `overrides`, `--set KEY=VALUE`); returns the dataset folder.
    `force` and `limit` are collect's (`castdata.rollout.collect.collect`)."""
    from castdata.builders.dataset import MANIFEST, build_dataset
    from castdata.label.run import label_run, load_label_config
    from castdata.rollout.collect import collect
    from castdata.ui import counting

    config: PipelineConfig = load_config(config_path, PipelineConfig, overrides)
    label_config = load_label_config(config_path, overrides)
    check_later_stages(config, label_config)
    run_dir = Path(out or config.out)
    dataset_dir = Path(config.build.out) if config.build.out else run_dir / "dataset"
    run = RunDir(run_dir)
    stages = _Stages(run, echo)

    def do_collect() -> str:
        manifest = collect(config.collect_part(), run_dir, show_progress=show_progress, force=force, limit=limit)
        counts = manifest.counts
        return f"{counts['finished']} of {counts['planned']} episodes in {run_dir}"

    def do_label() -> str:
        with counting("label", show=show_progress) as on_episode:
            labels = label_run(run_dir, label_config, on_episode=on_episode)["labels"]
        return f"{labels['total']} labels ({json.dumps(labels['verdicts'])})"

    def do_build() -> str:
        with counting("build", show=show_progress) as on_episode:
            manifest = build_dataset([run_dir], dataset_dir, config.build, on_episode)
        rows = {name: sum(entry["rows"] for entry in splits.values()) for name, splits in manifest["configs"].items()}
        return f"{dataset_dir}: {json.dumps(rows)}"

    stages.run("collect", _key(config.collect_part().fingerprint(), limit), run.local(TRAJECTORIES), do_collect)
    trajectories = run.digest(TRAJECTORIES)
    stages.run("label", _key(trajectories, label_config.model_dump()), run.local(LABELS), do_label)
    labels = run.digest(LABELS)
    stages.run("build", _key(trajectories, labels, config.build.model_dump()), dataset_dir / MANIFEST, do_build)
    if config.publish is not None:
        from castdata.hub.publish import publish

        release = config.publish
        built = json.loads((dataset_dir / MANIFEST).read_text())["files"]

        def do_publish() -> str:
            published = publish(dataset_dir, release.repo, release.version, private=release.private, echo=echo)
            return f"{release.repo} {published.tag} at {published.commit}"

        stages.run("publish", _key(built, release.model_dump()), dataset_dir / MANIFEST, do_publish)
    return dataset_dir
