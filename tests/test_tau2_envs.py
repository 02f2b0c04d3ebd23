"""The tau2-bench adapter: loading without LLM stacks, tool classification, private databases, and reward
parity with tau2's own evaluator on every gold replay and on perturbed writes."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

import pytest
from helpers.parity import FULL, sampled
from helpers.tau2 import needs_tau2, run_in_castdata

from castdata.envs import load_domain
from castdata.envs.catalog import TAU2_DOMAINS
from castdata.envs.tau2_reference import evaluate

pytestmark = needs_tau2


def all_tasks(names=TAU2_DOMAINS):
    for name in names:
        domain = load_domain(name)
        for split in domain.splits():
            yield from domain.tasks(split)


def test_domains_splits_and_tools():
    counts = {name: {s: len(load_domain(name).tasks(s)) for s in load_domain(name).splits()} for name in TAU2_DOMAINS}
    assert counts == {
        "tau2-airline": {"train": 30, "test": 20},
        "tau2-retail": {"train": 74, "test": 40},
        "tau2-telecom": {"train": 74, "test": 40, "full": 2245},
    }
    telecom = load_domain("tau2-telecom")
    assert len(telecom.tool_schemas) == 13 and len(telecom.user_tool_schemas) == 30
    retail = load_domain("tau2-retail")
    assert len(retail.tool_schemas) == 15 and "## Cancel pending order" in retail.policy
    test_ids = {telecom.source(t).id for t in telecom.tasks("test")}
    assert not test_ids & {telecom.source(t).id for t in telecom.tasks("full")}  # no test task trains


def test_loading_a_domain_imports_no_llm_server_or_tracing_stack():
    code = (
        "import sys; import castdata; assert 'tau2' not in sys.modules\n"
        "from castdata.envs import load_domain\n"
        "for n in ('tau2-retail', 'tau2-airline', 'tau2-telecom'): load_domain(n).tasks('test')\n"
        "print(sorted(m for m in ('litellm', 'fastapi', 'redis', 'langfuse', 'openai') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    assert "No .env file found" not in out.stderr  # tau2's loguru noise is off


def test_write_tools_are_tau2s_and_proved_by_gold_replay():
    """tau2's `ToolType.WRITE` tools are the catalog's; replaying every gold solution, a read tool never changes
    the data and every write tool does at least once (user tools of the telecom phone included)."""
    changed_by: dict[tuple[str, str, str], int] = {}
    for name in TAU2_DOMAINS:
        domain = load_domain(name)
        declared = {n for n in domain.tools if domain.env.tools.tool_type(n).value == "write"}
        assert declared == set(domain.catalog.write_tools), name
    for task in all_tasks():
        domain = load_domain(task.domain)
        db = domain.new_database(task)
        before = db.changes()
        for requestor, action in domain.gold_calls(task):
            kind = domain.tool_kind(action.name) if requestor == "assistant" else domain.user_tool_kind(action.name)
            domain.execute(db, action.name, action.kwargs, requestor)
            after = db.changes()
            changed, before = after != before, after
            if kind in ("read", "transfer"):
                assert not changed, (task.domain, task.split, task.index, action.name)
            elif kind == "write":
                key = (task.domain, requestor, action.name)
                changed_by[key] = changed_by.get(key, 0) + int(changed)
    assert {key for key, count in changed_by.items() if count == 0} == set()
    for name in ("tau2-retail", "tau2-airline"):
        assert set(load_domain(name).catalog.write_tools) == {n for d, _, n in changed_by if d == name}


def test_episode_databases_are_private_and_start_in_the_tasks_state():
    domain = load_domain("tau2-retail")
    task = domain.task("test", 0)
    first = domain.replay(task.actions, task).db
    second = domain.new_database(task)
    assert first.changes() and second.changes() == {}
    order_id = next(k for (table, k) in first.changes() if table == "orders")
    assert second["orders"][order_id] != first["orders"][order_id]
    assert domain.env.tools.db.orders[order_id] == second["orders"][order_id]  # the shared base is untouched
    telecom = load_domain("tau2-telecom")
    task = telecom.task("test", 0)
    assert telecom.new_database(task).changes() != telecom.new_database().changes()  # initialization actions ran


def test_unknown_tools_and_bad_arguments_are_observations():
    domain = load_domain("tau2-retail")
    db = domain.new_database()
    assert domain.execute(db, "launch_rocket", {}).observation.startswith("Error: Tool 'launch_rocket' not found")
    assert not domain.execute(db, "get_order_details", {"order": "#W1"}).ok
    assert not domain.execute(db, "get_order_details", "not a dict").ok  # type: ignore[arg-type]
    assert not domain.execute(db, "toggle_data", {}, "user").ok  # retail's user has no tools
    assert db.changes() == {}


def test_every_shipped_task_is_scorable_offline_and_nl_assertion_ones_are_excluded():
    assert all(load_domain(t.domain).scorable_offline(t) for t in all_tasks())
    domain = load_domain("tau2-airline")
    task = domain.task("test", 0)
    source = domain.source(task)
    original = source.evaluation_criteria.reward_basis
    from tau2.data_model.tasks import RewardType

    try:
        source.evaluation_criteria.reward_basis = [*original, RewardType.NL_ASSERTION]
        score = domain.score(task, domain.replay(task.actions, task).db, [" ".join(task.outputs)])
    finally:
        source.evaluation_criteria.reward_basis = original
    assert score.excluded and "NL_ASSERTION" in score.excluded and score.reward == 0.0


def _perturbed(domain, task):
    """One perturbed solution: a data-changing agent write with a wrong argument (retail, airline), or the
    gold calls without their last user-side fix (telecom); None when the task has neither."""
    from castdata.envs.known_issues import perturbed_write

    if task.user_actions:
        calls = domain.gold_calls(task)
        last = max(
            i
            for i, (requestor, a) in enumerate(calls)
            if requestor == "user" and domain.user_tool_kind(a.name) == "write"
        )
        return calls[:last] + calls[last + 1 :]
    perturbed = perturbed_write(domain, task)
    return None if perturbed is None else [("assistant", a) for a in perturbed]


def _parity_rows(name: str, split: str, part: int, parts: int, stride: int) -> list[tuple]:
    """(task id, castdata's and tau2's reward of the gold replay, of a perturbed one or None) for every `parts`-th
    sampled task from `part` (`helpers.parity`); a perturbed solution for every `stride`-th task."""
    domain = load_domain(name)
    rows = []
    for task in sampled(domain.tasks(split))[part::parts]:
        source, said = domain.source(task), " ".join(task.outputs)
        messages, ours = run_in_castdata(domain, task, domain.gold_calls(task), said)
        theirs = evaluate(domain.short, source, messages)
        perturbed = _perturbed(domain, task) if task.index % stride == 0 else None
        bad_ours = bad_theirs = None
        if perturbed is not None:
            messages, bad_ours = run_in_castdata(domain, task, perturbed, said)
            bad_theirs = evaluate(domain.short, source, messages)
        rows.append((task.index, ours, theirs, bad_ours, bad_theirs))
    return rows


def _check_parity(jobs: list[tuple[str, str, int, int, int]], monkeypatch) -> dict[str, int]:
    """Run `_parity_rows` jobs in two worker processes (tau2's evaluator imports litellm: not in this process)."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at litellm's import
    with ProcessPoolExecutor(max_workers=2) as pool:
        futures = {job: pool.submit(_parity_rows, *job) for job in jobs}
        results = {job: future.result(timeout=1500) for job, future in futures.items()}
    checked: dict[str, int] = {}
    for (name, split, *_), rows in results.items():
        for task_id, ours, theirs, bad_ours, bad_theirs in rows:
            assert ours == theirs, (name, split, task_id, ours, theirs)
            assert bad_ours == bad_theirs, (name, split, task_id, bad_ours, bad_theirs)
            for key, counts in (
                ("tasks", True),
                ("gold scores 1", ours == 1.0),
                ("perturbed", bad_ours is not None),
                ("perturbed scores 0", bad_ours == 0.0),
            ):
                checked[f"{name} {key}"] = checked.get(f"{name} {key}", 0) + int(counts)
    return checked


@pytest.mark.timeout(1800)
def test_tau2_evaluator_agrees_on_every_gold_replay_and_on_perturbed_writes(monkeypatch):
    """tau2's `evaluate_simulation` on the tau2 record of each castdata replay (it re-executes every call in its
    own environments and fails on any observation castdata rendered differently)."""
    jobs = [(name, split, part, 2, 3) for name in TAU2_DOMAINS for split in ("train", "test") for part in (0, 1)]
    checked = _check_parity(jobs, monkeypatch)
    print(checked)
    for name in TAU2_DOMAINS:
        domain = load_domain(name)
        assert checked[f"{name} tasks"] == sum(len(sampled(domain.tasks(split))) for split in ("train", "test"))
    if FULL:
        assert checked["tau2-retail tasks"] == 114 and checked["tau2-airline tasks"] == 50
        assert checked["tau2-telecom tasks"] == 114
    assert checked["tau2-retail perturbed scores 0"] > (20 if FULL else 4)
    assert checked["tau2-telecom perturbed"] > (30 if FULL else 4)


@pytest.mark.timeout(1800)
def test_tau2_evaluator_agrees_on_the_telecom_full_split(monkeypatch):
    """The same on telecom's `full` pool (2,245 tasks beyond the test split; every 8th unless CASTDATA_FULL_PARITY=1),
    a perturbed fix on every 4th (every 3rd of the sample)."""
    checked = _check_parity([("tau2-telecom", "full", part, 2, 4 if FULL else 3) for part in (0, 1)], monkeypatch)
    print(checked)
    assert checked["tau2-telecom tasks"] == (2245 if FULL else 281)
    assert checked["tau2-telecom perturbed scores 0"] > (400 if FULL else 60)


def test_known_issues_table_of_tau2_gold_solutions():
    from castdata.envs.known_issues import gold_issues

    table = {(name, split): gold_issues(name, split) for name in TAU2_DOMAINS for split in ("train", "test")}
    failing = {key: sum(1 for i in issues if i.failing_calls) for key, issues in table.items()}
    no_write = {key: sum(1 for i in issues if not i.distinguishing_write) for key, issues in table.items()}
    assert failing == {
        ("tau2-airline", "train"): 0,
        ("tau2-airline", "test"): 0,
        ("tau2-retail", "train"): 12,
        ("tau2-retail", "test"): 6,
        ("tau2-telecom", "train"): 0,
        ("tau2-telecom", "test"): 0,
    }
    assert no_write == {
        ("tau2-airline", "train"): 14,
        ("tau2-airline", "test"): 6,
        ("tau2-retail", "train"): 7,
        ("tau2-retail", "test"): 4,
        ("tau2-telecom", "train"): 8,
        ("tau2-telecom", "test"): 12,
    }
    retail = table[("tau2-retail", "test")]
    assert any("Non-delivered order cannot be exchanged" in call for i in retail for call in i.failing_calls)
