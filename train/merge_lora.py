"""Merge a LoRA adapter into its base model, e.g. an SFT policy trained with LoRA before DPO starts from it.

    python train/merge_lora.py out/policy-qwen3-0.6b-lora out/policy-qwen3-0.6b-merged
    python train/dpo_policy.py --config configs/train/policy_dpo_qwen3_0.6b.yaml \
        --set model.id=out/policy-qwen3-0.6b-merged
"""

import argparse
import sys
from pathlib import Path

from castdata.errors import InputError
from castdata.train.merge import merge_lora

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapter", type=Path, help="A LoRA run's output_dir (holds adapter_config.json).")
    parser.add_argument("out", type=Path, help="Where the merged model and tokenizer go.")
    args = parser.parse_args()
    try:
        print(merge_lora(args.adapter, args.out))
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
