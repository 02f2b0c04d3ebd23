"""`castdata build` on real labelled runs (scripted demo agent, real labeler): configs, splits, card, formats."""

from __future__ import annotations

import json
import math
import re
import shutil
from collections import Counter
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.build import labelled_run
from helpers.tiny_qwen import build_tokenizer, default_corpus

from castdata.builders.dataset import MANIFEST, build_dataset
from castdata.builders.features import CONFIGS
from castdata.builders.options import BuildOptions
from castdata.builders.validate import read_front_matter, validate_dataset
from castdata.errors import InputError, InvalidDataset

TRAINING = ("critic_sft", "policy_sft", "policy_dpo", "critic_prm")
OPTIONS = BuildOptions(validation_fraction=0.3)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """A benchmark-test run with one infrastructure failure, and a benchmark-train run (train + validation)."""
    root = tmp_path_factory.mktemp("runs")
    return [
        labelled_run(root / "bench-test", infrastructure_failure=True, split="test", tasks="0-3", trials=3),
        labelled_run(root / "bench-train", split="train", tasks="0-9", trials=2, domains=["retail"]),
    ]


@pytest.fixture(scope="module")
def built(runs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build") / "dataset"
    build_dataset(runs, out, OPTIONS)
    return out


@pytest.fixture(scope="module")
def manifest(built: Path) -> dict:
    return json.loads((built / MANIFEST).read_text())


def table(built: Path, config: str, split: str | None = None) -> pa.Table:
    """A config's rows (all splits, or one), straight from the Parquet files."""
    paths = sorted(built.glob(f"{config}/{split or '*'}-*.parquet"))
    return pa.concat_tables(pq.read_table(path) for path in paths)


def rows(built: Path, config: str, split: str) -> list[dict]:
    return datasets.load_dataset(str(built), config, split=split, cache_dir=str(built.parent / "cache")).to_list()


def test_every_config_loads_from_the_local_folder(built: Path, manifest: dict) -> None:
    assert set(manifest["configs"]) == set(CONFIGS)
    for config, splits in manifest["configs"].items():
        loaded = datasets.load_dataset(str(built), config, cache_dir=str(built.parent / "cache"))
        assert {split: len(loaded[split]) for split in loaded} == {
            split: entry["rows"] for split, entry in splits.items()
        }
        assert set(splits) == {"train", "validation", "test"}


def test_no_task_in_two_splits_and_test_only_from_benchmark_test(built: Path, manifest: dict) -> None:
    owner: dict[str, str] = {}
    for config in manifest["configs"]:
        for path in built.glob(f"{config}/*.parquet"):
            split = path.name.split("-")[0]
            for task in set(pq.read_table(path, columns=["task"])["task"].to_pylist()):
                assert owner.setdefault(task, split) == split, f"{task} in {owner[task]} and {split}"
                assert (task.split(".")[1] == "test") == (split == "test")
    assert {"train", "validation", "test"} == set(owner.values())


def test_infrastructure_failures_and_doomed_labels_never_train(built: Path) -> None:
    trajectories = table(built, "trajectories").to_pydict()
    infra = {
        t
        for t, o in zip(trajectories["trajectory_id"], trajectories["outcome"])
        if o["termination_reason"] == "infrastructure_error"
    }
    assert infra, "the fixture run has an infrastructure failure"
    labels = table(built, "labels").to_pydict()
    doomed = {
        (t, s) for t, s, after in zip(labels["trajectory_id"], labels["step"], labels["after_first_error"]) if after
    }
    assert doomed, "the labeler marked actions after a first error"
    for config in TRAINING:
        found = table(built, config).to_pydict()
        assert not infra & set(found["trajectory_id"]), config
        if "step" in found:
            assert not doomed & set(zip(found["trajectory_id"], found["step"])), config


def test_json_columns_keep_each_tool_call_its_own_arguments(built: Path) -> None:
    schema = pq.read_schema(next(built.glob("policy_sft/train-*.parquet")))
    assert schema.field("tools").type.value_type == pa.json_()
    for row in rows(built, "policy_sft", "train"):
        schemas = {tool["function"]["name"]: tool["function"]["parameters"]["properties"] for tool in row["tools"]}
        for message in row["messages"]:
            for call in message["tool_calls"] or []:
                assert isinstance(call["function"]["arguments"], dict)
                assert set(call["function"]["arguments"]) <= set(schemas[call["function"]["name"]])


def test_training_rows_render_through_the_qwen3_template(built: Path) -> None:
    tokenizer = build_tokenizer(default_corpus(), 3000)
    rendered = 0
    for config, columns in (
        ("critic_sft", ["messages"]),
        ("policy_sft", ["messages"]),
        ("policy_dpo", ["prompt", "chosen", "rejected"]),
    ):
        for split in ("train", "validation", "test"):
            for row in rows(built, config, split):
                messages = [m for column in columns for m in row[column]]
                text = tokenizer.apply_chat_template(
                    messages, tools=row.get("tools"), tokenize=False, **row["chat_template_kwargs"]
                )
                assert text.count("<|im_start|>assistant") >= 1
                rendered += 1
    assert rendered > 100


def test_critic_sees_only_the_visible_prefix(built: Path) -> None:
    trajectories = {row["trajectory_id"]: row for row in rows(built, "trajectories", "test")}
    checked = 0
    for row in rows(built, "critic_sft", "test"):
        system, user, critique = (m["content"] for m in row["messages"])
        trajectory = trajectories[row["trajectory_id"]]
        assert trajectory["privileged"]["instruction"] not in user + system
        numbers = [int(n) for n in re.findall(r"^\[(\d+)\] ", user, re.M)]
        assert numbers == list(range(1, row["step"])), "history is exactly the messages before the action"
        assert f"Proposed action [{row['step']}]:" in user
        answer = json.loads(critique)
        assert list(answer)[-1] == "verdict" and answer["verdict"] == row["verdict"]
        for item in answer["evidence"]:
            assert item["quote"] in (system if item["source"] == "policy" else user)
        checked += 1
    assert checked > 50


def test_policy_rows_correct_the_first_critical_error(built: Path) -> None:
    labels = {(r["trajectory_id"], r["step"]): r for r in rows(built, "labels", "test")}
    corrections = [r for r in rows(built, "policy_sft", "test") if r["kind"] == "correction"]
    pairs = rows(built, "policy_dpo", "test")
    assert corrections and len(pairs) == len(corrections)
    for row, pair in zip(corrections, pairs):
        label = labels[(row["trajectory_id"], row["step"])]
        assert label["first_critical_error"] and label["verdict"] == "invalid"
        fixed = row["messages"][-1]
        assert fixed["role"] == "assistant" and fixed["reasoning_content"]
        assert row["chat_template_kwargs"] == {"enable_thinking": True}
        assert len(row["messages"]) == row["step"] + 1
        assert pair["prompt"] == row["messages"][:-1]
        assert (
            pair["chosen"][0]["tool_calls"] == fixed["tool_calls"] and pair["chosen"][0]["content"] == fixed["content"]
        )
        assert pair["chosen"] != pair["rejected"]
    successes = [r for r in rows(built, "policy_sft", "test") if r["kind"] == "success"]
    assert successes and all(r["messages"][-1]["role"] == "assistant" for r in successes)


def test_prm_rows_are_stepwise(built: Path) -> None:
    for row in rows(built, "critic_prm", "test"):
        assert len(row["completions"]) == len(row["labels"]) == len(row["steps"]) > 0
        assert all(row["labels"][:-1]) or not all(row["labels"])
        assert row["completions"][-1].splitlines()[-1].startswith(f"[{row['steps'][-1]}] agent: ")


def card_table(card: str, heading: str) -> list[dict[str, str]]:
    """The first Markdown table after `heading`, as rows of header -> cell."""
    lines = card[card.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    body = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        body.append([cell.strip() for cell in line.strip("|").split("|")])
    return [dict(zip(body[0], cells)) for cells in body[2:]]


def test_card_front_matter_names_every_config_and_split(built: Path, manifest: dict) -> None:
    front = read_front_matter((built / "README.md").read_text())
    on_disk = {(p.parent.name, p.name.split("-")[0]) for p in built.glob("*/*.parquet")}
    listed = {(c["config_name"], f["split"]) for c in front["configs"] for f in c["data_files"]}
    assert listed == on_disk
    assert (
        front["license"]
        and front["pretty_name"]
        and front["tags"]
        and front["task_categories"]
        and front["size_categories"]
    )


def test_card_numbers_equal_the_files(built: Path) -> None:
    card = (built / "README.md").read_text()
    for row in card_table(card, "### Rows"):
        for split in ("train", "validation", "test"):
            assert int(row[split]) == table(built, row["config"], split).num_rows
    for row in card_table(card, "### Label verdicts"):
        verdicts = table(built, "labels", row["split"])["verdict"].to_pylist()
        counts = Counter(verdicts)
        assert [int(row[v]) for v in ("valid", "invalid", "uncertain", "total")] == [
            counts["valid"],
            counts["invalid"],
            counts["uncertain"],
            len(verdicts),
        ]
    categories = Counter(c for listed in table(built, "labels")["categories"].to_pylist() for c in listed)
    assert {row["category"]: int(row["total"]) for row in card_table(card, "### Error categories")} == dict(categories)
    assert {
        (r["domain"], r["benchmark split"], r["agent model"]): [
            r[k] for k in r if k.startswith("pass^") and r[k] != "-"
        ]
        for r in card_table(card, "### pass^k")
    } == expected_pass_k(built)


def test_every_trainer_the_card_names_exists_in_trl(built: Path) -> None:
    trl = pytest.importorskip("trl")
    card = (built / "README.md").read_text()
    rows = card[card.index("| config | what a row is | TRL trainer |") :].split("\n\n")[0].splitlines()[2:]
    named = {row.split("|")[-2].strip() for row in rows}
    assert all(hasattr(trl, name.strip("`")) for name in named if name.startswith("`")), named
    assert "PRMTrainer" not in card


def expected_pass_k(built: Path) -> dict[tuple, list[str]]:
    """pass^k computed here, independently, from the trajectories files."""
    data = table(built, "trajectories").to_pydict()
    trials: dict[tuple, list[bool]] = {}
    for domain, split, agent, task, outcome in zip(
        data["domain"], data["benchmark_split"], data["agent_model"], data["task_id"], data["outcome"]
    ):
        if outcome["termination_reason"] != "infrastructure_error":
            trials.setdefault((domain, split, agent), {}).setdefault(task, []).append(outcome["reward"] == 1.0)
    found = {}
    for group, tasks in trials.items():
        n_min = min(len(t) for t in tasks.values())
        found[group] = [
            f"{sum(math.comb(sum(t), k) / math.comb(len(t), k) for t in tasks.values()) / len(tasks):.4f}"
            for k in range(1, n_min + 1)
        ]
    return found


def test_validation_accepts_the_build_and_catches_tampering(built: Path, tmp_path: Path) -> None:
    assert validate_dataset(built)["schema"] == "castdata.dataset/1"
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    shard = next(copy.glob("labels/test-*.parquet"))
    pq.write_table(pq.read_table(shard).slice(1), shard)
    with pytest.raises(InvalidDataset, match="does not match the sha256"):
        validate_dataset(copy)


def test_critic_balance(runs: list[Path], tmp_path: Path) -> None:
    def verdicts(options: BuildOptions) -> Counter:
        build_dataset(runs, tmp_path / "balanced", options)
        return Counter(
            pq.read_table(next((tmp_path / "balanced").glob("critic_sft/train-*.parquet")), columns=["verdict"])[
                "verdict"
            ].to_pylist()
        )

    natural = verdicts(OPTIONS.model_copy(update={"critic_balance": "none"}))
    assert natural["valid"] > natural["invalid"] > 0
    default = verdicts(OPTIONS)  # upsample to 3 valid per invalid
    assert default == Counter(valid=natural["valid"], invalid=max(natural["invalid"], math.ceil(natural["valid"] / 3)))
    down = verdicts(OPTIONS.model_copy(update={"critic_balance": "downsample", "valid_per_invalid": 2.0}))
    assert down == Counter(valid=2 * natural["invalid"], invalid=natural["invalid"])
    up = verdicts(OPTIONS.model_copy(update={"critic_balance": "upsample", "valid_per_invalid": 1.0}))
    assert up == Counter(valid=natural["valid"], invalid=natural["valid"])


def test_build_refuses_unlabelled_runs_and_foreign_folders(runs: list[Path], tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(runs[0], bare, ignore=shutil.ignore_patterns("labels"))
    with pytest.raises(InputError, match="label the run first"):
        build_dataset([bare], tmp_path / "out")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not a castdata dataset"):
        build_dataset(runs, foreign)
    assert (foreign / "notes.txt").read_text() == "mine"


def test_castdata_load_reads_a_rebuilt_local_folder_not_a_stale_cache(tmp_path):
    """`datasets` caches a local folder by its name; `castdata.load(folder, config)` reads the files themselves."""
    import castdata
    from castdata.builders.dataset import build_dataset

    folder = tmp_path / "dataset"
    build_dataset([labelled_run(tmp_path / "a", split="test", tasks="0-1", trials=1)], folder)
    first = castdata.load(str(folder), "trajectories")
    build_dataset([labelled_run(tmp_path / "b", split="test", tasks="0-3", trials=1)], folder)
    second = castdata.load(str(folder), "trajectories")
    assert sum(len(s) for s in first.values()) == 4 and sum(len(s) for s in second.values()) == 8


def test_episodes_in_several_record_files_build_once_with_their_labels(tmp_path: Path) -> None:
    """Records split over files (a Ray run's unit files) and an infrastructure failure superseded by a rerun
    in another file: the builder takes each episode's latest record, as the store does, with its labels."""
    from castdata.builders.source import iter_episodes
    from castdata.label.run import label_run
    from castdata.rundir import RunDir, read_trajectories

    run = labelled_run(tmp_path / "run", split="test", tasks="0-1", trials=2)
    path = RunDir(run).trajectory_file("retail", "test")
    lines = path.read_text().splitlines(keepends=True)
    failed = json.loads(lines[0])
    failed["outcome"].update(reward=0.0, termination_reason="infrastructure_error", error="HTTP 503")
    failed["ended_at"] = 0.0  # older than the record that superseded it
    path.write_text("".join(lines[1:]))
    unit = path.with_name("retail.test.unit-x-0-0.jsonl")
    unit.write_text(lines[0] + json.dumps(failed) + "\n")  # a unit file: the episode, and its older failure
    label_run(run)

    episodes = list(iter_episodes(run))
    ids = [e.trajectory.id for e in episodes]
    assert sorted(ids) == sorted(r.id for r in read_trajectories(run)) and len(ids) == len(set(ids)) == 8
    assert all(e.labels and e.trajectory.counts_for_pass_k for e in episodes)
