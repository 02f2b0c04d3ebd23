"""The offline default makes training-grade data: over the demo build (`configs/demo.yaml`, the session's
`demo_build`), no agent turn a model trains on uses an identifier it never saw, every write rests on a user turn that
asked for it, and the report's pass^k equals the card's. Every mistake kind of the demo's rates fires on retail train
tasks, and every category the hindsight labeler gives appears in the train split.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from helpers.build import demo_config

from castdata.builders.dataset import MANIFEST
from castdata.envs import load_domain
from castdata.label.schema import HINDSIGHT_CATEGORIES
from castdata.models.scripted.goals import REQUEST_VERBS
from castdata.report import summarize
from castdata.rundir import read_trajectories
from castdata.visible import identifiers


def rows(built: Path, config: str, split: str) -> list[dict]:
    return pa.concat_tables(
        pq.read_table(path) for path in sorted(built.glob(f"{config}/{split}-*.parquet"))
    ).to_pylist()


def unseen(messages: list[dict], index: int) -> list[str]:
    """The identifiers of agent turn `index` found in no user turn or tool result before it."""
    turn = messages[index]
    text = json.dumps([turn.get("content"), [c["function"] for c in turn.get("tool_calls") or []]])
    sources = [m.get("content") or "" for m in messages[:index] if m["role"] in ("user", "tool")]
    return [
        token
        for token in identifiers(text)
        if not any(token in source or token.lstrip("$") in source for source in sources)
    ]


def test_no_train_turn_uses_an_identifier_it_never_saw(demo_build: tuple[Path, Path]) -> None:
    run, built = demo_build
    episodes = {record.id: record for record in read_trajectories(run)}
    critic = [row for row in rows(built, "critic_sft", "train") if row["verdict"] == "valid"]
    policy, dpo = rows(built, "policy_sft", "train"), rows(built, "policy_dpo", "train")
    assert critic and policy and dpo
    found = [
        (row["trajectory_id"], row["step"], unseen(episodes[row["trajectory_id"]].messages, row["step"]))
        for row in critic
    ]
    for row in policy:
        turns = [i for i, m in enumerate(row["messages"]) if m["role"] == "assistant"]
        found += [(row["trajectory_id"], i, unseen(row["messages"], i)) for i in turns]
    found += [
        (row["trajectory_id"], row["step"], unseen([*row["prompt"], *row["chosen"]], len(row["prompt"]))) for row in dpo
    ]
    assert [entry for entry in found if entry[2]] == []


def test_every_write_follows_a_user_turn_that_asked_for_it(demo_build: tuple[Path, Path]) -> None:
    """On train tasks (templated instructions: each request names its order), a write and its confirmation
    question name an order a user turn asked to change (injected mistakes aside: a wrong argument names another)."""
    run, _ = demo_build
    domain = load_domain("retail")
    checked = 0
    for record in (r for r in read_trajectories(run) if r.split == "train"):
        mistaken = {mistake.step for mistake in record.injected_mistakes}
        for index, message in enumerate(record.messages):
            if index in mistaken:
                continue
            calls = [
                c["function"]
                for c in message.get("tool_calls") or []
                if domain.tool_kind(c["function"]["name"]) == "write"
            ]
            asks = [m["content"].lower() for m in record.messages[:index] if m["role"] == "user"]
            for call in calls:
                order = call["arguments"].get("order_id")
                assert any(order.lower() in ask and any(verb in ask for verb in REQUEST_VERBS) for ask in asks), (
                    record.id,
                    index,
                )
                checked += 1
            if message["role"] == "assistant" and "do you confirm" in (message.get("content") or "").lower():
                order = json.loads(message["content"].split("details: ", 1)[1].rsplit(". Do you confirm", 1)[0]).get(
                    "order_id"
                )
                assert any(order.lower() in ask for ask in asks), (record.id, index)
    assert checked > 50


def test_report_pass_k_equals_the_card(demo_build: tuple[Path, Path]) -> None:
    run, built = demo_build
    card = {
        (row["domain"], row["benchmark_split"]): row["pass_k"]
        for row in json.loads((built / MANIFEST).read_text())["stats"]["pass_k"]
    }
    report = {
        (g["domain"], g["split"]): [round(g["pass_k"][k], 4) for k in sorted(g["pass_k"])]
        for g in summarize(run)["groups"]
    }
    assert report == card and set(card) == {("retail", "train"), ("retail", "test"), ("telehealth", "test")}


def test_every_kind_fires_on_retail_train_tasks(demo_build: tuple[Path, Path]) -> None:
    """Every kind the demo's rates name (the agent's and the user's), but missing_output: no retail train task has a
    required output."""
    run, _ = demo_build
    config = demo_config()
    rates = {**config.agent.options["mistakes"], **config.user.options["mistakes"]}
    train = [record for record in read_trajectories(run) if record.split == "train"]
    assert not any(record.privileged.required_outputs for record in train)
    assert {m.kind for record in train for m in record.injected_mistakes} == set(rates) - {"missing_output"}


def test_every_hindsight_category_appears_in_train(demo_build: tuple[Path, Path]) -> None:
    _, built = demo_build
    invalid = [row for row in rows(built, "critic_sft", "train") if row["verdict"] == "invalid"]
    assert {category for row in invalid for category in row["categories"]} == set(HINDSIGHT_CATEGORIES)
