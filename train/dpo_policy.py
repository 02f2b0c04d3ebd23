"""Preference-tune a Qwen3 policy on `policy_dpo` with TRL's DPOTrainer.

Each pair shares the prefix up to a first critical error (`prompt`, with the row's `tools`): `chosen` is the
corrected action, `rejected` the action the agent took. Start from the SFT policy (`model.id` = its output
directory). Full fine-tuning keeps a frozen reference copy of the model in memory; with LoRA the reference is the
base model with the adapter disabled.

    python train/dpo_policy.py --config configs/train/policy_dpo_qwen3_0.6b.yaml
    accelerate launch train/dpo_policy.py --config configs/train/policy_dpo_qwen3_8b_lora.yaml

`--set KEY=VALUE` overrides a recipe key.
"""

from castdata.train.run import train

if __name__ == "__main__":
    trainer = train("policy_dpo")
