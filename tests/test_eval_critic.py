"""`castdata eval-critic`: verdict metrics, first-error localisation and grounding, on a labelled run and its dataset."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from castdata.critic.eval_critic import cases, evaluate_critic, labelled_episodes
from castdata.critic.guard import Critique
from castdata.critic.replay import ReplayCritic
from castdata.label.schema import CritiqueJSON, Evidence, Label
from castdata.models.base import EpisodeContext

CASTDATA = [sys.executable, "-m", "castdata.cli"]


@pytest.fixture(scope="module")
def labelled(demo_build: tuple[Path, Path]) -> tuple[Path, Path]:
    """The demo run (scripted agent with injected mistakes), labelled, and the dataset built from it."""
    return demo_build


class Lookup:
    """A test critic answering from the labels of the actions it is shown (`answer(label)` -> Critique)."""

    def __init__(self, run: Path, answer) -> None:
        self.labels = {
            self.key(e.trajectory.domain, e.trajectory.task_id, e.trajectory.seed, label.step): label
            for e, label in cases(labelled_episodes(run, "test"))
        }
        self.answer = answer

    @staticmethod
    def key(domain: str, task: int, seed: int, step: int) -> tuple:
        return (domain, task, seed, step)

    async def judge(self, ctx: EpisodeContext, messages: list[dict[str, Any]], proposed: dict[str, Any]) -> Critique:
        return self.answer(self.labels[self.key(ctx.domain.name, ctx.task.index, ctx.seed, len(messages))])

    async def aclose(self) -> None:
        return None


def structured(label: Label, **changes: Any) -> Critique:
    """The label's own rationale as a critic's structured critique, with `changes`."""
    value = CritiqueJSON(**{**label.model_dump(include=set(CritiqueJSON.model_fields)), **changes})
    return Critique(verdict=value.verdict, text=value.model_dump_json(), structured=value)


def test_a_run_and_its_dataset_give_the_same_metrics(labelled) -> None:
    run, dataset = labelled
    from_run, from_dataset = (evaluate_critic(ReplayCritic(), data) for data in (run, dataset))

    assert {k: v for k, v in from_run.items() if k != "data"} == {k: v for k, v in from_dataset.items() if k != "data"}
    assert from_run["cases"] == len(cases(labelled_episodes(run, "test"))) > 100
    invalid = from_run["invalid"]
    assert invalid["precision"] == 1.0 and 0 < invalid["recall"] < 1  # the replay critic only judges writes
    assert from_run["grounding"]["checked"] == 0  # it writes no structured critique


def test_a_perfect_critic_and_two_trivial_ones(labelled) -> None:
    run, _ = labelled
    judged = cases(labelled_episodes(run, "test"))
    support = sum(1 for _, label in judged if label.verdict == "invalid")
    first_steps: dict[str, int] = {}
    for episode, label in judged:
        first_steps.setdefault(episode.trajectory.id, label.step)
    errors = {e.trajectory.id: label.step for e, label in judged if label.first_critical_error}

    perfect = evaluate_critic(Lookup(run, structured), run)  # the labels' own structured rationales
    assert perfect["accuracy"] == 1.0 and perfect["invalid"] == {
        "support": support,
        "flagged": support,
        "precision": 1.0,
        "recall": 1.0,
        "f1": 1.0,
    }
    assert (
        perfect["first_error"] == {"episodes": len(errors), "located": len(errors), "accuracy": 1.0}
        and len(errors) >= 5
    )
    assert perfect["grounding"] == {"checked": perfect["cases"], "failing": 0, "rate": 0.0, "reasons": {}}

    lenient = evaluate_critic(Lookup(run, lambda label: Critique("valid", "")), run)
    assert lenient["accuracy"] == round(1 - support / len(judged), 4)
    assert lenient["invalid"] == {"support": support, "flagged": 0, "precision": None, "recall": 0.0, "f1": 0.0}
    assert lenient["first_error"]["located"] == 0

    strict = evaluate_critic(
        Lookup(run, lambda label: Critique("invalid", "")), run
    )  # unstructured: every flag is critical
    assert strict["invalid"]["precision"] == round(support / len(judged), 4) and strict["invalid"]["recall"] == 1.0
    assert strict["first_error"]["located"] == sum(1 for key, step in errors.items() if first_steps[key] == step)


def test_rationales_failing_the_grounding_verifier_are_counted(labelled) -> None:
    run, _ = labelled
    made_up = Evidence(step=1, source="message", quote="my order number is #W0000000")
    invented = evaluate_critic(Lookup(run, lambda label: structured(label, evidence=[made_up])), run)

    assert invented["grounding"]["failing"] == invented["cases"]
    assert invented["grounding"]["reasons"] == {"quote_not_found": invented["cases"]}
    assert invented["accuracy"] == 1.0  # grounding is judged apart from the verdict


def test_eval_critic_cli(labelled, tmp_path: Path) -> None:
    _, dataset = labelled
    config = tmp_path / "critic.yaml"
    config.write_text(yaml.safe_dump({"critic": {"backend": "scripted", "model": "replay-critic"}}))
    shown = subprocess.run(
        [*CASTDATA, "eval-critic", str(config), str(dataset), "--json", "--limit", "50"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["cases"] == 50

    for args, expected in [
        ([str(config), str(tmp_path)], "neither a run directory nor a castdata dataset folder"),
        ([str(config), str(dataset), "--split", "dev"], "no 'dev' split"),
    ]:
        refused = subprocess.run([*CASTDATA, "eval-critic", *args], capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and expected in refused.stderr, (
            refused.stderr
        )
    config.write_text(yaml.safe_dump({"domains": ["retail"]}))
    refused = subprocess.run(
        [*CASTDATA, "eval-critic", str(config), str(dataset)], capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2 and "critic: required" in refused.stderr


def test_a_tiny_qwen3_critic_is_evaluated_end_to_end(labelled, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from helpers.tiny_qwen import build_tiny_qwen3

    from castdata.critic import open_critic
    from castdata.models.spec import ModelSpec, Sampling

    run, _ = labelled
    model = build_tiny_qwen3(tmp_path / "tiny-qwen3")
    critic = open_critic(ModelSpec(backend="transformers", model=str(model), sampling=Sampling(max_tokens=8)))
    result = evaluate_critic(critic, run, limit=2)

    assert (
        result["cases"] == 2 and result["unparseable"] == 2 and result["accuracy"] == 0.0
    )  # random weights write no JSON
