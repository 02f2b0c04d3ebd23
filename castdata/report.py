"""`castdata report`: pass^k, turns and termination reasons per domain, split and agent model (polars).

A task is a (domain, split, task id): retail train task 3 and retail test task 3 are two tasks.
"""

from __future__ import annotations

from math import comb
from pathlib import Path

import polars as pl

from castdata.records import NOT_JUDGED, Trajectory
from castdata.rundir import RunDir


def pass_hat_k(n: int, c: int, k: int) -> float:
    """tau-bench's pass^k for one task: the chance that k trials drawn from n (c successes) all succeed."""
    return comb(c, k) / comb(n, k)


def episodes_frame(records: list[Trajectory]) -> pl.DataFrame:
    """One row per episode: domain, split, agent, task, trial, success, turns, termination reason, token usage and
    cost (a guarding critic's included, and also on its own)."""
    usage = [r.usage_total() for r in records]
    critic = [r.critic_usage() for r in records]
    return pl.DataFrame(
        {
            "domain": [r.domain for r in records],
            "split": [r.split for r in records],
            "agent": [r.agent.label for r in records],
            "task_id": [r.task_id for r in records],
            "trial": [r.trial for r in records],
            "success": [r.outcome.reward == 1.0 for r in records],
            "turns": [sum(1 for m in r.messages if m["role"] == "assistant") for r in records],
            "termination": [r.outcome.termination_reason for r in records],
            "counted": [r.counts_for_pass_k for r in records],
            "not_judged": [r.outcome.excluded == NOT_JUDGED for r in records],
            "prompt_tokens": [u.prompt_tokens for u in usage],
            "completion_tokens": [u.completion_tokens for u in usage],
            "cost_usd": [u.cost_usd for u in usage],
            "critic_calls": [len(r.critic_calls) for r in records],
            "critic_prompt_tokens": [u.prompt_tokens for u in critic],
            "critic_completion_tokens": [u.completion_tokens for u in critic],
            "critic_cost_usd": [u.cost_usd for u in critic],
        },
        schema={
            "domain": pl.Utf8,
            "split": pl.Utf8,
            "agent": pl.Utf8,
            "task_id": pl.Int64,
            "trial": pl.Int64,
            "success": pl.Boolean,
            "turns": pl.Int64,
            "termination": pl.Utf8,
            "counted": pl.Boolean,
            "not_judged": pl.Boolean,
            "prompt_tokens": pl.Int64,
            "completion_tokens": pl.Int64,
            "cost_usd": pl.Float64,
            "critic_calls": pl.Int64,
            "critic_prompt_tokens": pl.Int64,
            "critic_completion_tokens": pl.Int64,
            "critic_cost_usd": pl.Float64,
        },
    )


def pass_k_table(episodes: pl.DataFrame) -> pl.DataFrame:
    """pass^1..pass^n per (domain, split, agent), n the fewest trials any of its tasks has; infrastructure errors
    and imported episodes that do not reproduce excluded."""
    counted = episodes.filter(pl.col("counted"))
    per_task = counted.group_by("domain", "split", "agent", "task_id").agg(
        n=pl.len(), c=pl.col("success").sum().cast(pl.Int64)
    )
    rows = []
    for (domain, split, agent), group in per_task.group_by("domain", "split", "agent", maintain_order=True):
        n_min = int(group["n"].min())
        for k in range(1, n_min + 1):
            scores = [pass_hat_k(n, c, k) for n, c in zip(group["n"], group["c"])]
            rows.append(
                {
                    "domain": domain,
                    "split": split,
                    "agent": agent,
                    "k": k,
                    "pass_k": sum(scores) / len(scores),
                    "tasks": len(scores),
                }
            )
    schema = {
        "domain": pl.Utf8,
        "split": pl.Utf8,
        "agent": pl.Utf8,
        "k": pl.Int64,
        "pass_k": pl.Float64,
        "tasks": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema).sort("domain", "split", "agent", "k")


def summarize(run_dir: Path) -> dict:
    """Everything `castdata report` shows, as plain data; InputError when `run_dir` holds no run."""
    run = RunDir(run_dir)
    run.require("; `castdata collect` makes one")
    episodes = episodes_frame(list(run.iter_trajectories()))
    groups = []
    for (domain, split, agent), group in episodes.group_by("domain", "split", "agent", maintain_order=True):
        counted = group.filter(pl.col("counted"))
        infrastructure = group.filter(pl.col("termination") == "infrastructure_error").height
        passes = pass_k_table(group)
        groups.append(
            {
                "domain": domain,
                "split": split,
                "agent": agent,
                "episodes": group.height,
                "tasks": group["task_id"].n_unique(),
                "infrastructure_errors": infrastructure,
                "excluded": group.height
                - counted.height
                - infrastructure,  # not scorable: not reproduced, NL assertions not judged
                "not_judged": int(group["not_judged"].sum()),
                "mean_turns": float(counted["turns"].mean() or 0.0),
                "pass_k": {int(k): round(float(v), 6) for k, v in zip(passes["k"], passes["pass_k"])},
                "terminations": dict(
                    sorted(zip(*group["termination"].value_counts().to_dict(as_series=False).values()))
                ),
                "usage": usage_sums(group),
            }
        )
    groups = sorted(groups, key=lambda g: (g["domain"], g["split"], g["agent"]))
    return {"run_dir": str(run_dir), "groups": groups, "usage": usage_sums(episodes)}


def usage_sums(episodes: pl.DataFrame) -> dict:
    """Tokens and cost summed over episodes (all of them: infrastructure errors cost too); cost None if unpriced.
    `critic`: the guarding critic's calls and their part of the sums."""
    return {
        **_sums(episodes, ""),
        "critic": {"calls": int(episodes["critic_calls"].sum()), **_sums(episodes, "critic_")},
    }


def _sums(episodes: pl.DataFrame, prefix: str) -> dict:
    priced = episodes[f"{prefix}cost_usd"].drop_nulls()
    return {
        "prompt_tokens": int(episodes[f"{prefix}prompt_tokens"].sum()),
        "completion_tokens": int(episodes[f"{prefix}completion_tokens"].sum()),
        "cost_usd": round(float(priced.sum()), 6) if len(priced) else None,
    }
