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


@app.command()
@_user_errors
def collect(
    config: Annotated[Path, typer.Argument(help="Pipeline YAML (collection keys at the top level).")],
    out: Annotated[Optional[Path], typer.Option(help="Run directory (default: the config's `out`).")] = None,
    force: Annotated[bool, typer.Option(help="Continue into a run directory made with another config.")] = False,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
) -> None:
    """Collect trajectories: k trials per task, resumable."""
    from castdata.config import CollectConfig, PipelineConfig, load_config
    from castdata.rollout.collect import collect as run_collect

    cfg: CollectConfig = load_config(config, PipelineConfig).collect_part()
    manifest = run_collect(cfg, out or Path(cfg.out), force=force, show_progress=not quiet)
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
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        print_report(summary)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="castdata")


if __name__ == "__main__":
    sys.exit(main())
