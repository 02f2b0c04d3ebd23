"""`castdata import tau-bench` on real result files (tests/golden_real): rewards recomputed, reproduction checked
and marked, tasks matched, extra tools listed, idempotent; label, report and build accept the run."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from castdata.builders.dataset import build_dataset
from castdata.errors import InputError, RunDirConflict, UnknownName
from castdata.imports.tau_bench import import_tau_bench
from castdata.label.run import label_run, read_labels
from castdata.report import summarize
from castdata.rundir import read_trajectories

GOLDEN = Path(__file__).parent / "golden_real"
RETAIL = GOLDEN / "tau-bench.retail-test.gpt-4.1.golden.json.gz"
AIRLINE = GOLDEN / "tau-bench.airline-test.gpt-4o.golden.json.gz"
LEAKED = GOLDEN / "tau-bench.retail-test.gpt-4.1.not-reproduced.json.gz"


def _entries(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))


@pytest.fixture(scope="module")
def retail_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("import") / "retail"
    import_tau_bench([RETAIL, LEAKED], out, "retail", agent_model="gpt-4.1", user_model="gpt-4o")
    return out


def test_every_entry_is_imported_or_refused_with_a_reason(retail_run):
    manifest = json.loads((retail_run / "manifest.json").read_text())
    sources = {s["name"]: s for s in manifest["sources"]}
    assert sources[RETAIL.name]["imported"] == len(_entries(RETAIL)) == 42
    leaked = sources[LEAKED.name]
    assert leaked["imported"] + len(leaked["refused"]) == leaked["entries"] == 17
    assert [r["task_id"] for r in leaked["refused"]] == [60]
    assert leaked["refused"][0]["reason"].startswith("no task recorded (the harness failed: ('Connection aborted.'")
    assert manifest["missing"] and "timestamps" in manifest["missing"] and len(sources[RETAIL.name]["sha256"]) == 64
    assert manifest["counts"] == {
        "episodes": 58,
        "reproduced": 42,
        "not_reproduced": 16,
        "infrastructure_error": 0,
        "successes": 16,
    }


def test_rewards_are_recomputed_never_taken_from_the_file(retail_run):
    records = {t.id: t for t in read_trajectories(retail_run)}
    recorded = {f"retail.test.{e['task_id']}.{e['trial']}": e["reward"] for e in _entries(RETAIL)}
    claimed_but_failed = [
        i for i, t in records.items() if i in recorded and recorded[i] == 1.0 and t.outcome.reward == 0.0
    ]
    assert len(claimed_but_failed) >= 10  # the fork's reward is wrong for these; the replay says so
    exchange = records["retail.test.23.23"]  # "modified" an item into itself: recorded 1, a no-op write
    assert exchange.imported.source_reward == 1.0 and exchange.outcome.reward == 0.0 and not exchange.outcome.db_match
    success = records["retail.test.0.0"]
    assert success.outcome.reward == 1.0 and success.outcome.db_match and success.imported.task_match == "same"


def test_episodes_that_do_not_reproduce_are_kept_marked_and_never_counted(retail_run, tmp_path):
    records = {t.id: t for t in read_trajectories(retail_run)}
    leaked = records["retail.test.11.11"]  # the harness had already returned this order in another episode
    mark = leaked.imported
    assert (
        not mark.reproduced
        and mark.first_mismatch.step == 18
        and mark.first_mismatch.tool == "return_delivered_order_items"
    )
    assert "non-delivered order cannot be returned" in mark.first_mismatch.recorded
    assert not leaked.counts_for_pass_k
    assert sum(not t.imported.reproduced for t in records.values()) == 16
    extra = records["retail.test.2.2"]  # called the fork's no-op tool, then met leaked state
    assert extra.imported.extra_tools == ["get_input_from_user"]
    assert any(tool["function"]["name"] == "get_input_from_user" for tool in extra.tools)
    manifest = json.loads((retail_run / "manifest.json").read_text())
    assert manifest["extra_tools"] == ["get_input_from_user"]
    assert {item["id"] for item in manifest["not_reproduced"]} == {
        i for i, t in records.items() if not t.imported.reproduced
    }

    run = tmp_path / "run"
    shutil.copytree(retail_run, run)
    stats = label_run(run)
    assert stats["trajectories"]["skipped"] == {"not_reproduced": 16}
    assert not set(read_labels(run)) & {i for i, t in records.items() if not t.imported.reproduced}
    group = summarize(run)["groups"][0]
    assert group["episodes"] == 58 and group["excluded"] == 16
    assert group["pass_k"][1] == pytest.approx(16 / 42, abs=1e-6)  # pass^1 over the 42 episodes that reproduce
    dataset = build_dataset([run], tmp_path / "dataset")
    trained = {config: sum(e["rows"] for e in splits.values()) for config, splits in dataset["configs"].items()}
    assert trained["trajectories"] == 58 and trained["critic_prm"] <= 42  # marked episodes reach no training config


def test_a_harness_tool_whose_only_call_failed_validation_is_an_extra_tool(tmp_path):
    """The source harness ran its own helper and rejected the call's arguments: the tool existed there, so its
    recorded reply is kept, not replayed as a tool castdata's domain lacks (which would mark the episode)."""
    entry = next(e for e in _entries(RETAIL) if e["task_id"] == 0)
    call = {"id": "call_x", "type": "function", "function": {"name": "get_return_refund_options", "arguments": "{}"}}
    error = "Error: Error executing tool get_return_refund_options: 2 validation errors for Arguments\norder_id\n"
    traj = entry["traj"]
    entry["traj"] = [
        *traj[:-1],
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_x", "name": "get_return_refund_options", "content": error},
        traj[-1],
    ]
    source = tmp_path / "helper.json"
    source.write_text(json.dumps([entry]))
    manifest = import_tau_bench([source], tmp_path / "run", "retail")
    (record,) = read_trajectories(tmp_path / "run")
    assert record.imported.reproduced and manifest["extra_tools"] == ["get_return_refund_options"]
    assert record.outcome.reward == 1.0

    entry["traj"][-2]["content"] = "Unknown action get_return_refund_options"  # this harness lacked it too
    source.write_text(json.dumps([entry]))
    manifest = import_tau_bench([source], tmp_path / "lacked", "retail")
    assert manifest["extra_tools"] == []


def test_airline_observations_with_renamed_fields_reproduce_and_say_so(tmp_path):
    out = tmp_path / "airline"
    manifest = import_tau_bench([AIRLINE], out, "airline")
    assert manifest["counts"]["reproduced"] == 58 and manifest["counts"]["not_reproduced"] == 0
    records = read_trajectories(out)
    renamed = [t for t in records if t.imported.renamed_fields]
    assert renamed and all(t.imported.renamed_fields == ["address.province->state"] for t in renamed)
    assert {t.imported.task_match for t in records} <= {"same", "reworded"}
    assert set(manifest["tasks"]["reworded"]) == {t.task_id for t in records if t.imported.task_match == "reworded"}
    terminations = {t.outcome.termination_reason for t in records}
    assert terminations <= {"user_stop", "transfer", "max_steps"} and "user_stop" in terminations
    with_text = [m for t in records for m in t.meta if m.violation == "tool_call_with_text"]
    assert with_text  # gpt-4o sometimes writes to the user in the turn of a tool call


def test_importing_twice_adds_nothing_and_a_clashing_file_is_refused(tmp_path):
    out = tmp_path / "run"
    import_tau_bench([AIRLINE], out, "airline")
    lines = (out / "trajectories" / "airline.test.jsonl").read_text()
    again = import_tau_bench([AIRLINE], out, "airline")
    assert (out / "trajectories" / "airline.test.jsonl").read_text() == lines
    assert [s["already_imported"] for s in again["sources"]] == [58] and again["counts"]["episodes"] == 58

    renamed = tmp_path / "another-run.json"
    renamed.write_text(json.dumps([*_entries(AIRLINE)[:3], {"not": "an episode"}]))
    clash = import_tau_bench([renamed], out, "airline")
    refused = next(s for s in clash["sources"] if s["name"] == renamed.name)["refused"]
    assert len(refused) == 4 and "--trial-offset" in refused[0]["reason"] and "not an episode" in refused[3]["reason"]
    offset = import_tau_bench([renamed], out, "airline", trial_offset=10)
    first = {(e["task_id"], e["trial"] + 10) for e in _entries(AIRLINE)[:3]}
    assert offset["counts"]["episodes"] == 61 and first <= {(t.task_id, t.trial) for t in read_trajectories(out)}


def test_two_runs_holding_the_same_episodes_build_each_once(tmp_path):
    first = tmp_path / "first"
    import_tau_bench([AIRLINE], first, "airline")
    label_run(first)
    second = tmp_path / "second"
    shutil.copytree(first, second)
    once = build_dataset([first], tmp_path / "once")
    twice = build_dataset([first, second], tmp_path / "twice")
    rows = lambda m: {c: sum(e["rows"] for e in s.values()) for c, s in m["configs"].items()}  # noqa: E731
    assert rows(once) == rows(twice) and twice["duplicate_episodes"] == 58


def test_bad_input_is_one_clear_error(tmp_path):
    text = tmp_path / "notes.json"
    text.write_text("{not json")
    with pytest.raises(InputError, match=r"notes\.json: not a tau-bench result file"):
        import_tau_bench([text], tmp_path / "out", "retail")
    assert not (tmp_path / "out").exists()
    with pytest.raises(UnknownName, match="domain"):
        import_tau_bench([AIRLINE], tmp_path / "out", "aviation")
    collected = tmp_path / "collected"
    collected.mkdir()
    (collected / "manifest.json").write_text(json.dumps({"schema": "castdata.run/1", "config": {}}))
    with pytest.raises(RunDirConflict, match="collected run"):
        import_tau_bench([AIRLINE], collected, "airline")


def test_the_command_line(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "castdata.cli",
            "import",
            "tau-bench",
            str(AIRLINE),
            "--out",
            str(out),
            "--domain",
            "airline",
            "--agent-model",
            "gpt-4o",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"{AIRLINE.name}: 58 imported, 0 already there, 0 refused" in done.stdout
    assert read_trajectories(out)[0].agent.model == "gpt-4o"
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "castdata.cli",
            "import",
            "tau-bench",
            str(tmp_path / "none.json"),
            "--out",
            str(out),
            "--domain",
            "airline",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "none.json" in bad.stderr
