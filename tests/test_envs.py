"""The tau-trait adapter: tool classification, reward parity with tau-trait, error observations, the clock."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

import pytest
from helpers.parity import FULL, sampled

from castdata.envs import load_domain
from castdata.envs.catalog import TAU_TRAIT_DOMAINS as DOMAINS
from castdata.envs.clock import episode_clock
from castdata.envs.known_issues import gold_issues, perturbed_write
from castdata.envs.reference import tau_trait_env, tau_trait_reward


def all_tasks():
    for name in DOMAINS:
        domain = load_domain(name)
        for split in domain.splits():
            yield from domain.tasks(split)


def test_every_domain_and_split_loads():
    counts = {name: {s: len(load_domain(name).tasks(s)) for s in load_domain(name).splits()} for name in DOMAINS}
    assert counts["retail"] == {"train": 500, "test": 120, "dev": 20}
    assert counts["airline"] == {"test": 60}
    assert counts["telehealth"]["test"] == 12
    assert counts["telecom"]["test"] == 2


def test_importing_domains_does_not_import_litellm_or_need_a_key():
    code = (
        "import sys, os; os.environ.pop('OPENAI_API_KEY', None)\n"
        "from castdata.envs import load_domain; load_domain('retail').tasks('test')\n"
        "assert 'litellm' not in sys.modules and 'OPENAI_API_KEY' not in os.environ; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_tool_classification_by_gold_replay():
    """Replaying every gold solution: a read tool never changes the data; every write tool does (at least once)."""
    changed_by: dict[tuple[str, str], int] = {}
    for task in all_tasks():
        domain = load_domain(task.domain)
        db = domain.new_database()
        with episode_clock():
            for action in task.actions:
                kind = domain.tool_kind(action.name)
                if kind not in ("read", "write"):
                    continue
                before = db.changes()
                domain.execute(db, action.name, action.kwargs)
                changed = db.changes() != before
                if kind == "read":
                    assert not changed, (task.domain, task.index, action.name)
                else:
                    changed_by[(task.domain, action.name)] = changed_by.get((task.domain, action.name), 0) + int(
                        changed
                    )
    never = {key for key, count in changed_by.items() if count == 0}
    assert never == set()
    declared = {(d, name) for d in DOMAINS for name in load_domain(d).catalog.write_tools}
    assert declared - set(changed_by) == set()  # every write tool is exercised by some gold solution


def test_telecom_writes_change_data():
    domain = load_domain("telecom")
    customer = next(iter(domain.base.tables["customers"].blobs))
    db = domain.new_database()
    before = db.changes()
    result = domain.execute(
        db, "manage_service", {"customer_id": customer, "action": "add", "service_id": "mobile_senior"}
    )
    assert result.ok, result.observation
    assert db.changes() != before
    listing = domain.new_database()
    domain.execute(listing, "manage_devices", {"customer_id": customer, "action": "list"})
    assert listing.changes() == {}


def test_castdata_gold_replay_scores_one_and_a_perturbed_write_zero():
    undistinguishable = 0
    for task in all_tasks():
        domain = load_domain(task.domain)
        assert domain.score(task, domain.replay(task.actions).db, [" ".join(task.outputs)]).reward == 1.0, task
        perturbed = perturbed_write(domain, task)
        if perturbed is None:
            undistinguishable += 1
            continue
        assert domain.score(task, domain.replay(perturbed).db, [" ".join(task.outputs)]).reward == 0.0, task
    assert undistinguishable < 120  # tasks without a distinguishing write are listed by gold_issues


def _tau_trait_rewards(
    domain_name: str, split: str, sample_perturbed: int, part: int = 0, parts: int = 1
) -> list[tuple[int, float, float | None]]:
    """(task id, tau-trait's reward of the gold replay, of a perturbed one) for every `parts`-th sampled task from
    `part` (`helpers.parity`)."""
    domain = load_domain(domain_name)
    env = tau_trait_env(domain_name, split)
    rows = []
    for task in sampled(domain.tasks(split))[part::parts]:
        said = [" ".join(task.outputs)]
        gold = tau_trait_reward(
            env, task.index, [(a.name, a.kwargs) for a in task.actions if a.name != "respond"], said
        )
        perturbed = perturbed_write(domain, task) if task.index % sample_perturbed == 0 else None
        bad = (
            None
            if perturbed is None
            else tau_trait_reward(env, task.index, [(a.name, a.kwargs) for a in perturbed], said)
        )
        rows.append((task.index, gold, bad))
    return rows


@pytest.mark.timeout(1800)  # the full sweep is ~500 CPU seconds of tau-trait: past the default 600 s
def test_tau_trait_agrees_on_every_gold_replay_and_on_perturbed_writes():
    """tau-trait's own Env.step + calculate_reward, in two worker processes (it costs ~0.5 s a retail task): each
    split in two halves, largest first, so that neither process waits on the other (retail train alone is ~half).
    Every task of the small splits and every 8th of the large ones; every task with CASTDATA_FULL_PARITY=1."""
    splits = [(name, split) for name in DOMAINS for split in load_domain(name).splits()]
    splits.sort(key=lambda job: -len(load_domain(job[0]).tasks(job[1])))
    jobs = [(name, split, 8, part, 2) for name, split in splits for part in (0, 1)]
    with ProcessPoolExecutor(max_workers=2) as pool:
        futures = {job: pool.submit(_tau_trait_rewards, *job) for job in jobs}
        results = {job: future.result(timeout=900) for job, future in futures.items()}
    known = {
        (i.domain, i.split, i.task_id)
        for name in DOMAINS
        for s in load_domain(name).splits()
        for i in gold_issues(name, s)
        if i.tau_trait_scores_zero
    }
    perturbed_checked = 0
    replayed = {(name, split): 0 for name, split in splits}
    for (name, split, *_), rows in results.items():
        replayed[name, split] += len(rows)
        for task_id, gold, bad in rows:
            if (name, split, task_id) not in known:
                assert gold == 1.0, (name, split, task_id)
            if bad is not None:
                perturbed_checked += 1
                assert bad == 0.0, (name, split, task_id)
    assert perturbed_checked > (50 if FULL else 12)
    assert replayed == {(n, s): len(sampled(load_domain(n).tasks(s))) for n, s in splits}
    assert replayed["retail", "train"] == (500 if FULL else 63)


def test_unknown_tools_and_bad_arguments_are_observations():
    domain = load_domain("retail")
    db = domain.new_database()
    assert domain.execute(db, "launch_rocket", {}).observation.startswith("Error: unknown tool")
    bad = domain.execute(db, "get_order_details", {"order": "#W1"})
    assert not bad.ok and "bad arguments" in bad.observation
    assert not domain.execute(db, "get_order_details", "not a dict").ok  # type: ignore[arg-type]
    assert domain.execute(db, "get_order_details", {"order_id": "#W0000000"}).observation.startswith("Error")
    assert db.changes() == {}


def test_a_replay_returns_each_result_and_when_tracked_what_each_write_changed():
    domain = load_domain("retail")
    task = domain.task("test", 0)
    gold = domain.tool_actions(task.actions)
    replay = domain.replay(gold, task, track=True)
    assert [call.action for call in replay.calls] == gold and all(call.result.ok for call in replay.calls)
    merged: dict = {}
    for call in replay.calls:
        if domain.tool_kind(call.action.name) != "write":
            assert call.changed == call.values == {}, call.action
        merged.update(call.changed)
        assert set(call.values) == set(call.changed)
    assert merged == replay.db.changes() != {}  # every change is some write's
    untracked = domain.replay(gold, task)
    assert untracked.db.changes() == replay.db.changes() and all(call.changed == {} for call in untracked.calls)
    assert domain.reaches_gold(task.actions, task) and not domain.reaches_gold(perturbed_write(domain, task), task)


def test_episode_databases_are_private():
    domain = load_domain("retail")
    task = domain.task("test", 0)
    first = domain.replay(task.actions).db
    second = domain.new_database()
    assert first.changes() and second.changes() == {}
    order_id = next(k for (table, k) in first.changes() if table == "orders")
    assert second["orders"][order_id] != first["orders"][order_id]


def test_telehealth_cancellation_uses_the_episode_clock():
    import datetime

    domain = load_domain("telehealth")
    task = next(t for t in domain.tasks("test") if any(a.name == "cancel_appointment" for a in t.actions))
    call = next(a for a in task.actions if a.name == "cancel_appointment")
    db = domain.new_database()
    with episode_clock(datetime.datetime(2031, 2, 3)):
        result = domain.execute(db, call.name, call.kwargs)
    assert result.ok and "2031-02-03" in str(db["appointments"][call.kwargs["appointment_id"]])
    replayed = domain.replay(task.actions).db  # default clock: equals the cached gold state
    assert domain.score(task, replayed, [" ".join(task.outputs)]).db_match


def test_known_issues_table_lists_gold_solutions_that_call_failing_tools():
    retail = gold_issues("retail", "test")
    airline = gold_issues("airline", "test")
    assert sum(1 for i in retail if i.failing_calls) == 23 and sum(1 for i in airline if i.failing_calls) == 8
    assert all(i.failing_calls or not i.distinguishing_write for i in retail + airline)
    assert any("update_reservation_baggage" in call for issue in airline for call in issue.failing_calls)
    assert not any(issue.tau_trait_scores_zero for issue in retail + airline)


@pytest.mark.parametrize("name", DOMAINS)
def test_unknown_split_names_allowed(name):
    from castdata.envs import UnknownName

    with pytest.raises(UnknownName, match="allowed:"):
        load_domain(name).tasks("nope")


def test_a_tasks_user_can_be_looked_up_by_the_details_on_its_record():
    """`Domain.auth_calls`: each auth tool with the arguments the user's record gives it (retail's email and its
    name and zip code); airline authenticates nobody."""
    retail = load_domain("retail")
    calls = {call.name: call.kwargs for call in retail.auth_calls(retail.task("test", 102))}
    assert calls == {
        "find_user_id_by_email": {"email": "noah.ito4296@example.com"},
        "find_user_id_by_name_zip": {"first_name": "Noah", "last_name": "Ito", "zip": "98187"},
    }
    for name, kwargs in calls.items():  # each finds the task's user
        with episode_clock():
            assert retail.execute(retail.new_database(), name, kwargs).observation == "noah_ito_3850"
    airline = load_domain("airline")
    assert airline.auth_calls(airline.task("test", 0)) == []
