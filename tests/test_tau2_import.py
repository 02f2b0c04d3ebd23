"""`castdata import tau2`: results files written with tau2's own data model are replayed, checked and rescored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.tau2 import needs_tau2, run_in_castdata

from castdata.envs import load_domain
from castdata.envs.known_issues import perturbed_write
from castdata.envs.tau2_reference import simulation
from castdata.report import summarize
from castdata.rundir import read_trajectories

pytestmark = needs_tau2


def _results(domain_name: str, simulations: list, tasks: list):
    from tau2.data_model.simulation import AgentInfo, Info, Results, UserInfo
    from tau2.environment.environment import EnvironmentInfo

    domain = load_domain(domain_name)
    info = Info(
        git_commit="test",
        num_trials=1,
        max_steps=50,
        max_errors=10,
        user_info=UserInfo(implementation="user_simulator", llm="gpt-4.1"),
        agent_info=AgentInfo(implementation="llm_agent", llm="gpt-4.1-mini"),
        environment_info=EnvironmentInfo(domain_name=domain.short, policy=domain.policy),
    )
    return Results(info=info, tasks=tasks, simulations=simulations)


def _write_results(tmp_path: Path) -> tuple[Path, Path]:
    retail = load_domain("tau2-retail")
    task = next(t for t in retail.tasks("test") if perturbed_write(retail, t) is not None)
    source, said = retail.source(task), " ".join(task.outputs)
    gold, _ = run_in_castdata(retail, task, retail.gold_calls(task), said)
    bad, _ = run_in_castdata(retail, task, [("assistant", a) for a in perturbed_write(retail, task)], said)
    tampered, _ = run_in_castdata(retail, task, retail.gold_calls(task), said)
    tool = next(i for i, m in enumerate(tampered) if m.role == "tool" and m.content.startswith("{"))
    tampered[tool] = tampered[tool].model_copy(update={"content": json.dumps({"status": "invented"})})
    sims = [
        simulation(source.id, gold, 0, reward=0.0),
        simulation(source.id, bad, 1, reward=1.0),
        simulation(source.id, tampered, 2, reward=1.0),
        simulation("no-such-task", gold, 3, reward=1.0),
    ]
    retail_file = tmp_path / "retail_results.json"
    retail_file.write_text(_results("tau2-retail", sims, [source]).model_dump_json())
    telecom = load_domain("tau2-telecom")
    task = telecom.task("test", 0)
    messages, _ = run_in_castdata(telecom, task, telecom.gold_calls(task), "All set.")
    telecom_file = tmp_path / "telecom_results.json"
    sims = [simulation(telecom.source(task).id, messages, 0, reward=0.0)]
    telecom_file.write_text(_results("tau2-telecom", sims, [telecom.source(task)]).model_dump_json())
    return retail_file, telecom_file


def _castdata(*arguments: str) -> None:
    command = [sys.executable, "-m", "castdata.cli", *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def _import(files: list[Path], out: Path) -> dict:
    _castdata("import", "tau2", *map(str, files), "--out", str(out))
    return json.loads((out / "manifest.json").read_text())


def test_import_recomputes_rewards_checks_reproduction_and_is_idempotent(tmp_path):
    files = _write_results(tmp_path)
    out = tmp_path / "run"
    manifest = _import(list(files), out)
    assert manifest["counts"] == {
        "imported": 4,
        "already_imported": 0,
        "not_reproduced": 1,
        "unknown_task": 1,
        "finished": 4,
    }
    records = {(r.domain, r.trial): r for r in read_trajectories(out)}
    gold, bad, tampered = (records[("tau2-retail", trial)] for trial in range(3))
    assert gold.imported.source_reward == 0.0 and gold.outcome.reward == 1.0 and gold.counts_for_pass_k
    assert bad.imported.source_reward == 1.0 and bad.outcome.reward == 0.0 and not bad.outcome.db_match
    assert tampered.outcome.excluded.startswith("not reproduced: tau2 message") and not tampered.counts_for_pass_k
    assert gold.messages[0] == {"role": "system", "content": load_domain("tau2-retail").policy}
    assert len(gold.meta) == len(gold.messages)
    for i, message in enumerate(gold.messages):  # castdata's record shape: one call per turn, then its result
        if message.get("tool_calls"):
            assert gold.messages[i + 1]["tool_call_id"] == message["tool_calls"][0]["id"]

    phone = records[("tau2-telecom", 0)]
    assert phone.outcome.reward == 1.0 and phone.user_tool_calls  # ENV_ASSERTION on the user's phone, after its calls
    assert {c.name for c in phone.user_tool_calls} == {a.name for a in phone.privileged.user_gold_actions}
    assert not any(m.get("tool_calls") for m in phone.messages if m["role"] != "assistant")
    steps = [c.step for c in phone.user_tool_calls]
    assert steps == sorted(steps) and steps[-1] == len(phone.messages) - 1  # the last ones led to the closing reply

    again = _import(list(files), out)
    assert again["counts"]["imported"] == 0 and again["counts"]["already_imported"] == 4
    lines = [line for path in (out / "trajectories").glob("*.jsonl") for line in path.read_text().splitlines()]
    assert len(lines) == len(read_trajectories(out)) == 4
    groups = {g["domain"]: g for g in summarize(out)["groups"]}
    assert groups["tau2-retail"]["excluded"] == 1 and groups["tau2-retail"]["pass_k"] == {1: 0.5, 2: 0.0}

    _castdata("label", str(out))
    _castdata("build", str(out), "--out", str(tmp_path / "dataset"))
    built = json.loads((tmp_path / "dataset" / "castdata.json").read_text())["configs"]
    assert built["trajectories"]["test"]["rows"] == 4
    assert built["critic_prm"]["test"]["rows"] == 3  # not the tampered episode


def _write_as_tau2_does(path: Path, results) -> None:
    """tau2 26.3's `run_tasks` with `save_to`: the run's header first, then each simulation appended as it ends."""
    header = results.model_copy(update={"simulations": []})
    path.write_text(header.model_dump_json(indent=2))
    for simulation_run in results.simulations:
        checkpoint = json.loads(path.read_text())
        checkpoint["simulations"].append(simulation_run.model_dump())
        path.write_text(json.dumps(checkpoint, indent=2))


def _run(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "castdata.cli", *arguments], capture_output=True, text=True, timeout=300
    )


def test_a_run_checkpoint_with_errors_imports_and_a_truncated_or_foreign_file_is_refused_naming_it(tmp_path):
    from tau2.data_model.message import AssistantMessage
    from tau2.data_model.simulation import RewardInfo, SimulationRun, TerminationReason

    retail = load_domain("tau2-retail")
    task = retail.task("test", 0)
    source, said = retail.source(task), " ".join(task.outputs)
    gold, _ = run_in_castdata(retail, task, retail.gold_calls(task), said)
    dangling = [*gold[:4], gold[4].model_copy(update={"content": None})]  # ends on a call tau2 never answered
    assert isinstance(dangling[-1], AssistantMessage) and dangling[-1].tool_calls
    crashed = simulation(source.id, dangling, 1, reward=0.0).model_copy(
        update={"termination_reason": TerminationReason.AGENT_ERROR}
    )
    skipped = SimulationRun(  # exactly what tau2's run_tasks writes for a sample that raised (skip_failed_samples)
        id=f"{source.id}_2_failed",
        task_id=source.id,
        start_time="2025-01-01T00:00:00",
        end_time="2025-01-01T00:00:00",
        duration=0.0,
        termination_reason=TerminationReason.AGENT_ERROR,
        messages=[],
        trial=2,
        seed=3,
        reward_info=RewardInfo(reward=0.0),
        skipped=True,
    )
    results = _results("tau2-retail", [simulation(source.id, gold, 0, reward=1.0), crashed, skipped], [source])
    checkpoint = tmp_path / "retail_checkpoint.json"
    _write_as_tau2_does(checkpoint, results)

    manifest = _import([checkpoint], tmp_path / "run")
    assert manifest["counts"] == {
        "imported": 3,
        "already_imported": 0,
        "not_reproduced": 0,
        "unknown_task": 0,
        "finished": 2,  # the skipped sample is an infrastructure failure
    }
    records = {r.trial: r for r in read_trajectories(tmp_path / "run")}
    assert records[0].outcome.reward == 1.0 and records[0].counts_for_pass_k
    assert records[1].outcome.termination_reason == "agent_error" and records[1].outcome.reward == 0.0
    assert records[1].counts_for_pass_k  # a failure of the agent, as tau2 counts it
    assert not any(m.get("tool_calls") for m in records[1].messages[-1:])  # the unanswered call never ran
    assert records[2].outcome.termination_reason == "infrastructure_error" and not records[2].counts_for_pass_k
    assert "skip_failed_samples" in records[2].outcome.error

    text = checkpoint.read_text()
    truncated = tmp_path / "killed_results.json"
    truncated.write_text(text[: len(text) // 2])
    foreign = tmp_path / "mock_results.json"
    foreign.write_text(text.replace('"domain_name": "retail"', '"domain_name": "mock"'))
    broken = json.loads(text)
    del broken["simulations"][1]["termination_reason"]
    shapeless = tmp_path / "shapeless_results.json"
    shapeless.write_text(json.dumps(broken))
    for path, says in [
        (truncated, "not JSON (truncated?)"),
        (foreign, "info.environment_info.domain_name: no castdata domain for 'mock'"),
        (shapeless, "not a tau2 results file: simulations.1.termination_reason: Field required"),
    ]:
        done = _run("import", "tau2", str(checkpoint), str(path), "--out", str(tmp_path / path.stem))
        assert done.returncode == 2 and f"{path}: {says}" in done.stderr, done.stderr[-2000:]
        assert not (tmp_path / path.stem).exists()  # every file is read before anything is written
