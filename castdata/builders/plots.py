"""The card's two figures (PNG, drawn headless): pass^k against k, and error categories per split."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PASS_K_PNG = "plots/pass_k.png"
CATEGORIES_PNG = "plots/error_categories.png"
_SAVE = {"dpi": 110, "metadata": {"Software": None}}  # no version stamp: same data, same bytes


def plot_pass_k(rows: list[dict], path: Path) -> None:
    """One line per (agent model, domain, benchmark split): pass^k for k = 1..n."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for row in rows:
        ks = range(1, len(row["pass_k"]) + 1)
        ax.plot(ks, row["pass_k"], marker="o", label=f"{row['agent']} / {row['domain']} ({row['benchmark_split']})")
    ax.set(xlabel="k", ylabel="pass^k", ylim=(0, 1.02), title="pass^k by agent model and domain")
    ax.xaxis.get_major_locator().set_params(integer=True)
    if rows:
        ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    _save(fig, path)


def plot_categories(categories: dict[str, dict[str, int]], path: Path) -> None:
    """Horizontal bars: how many labels cite each error category, stacked by split."""
    names = sorted({name for counts in categories.values() for name in counts})
    fig, ax = plt.subplots(figsize=(6.4, 1.2 + 0.35 * max(len(names), 1)))
    left = [0] * len(names)
    for split, counts in sorted(categories.items()):
        values = [counts.get(name, 0) for name in names]
        ax.barh(names, values, left=left, label=split)
        left = [a + b for a, b in zip(left, values)]
    ax.set(xlabel="labels citing the category", title="Error categories")
    if names:
        ax.legend(fontsize="small")
    ax.invert_yaxis()
    _save(fig, path)


def _save(fig: plt.Figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, **_SAVE)
    plt.close(fig)
