"""The labeler against careful human judgement on real agents' episodes (tests/golden_real: seven parts, each judged
by two annotators before the labeler was run on it). The bounds are today's measured levels per part
(benchmarks/README.md), kept as floors: a change that makes labels on real trajectories worse fails here. The
issue's first-error target (90%) is met on part 1 only; its flag precision target (95%) on parts 2, 4, 5 and 7 and on
all seven together (114 of 120). Parts 4, 5, 6 and 7, other agents, were measured once before any rule was written
from them (22.2% / 83.3%, 44.7% / 95.2%, 46.2% / 85.7% and 41.4% / 83.3%)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from castdata.imports.tau_bench import import_tau_bench
from castdata.label.agreement import agreement, read_judgements
from castdata.label.run import label_run, read_labels

GOLDEN = Path(__file__).parent / "golden_real"
PARTS = json.loads((GOLDEN / "parts.json").read_text())  # each part: its judgements and result files
# each part: its failed and successful episodes, its annotators per episode, and today's floors
EXPECTED = {
    "part 1": ((66, 34), 2, {"accuracy": 0.95, "close": 49, "no_blame": 16, "precision": 0.92, "false_alarms": 1}),
    "part 2": ((40, 30), 2, {"accuracy": 0.87, "close": 31, "no_blame": 5, "precision": 0.95, "false_alarms": 0}),
    "part 3": ((34, 30), 2, {"accuracy": 0.82, "close": 18, "no_blame": 11, "precision": 0.87, "false_alarms": 2}),
    "part 4": ((36, 24), 2, {"accuracy": 0.83, "close": 29, "no_blame": 2, "precision": 0.95, "false_alarms": 0}),
    "part 5": ((38, 30), 2, {"accuracy": 0.78, "close": 25, "no_blame": 8, "precision": 0.95, "false_alarms": 0}),
    "part 6": ((39, 30), 2, {"accuracy": 0.71, "close": 26, "no_blame": 4, "precision": 0.88, "false_alarms": 1}),
    "part 7": ((29, 30), 2, {"accuracy": 0.62, "close": 15, "no_blame": 5, "precision": 0.95, "false_alarms": 0}),
}


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    run = tmp_path_factory.mktemp("golden-real") / "run"
    for spec in PARTS.values():
        for source in spec["sources"]:
            import_tau_bench(
                [GOLDEN / source["file"]], run, source["domain"], trial_offset=source.get("trial_offset", 0)
            )
    label_run(run)
    return read_labels(run)


@pytest.fixture(scope="module", params=sorted(PARTS))
def scored(request, labelled):
    judgements = read_judgements(GOLDEN / PARTS[request.param]["judgements"])
    labels = {episode: items for episode, items in labelled.items() if episode in judgements}
    return request.param, judgements, labels, agreement(judgements, labels)


def test_the_golden_set_is_what_its_readme_says(scored):
    part, judgements, labels, _ = scored
    (failed, succeeded), annotators, _ = EXPECTED[part]
    outcomes = [j["outcome"] for j in judgements.values()]
    assert outcomes.count("failure") == failed and outcomes.count("success") == succeeded
    assert all(len(j["annotations"]) == annotators for j in judgements.values())
    assert set(labels) == set(judgements)  # every judged episode reproduces and is labelled
    for episode, judged in judgements.items():  # the recomputed outcome is the one the annotators judged
        success = not any(label.first_critical_error or label.user_fault for label in labels[episode])
        assert success == (judged["outcome"] == "success"), episode


def test_first_errors_fall_on_the_hand_marked_step(scored):
    part, _, _, result = scored
    (failed, _), _, floors = EXPECTED[part]
    failures = result.failures
    assert sum(failures.values()) == failed
    assert result.first_error_accuracy >= floors["accuracy"], dict(failures)
    assert failures["exact"] + failures["exact_other"] + failures["adjacent"] >= floors["close"]
    assert failures["no_blame"] >= floors["no_blame"]  # user- and task-caused failures recognised, no agent blamed


def test_few_false_alarms_on_successful_episodes(scored):
    part, _, _, result = scored
    (_, succeeded), _, floors = EXPECTED[part]
    assert result.successes == succeeded
    assert result.flag_precision >= floors["precision"], (result.flags, result.true_flags)
    assert result.false_alarms <= floors["false_alarms"]  # successes with a flag no annotator lists


def test_user_fault_episodes_blame_no_action_and_train_nothing(scored):
    _, _, labels, _ = scored
    faulted = [episode for episode, items in labels.items() if any(label.user_fault for label in items)]
    assert faulted
    for episode in faulted:
        assert all(
            label.user_fault and not label.first_critical_error and label.severity != "critical"
            for label in labels[episode]
        ), episode


def test_real_rationales_never_speak_of_the_outcome(scored):
    _, _, labels, _ = scored
    words = ("episode succeeded", "episode failed", "the outcome", "task succeeded", "reward", "hindsight")
    for items in labels.values():
        for label in items:
            prose = " ".join(label.rationale.model_dump().values()).lower()
            assert not any(word in prose for word in words), (label.trajectory_id, label.step, prose)
