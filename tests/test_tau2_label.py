"""Labels on tau2-telecom (dual control) episodes replay the state the episode saw: the task's initialization
actions, then the agent's and the user's own tool calls in the order they were made."""

from __future__ import annotations

from helpers.tau2 import dual_control_record, needs_tau2

from castdata.envs import load_domain
from castdata.envs.reproduce import replay_record
from castdata.label.hindsight import judge
from castdata.records import Action

pytestmark = needs_tau2


def _wrong_tool_episode():
    """Test task 3 (roaming disabled by its setup, data used up): the gold solution, but `disable_roaming` where
    gold enables roaming; in the task's initial state that call changes nothing ("already disabled")."""
    domain = load_domain("tau2-telecom")
    task = domain.task("test", 3)
    calls = [("assistant", domain.auth_action(task))] + [
        (who, Action(name="disable_roaming", kwargs=a.kwargs) if a.name == "enable_roaming" else a)
        for who, a in domain.gold_calls(task)
    ]
    return domain, dual_control_record(domain, task, calls)


def test_the_replay_starts_in_the_tasks_state_and_runs_the_users_calls_where_they_happened():
    domain, record = _wrong_tool_episode()
    wrong = next(i for i, m in enumerate(record.messages) if m.get("name") == "disable_roaming")
    assert record.messages[wrong]["content"] == "Roaming was already disabled"  # the task's setup disabled it
    reproduction = replay_record(domain, record)
    assert reproduction.reproduced, reproduction.first_mismatch
    task = domain.task(record.split, record.task_id)
    assert [(c.requestor, c.name) for c in reproduction.calls] == [("assistant", "get_customer_by_phone")] + [
        (who, a.name.replace("enable_roaming", "disable_roaming")) for who, a in domain.gold_calls(task)
    ]
    before = replay_record(domain, record, wrong - 1)  # the state before the wrong call: the user's calls so far ran
    assert [c.name for c in before.calls if c.requestor == "user"] == [
        c.name for c in record.user_tool_calls if c.step <= wrong - 1
    ]
    *first, last = record.user_tool_calls  # reseating the SIM first, in airplane mode, shows no signal
    early = record.model_copy(update={"user_tool_calls": [last.model_copy(update={"step": 1}), *first]})
    assert replay_record(domain, early).first_mismatch.name == last.name


def test_a_telecom_episodes_labels_charge_the_agents_wrong_act_and_nothing_the_user_did():
    domain, record = _wrong_tool_episode()
    assert record.outcome.reward == 0.0
    judgement = judge(record, domain)
    assert judgement.consistent  # every observation and the outcome reproduced
    proposal = next(i for i, m in enumerate(record.messages) if "disable roaming" in (m.get("content") or ""))
    assert judgement.first_error == proposal  # where the wrong act was said (then confirmed and made)
    invalid = [j for j in judgement.judgements if j.verdict == "invalid"]
    assert [(j.step, j.severity) for j in invalid] == [(proposal, "critical")]
    (finding,) = invalid[0].findings
    assert finding.category == "wrong_tool" and "enable roaming" in finding.expected.kwargs["content"]
    assert all(j.verdict == "valid" for j in judgement.judgements if j.step != proposal)
    unseen = judge(record.model_copy(update={"user_tool_calls": []}), domain)  # the user's phone work left out:
    ending = judgement.judgements[-1].step  # it would be charged to the agent's ending
    assert [f.signal for j in unseen.judgements if j.step == ending for f in j.findings] == [
        "replay.gold_write_missing"
    ]


def test_a_continued_telecom_prefix_reruns_the_users_calls_so_monte_carlo_starts_where_the_episode_was():
    import asyncio

    from castdata.models import open_backend
    from castdata.models.spec import ModelSpec
    from castdata.rollout.episode import run_episode

    domain = load_domain("tau2-telecom")
    task = domain.task("test", 3)
    agent, user = ModelSpec(), ModelSpec(model="scripted-user")

    async def episode(**prefix):
        return await run_episode(domain, task, 0, 7, open_backend(agent), open_backend(user), agent, user, **prefix)

    whole = asyncio.run(episode())
    assert whole.outcome.reward == 1.0 and whole.user_tool_calls
    cut = next(c.step for c in whole.user_tool_calls) + 1  # after the user's first calls
    prefix = whole.messages[:cut]
    continued = asyncio.run(episode(prefix=prefix, prefix_user_calls=whole.user_tool_calls))
    assert continued.outcome.reward == 1.0
    assert [(c.step, c.name, c.content) for c in continued.user_tool_calls] == [
        (c.step, c.name, c.content) for c in whole.user_tool_calls
    ]
    assert asyncio.run(episode(prefix=prefix)).outcome.reward == 0.0  # without them the phone was never fixed
