"""Collection: the scripted noisy oracle, injected mistakes, determinism, resume after SIGKILL, bad input."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from castdata.config import CollectConfig
from castdata.envs import load_domain
from castdata.messages import agent_actions
from castdata.models.base import EpisodeContext
from castdata.models.scripted import MISTAKE_KINDS, ScriptedUser
from castdata.rollout.collect import collect
from castdata.rundir import read_trajectories, repair

CASTDATA = [sys.executable, "-m", "castdata.cli"]


def run(tmp_path: Path, **overrides) -> list:
    config = CollectConfig(**{"trials": 1, "out": str(tmp_path / "run"), **overrides})
    collect(config, Path(config.out), show_progress=False)
    return read_trajectories(Path(config.out))


@pytest.mark.parametrize(
    "domain,split",
    [
        ("retail", "train"),
        ("retail", "test"),
        ("retail", "dev"),
        ("airline", "test"),
        ("telecom", "test"),
        ("telecom", "train"),
        ("telehealth", "test"),
        ("telehealth", "train"),
        ("telehealth", "dev"),
    ],
)
def test_oracle_without_mistakes_solves_every_task(tmp_path, domain, split):
    records = run(tmp_path, domains=[domain], split=split, max_steps=40)  # the careful lookups take more turns
    assert len(records) == len(load_domain(domain).tasks(split))
    failed = [(r.task_id, r.outcome) for r in records if r.outcome.reward != 1.0]
    assert failed == []
    assert not any(r.injected_mistakes for r in records)
    ended = {
        r.task_id: r.outcome.termination_reason
        for r in records
        if r.outcome.termination_reason not in ("user_stop", "transfer")
    }
    assert set(ended.values()) <= {"too_many_errors"}  # gold solutions with many failing calls (known issues)


@pytest.mark.parametrize("kind", ["wrong_argument", "wrong_tool", "premature_end", "missing_output"])
def test_outcome_breaking_mistakes_fail_the_episode(tmp_path, kind):
    records = run(
        tmp_path, domains=["retail"], split="test", tasks="0-59", agent={"options": {"mistakes": {kind: 1.0}}}
    )
    breaking = [r for r in records if any(m.kind == kind and m.outcome_breaking for m in r.injected_mistakes)]
    assert len(breaking) >= 10
    for record in records:  # recorded as outcome-breaking exactly when the episode fails
        assert (record in breaking) == (record.outcome.reward == 0.0), (record.id, record.injected_mistakes)


def test_injected_mistakes_match_what_happened(tmp_path):
    mistakes = {kind: 0.3 for kind in MISTAKE_KINDS}
    records = run(
        tmp_path, domains=["retail", "telehealth"], split="test", trials=2, agent={"options": {"mistakes": mistakes}}
    )
    seen = set()
    for record in records:
        domain = load_domain(record.domain)
        auth_steps = [i for i, a in agent_actions(record.messages) if a.name in domain.catalog.auth_tools]
        for mistake in record.injected_mistakes:
            seen.add(mistake.kind)
            message, meta = record.messages[mistake.step], record.meta[mistake.step]
            assert message["role"] == "assistant"
            call = message.get("tool_calls", [{}])[0].get("function")
            if mistake.kind == "two_tool_calls":
                assert meta.violation == "multiple_tool_calls" and len(meta.raw) == 2
            elif mistake.kind == "before_auth":
                assert call and auth_steps and mistake.step < auth_steps[0]
            elif mistake.kind == "no_confirmation":
                assert domain.tool_kind(call["name"]) == "write"
                assert "confirm" not in (record.messages[mistake.step - 2].get("content") or "")
            elif mistake.kind == "wrong_argument":
                key, change = mistake.detail.split(": ", 1)
                old, new = change.split(" -> ")
                assert old != new and repr(_at(call["arguments"], key)) == new
            elif mistake.kind == "wrong_tool":
                assert domain.tool_kind(call["name"]) == "write"
                assert mistake.detail.startswith(f"called {call['name']} instead of ") and not mistake.detail.endswith(
                    call["name"]
                )
            elif mistake.kind in ("premature_end", "missing_output"):
                assert "content" in message and not message.get("tool_calls")
                assert record.messages[mistake.step + 1]["content"].endswith("###STOP###")
            elif mistake.kind == "misread_observation":
                right, wrong = mistake.detail.split(": ", 1)[1].split(" -> ")
                assert wrong in message["content"] and right not in message["content"]
                assert any(
                    right in (m["content"] or "") for m in record.messages[: mistake.step] if m["role"] == "tool"
                )
            elif mistake.kind == "wrong_refusal":
                assert message["content"].startswith("I'm sorry, but I can't")
            elif mistake.kind == "partial_plan":
                key, left_out = mistake.detail.split(": left out ")
                assert domain.tool_kind(call["name"]) == "write"
                assert repr(left_out) not in json.dumps(call["arguments"][key])
            elif mistake.kind == "wrong_order":
                blocked = mistake.detail.split(" before ")[1]
                later = [m for m in record.messages[mistake.step :] if m["role"] == "tool" and m["name"] == blocked]
                assert domain.tool_kind(call["name"]) == "write" and later and later[0]["content"].startswith("Error")
            elif mistake.kind == "guessed_id":
                token = mistake.detail.split(" without ")[0]
                earlier = [
                    m["content"] or "" for m in record.messages[1 : mistake.step] if m["role"] in ("user", "tool")
                ]
                assert token in json.dumps(message) and not any(token in text for text in earlier)
            elif mistake.kind == "malformed_call":
                assert meta.violation == "malformed_tool_call" and record.messages[mistake.step + 1][
                    "content"
                ].startswith("Error")
                with pytest.raises(ValueError):
                    json.loads(meta.raw["arguments"])
                retried = record.messages[mistake.step + 2]["tool_calls"][0]["function"]
                assert retried["name"] == call["name"] and retried["arguments"] == json.loads(
                    meta.raw["arguments"] + "}"
                )
            elif mistake.kind == "empty_reply":
                assert message["content"] == "" and meta.violation == "empty_reply"
                assert record.messages[mistake.step + 1]["role"] == "user"
            elif mistake.kind == "needless_transfer":
                assert domain.tool_kind(call["name"]) == "transfer" and record.outcome.termination_reason == "transfer"
                assert not any(domain.tool_kind(a.name) == "transfer" for a in record.privileged.gold_actions)
            elif mistake.kind == "repeated_lookup":
                before = record.messages[mistake.step - 2]
                assert before["tool_calls"][0]["function"] == call and domain.tool_kind(call["name"]) == "read"
                assert not record.messages[mistake.step - 1]["content"].startswith("Error")
    assert seen == set(MISTAKE_KINDS)


def test_user_deviation_asks_for_more_and_the_oracle_serves_it(tmp_path):
    user = {"options": {"mistakes": {"user_deviation": 1.0}}}
    records = run(tmp_path, domains=["retail"], split="train", tasks="0-39", user=user)
    deviated = [r for r in records if r.injected_mistakes]
    assert len(deviated) >= 10
    for record in deviated:
        (mistake,) = record.injected_mistakes
        message = record.messages[mistake.step]
        assert mistake.kind == "user_deviation" and message["role"] == "user" and message["content"] == mistake.detail
        order = mistake.detail.rsplit(" ", 1)[1].rstrip(".")
        assert order not in record.privileged.instruction
        cancels = [
            i
            for i, a in agent_actions(record.messages)
            if a.name == "cancel_pending_order" and a.kwargs["order_id"] == order
        ]
        assert cancels and cancels[0] > mistake.step
        assert mistake.outcome_breaking and record.outcome.reward == 0.0
    assert all(r.outcome.reward == 1.0 for r in records if not r.injected_mistakes)


def _at(arguments: dict, key: str):
    """`arguments["k"]` or, for a detail like `k[1]`, `arguments["k"][1]`."""
    if key.endswith("]"):
        name, index = key[:-1].split("[")
        return arguments[name][int(index)]
    return arguments[key]


def test_the_scripted_user_gives_up_after_three_turns_it_does_not_understand_in_a_row():
    domain = load_domain("retail")
    user = ScriptedUser(EpisodeContext(domain, domain.task("test", 0), seed=0))
    asyncio.run(user.reply(None))
    replies = [asyncio.run(user.reply("Blorp?")).content for _ in range(2)]
    assert asyncio.run(user.reply("What is your zip code?")).content != replies[0]  # understood: patience restored
    replies += [asyncio.run(user.reply("Blorp?")).content for _ in range(3)]
    assert ["###STOP###" in reply for reply in replies] == [False, False, False, False, True]


def test_same_seed_same_episodes(tmp_path):
    mistakes = {kind: 0.2 for kind in MISTAKE_KINDS}
    first = run(tmp_path / "a", domains=["retail"], tasks="0-9", trials=2, agent={"options": {"mistakes": mistakes}})
    second = run(
        tmp_path / "b",
        domains=["retail"],
        tasks="0-9",
        trials=2,
        agent={"options": {"mistakes": mistakes}},
        concurrency=3,
    )

    def strip(r):
        return r.model_dump(mode="json", exclude={"started_at": True, "ended_at": True, "meta": {"__all__": {"t"}}})

    assert [strip(r) for r in sorted(first, key=lambda r: r.id)] == [
        strip(r) for r in sorted(second, key=lambda r: r.id)
    ]
    other = run(
        tmp_path / "c", domains=["retail"], tasks="0-9", trials=2, seed=1, agent={"options": {"mistakes": mistakes}}
    )
    assert [r.messages for r in sorted(other, key=lambda r: r.id)] != [
        r.messages for r in sorted(first, key=lambda r: r.id)
    ]


def test_several_splits_with_a_selection_per_domain_and_split(tmp_path):
    tasks = {"retail/train": "0-2", "retail/test": [5], "test": "0-1"}
    records = run(tmp_path, domains=["retail", "telehealth"], split=["train", "test"], tasks=tasks)
    assert sorted((r.domain, r.split, r.task_id) for r in records) == [
        ("retail", "test", 5),
        ("retail", "train", 0),
        ("retail", "train", 1),
        ("retail", "train", 2),
        ("telehealth", "test", 0),
        ("telehealth", "test", 1),
    ]


def test_record_shape_follows_the_openai_chat_format(tmp_path):
    record = run(tmp_path, domains=["retail"], tasks=[0])[0]
    assert record.messages[0] == {"role": "system", "content": load_domain("retail").policy}
    assert len(record.meta) == len(record.messages)
    for i, message in enumerate(record.messages):
        if message.get("tool_calls"):
            call = message["tool_calls"][0]
            assert call["type"] == "function" and isinstance(call["function"]["arguments"], dict)
            reply = record.messages[i + 1]
            assert (
                reply["role"] == "tool"
                and reply["tool_call_id"] == call["id"]
                and reply["name"] == call["function"]["name"]
            )
    line = json.loads(record.to_json())
    assert line["schema"] == "castdata.trajectory/1"
    assert set(line["privileged"]) == {
        "user_id",
        "instruction",
        "gold_actions",
        "required_outputs",
        "user_gold_actions",
    }
    assert record.privileged.instruction not in json.dumps(record.messages)


def write_config(path: Path, **values) -> Path:
    base = {
        "domains": ["retail"],
        "split": "train",
        "tasks": "all",
        "trials": 2,
        "concurrency": 8,
        "out": str(path.parent / "run"),
    }
    path.write_text(yaml.safe_dump({**base, **values}))
    return path


def test_resume_after_sigkill_gives_every_episode_once(tmp_path):
    config = write_config(tmp_path / "c.yaml", trials=3)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [*CASTDATA, "collect", str(config), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    target = out / "trajectories" / "retail.train.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not target.exists() or target.stat().st_size < 200_000):
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    lines_before = target.read_bytes().count(b"\n")
    assert 0 < lines_before < 1500, "the kill must land mid-run"
    rerun = subprocess.run([*CASTDATA, "collect", str(config), "--quiet"], capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    raw = target.read_text().splitlines()
    keys = [(r["task_id"], r["trial"]) for r in map(json.loads, raw)]  # every line parses: no torn record
    assert len(keys) == len(set(keys)) == 1500
    assert set(keys) == {(t, k) for t in range(500) for k in range(3)}


def test_repair_cuts_a_torn_last_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3, "b"')
    assert repair(path) == len(b'{"a": 3, "b"')
    assert path.read_bytes() == b'{"a": 1}\n{"a": 2}\n'
    assert repair(path) == 0


def test_changed_config_is_refused_unless_forced(tmp_path):
    config = write_config(tmp_path / "c.yaml", tasks="0-1", trials=1)
    assert (
        subprocess.run([*CASTDATA, "collect", str(config), "--quiet"], capture_output=True, timeout=120).returncode == 0
    )
    changed = write_config(tmp_path / "c.yaml", tasks="0-1", trials=2)
    refused = subprocess.run(
        [*CASTDATA, "collect", str(changed), "--quiet"], capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2 and "different config" in refused.stderr and "--force" in refused.stderr
    forced = subprocess.run(
        [*CASTDATA, "collect", str(changed), "--quiet", "--force"], capture_output=True, text=True, timeout=120
    )
    assert forced.returncode == 0
    assert len(read_trajectories(tmp_path / "run")) == 4


@pytest.mark.parametrize(
    "values,expected",
    [
        ({"domains": ["shop"]}, "domains: unknown domain 'shop'; allowed: retail, airline, telecom, telehealth"),
        ({"split": "holdout"}, "split: unknown split 'holdout' for domain 'retail'; allowed: train, test, dev"),
        ({"trials": 0}, "trials: Input should be greater than or equal to 1"),
        ({"trails": 3}, "trails: unknown key; allowed: domains, split, tasks, trials"),
        ({"tasks": [3, 900]}, "tasks: task id 900 out of range for retail/train; allowed: 0..499"),
        (
            {"tasks": {"retail/train": "0-2", "test": "7-200"}, "split": ["train", "test"]},
            "tasks: task id 120 out of range for retail/test; allowed: 0..119",
        ),
        (
            {"agent": {"backend": "scripted", "temprature": 0.5}},
            "agent.temprature: unknown key; allowed: backend, model",
        ),
        (
            {"agent": {"options": {"mistakes": {"guesed_id": 0.1}}}},
            "agent.options.mistakes.guesed_id: unknown mistake kind; allowed: wrong_argument,",
        ),
        (
            {"user": {"options": {"mistakes": {"wrong_order": 0.1}}}},
            "user.options.mistakes.wrong_order: unknown mistake kind; allowed: user_deviation",
        ),
        ({"user": {"options": {"deviation": 0.1}}}, "user.options.deviation: unknown option; allowed: mistakes"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, values, expected):
    config = write_config(tmp_path / "c.yaml", **values)
    result = subprocess.run([*CASTDATA, "collect", str(config)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr
    assert not (tmp_path / "run").exists()
