"""The model side of a recipe: TRL training arguments (CPU-safe without a GPU), tokenizer, model and LoRA config."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from castdata.errors import ConfigError
from castdata.train.recipe import LoraSection, ModelSection, Recipe

CPU_SAFE = {"use_cpu": True, "bf16": False, "fp16": False, "activation_checkpointing": False}
"""What a run without a GPU overrides: TRL defaults to bf16 and activation checkpointing."""


def has_gpu() -> bool:
    """Whether torch sees a CUDA device."""
    import torch

    return torch.cuda.is_available()


def training_args(config_class: type, recipe: Recipe) -> Any:
    """`config_class` (SFTConfig or DPOConfig) from the recipe's `training:`; ConfigError for an unknown field."""
    fields = {field.name for field in dataclasses.fields(config_class)}
    unknown = sorted(set(recipe.training) - fields)
    if unknown:
        raise ConfigError(f"training.{unknown[0]}: not a {config_class.__name__} field")
    values = dict(recipe.training)
    if not has_gpu():
        print("no GPU: training on the CPU in float32 (bf16, fp16 and activation checkpointing off)", file=sys.stderr)
        values.pop("gradient_checkpointing", None)  # the deprecated alias of activation_checkpointing
        values.update(CPU_SAFE)
    return config_class(**values)


def load_tokenizer(section: ModelSection, args: Any) -> Any:
    """The model's tokenizer. For assistant-only loss without a `chat_template_path`, a template with generation
    markers must exist: the tokenizer's own, or TRL's training version of it (Qwen3's is swapped in by TRL)."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    tokenizer = AutoTokenizer.from_pretrained(section.id, revision=section.revision)
    checked = getattr(args, "assistant_only_loss", False) and not getattr(args, "chat_template_path", None)
    if checked and not has_generation_markers(tokenizer.chat_template):
        try:
            get_training_chat_template(tokenizer)
        except ValueError:
            raise ConfigError(
                f"training.assistant_only_loss: {section.id}'s chat template has no generation markers and TRL has no "
                "training version of it; set training.chat_template_path to a template with {% generation %} markers"
            ) from None
    return tokenizer


def load_model(section: ModelSection) -> Any:
    """The causal LM to fine-tune (float32 on the CPU)."""
    from transformers import AutoModelForCausalLM

    dtype = section.dtype if has_gpu() else "float32"
    options = {"attn_implementation": section.attn_implementation} if section.attn_implementation else {}
    return AutoModelForCausalLM.from_pretrained(section.id, revision=section.revision, dtype=dtype, **options)


def lora_config(section: LoraSection | None) -> Any:
    """The peft LoRA config, or None for full fine-tuning."""
    if section is None:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=section.r,
        lora_alpha=section.alpha,
        lora_dropout=section.dropout,
        target_modules=section.target_modules,
        task_type="CAUSAL_LM",
    )
