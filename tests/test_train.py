"""The training scripts on CPU: a tiny random Qwen3 with a locally trained tokenizer, the demo dataset from a folder.

The demo dataset is made by the pipeline (`configs/demo.yaml` collected, labelled, built). The smoke runs train on
its telehealth rows (the shorter policy, so the shorter rows), which are all in its `test` split.
"""

from __future__ import annotations

import math
import os
import runpy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("peft")

from helpers.build import ROOT

from castdata.builders.features import CONFIGS
from castdata.errors import ConfigError
from castdata.train import smoke
from castdata.train.model import training_args
from castdata.train.recipe import load_recipe
from castdata.train.run import TRAINERS, train
from castdata.train.shorten import OMITTED, fit_rows

RECIPES = sorted((ROOT / "configs" / "train").glob("*.yaml"))
NEEDS_TAG = "dataset.revision: a Hub dataset needs a release tag like v1.0.0 (or a commit sha)"
SCRIPTS = {"critic_sft": "sft_critic.py", "policy_sft": "sft_policy.py", "policy_dpo": "dpo_policy.py"}


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """One CPU thread: a tiny model's ops are too small to share, and on a busy machine threads wait on each other."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def demo_dataset(demo_build: tuple[Path, Path]) -> Path:
    return demo_build[1]


@pytest.fixture(scope="module")
def tiny_model(demo_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3 whose tokenizer also learned the dataset's text (policies, tools, critiques): shorter sequences."""
    return smoke.tiny_model(demo_dataset, tmp_path_factory.mktemp("tiny-qwen3"))


def smoke_args(recipe: str, model: Path, dataset: Path, out: Path, **more: Any) -> list[str]:
    """A real recipe, pointed at the tiny model and the local demo dataset, for a few CPU steps."""
    return ["--config", str(ROOT / "configs" / "train" / recipe), *smoke.overrides(model, dataset, out, **more)]


def run_script(script: str, args: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run a training script as `python train/SCRIPT ARGS` does, in this process; returns its trainer."""
    monkeypatch.setattr(sys, "argv", [script, *args])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return runpy.run_path(str(ROOT / "train" / script), run_name="__main__")["trainer"]


def losses(trainer: Any) -> list[float]:
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_recipes_parse_and_name_existing_dataset_configs(path: Path) -> None:
    from trl import DPOConfig, SFTConfig

    recipe = load_recipe(path)
    config = recipe.dataset.config
    assert config in CONFIGS and config in TRAINERS and recipe.hardware
    assert (recipe.dataset.path, recipe.dataset.repo) == ("runs/demo/dataset", None)  # the demo's build by default
    assert "--set dataset.path=null --set dataset.repo=ORG/NAME --set dataset.revision=v1.0.0" in path.read_text()
    assert path.stem.startswith(
        {"critic_sft": "critic_", "policy_sft": "policy_qwen3", "policy_dpo": "policy_dpo_"}[config]
    )
    assert (recipe.lora is not None) == path.stem.endswith("_lora")
    args = training_args(
        SFTConfig if TRAINERS[config].__name__ == "sft" else DPOConfig, recipe
    )  # TRL accepts every value
    assert (
        args.learning_rate == recipe.training["learning_rate"]
        and args.num_train_epochs == recipe.training["num_train_epochs"]
    )
    assert recipe.training.get(
        "assistant_only_loss", config == "policy_dpo"
    )  # SFT recipes train on assistant turns only
    assert SCRIPTS[config] in path.read_text()  # the recipe says how to run it


@pytest.mark.parametrize(
    "change,expected",
    [
        (
            ["dataset.config=critic_sfts"],
            "dataset.config: unknown dataset config 'critic_sfts'; allowed: trajectories, labels,",
        ),
        (["dataset.path=null", "dataset.repo=org/name"], f"{NEEDS_TAG}, got None"),
        (["dataset.path=null", "dataset.repo=org/name", "dataset.revision=main"], f"{NEEDS_TAG}, got 'main'"),
        (["dataset.config=policy_sft"], "dataset.config: this script trains on 'critic_sft', got 'policy_sft'"),
        (["training.learning_rat=1e-5"], "training.learning_rat: not a SFTConfig field"),
        (["dataset.path=/nowhere"], "dataset.path: /nowhere: not a dataset folder made by `castdata build`"),
    ],
)
def test_a_bad_recipe_is_one_clear_line_before_any_model_loads(
    change: list[str], expected: str, capsys: pytest.CaptureFixture
) -> None:
    args = ["--config", str(ROOT / "configs" / "train" / "critic_qwen3_0.6b.yaml"), "--set", "model.id=/no/such/model"]
    with pytest.raises(SystemExit) as exited:
        train("critic_sft", args + [x for assignment in change for x in ("--set", assignment)])

    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        error.startswith("error: ") and expected in error
    )  # and the model, which does not exist, was never looked for


def test_the_script_exits_2_with_one_line(tmp_path: Path) -> None:
    recipe = str(ROOT / "configs" / "train" / "critic_qwen3_0.6b.yaml")
    args = ["--config", recipe, "--set", "dataset.path=null", "--set", "dataset.repo=org/name"]
    result = subprocess.run(
        [sys.executable, str(ROOT / "train" / "sft_critic.py"), *args], capture_output=True, text=True, timeout=120
    )
    assert (
        result.returncode == 2
        and result.stderr.count("\n") == 1
        and "dataset.revision: a Hub dataset needs" in result.stderr
    )


def test_set_overrides_and_strategies_read_as_no() -> None:
    recipe = load_recipe(
        ROOT / "configs" / "train" / "critic_qwen3_0.6b.yaml",
        ["training.learning_rate=2e-5", "training.save_strategy=no", "lora.r=8"],
    )
    assert recipe.training["learning_rate"] == 2e-5 and recipe.training["save_strategy"] == "no" and recipe.lora.r == 8
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_recipe(ROOT / "configs" / "train" / "critic_qwen3_0.6b.yaml", ["training.learning_rate"])


def test_sft_critic_trains_saves_and_reloads(
    tiny_model: Path, demo_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoModelForCausalLM

    trainer = run_script(
        "sft_critic.py",
        smoke_args("critic_qwen3_0.6b.yaml", tiny_model, demo_dataset, tmp_path / "critic"),
        monkeypatch,
    )

    assert len(losses(trainer)) == 3 and all(math.isfinite(loss) for loss in losses(trainer))
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "critic")
    trained = dict(trainer.model.named_parameters())
    for name, value in reloaded.named_parameters():
        assert value.detach().equal(trained[name].detach()), name


def test_sft_policy_with_lora_masks_exactly_the_assistant_turns(
    tiny_model: Path, demo_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoModelForCausalLM
    from trl.chat_template_utils import get_training_chat_template

    from castdata.errors import InputError
    from castdata.train.merge import merge_lora

    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "all-linear"}
    trainer = run_script(
        "sft_policy.py",
        smoke_args("policy_qwen3_0.6b.yaml", tiny_model, demo_dataset, tmp_path / "policy", lora=lora),
        monkeypatch,
    )
    assert all(math.isfinite(loss) for loss in losses(trainer)) and losses(trainer)
    adapted = AutoPeftModelForCausalLM.from_pretrained(tmp_path / "policy")
    merged = AutoModelForCausalLM.from_pretrained(merge_lora(tmp_path / "policy", tmp_path / "merged"))  # for DPO
    tokens = torch.tensor([[1, 2, 3, 4]])
    assert torch.allclose(adapted(tokens).logits, merged(tokens).logits, atol=1e-4)
    with pytest.raises(InputError, match="no LoRA adapter here"):
        merge_lora(tmp_path / "merged", tmp_path / "again")

    tokenizer, row = trainer.processing_class, trainer.train_dataset[0]
    rendered = tokenizer.apply_chat_template(
        row["messages"],
        tools=row["tools"],
        chat_template=get_training_chat_template(tokenizer),
        tokenize=False,
        **row["chat_template_kwargs"],
    )
    opener, closer = "<|im_start|>assistant\n", "<|im_end|>\n"
    expected, start = [], rendered.find(opener)
    while start >= 0:  # each assistant turn: after its opener, up to and with its end-of-turn
        end = rendered.index(closer, start) + len(closer)
        expected.append(rendered[start + len(opener) : end])
        start = rendered.find(opener, end)
    masked, run = [], []
    for token, label in zip(row["input_ids"], row["labels"]):
        if label != -100:
            run.append(token)
        elif run:
            masked.append(tokenizer.decode(run))
            run = []
    masked += [tokenizer.decode(run)] if run else []

    assert tokenizer.decode(row["input_ids"]) == rendered
    assert len(expected) == sum(1 for m in row["messages"] if m["role"] == "assistant") >= 3
    assert masked == expected
    assert any("<tool_call>" in turn for turn in masked)


def test_dpo_policy_trains_saves_and_reloads(
    tiny_model: Path, demo_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import AutoModelForCausalLM

    trainer = run_script(
        "dpo_policy.py",
        smoke_args(
            "policy_dpo_qwen3_0.6b.yaml", tiny_model, demo_dataset, tmp_path / "dpo", **{"training.max_steps": 2}
        ),
        monkeypatch,
    )

    assert len(losses(trainer)) == 2 and all(math.isfinite(loss) for loss in losses(trainer))
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "dpo").config.vocab_size == trainer.model.config.vocab_size


def test_thirty_steps_on_a_fixed_subset_lower_the_loss(
    tiny_model: Path, demo_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    more = {"training.max_steps": 30, "training.learning_rate": 3e-3, "training.lr_scheduler_type": "constant"}
    args = smoke_args("critic_qwen3_0.6b.yaml", tiny_model, demo_dataset, tmp_path / "critic-30", **more)
    curve = losses(run_script("sft_critic.py", args, monkeypatch))

    assert len(curve) == 30
    assert sum(curve[-5:]) / 5 < 0.7 * sum(curve[:5]) / 5, curve


def test_accelerate_launch_runs_a_script(tiny_model: Path, demo_dataset: Path, tmp_path: Path) -> None:
    launch = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--cpu",
        "--num_processes",
        "1",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
    ]
    args = smoke_args(
        "critic_qwen3_0.6b.yaml", tiny_model, demo_dataset, tmp_path / "launched", **{"training.max_steps": 1}
    )
    result = subprocess.run(
        [*launch, str(ROOT / "train" / "sft_critic.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "launched" / "model.safetensors").is_file()


def token_length(tokenizer: Any, row: dict) -> int:
    messages = row["messages"] if "messages" in row else row["prompt"] + row["chosen"]
    encoded = tokenizer.apply_chat_template(
        messages, tools=row.get("tools"), tokenize=True, return_dict=True, **(row.get("chat_template_kwargs") or {})
    )
    return len(encoded["input_ids"])


@pytest.mark.parametrize("config", ["critic_sft", "policy_sft"])
def test_long_rows_are_shortened_from_the_left_never_dropped(config: str, tiny_model: Path, demo_dataset: Path) -> None:
    from transformers import AutoTokenizer

    from castdata.hub.local import local_split

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    rows = local_split(demo_dataset, config, "test")
    rows = rows.filter(lambda domain: domain == "telehealth", input_columns="domain").select(range(16))
    lengths = sorted(token_length(tokenizer, row) for row in rows)
    max_length = lengths[len(lengths) * 2 // 3]  # a third of the rows run over, by a part of their history
    fitted = fit_rows(rows, tokenizer, max_length, config)

    over = sum(length > max_length for length in lengths)
    assert fitted.shortened + fitted.dropped == over and fitted.shortened > max(0, fitted.dropped)
    assert len(fitted.rows) == len(rows) - fitted.dropped
    assert fitted.dropped == 0 or config == "policy_sft"  # a policy row whose last user turn starts too late cannot fit
    identity = lambda row: (row["trajectory_id"], row["step"], row.get("kind"))  # noqa: E731
    originals = {identity(row): row for row in rows}
    for after in fitted.rows:
        before = originals[identity(after)]
        assert token_length(tokenizer, after) <= max_length
        assert after["messages"][0] == before["messages"][0] and after["messages"][-1] == before["messages"][-1]
        if config == "critic_sft" and after["messages"] != before["messages"]:
            user = after["messages"][1]["content"]
            proposed = before["messages"][1]["content"].split("Proposed action")[-1]
            assert OMITTED in user and user.split("Proposed action")[-1] == proposed
        if config == "policy_sft" and after["messages"] != before["messages"]:
            assert after["messages"][1]["role"] == "user" and len(after["messages"]) < len(before["messages"])


def test_a_max_length_nothing_fits_in_is_one_line(tiny_model: Path, demo_dataset: Path, capsys) -> None:
    tiny = {"training.max_length": 256}
    args = smoke_args("critic_qwen3_0.6b.yaml", tiny_model, demo_dataset, Path("unused"), **tiny)
    with pytest.raises(SystemExit) as exited:
        train("critic_sft", args)
    assert exited.value.code == 2
    assert "error: training.max_length: 256 tokens do not hold the system turn" in capsys.readouterr().err


def test_the_cpu_smoke_command_runs_every_script(demo_dataset: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        str(ROOT / "train" / "smoke_cpu.py"),
        str(demo_dataset),
        "--out",
        str(tmp_path),
        "--steps",
        "1",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = [line for line in result.stdout.splitlines() if line.split(":")[0] in smoke.RECIPES]  # TRL logs too
    assert [line.split(":")[0] for line in summary] == ["critic_sft", "policy_sft", "policy_dpo"]
    assert all(" 1 steps, losses " in line for line in summary)
