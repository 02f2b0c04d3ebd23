"""Monte-Carlo labels: episodes continued from a recorded prefix (scripted oracle and LLM backends), success rates
before and after each action, and their agreement with the hindsight labels."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from golden.cases import CASES
from helpers.openai_server import ChatServer

from castdata.config import CollectConfig
from castdata.envs import load_domain
from castdata.label.montecarlo import MCConfig
from castdata.label.run import LabelConfig, label_run
from castdata.label.schema import Label
from castdata.models import open_backend
from castdata.models.spec import ModelSpec
from castdata.models.user_llm import AGENT_GREETING
from castdata.rollout.collect import collect
from castdata.rollout.episode import run_episode

WRONG_CANCEL = 14  # the write that cancels another order than the one proposed: the first critical error


def read_labels(run: Path) -> list[Label]:
    return [
        Label.model_validate_json(line)
        for path in sorted((run / "labels").glob("*.jsonl"))
        if path.name != "policy_clauses.jsonl"
        for line in path.read_text().splitlines()
    ]


@pytest.mark.parametrize("name,tasks", [("retail", range(12)), ("airline", range(4)), ("telehealth", range(4))])
def test_the_resumed_oracle_continues_every_prefix_as_the_episode_went(name, tasks):
    domain = load_domain(name)
    agent_spec, user_spec = ModelSpec(), ModelSpec(model="scripted-user")
    agent, user = open_backend(agent_spec), open_backend(user_spec)

    async def main() -> int:
        cuts = 0
        for index in tasks:
            task = domain.task("test", index)
            episode = await run_episode(domain, task, 0, 1, agent, user, agent_spec, user_spec, max_steps=60)
            for cut in range(2, len(episode.messages)):
                resumed = await run_episode(
                    domain, task, 0, 2, agent, user, agent_spec, user_spec, max_steps=60, prefix=episode.messages[:cut]
                )
                assert resumed.messages == episode.messages, (index, cut)
                assert resumed.outcome == episode.outcome
                cuts += 1
        return cuts

    assert asyncio.run(main()) > 5 * len(tasks)


def gold_playing_responder(body: dict[str, Any]) -> dict[str, Any]:
    """The agent (requests with tools) calls the gold tool calls not executed yet, in order, then closes; the
    user (requests without) agrees, and stops when offered more help."""
    if "tools" not in body:
        return {
            "content": "###STOP###" if "anything else" in body["messages"][-1]["content"].lower() else "Yes, please."
        }
    remaining = list(load_domain("retail").task("test", 66).actions)
    for message in body["messages"]:
        for call in message.get("tool_calls") or []:
            executed = (call["function"]["name"], json.loads(call["function"]["arguments"]))
            remaining = _without(remaining, executed)
    if not remaining:
        return {"content": "Your request is done. Is there anything else?"}
    return {
        "content": None,
        "tool_calls": [{"function": {"name": remaining[0].name, "arguments": remaining[0].kwargs}}],
    }


def _without(actions: list, executed: tuple[str, dict]) -> list:
    for i, action in enumerate(actions):
        if (action.name, action.kwargs) == executed:
            return actions[:i] + actions[i + 1 :]
    return actions


@pytest.fixture(scope="module")
def server():
    with ChatServer(gold_playing_responder) as server:
        yield server


@pytest.fixture
def llm_run(tmp_path, server) -> Path:
    """The golden wrong-order cancel, as if an LLM agent and an LLM user had played it on the test server."""
    trajectory, _ = CASES["retail_write_deviates_to_the_wrong_order"]()
    spec = ModelSpec(backend="openai", model="m", base_url=server.base_url, max_retries=0)
    trajectory.agent, trajectory.user = (
        spec.model_copy(update={"model": "agent"}),
        spec.model_copy(update={"model": "user"}),
    )
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    (run / "trajectories" / "retail.test.jsonl").write_text(trajectory.to_json() + "\n")
    return run


def test_mc_with_llm_models_finds_the_wrong_write_and_agrees_with_hindsight(llm_run, server):
    before = server.stats.total
    stats = label_run(llm_run, LabelConfig(mc=MCConfig(rollouts=2)))
    labels = read_labels(llm_run)
    judged = [label for label in labels if label.label_source.mc_success_before is not None]
    assert [label.step for label in judged] == [label.step for label in labels if not label.after_first_error]
    for label in judged:
        source = label.label_source
        drop = (1.0, 0.0) if label.step == WRONG_CANCEL else (1.0, 1.0)
        assert (source.mc_success_before, source.mc_success_after) == drop and source.agreement, label.step
        assert label.first_critical_error == (label.step == WRONG_CANCEL)
    prefixes = {n for label in judged for n in (label.step, label.step + (2 if label.action.name != "respond" else 1))}
    assert stats["mc"] == {"labels": len(judged), "agreement": 1.0, "rollouts": 2 * len(prefixes)}

    requests = server.stats.requests[before:]
    assert {r["model"] for r in requests} == {"agent", "user"}
    user = next(r for r in requests if r["model"] == "user" and len(r["messages"]) > 3)
    assert user["messages"][1:3] == [
        {"role": "user", "content": AGENT_GREETING},
        {"role": "assistant", "content": "Hi, please cancel my order with the luggage set, I no longer need it."},
    ]


@pytest.mark.parametrize("mc,steps", [({"actions": "writes"}, [WRONG_CANCEL]), ({"max_labels": 2}, [2, 4])])
def test_mc_keeps_to_the_selected_actions(llm_run, mc, steps):
    label_run(llm_run, LabelConfig(mc=MCConfig(rollouts=1, **mc)))
    assert [label.step for label in read_labels(llm_run) if label.label_source.mc_success_before is not None] == steps


def test_mc_with_the_scripted_oracle_sees_doomed_continuations(tmp_path):
    """Ending the conversation early dooms every continuation; a write without confirmation (minor) does not."""
    out = tmp_path / "run"
    mistakes = {"premature_end": 0.25, "no_confirmation": 0.25, "wrong_tool": 0.1}
    config = CollectConfig(
        domains=["retail"],
        split="test",
        tasks="0-9",
        trials=2,
        seed=2,
        agent={"options": {"mistakes": mistakes}},
        out=str(out),
    )
    collect(config, out, show_progress=False)
    stats = label_run(out, LabelConfig(mc=MCConfig(rollouts=3)))
    labels = read_labels(out)
    judged = [label for label in labels if label.label_source.mc_success_before is not None]
    assert len(judged) == sum(not label.after_first_error for label in labels) == stats["mc"]["labels"]
    firsts = [label.label_source for label in judged if label.first_critical_error]
    ended = [
        label.label_source
        for label in judged
        if label.first_critical_error and "premature_termination" in label.categories
    ]
    assert len(firsts) >= 5 and ended and all(source.mc_success_after == 0.0 for source in ended)
    assert sum(s.mc_success_before - s.mc_success_after for s in firsts) / len(firsts) > 0.3
    unconfirmed = [label.label_source for label in judged if label.categories[:1] == ["missing_confirmation"]]
    assert unconfirmed and all(source.agreement for source in unconfirmed)
    assert stats["mc"]["agreement"] >= 0.8
    assert Counter(label.label_source.agreement for label in judged)[True] == round(
        stats["mc"]["agreement"] * len(judged)
    )
