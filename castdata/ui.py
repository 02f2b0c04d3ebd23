"""Terminal rendering of reports (rich tables)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.table import Table


def print_report(summary: dict) -> None:
    """Print `castdata report`'s summary as tables."""
    console = Console()
    if not summary["groups"]:
        console.print(f"no episodes in {summary['run_dir']}")
        return
    ks = sorted({k for group in summary["groups"] for k in group["pass_k"]})
    table = Table(title=f"pass^k - {summary['run_dir']}")
    for column in ("domain", "split", "agent", "tasks", "episodes", "mean turns", *(f"pass^{k}" for k in ks)):
        table.add_column(column, justify="right" if column not in ("domain", "split", "agent") else "left")
    for group in summary["groups"]:
        passes = [f"{group['pass_k'][k]:.3f}" if k in group["pass_k"] else "" for k in ks]
        table.add_row(
            group["domain"],
            group["split"],
            group["agent"],
            str(group["tasks"]),
            str(group["episodes"]),
            f"{group['mean_turns']:.1f}",
            *passes,
        )
    console.print(table)
    for group in summary["groups"]:
        if group["excluded"]:
            judged = (
                f" ({group['not_judged']} with NL_ASSERTION not judged: set `judge:`)" if group["not_judged"] else ""
            )
            where = f"{group['domain']}/{group['split']} {group['agent']}"
            console.print(f"{where}: {group['excluded']} episode(s) excluded from pass^k{judged}")
    reasons = Table(title="termination reasons")
    for column in ("domain", "split", "agent"):
        reasons.add_column(column)
    reasons.add_column("reasons")
    for group in summary["groups"]:
        shown = ", ".join(f"{k}={v}" for k, v in group["terminations"].items())
        reasons.add_row(group["domain"], group["split"], group["agent"], shown)
    console.print(reasons)
    usage = Table(title="token usage and cost (agent, user and critic models)")
    columns = ("domain", "split", "agent", "prompt tokens", "completion tokens", "cost (USD)", "critic calls")
    for column in (*columns, "critic tokens", "critic cost (USD)"):
        usage.add_column(column, justify="right" if column not in ("domain", "split", "agent") else "left")
    for domain, split, agent, sums in [
        *((g["domain"], g["split"], g["agent"], g["usage"]) for g in summary["groups"]),
        ("all", "", "", summary["usage"]),
    ]:
        critic = sums["critic"]
        usage.add_row(
            domain,
            split,
            agent,
            str(sums["prompt_tokens"]),
            str(sums["completion_tokens"]),
            _cost(sums["cost_usd"]),
            str(critic["calls"]),
            str(critic["prompt_tokens"] + critic["completion_tokens"]),
            _cost(critic["cost_usd"]),
        )
    console.print(usage)


def _cost(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


@contextmanager
def counting(stage: str, show: bool = True) -> Iterator[Callable[[], None]]:
    """A live count of the items a stage has done (`build: 120 episodes`); yields the callback to call per item."""
    if not show:
        yield lambda: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn(f"{stage}: {{task.completed}} episodes"), TimeElapsedColumn())
    with Progress(*columns, transient=True) as bar:
        handle = bar.add_task(stage, total=None)
        yield lambda: bar.advance(handle)
