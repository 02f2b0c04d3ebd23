"""`castdata eval CONFIG.yaml`: a policy on a domain's tasks for k trials, without and with a critic guard.

The config is a collect config plus `critic:` (a model spec; none: only the plain run), `guard:` (`writes`:
judge every proposed write, `all`: every action) and `max_revisions:` (R). Both arms are ordinary, resumable
collect runs with the same seeds, into `OUT/without_critic` (exactly a plain `castdata collect` run) and
`OUT/with_critic`; the report puts their pass^k side by side (`castdata.report`) and counts interceptions.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import model_validator

from castdata.config import CollectConfig
from castdata.report import summarize
from castdata.rollout.collect import collect
from castdata.rundir import read_trajectories, write_json

ARMS = ("without_critic", "with_critic")
REPORT = "eval.json"


class EvalConfig(CollectConfig):
    """What `castdata eval` runs: a collect config whose `critic:` (when set) guards the second arm."""

    @model_validator(mode="after")
    def _local(self) -> EvalConfig:
        if self.executor.ray is not None:
            raise ValueError("`castdata eval` runs on the local executor; remove `executor.ray`")
        return self

    def plain(self) -> CollectConfig:
        """The same collection without the critic."""
        return self.unguarded()


def run_eval(config: EvalConfig, out: Path, *, show_progress: bool = True, limit: int | None = None) -> dict:
    """Run both arms (the first `limit` planned episodes of each, when given) into `out` (the guarded one only
    with a critic) and write and return the comparison."""
    arms = {"without_critic": config.plain()}
    if config.critic is not None:
        arms["with_critic"] = config
    for name, arm in arms.items():
        collect(arm, out / name, show_progress=show_progress, limit=limit)
    comparison = compare(out, list(arms))
    write_json(out / REPORT, comparison)
    return comparison


def compare(out: Path, arms: list[str]) -> dict:
    """pass^k of each arm per (domain, split, agent, k), and the guarded arm's interceptions."""
    summaries = {arm: summarize(out / arm) for arm in arms}
    rows: dict[tuple, dict] = {}
    for arm, summary in summaries.items():
        for group in summary["groups"]:
            for k, value in group["pass_k"].items():
                key = (group["domain"], group["split"], group["agent"], k)
                rows.setdefault(key, {"domain": key[0], "split": key[1], "agent": key[2], "k": k})[arm] = value
    comparison = {"out": str(out), "pass_k": [rows[key] for key in sorted(rows)], "arms": summaries}
    if "with_critic" in arms:
        records = read_trajectories(out / "with_critic")
        interceptions = [i for r in records for i in r.interceptions]
        comparison["interceptions"] = {
            "total": len(interceptions),
            "episodes": sum(1 for r in records if r.interceptions),
            "executed_anyway": sum(1 for i in interceptions if i.revised is None),
        }
    return comparison


def print_comparison(comparison: dict) -> None:
    """The comparison as a table: pass^k without and with the critic, and the difference."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    guarded = "interceptions" in comparison
    table = Table(title=f"pass^k without and with the critic - {comparison['out']}")
    for column in ("domain/split", "agent", "k", "without critic", *(("with critic", "change") if guarded else ())):
        table.add_column(column, justify="left" if column in ("domain/split", "agent") else "right")
    for row in comparison["pass_k"]:
        without, with_ = row.get("without_critic"), row.get("with_critic")
        cells = [f"{row['domain']}/{row['split']}", row["agent"], str(row["k"]), _shown(without)]
        if guarded:
            change = f"{with_ - without:+.3f}" if None not in (with_, without) else ""
            cells += [_shown(with_), change]
        table.add_row(*cells)
    console.print(table)
    if guarded:
        counts = comparison["interceptions"]
        console.print(
            f"interceptions: {counts['total']} in {counts['episodes']} episodes "
            f"({counts['executed_anyway']} executed anyway after max_revisions)"
        )


def _shown(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"
