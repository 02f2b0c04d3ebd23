"""The model critic: it sees exactly what a `critic_sft` row shows, and guards a policy over an OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.build import labelled_run
from helpers.critics import confirmed_writes_only, critique
from helpers.openai_server import ChatServer

from castdata.builders import critic as critic_rows
from castdata.builders.render import context_block, emitted
from castdata.builders.source import iter_episodes, read_clauses
from castdata.critic import open_critic
from castdata.critic.eval_policy import EvalConfig, run_eval
from castdata.critic.model import ModelCritic, critique_schema, parse_critique
from castdata.envs import load_domain
from castdata.label.schema import CATEGORIES
from castdata.models.base import EpisodeContext
from castdata.models.spec import ModelSpec
from castdata.rundir import read_trajectories


def test_the_critic_prompt_is_the_critic_sft_rows_prompt(tmp_path: Path) -> None:
    run = labelled_run(tmp_path / "run", split="test", tasks="0-2", trials=1)
    clauses = read_clauses(run)
    model = ModelCritic(backend=None)
    compared = 0
    for episode in iter_episodes(run):
        t = episode.trajectory
        domain = load_domain(t.domain)
        ctx = EpisodeContext(domain=domain, task=domain.task(t.split, t.task_id), seed=t.seed)
        system = critic_rows.system_prompt(context_block(clauses[t.domain], t.tools))
        for row in critic_rows.critic_rows(episode, system):
            assert model.prompt(ctx, t.messages[: row["step"]], emitted(t, row["step"])) == row["messages"][:2]
            compared += 1
    assert compared >= 30


def test_critiques_parse_and_the_schema_lists_the_taxonomy() -> None:
    text = json.dumps(critique("invalid", "Wrong order id."))
    parsed = parse_critique(f"<think>\n</think>\n{text}")
    assert (
        parsed.verdict == "invalid"
        and parsed.structured.rationale.assessment == "Wrong order id."
        and parsed.text == text
    )
    assert parse_critique("I think this is fine.").verdict is None
    assert parse_critique(json.dumps({**critique("valid"), "verdict": "maybe"})).verdict is None
    schema = critique_schema()
    assert schema["properties"]["categories"]["items"]["enum"] == list(CATEGORIES)
    assert list(schema["properties"])[-1] == "verdict"


@pytest.mark.timeout(120)
def test_a_critic_model_served_over_http_guards_the_policy(tmp_path: Path) -> None:
    mistakes = {"wrong_argument": 0.5, "no_confirmation": 0.3}
    with ChatServer(confirmed_writes_only) as server:
        critic = {"backend": "openai", "model": "critic", "base_url": server.base_url, "max_retries": 0}
        config = EvalConfig(
            domains=["retail"], tasks="0-9", trials=2, agent={"options": {"mistakes": mistakes}}, critic=critic
        )
        comparison = run_eval(config, tmp_path, show_progress=False)
        assert server.stats.outcomes["ok"] > 0
    records = read_trajectories(tmp_path / "with_critic")
    intercepted = [m for r in records for m in r.injected_mistakes if m.intercepted]

    assert {m.kind for m in intercepted} == {"wrong_argument", "no_confirmation"}
    assert all(r.outcome.reward == 1.0 for r in records)
    assert all(row["with_critic"] == 1.0 > row["without_critic"] for row in comparison["pass_k"])
    first = next(i for r in records for i in r.interceptions)
    assert json.loads(first.critique)["rationale"]["assessment"] == "These are not the details the user confirmed."


def test_a_critic_spec_renders_without_thinking_by_default() -> None:
    with ChatServer(confirmed_writes_only) as server:
        spec = ModelSpec(backend="openai", model="critic", base_url=server.base_url)
        assert open_critic(spec).backend.spec.chat_template_kwargs == critic_rows.CHAT_TEMPLATE_KWARGS
        kept = {"enable_thinking": True}
        assert (
            open_critic(spec.model_copy(update={"chat_template_kwargs": kept})).backend.spec.chat_template_kwargs
            == kept
        )
