"""The `castdata` command line. Imports stay inside commands so `castdata --help` is instant."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

_click = sys.modules[typer.BadParameter.__module__]  # click's exceptions (or typer's own copy of click's)


class _OneLineUsageErrors(TyperGroup):
    """typer's group, with a usage error (a bad option value, an unknown option, a missing argument) as one line on
    stderr naming the option, and exit code 2, like every other user error (not typer's boxed message)."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except getattr(_click, "NoArgsIsHelpError", ()) as err:  # the help is shown already
            sys.exit(err.exit_code)
        except _click.UsageError as err:
            typer.echo(f"error: {_usage_message(err)}", err=True)
            sys.exit(err.exit_code)
        except _click.ClickException as err:
            typer.echo(f"error: {err.format_message()}", err=True)
            sys.exit(err.exit_code)
        except typer.Abort:
            typer.echo("Aborted.", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def _usage_message(err: Any) -> str:
    """One line: the option and what is wrong with it (`--limit: Input should be greater than or equal to 1`), and where help is."""
    where = f" (see `{err.ctx.command_path} --help`)" if err.ctx is not None else ""
    if isinstance(err, typer.BadParameter) and err.param is not None and err.message:
        hint = err.param_hint if isinstance(err.param_hint, str) else "/".join(err.param.opts)
        return f"{hint}: {err.message}{where}"
    return " ".join(f"{err.format_message()}{where}".split())


app = typer.Typer(
    cls=_OneLineUsageErrors,
    add_completion=False,
    no_args_is_help=True,
    help="Build, publish and train on CAST critique datasets.",
)


def _user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn expected user errors (bad config, bad input, a dead endpoint) into one line on stderr and exit code 2,
    and a run that produced nothing (`RunFailed`) into one line and exit code 1; keys redacted."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from castdata.errors import USER_ERRORS, RunFailed
        from castdata.redact import redact_error

        try:
            return command(*args, **kwargs)
        except USER_ERRORS as err:
            typer.echo(redact_error(f"error: {err}"), err=True)
            raise typer.Exit(2) from None
        except RunFailed as err:
            typer.echo(redact_error(f"failed: {err}"), err=True)
            raise typer.Exit(1) from None

    return wrapper


def _version(show: bool) -> None:
    if show:
        from castdata import __version__

        typer.echo(f"castdata {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Build, publish and train on CAST critique datasets."""


Limit = Annotated[
    int | None, typer.Option(min=1, help="Run only the first N planned episodes (a rerun without it continues).")
]
Overrides = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="KEY=VALUE", help="Override a config key, e.g. --set trials=2 (repeatable)."),
]


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
    out: Annotated[
        str | None,
        typer.Option(help="Run directory, or an fsspec URL with `executor: ray` (default: the config's `out`)."),
    ] = None,
    force: Annotated[bool, typer.Option(help="Continue into a run directory made with another config.")] = False,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    limit: Limit = None,
    overrides: Overrides = None,
) -> None:
    """Collect trajectories: k trials per task, resumable."""
    from castdata.config import CollectConfig, PipelineConfig, load_config
    from castdata.rollout.collect import collect as run_collect
    from castdata.rundir import run_location

    cfg: CollectConfig = load_config(config, PipelineConfig, overrides or ()).collect_part()
    manifest = run_collect(cfg, run_location(out or cfg.out), force=force, show_progress=not quiet, limit=limit)
    typer.echo(f"collected into {out or cfg.out}: {json.dumps(manifest.counts)}")


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
    config: Annotated[
        Path | None, typer.Option(help="Pipeline YAML; its `label:` section configures this stage.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON instead of tables.")] = False,
    quiet: Annotated[bool, typer.Option(help="No progress display.")] = False,
) -> None:
    """Label every agent action in hindsight: labels/*.jsonl, policy clauses and statistics."""
    from castdata.label.run import label_run, load_label_config
    from castdata.label.stats import print_stats
    from castdata.ui import counting

    with counting("label", show=not quiet and not as_json) as on_episode:
        stats = label_run(run_dir, load_label_config(config), on_episode=on_episode)
    _show(stats, as_json, print_stats)


@app.command()
@_user_errors
def build(
    run_dirs: Annotated[list[Path], typer.Argument(help="Labelled run directories (one or more).")],
    out: Annotated[
        Path | None, typer.Option(help="Dataset folder (default: the config's build.out, else RUN_DIR/dataset).")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="Pipeline YAML; its `build:` section configures this stage.")
    ] = None,
    quiet: Annotated[bool, typer.Option(help="No progress display.")] = False,
) -> None:
    """Build the dataset configs (Parquet), card, plots and manifest from labelled runs."""
    from castdata.builders.dataset import build_dataset
    from castdata.config import PipelineConfig, load_config
    from castdata.errors import InputError
    from castdata.ui import counting

    options = load_config(config, PipelineConfig).build if config else PipelineConfig().build
    out = out or (Path(options.out) if options.out else None)
    if out is None and len(run_dirs) > 1:
        raise InputError("--out is required when building from several runs")
    out = out or run_dirs[0] / "dataset"
    with counting("build", show=not quiet) as on_episode:
        manifest = build_dataset(run_dirs, out, options, on_episode)
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
    config: Annotated[str | None, typer.Option(help="Only this config (plus the card and manifest).")] = None,
    out: Annotated[Path | None, typer.Option(help="Target folder (default: the Hugging Face cache).")] = None,
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
    out: Annotated[Path | None, typer.Option(help="Run directory (default: the config's `out`).")] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    force: Annotated[bool, typer.Option(help="Continue into a run directory made with another config.")] = False,
    limit: Limit = None,
    overrides: Overrides = None,
) -> None:
    """The whole job: collect, label, build (and publish with a `publish:` section); reruns skip finished stages."""
    from castdata.pipeline import run_pipeline

    dataset_dir = run_pipeline(
        config, out, show_progress=not quiet, echo=typer.echo, force=force, limit=limit, overrides=overrides or ()
    )
    typer.echo(f"dataset: {dataset_dir}")


@app.command("eval")
@_user_errors
def eval_policy(
    config: Annotated[
        Path, typer.Argument(help="Collect YAML plus `critic:` (a model spec), `guard:` and `max_revisions:`.")
    ],
    out: Annotated[Path | None, typer.Option(help="Output folder (default: the config's `out`).")] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    limit: Limit = None,
    overrides: Overrides = None,
) -> None:
    """pass^k of a policy on a domain's tasks, without and with a critic guarding its actions, side by side."""
    from castdata.config import load_config
    from castdata.critic.eval_policy import EvalConfig, print_comparison, run_eval

    cfg: EvalConfig = load_config(config, EvalConfig, overrides or ())
    comparison = run_eval(cfg, out or Path(cfg.out), show_progress=not quiet, limit=limit)
    _show(comparison, as_json, print_comparison)


@app.command("eval-critic")
@_user_errors
def eval_critic(
    config: Annotated[Path, typer.Argument(help="YAML with a `critic:` model spec (an eval config will do).")],
    data: Annotated[
        Path, typer.Argument(help="A labelled run directory, or a dataset folder made by `castdata build`.")
    ],
    split: Annotated[str, typer.Option(help="The split of a dataset folder.")] = "test",
    limit: Annotated[int | None, typer.Option(min=1, help="Judge only the first N labelled actions.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """A critic on labelled actions: accuracy, invalid precision/recall/F1, first-error localisation, grounding."""
    from castdata.config import load_config
    from castdata.critic import open_critic
    from castdata.critic.eval_critic import evaluate_critic, print_metrics
    from castdata.critic.eval_policy import EvalConfig
    from castdata.errors import ConfigError

    cfg: EvalConfig = load_config(config, EvalConfig)
    if cfg.critic is None:
        raise ConfigError(f"{config}: critic: required (a model spec)")
    result = evaluate_critic(open_critic(cfg.critic), data, split, limit, cfg.concurrency)
    _show(result, as_json, print_metrics)


@app.command()
@_user_errors
def validate(
    config: Annotated[Path, typer.Argument(help="A pipeline, collect or eval YAML.")],
    probe: Annotated[bool, typer.Option(help="Also probe each model endpoint (a request to each server).")] = False,
    overrides: Overrides = None,
) -> None:
    """Check a config without running anything: keys, tasks, model specs and keys' variables (and endpoints)."""
    from castdata.preflight import validate_config

    typer.echo(validate_config(config, overrides or (), probe=probe))


@app.command()
@_user_errors
def view(
    path: Annotated[Path, typer.Argument(help="A run directory, or a dataset folder made by `castdata build`.")],
    out: Annotated[Path, typer.Option(help="The HTML file to write.")] = Path("view.html"),
    episode: Annotated[str | None, typer.Option(help="Only this episode id; the page opens on it.")] = None,
    filter_: Annotated[
        list[str] | None,
        typer.Option(
            "--filter",
            help=(
                "KEY=VALUE[,VALUE...], repeatable; keys: domain, split, outcome (success/failure), category, user_fault "
                "(true/false), source, termination, agent."
            ),
        ),
    ] = None,
) -> None:
    """Write one self-contained HTML page: the index of episodes, and each episode with its verdicts."""
    from castdata.view import write_view

    written = write_view(path, out, episode, filter_ or [])
    typer.echo(f"wrote {written['out']}: {written['episodes']} episodes, {written['bytes'] / 2**20:.1f} MiB")


import_app = typer.Typer(no_args_is_help=True, help="Import result files of other harnesses as a run directory.")
app.add_typer(import_app, name="import")


@import_app.command("tau-bench")
@_user_errors
def import_tau_bench(
    files: Annotated[list[Path], typer.Argument(help="tau-bench / tau-trait result files (.json or .json.gz).")],
    out: Annotated[Path, typer.Option(help="The run directory to write (or add to).")],
    domain: Annotated[str, typer.Option(help="retail, airline, telecom or telehealth.")],
    split: Annotated[str, typer.Option(help="The split the file's task ids index.")] = "test",
    agent_model: Annotated[
        str | None, typer.Option(help="The agent model's name (the files do not record it).")
    ] = None,
    user_model: Annotated[str | None, typer.Option(help="The user simulator's name.")] = None,
    trial_offset: Annotated[
        int, typer.Option(min=0, help="Added to every trial number (import several runs of one model).")
    ] = 0,
) -> None:
    """Import tau-bench result files: rewards recomputed, reproduction checked, tasks matched."""
    from castdata.imports.tau_bench import import_tau_bench as run_import

    manifest = run_import(files, out, domain, split, agent_model, user_model, trial_offset)
    for source in manifest["sources"]:
        typer.echo(
            f"{source['name']}: {source['imported']} imported, {source['already_imported']} already there, "
            f"{len(source['refused'])} refused"
        )
    typer.echo(f"{out}: {json.dumps(manifest['counts'])}")


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


def main() -> None:
    """Console-script entry point."""
    app(prog_name="castdata")


if __name__ == "__main__":
    sys.exit(main())
