"""`castdata label` on scripted runs: agreement with injected mistakes, output files, skipped episodes, CLI errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from golden.cases import CASES
from helpers.writers import PlantingWriter

from castdata.config import CollectConfig
from castdata.label.hindsight import judge
from castdata.label.policy import Clause
from castdata.label.rationale import programmatic_labels
from castdata.label.run import LabelConfig, label_run
from castdata.label.schema import HINDSIGHT_CATEGORIES, Label
from castdata.label.stats import KIND_CATEGORY, USER_KINDS, LabelStats
from castdata.messages import agent_actions
from castdata.models.scripted import MISTAKE_KINDS
from castdata.records import InjectedMistake
from castdata.rollout.collect import collect
from castdata.rundir import read_trajectories
from castdata.visible import View

CASTDATA = [sys.executable, "-m", "castdata.cli"]


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory) -> Path:
    """Every retail, airline and telehealth test task, three trials, with frequent injected mistakes of every kind,
    the scripted user's deviations included."""
    out = tmp_path_factory.mktemp("label") / "run"
    mistakes = {kind: 0.12 for kind in KIND_CATEGORY}
    user = {"model": "scripted-user", "options": {"mistakes": {kind: 0.1 for kind in USER_KINDS}}}
    config = CollectConfig(
        domains=["retail", "airline", "telehealth"],
        split="test",
        trials=3,
        seed=3,
        max_steps=60,
        agent={"options": {"mistakes": mistakes}},
        user=user,
        out=str(out),
    )
    collect(config, out, show_progress=False)
    return out


@pytest.fixture(scope="module")
def labeled(scripted_run) -> tuple[dict, dict[str, list[Label]]]:
    stats = label_run(scripted_run)
    labels: dict[str, list[Label]] = {}
    for path in sorted((scripted_run / "labels").glob("*.test.jsonl")):
        for line in path.read_text().splitlines():
            label = Label.model_validate_json(line)
            labels.setdefault(label.trajectory_id, []).append(label)
    return stats, labels


def test_first_critical_error_is_the_first_injected_outcome_breaking_mistake(scripted_run, labeled):
    stats, labels = labeled
    injected = stats["injected"]
    assert injected["failed_with_breaking"] >= 150 and injected["failed_without_breaking"] == 0
    assert injected["first_error_agreement"] >= 0.99, injected["mismatches"]  # issue 10's target
    for trajectory in read_trajectories(scripted_run):
        firsts = [label.step for label in labels[trajectory.id] if label.first_critical_error]
        breaking = [m.step for m in trajectory.injected_mistakes if m.outcome_breaking]
        user_fault = any(label.user_fault for label in labels[trajectory.id])
        if trajectory.outcome.reward == 1.0:
            assert firsts == [] and not user_fault
        elif user_fault:
            against_policy = any(
                "fault.gold_against_policy" in label.label_source.signals for label in labels[trajectory.id]
            )
            assert firsts == [] and (against_policy or any(m.kind in USER_KINDS for m in trajectory.injected_mistakes))
        else:
            assert len(firsts) == 1 and breaking


def test_each_kind_of_mistake_is_found_where_it_was_made(labeled):
    kinds = labeled[0]["injected"]["kinds"]
    counted = {kind: c for kind, c in kinds.items() if c.get("first_breaking", 0) >= 5}
    assert {
        "wrong_refusal",
        "partial_plan",
        "user_deviation",
        "wrong_argument",
        "premature_end",
        "needless_transfer",
    } <= set(counted)
    for kind, c in counted.items():  # the first critical error is the first outcome-breaking mistake of that kind
        assert c.get("first_error_matches", 0) >= 0.85 * c["first_breaking"], (kind, c)
    # issue 15's kinds: at least 98% (a user's deviation: its fault, no agent action blamed); the 10k-episode figures
    # per kind are benchmarks/bench_label.py's
    for kind in ("wrong_refusal", "partial_plan", "wrong_order", "user_deviation", "needless_transfer"):
        if kind in counted:
            assert kinds[kind]["first_error_matches"] >= 0.98 * kinds[kind]["first_breaking"], (kind, kinds[kind])


def test_every_action_gets_one_verified_label(scripted_run, labeled):
    stats, labels = labeled
    trajectories = read_trajectories(scripted_run)
    assert {t.id for t in trajectories} == set(labels)
    for trajectory in trajectories:
        got = labels[trajectory.id]
        assert [(label.step, label.action) for label in got] == agent_actions(trajectory.messages)
        first = next((label.step for label in got if label.first_critical_error), None)
        for label in got:
            assert label.after_first_error == (first is not None and label.step > first)
            assert (label.verdict == "invalid") == bool(label.categories) == (label.severity != "none")
    assert stats["verifier"]["programmatic"] == {"checked": stats["labels"]["total"], "rejected": 0, "reasons": {}}
    assert stats["labels"]["total"] == sum(len(v) for v in labels.values())
    assert json.loads((scripted_run / "labels" / "stats.json").read_text()) == stats


def test_injected_mistakes_are_flagged_with_their_category(labeled):
    injected = labeled[0]["injected"]
    assert injected["first_error_category_matches"] >= 0.9 * injected["first_error_matches"]
    kinds = injected["kinds"]
    assert set(kinds) == set(KIND_CATEGORY) | set(USER_KINDS) and set(KIND_CATEGORY) <= set(MISTAKE_KINDS)
    assert set(KIND_CATEGORY.values()) == set(HINDSIGHT_CATEGORIES)  # every category the labeler gives is injected
    assert set(HINDSIGHT_CATEGORIES) <= set(labeled[0]["labels"]["categories"])
    # rule checks see every one of these, at the step it was made
    for kind in ("two_tool_calls", "malformed_call", "empty_reply", "needless_transfer", "repeated_lookup"):
        assert kinds[kind]["injected"] >= 20 and kinds[kind]["category_match"] == kinds[kind]["injected"], (
            kind,
            kinds[kind],
        )
    assert kinds["no_confirmation"]["flagged"] >= 0.95 * kinds["no_confirmation"]["injected"]
    # a missing output the user's deviation follows is charged where the episode ends, after the deviation's write
    assert kinds["missing_output"]["category_match"] >= 0.9 * kinds["missing_output"]["injected"]


def test_clause_table_ships_with_the_labels(scripted_run, labeled):
    lines = (scripted_run / "labels" / "policy_clauses.jsonl").read_text().splitlines()
    clauses = [Clause.model_validate_json(line) for line in lines]
    assert {c.domain for c in clauses} == {"retail", "airline", "telehealth"}
    ids = {c.clause_id for c in clauses}
    cited = {ref.clause_id for group in labeled[1].values() for label in group for ref in label.policy_refs}
    assert cited and cited <= ids


def test_relabeling_gives_the_same_files(scripted_run, labeled):
    before = {p.name: p.read_bytes() for p in (scripted_run / "labels").glob("*.jsonl")}
    label_run(scripted_run)
    assert {p.name: p.read_bytes() for p in (scripted_run / "labels").glob("*.jsonl")} == before
    assert not list((scripted_run / "labels").glob(".*"))  # no temp files left


def _small_run(tmp_path: Path, scripted_run: Path, edit) -> Path:
    """A copy of the scripted run's retail file, each record passed through `edit` (returning lines to write)."""
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    lines = (scripted_run / "trajectories" / "retail.test.jsonl").read_text().splitlines()[:6]
    out = [new for line in lines for new in edit(json.loads(line))]
    (run / "trajectories" / "retail.test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))
    return run


def test_infrastructure_errors_are_skipped_and_counted_and_reruns_supersede(tmp_path, scripted_run):
    def edit(record):
        if record["task_id"] == 0:
            broken = json.loads(json.dumps(record))
            broken["outcome"]["termination_reason"] = "infrastructure_error"
            return [record, broken]  # the rerun is the later line: it supersedes
        if record["task_id"] == 1:
            broken = json.loads(json.dumps(record))
            broken["outcome"]["termination_reason"] = "infrastructure_error"
            return [broken, record]
        return [record]

    run = _small_run(tmp_path, scripted_run, edit)
    stats = label_run(run)
    assert stats["trajectories"]["skipped"] == {"infrastructure_error": 3}
    assert stats["trajectories"]["read"] == 6 and stats["trajectories"]["labeled"] == 3
    ids = {
        json.loads(line)["trajectory_id"] for line in (run / "labels" / "retail.test.jsonl").read_text().splitlines()
    }
    assert ids == {"retail.test.1.0", "retail.test.1.1", "retail.test.1.2"}


def test_writer_rejections_are_reported(tmp_path, scripted_run):
    run = _small_run(tmp_path, scripted_run, lambda record: [record])
    stats = label_run(run, LabelConfig(verifier_retries=1), writer=PlantingWriter(bad=3))
    writer = stats["verifier"]["writer"]
    total = stats["labels"]["total"]
    assert (
        writer["labels"] == total and writer["rejected_tries"] == 3 and writer["reasons"] == {"evidence_not_before": 3}
    )
    assert writer["fallbacks"] == 1 and writer["tries"] == total + 2
    methods = [
        json.loads(line)["label_source"]["method"]
        for line in (run / "labels" / "retail.test.jsonl").read_text().splitlines()
    ]
    assert methods.count("teacher") == total - 1


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CASTDATA, "label", *args], capture_output=True, text=True, timeout=120)


def test_cli_labels_a_run_and_prints_json(tmp_path, scripted_run):
    run = _small_run(tmp_path, scripted_run, lambda record: [record])
    config = tmp_path / "pipeline.yaml"
    config.write_text("domains: [retail]\nlabel:\n  verifier_retries: 1\n")
    out = cli(str(run), "--config", str(config), "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["trajectories"]["labeled"] == 6
    shown = cli(str(run))
    assert shown.returncode == 0 and "first critical error" in shown.stdout


@pytest.mark.parametrize(
    "setup,message",
    [
        (lambda tmp: tmp / "missing", "no such run directory"),
        (lambda tmp: tmp, "not a run directory"),
    ],
)
def test_cli_rejects_a_bad_run_dir(tmp_path, setup, message):
    out = cli(str(setup(tmp_path)))
    assert out.returncode == 2 and message in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_cli_rejects_a_bad_config_and_a_bad_record(tmp_path, scripted_run):
    run = _small_run(tmp_path, scripted_run, lambda record: [record])
    config = tmp_path / "pipeline.yaml"
    config.write_text("label:\n  retries: 3\n")
    out = cli(str(run), "--config", str(config))
    assert (
        out.returncode == 2
        and out.stderr.strip()
        == "error: label.retries: unknown key; allowed: verifier_retries, teacher, mc, concurrency"
    )
    with (run / "trajectories" / "retail.test.jsonl").open("a") as handle:
        handle.write('{"schema": "castdata.trajectory/1", "id": "x"}\n')
    out = cli(str(run))
    assert out.returncode == 2 and "retail.test.jsonl:7: not a trajectories record" in out.stderr


@pytest.mark.parametrize("intercepted", [False, True])
def test_injected_agreement_counts_executed_mistakes_only(intercepted):
    trajectory, expect = CASES["retail_wrong_order_cancel"]()
    trajectory.injected_mistakes = [
        InjectedMistake(kind="wrong_argument", step=expect.first_error, outcome_breaking=True, intercepted=intercepted)
    ]
    episode = judge(trajectory)
    stats = LabelStats("run")
    stats.add(episode, programmatic_labels(episode, View(trajectory)))
    injected = stats.to_dict()["injected"]
    assert injected["failed_with_breaking"] == (0 if intercepted else 1)
    assert injected["first_error_matches"] == injected["first_error_category_matches"] == (0 if intercepted else 1)
    found = {"injected": 1, "flagged": 1, "category_match": 1, "first_breaking": 1, "first_error_matches": 1}
    assert injected["kinds"] == ({} if intercepted else {"wrong_argument": found})


def test_label_progress_counts_every_episode(tmp_path):
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    records = [CASES[name]()[0].to_json() for name in ("retail_wrong_order_cancel", "retail_cancel_success")]
    (run / "trajectories" / "retail.test.jsonl").write_text("".join(r + "\n" for r in records))
    seen = []
    stats = label_run(run, on_episode=lambda: seen.append(1))
    assert len(seen) == stats["trajectories"]["read"] == 2
