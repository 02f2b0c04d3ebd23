"""The CAST loop: guarded collection, hindsight verdicts on interceptions, and the critique-aware rows they give."""

from __future__ import annotations

import json
import math
import re
import runpy
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers.build import ROOT
from helpers.critics import confirmed_writes_only
from helpers.openai_server import ChatServer

from castdata.builders.dataset import build_dataset
from castdata.builders.features import SOURCES
from castdata.builders.source import read_interception_labels
from castdata.config import CollectConfig, PipelineConfig, load_config
from castdata.errors import InputError
from castdata.hub.local import local_split
from castdata.label.run import label_run
from castdata.report import summarize
from castdata.rollout.collect import collect
from castdata.rundir import LABELS, read_trajectories
from castdata.train import smoke

LOOP = ROOT / "configs" / "demo_critic_loop.yaml"
MISTAKES = {"wrong_argument": 0.3, "wrong_tool": 0.3, "no_confirmation": 0.2, "partial_plan": 0.3}
COLLECTION = {
    "domains": ["retail", "telehealth"],
    "split": "test",
    "tasks": {"retail/test": "0-9", "telehealth/test": "all"},
    "trials": 2,
}
SPLITS = ("train", "validation", "test")


def every_row(dataset: Path, config: str) -> list[dict[str, Any]]:
    """Every row of one config, all splits."""
    found = []
    for split in SPLITS:
        try:
            found += list(local_split(dataset, config, split))
        except InputError:  # a split without rows has no files
            continue
    return found


def acted(message: dict[str, Any]) -> Any:
    """What an assistant message does: its tool calls, or its text."""
    calls = message.get("tool_calls") or []
    return [(c["function"]["name"], c["function"]["arguments"]) for c in calls] or message.get("content")


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """The offline loop: the noisy oracle (revising half of the time) guarded by the replay critic, labelled, built."""
    root = tmp_path_factory.mktemp("loop")
    agent = {"options": {"revise": 0.5, "mistakes": MISTAKES}}
    config = CollectConfig(**COLLECTION, agent=agent, critic={"backend": "scripted", "model": "replay-critic"})
    collect(config, root / "run", show_progress=False)
    label_run(root / "run")
    return root / "run", root / "dataset", build_dataset([root / "run"], root / "dataset")


def test_a_guarded_collection_records_every_judgement_and_how_the_agent_revised(loop) -> None:
    run, _, _ = loop
    records = read_trajectories(run)
    calls = [c for r in records for c in r.critic_calls]
    assert calls and {c.verdict for c in calls} == {"valid", "invalid"}
    for record in records:
        rejected = [(c.step, c.attempt) for c in record.critic_calls if c.verdict == "invalid"]
        assert rejected == [(i.step, i.attempt) for i in record.interceptions]
    assert all(c.usage is None for c in calls)  # the replay critic calls no model
    revisions = Counter(m.revision for r in records for m in r.injected_mistakes if m.intercepted)
    assert revisions["gold"] and revisions["repeated"] and revisions["another"]
    assert None not in revisions
    stats = json.loads((run / LABELS / "stats.json").read_text())["interceptions"]
    assert stats["total"] == sum(len(r.interceptions) for r in records) and stats["confirmed"] > 0


def test_revision_rows_and_critic_pairs_are_confirmed_by_hindsight(loop) -> None:
    run, dataset, _ = loop
    by_key = {}
    for domain in COLLECTION["domains"]:
        for tid, records in read_interception_labels(run, domain, "test").items():
            by_key.update({(tid, r.step, r.attempt): r for r in records})
    intercepted = {(r.id, i.step, i.attempt): i for r in read_trajectories(run) for i in r.interceptions}
    confirmed = [key for key, record in by_key.items() if record.confirmed]
    assert confirmed and len(confirmed) < len(by_key)  # some revisions repeat the mistake: hindsight says no

    revisions = [row for row in every_row(dataset, "policy_sft") if row["kind"] == "revision"]
    pairs = [row for row in every_row(dataset, "policy_dpo") if row["source"] == "critic"]
    assert len(revisions) == len(pairs) == len(confirmed)
    for row in revisions:
        assert row["source"] == "critic" and row["chat_template_kwargs"] == {"enable_thinking": True}
        last = row["messages"][-1]
        match = [k for k in confirmed if k[:2] == (row["trajectory_id"], row["step"])]
        assert any(acted(last) == acted(intercepted[k].revised) for k in match)
        assert (
            last["reasoning_content"].startswith("Draft: agent: ") and "\nRevised: agent: " in last["reasoning_content"]
        )
        assert len(row["messages"]) == row["step"] + 1
    for row in pairs:
        match = [intercepted[k] for k in confirmed if k[:2] == (row["trajectory_id"], row["step"])]
        assert any(
            acted(row["chosen"][0]) == acted(i.revised) and acted(row["rejected"][0]) == acted(i.proposed)
            for i in match
        )
        assert row["categories"]


def test_every_policy_and_critic_row_says_where_it_came_from_and_the_card_counts_them(loop) -> None:
    _, dataset, manifest = loop
    for config in ("critic_sft", "policy_sft", "policy_dpo", "critic_prm"):
        counted = Counter(row["source"] for row in every_row(dataset, config))
        assert set(counted) <= set(SOURCES) and counted["hindsight"] > 0
    critic_rows = every_row(dataset, "critic_sft")
    from_critic = [r for r in critic_rows if r["source"] == "critic"]
    assert from_critic and all(r["verdict"] == "invalid" for r in from_critic)
    agreement = manifest["stats"]["critic"]
    assert agreement["confirmed"] == len(from_critic)  # test split only: no class balance
    assert agreement["precision"] == round(agreement["confirmed"] / agreement["rejected"], 4)
    card = (dataset / "README.md").read_text()
    assert "### Rows per source" in card and "### The guarding critic against hindsight" in card
    assert f"Precision of\n`invalid`: {agreement['precision']:.4f}" in card


def always_invalid(body: dict[str, Any]) -> dict[str, Any]:
    """A stand-in critic model that rejects every action it is shown, with a grounded-looking critique."""
    critique = {
        "categories": ["wrong_argument"],
        "severity": "critical",
        "policy_refs": [],
        "evidence": [],
        "rationale": {"observed": "A write.", "required": "Other arguments.", "assessment": "Rejected."},
        "expected_action": None,
        "verdict": "invalid",
    }
    return {"content": json.dumps(critique)}


def test_a_critic_that_rejects_valid_actions_trains_no_policy_and_gives_critic_errors(tmp_path: Path) -> None:
    with ChatServer(always_invalid) as server:
        critic = {
            "backend": "openai",
            "model": "critic",
            "base_url": server.base_url,
            "max_retries": 0,
            "price_in_per_mtok": 1.0,
        }
        config = CollectConfig(**{**COLLECTION, "tasks": "0-4", "trials": 1}, critic=critic, max_revisions=1)
        collect(config, tmp_path / "run", show_progress=False)
    records = read_trajectories(tmp_path / "run")
    assert all(r.outcome.reward == 1.0 for r in records)  # a mistake-free agent re-proposes its correct writes
    assert all(r.critic_usage().prompt_tokens > 0 and r.critic_usage().cost_usd > 0 for r in records if r.critic_calls)
    usage = summarize(tmp_path / "run")["usage"]
    assert usage["critic"]["calls"] == sum(len(r.critic_calls) for r in records) > 0
    assert usage["critic"]["prompt_tokens"] == sum(r.critic_usage().prompt_tokens for r in records)
    assert usage["prompt_tokens"] >= usage["critic"]["prompt_tokens"]

    label_run(tmp_path / "run")
    manifest = build_dataset([tmp_path / "run"], tmp_path / "dataset")
    assert not [
        r
        for c in ("policy_sft", "policy_dpo")
        for r in every_row(tmp_path / "dataset", c)
        if r["source"] != "hindsight"
    ]
    errors = [r for r in every_row(tmp_path / "dataset", "critic_sft") if r["source"] == "critic_error"]
    assert errors and all(r["verdict"] == "valid" for r in errors)
    assert manifest["stats"]["critic"]["precision"] == 0.0 and manifest["stats"]["critic"]["false_alarms"] > 0


@pytest.mark.parametrize(
    ("assessment", "grounded"),
    [("These are not the details the user confirmed.", True), ("Order #W9999999 is the one the user meant.", False)],
)
def test_a_revision_reasons_with_the_critics_own_critique_only_when_it_is_grounded(
    assessment: str, grounded: bool, tmp_path: Path
) -> None:
    def critic_model(body: dict[str, Any]) -> dict[str, Any]:
        answer = json.loads(confirmed_writes_only(body)["content"])
        answer["rationale"]["assessment"] = assessment  # an identifier the agent never saw is not grounded
        return {"content": json.dumps(answer)}

    with ChatServer(critic_model) as server:
        critic = {"backend": "openai", "model": "critic", "base_url": server.base_url, "max_retries": 0}
        agent = {"options": {"mistakes": {"wrong_argument": 0.5}}}
        config = CollectConfig(domains=["retail"], split="test", tasks="0-9", trials=2, agent=agent, critic=critic)
        collect(config, tmp_path / "run", show_progress=False)
    label_run(tmp_path / "run")
    build_dataset([tmp_path / "run"], tmp_path / "dataset")
    rows = [r for r in every_row(tmp_path / "dataset", "policy_sft") if r["kind"] == "revision"]
    assert rows
    for row in rows:
        reasoning = row["messages"][-1]["reasoning_content"]
        assert (f"A mistake to avoid here: {assessment}" in reasoning) == grounded
        assert "#W9999999" not in reasoning


def run_script(script: str, args: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run a training script as `python train/SCRIPT ARGS` does, in this process; returns its trainer."""
    monkeypatch.setattr(sys, "argv", [script, *args])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return runpy.run_path(str(ROOT / "train" / script), run_name="__main__")["trainer"]


def recipe_args(config: str, model: Path, dataset: Path, out: Path, **more: Any) -> list[str]:
    recipe = ROOT / "configs" / "train" / smoke.RECIPES[config]
    return ["--config", str(recipe), *smoke.overrides(model, dataset, out, **more)]


@pytest.fixture(scope="module")
def tiny(loop, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    torch.set_num_threads(1)
    return smoke.tiny_model(loop[1], tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.mark.parametrize("config", ["policy_sft", "policy_dpo"])
def test_trl_trains_on_the_critic_rows_alone(
    config: str, loop, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {"policy_sft": "sft_policy.py", "policy_dpo": "dpo_policy.py"}[config]
    more = {"dataset.sources": ["critic"], "training.max_steps": 2}
    trainer = run_script(script, recipe_args(config, tiny, loop[1], tmp_path / "out", **more), monkeypatch)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    rows = local_split(loop[1], config, "test").filter(
        lambda s, d: s == "critic" and d == "telehealth", input_columns=["source", "domain"]
    )
    assert len(trainer.train_dataset) == min(2, len(rows)) > 0


def test_a_round_with_a_tiny_trained_critic_executes_nothing_its_unusable_critiques_say(
    loop, tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """label -> build -> train the critic -> guarded collection with it (transformers) -> label -> build."""
    run_script("sft_critic.py", recipe_args("critic_sft", tiny, loop[1], tmp_path / "critic"), monkeypatch)
    config = load_config(LOOP, PipelineConfig).model_copy(
        update={"domains": ["retail"], "tasks": {"retail/test": "0-1"}, "trials": 1, "concurrency": 1}
    )
    critic = {"backend": "transformers", "model": str(tmp_path / "critic"), "sampling": {"max_tokens": 8}}
    guarded = CollectConfig(**{**config.collect_part().model_dump(), "critic": critic})
    collect(guarded, tmp_path / "guarded", show_progress=False)
    collect(guarded.unguarded(), tmp_path / "plain", show_progress=False)

    records = read_trajectories(tmp_path / "guarded")
    calls = [c for r in records for c in r.critic_calls]
    assert calls and all(c.verdict is None and c.usage.completion_tokens > 0 for c in calls)  # recorded, unusable
    assert not any(r.interceptions for r in records)
    plain = {r.id: r.messages for r in read_trajectories(tmp_path / "plain")}
    assert {r.id: r.messages for r in records} == plain  # nothing executed that the agent did not propose
    label_run(tmp_path / "guarded")
    manifest = build_dataset([tmp_path / "guarded"], tmp_path / "dataset")
    assert manifest["stats"]["critic"] is None  # no usable judgement to compare with hindsight
    assert every_row(tmp_path / "dataset", "policy_sft")


def test_the_shipped_loop_config_runs_as_a_pipeline(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "castdata.cli", "run", str(LOOP), "--out", str(tmp_path / "run"), "--limit", "8"]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    records = read_trajectories(tmp_path / "run")
    assert len(records) == 8 and all(r.critic_calls for r in records)
    manifest = json.loads((tmp_path / "run" / "dataset" / "castdata.json").read_text())
    assert manifest["stats"]["critic"]["judged"] > 0


def test_the_guard_keys_are_checked_and_change_the_fingerprint_only_with_a_critic(tmp_path: Path) -> None:
    from castdata.errors import ConfigError

    replay = {"backend": "scripted", "model": "replay-critic"}
    assert CollectConfig(guard="all", max_revisions=0).fingerprint() == CollectConfig().fingerprint()
    assert CollectConfig(critic=replay).fingerprint() != CollectConfig().fingerprint()
    assert CollectConfig(critic=replay).unguarded().fingerprint() == CollectConfig().fingerprint()
    bad = tmp_path / "bad.yaml"
    for text, message in [
        ("agent: {options: {revise: 2}}", "agent.options.revise: must be a probability in [0, 1] (got 2)"),
        ("critic: {backend: scripted, model: replay-critic}\nexecutor: ray", "runs on the local executor"),
        ("guard: every", "guard: Input should be 'writes' or 'all'"),
    ]:
        bad.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(message)):
            load_config(bad, PipelineConfig)
