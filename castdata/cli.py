"""The `castdata` command line. Imports stay inside commands so `castdata --help` is instant."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Build, publish and train on CAST critique datasets.")


def _user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn expected user errors (bad config, bad input) into one line on stderr and exit code 2."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from castdata.errors import USER_ERRORS

        try:
            return command(*args, **kwargs)
        except USER_ERRORS as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2) from None

    return wrapper


def _show(result: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    """Print a command's result as JSON, or with its rich renderer."""
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        render(result)


@app.command()
@_user_errors
def collect(
    config: Annotated[Path, typer.Argument(help="Pipeline YAML (collection keys at the top level).")],
    out: Annotated[Optional[str], typer.Option(help="Run directory, or an fsspec URL with `executor: ray` (default: the config's `out`).")] = None,
    force: Annotated[bool, typer.Option(help="Continue into a run directory made with another config.")] = False,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
) -> None:
    """Collect trajectories: k trials per task, resumable."""
    from castdata.config import CollectConfig, PipelineConfig, load_config
    from castdata.rollout.collect import collect as run_collect
    from castdata.scale.location import run_location

    cfg: CollectConfig = load_config(config, PipelineConfig).collect_part()
    manifest = run_collect(cfg, run_location(out or cfg.out), force=force, show_progress=not quiet)
    typer.echo(f"collected into {out or cfg.out}: {json.dumps(manifest['counts'])}")


@app.command()
@_user_errors
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """pass^k, turns and termination reasons per domain and agent model."""
    from castdata.report import summarize
    from castdata.ui import print_report

    summary = summarize(run_dir)
    _show(summary, as_json, print_report)


@app.command()
@_user_errors
def label(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (from `castdata collect`).")],
    config: Annotated[Optional[Path], typer.Option(help="Pipeline YAML; its `label:` section configures this stage.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON instead of tables.")] = False,
) -> None:
    """Label every agent action in hindsight: labels/*.jsonl, policy clauses and statistics."""
    from castdata.label.run import label_run, load_label_config
    from castdata.label.stats import print_stats

    stats = label_run(run_dir, load_label_config(config))
    _show(stats, as_json, print_stats)


@app.command()
@_user_errors
def build(
    run_dirs: Annotated[list[Path], typer.Argument(help="Labelled run directories (one or more).")],
    out: Annotated[Optional[Path], typer.Option(help="Dataset folder (default: the config's build.out, else RUN_DIR/dataset).")] = None,
    config: Annotated[Optional[Path], typer.Option(help="Pipeline YAML; its `build:` section configures this stage.")] = None,
) -> None:
    """Build the dataset configs (Parquet), card, plots and manifest from labelled runs."""
    from castdata.build.dataset import build_dataset
    from castdata.config import PipelineConfig, load_config
    from castdata.errors import InputError

    options = load_config(config, PipelineConfig).build if config else PipelineConfig().build
    out = out or (Path(options.out) if options.out else None)
    if out is None and len(run_dirs) > 1:
        raise InputError("--out is required when building from several runs")
    out = out or run_dirs[0] / "dataset"
    manifest = build_dataset(run_dirs, out, options)
    for name, splits in manifest["configs"].items():
        typer.echo(f"{name}: " + ", ".join(f"{split} {entry['rows']}" for split, entry in splits.items()))
    typer.echo(f"built {out}")


@app.command()
@_user_errors
def publish(
    dataset_dir: Annotated[Path, typer.Argument(help="A dataset folder made by `castdata build`.")],
    repo: Annotated[str, typer.Option(help="Hub dataset repo, ORG/NAME.")],
    version: Annotated[str, typer.Option(help="Release version X.Y.Z (tagged vX.Y.Z).")],
    private: Annotated[bool, typer.Option(help="Create the repo private (when it does not exist yet).")] = False,
    dry_run: Annotated[bool, typer.Option(help="Validate and list the files and the commit; upload nothing.")] = False,
) -> None:
    """Validate a dataset and publish it as one commit on main, tagged vX.Y.Z."""
    from castdata.hub.publish import publish as publish_release

    publish_release(dataset_dir, repo, version, private=private, dry_run=dry_run, echo=typer.echo)


@app.command()
@_user_errors
def download(
    repo: Annotated[str, typer.Argument(help="Hub dataset repo, ORG/NAME.")],
    version: Annotated[str, typer.Option(help="Release version X.Y.Z.")],
    config: Annotated[Optional[str], typer.Option(help="Only this config (plus the card and manifest).")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Target folder (default: the Hugging Face cache).")] = None,
) -> None:
    """Download a released dataset (or one config of it), pinned to its version tag."""
    from castdata.hub.download import download as download_release

    typer.echo(str(download_release(repo, version, config, out)))


@app.command()
@_user_errors
def versions(repo: Annotated[str, typer.Argument(help="Hub dataset repo, ORG/NAME.")]) -> None:
    """List the released versions of a dataset repo, oldest first, with their commits."""
    from castdata.hub.versions import list_versions

    for version, commit in list_versions(repo):
        typer.echo(f"{version}\t{commit}")


@app.command()
@_user_errors
def run(
    config: Annotated[Path, typer.Argument(help="Pipeline YAML: collection keys, and label/build/publish sections.")],
    out: Annotated[Optional[Path], typer.Option(help="Run directory (default: the config's `out`).")] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
) -> None:
    """The whole job: collect, label, build (and publish with a `publish:` section); reruns skip finished stages."""
    from castdata.pipeline import run_pipeline

    dataset_dir = run_pipeline(config, out, show_progress=not quiet, echo=typer.echo)
    typer.echo(f"dataset: {dataset_dir}")


@app.command("eval")
@_user_errors
def eval_policy(
    config: Annotated[Path, typer.Argument(help="Collect YAML plus `critic:` (a model spec), `guard:` and `max_revisions:`.")],
    out: Annotated[Optional[Path], typer.Option(help="Output folder (default: the config's `out`).")] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """pass^k of a policy on a domain's tasks, without and with a critic guarding its actions, side by side."""
    from castdata.config import load_config
    from castdata.critic.eval_policy import EvalConfig, print_comparison, run_eval

    cfg: EvalConfig = load_config(config, EvalConfig)
    comparison = run_eval(cfg, out or Path(cfg.out), show_progress=not quiet)
    _show(comparison, as_json, print_comparison)


@app.command("eval-critic")
@_user_errors
def eval_critic(
    config: Annotated[Path, typer.Argument(help="YAML with a `critic:` model spec (an eval config will do).")],
    data: Annotated[Path, typer.Argument(help="A labelled run directory, or a dataset folder made by `castdata build`.")],
    split: Annotated[str, typer.Option(help="The split of a dataset folder.")] = "test",
    limit: Annotated[Optional[int], typer.Option(help="Judge only the first N labelled actions.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """A critic on labelled actions: accuracy, invalid precision/recall/F1, first-error localisation, grounding."""
    from castdata.config import ConfigError, load_config
    from castdata.critic import open_critic
    from castdata.critic.eval_critic import evaluate_critic, print_metrics
    from castdata.critic.eval_policy import EvalConfig

    cfg: EvalConfig = load_config(config, EvalConfig)
    if cfg.critic is None:
        raise ConfigError(f"{config}: critic: required (a model spec)")
    result = evaluate_critic(open_critic(cfg.critic), data, split, limit, cfg.concurrency)
    _show(result, as_json, print_metrics)


import_app = typer.Typer(no_args_is_help=True, help="Import other tools' result files as a castdata run.")


@import_app.command("tau2")
@_user_errors
def import_tau2_results(
    results: Annotated[list[Path], typer.Argument(help="tau2-bench results.json file(s).")],
    out: Annotated[Path, typer.Option(help="Run directory to import into (created if missing).")],
) -> None:
    """tau2-bench results: replayed, checked for reproduction and rescored (the source reward is never trusted)."""
    from castdata.imports.tau2 import import_tau2

    manifest = import_tau2(results, out)
    typer.echo(f"imported into {out}: {json.dumps(manifest['counts'])}")


app.add_typer(import_app, name="import")


def main() -> None:
    """Console-script entry point."""
    app(prog_name="castdata")


if __name__ == "__main__":
    sys.exit(main())
