"""Merge a LoRA adapter into its base model (`python train/merge_lora.py ADAPTER OUT`): a full model that DPO can
start from (`model.id`), or that serves without peft."""

from __future__ import annotations

from pathlib import Path

from castdata.errors import InputError


def merge_lora(adapter: Path, out: Path) -> Path:
    """Load the adapter in `adapter` (a LoRA run's output_dir) on its base model, merge it, and save the merged
    model and the tokenizer to `out`; InputError when `adapter` holds no adapter."""
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    if not (adapter / "adapter_config.json").is_file():
        raise InputError(f"{adapter}: no LoRA adapter here (no adapter_config.json); a full run needs no merging")
    model = AutoPeftModelForCausalLM.from_pretrained(adapter).merge_and_unload()
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(adapter).save_pretrained(out)
    return out
