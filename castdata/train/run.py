"""Fine-tuning runs over TRL's trainers, shared by the scripts in `train/`: SFT (critic or policy) and DPO (policy)."""

from __future__ import annotations

import sys
from typing import Any

from castdata.errors import ConfigError
from castdata.train.data import load_splits
from castdata.train.model import load_model, load_tokenizer, lora_config, training_args
from castdata.train.recipe import Recipe, recipe_from_argv
from castdata.train.shorten import fit_rows, report


def sft(recipe: Recipe) -> Any:
    """Supervised fine-tuning (`trl.SFTTrainer`) on a conversational config; returns the trained trainer."""
    from trl import SFTConfig, SFTTrainer

    return fit(SFTTrainer, training_args(SFTConfig, recipe), recipe)


def dpo(recipe: Recipe) -> Any:
    """Preference optimisation (`trl.DPOTrainer`) on `policy_dpo`; returns the trained trainer."""
    from trl import DPOConfig, DPOTrainer

    return fit(DPOTrainer, training_args(DPOConfig, recipe), recipe)


def fit(trainer_class: type, args: Any, recipe: Recipe) -> Any:
    """Load the data and the tokenizer (cheap, so a bad recipe fails first), then the model; train; save to `output_dir`."""
    train, evaluation = load_splits(recipe)
    tokenizer = load_tokenizer(recipe.model, args)
    train = fit_split("train", train, tokenizer, args, recipe)
    evaluation = fit_split("eval", evaluation, tokenizer, args, recipe)
    trainer = trainer_class(
        model=load_model(recipe.model),
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        processing_class=tokenizer,
        peft_config=lora_config(recipe.lora),
    )
    trainer.train()
    trainer.save_model()
    return trainer


def fit_split(name: str, rows: Any, tokenizer: Any, args: Any, recipe: Recipe) -> Any:
    """A split with its rows shortened to `max_length` (`castdata.train.shorten`), reporting how many."""
    if rows is None:
        return None
    fitted = fit_rows(rows, tokenizer, getattr(args, "max_length", None), recipe.dataset.config)
    report(name, fitted, args.max_length)
    return fitted.rows


TRAINERS = {"critic_sft": sft, "policy_sft": sft, "policy_dpo": dpo}
"""The trainer of each dataset config a script trains on."""


def train(config: str, argv: list[str] | None = None) -> Any:
    """A training script's body: the recipe from `--config` (and `--set`), which must train on `config`; train.
    A bad recipe, or data that does not fit it, is one line on stderr and exit code 2, before the model loads."""
    try:
        recipe = recipe_from_argv(
            argv, config, f"Fine-tune on {config} ({TRAINERS[config].__name__.upper()} with TRL)."
        )
        return TRAINERS[config](recipe)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
