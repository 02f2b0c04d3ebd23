"""Fine-tune a Qwen3 policy on `policy_sft` (critique-aware SFT) with TRL's SFTTrainer.

Rows are successful episodes, and at each first critical error the prefix followed by the corrected action,
which may carry reasoning derived from the critique (`reasoning_content`, rendered in the think block: those
rows ask for thinking in their `chat_template_kwargs`). Tools are in the system turn (the row's `tools`). The
loss covers the assistant turns only (`assistant_only_loss`, TRL's Qwen3 training template).

    python train/sft_policy.py --config configs/train/policy_qwen3_0.6b.yaml
    accelerate launch train/sft_policy.py --config configs/train/policy_qwen3_4b_lora.yaml

`--set KEY=VALUE` overrides a recipe key.
"""

from castdata.train.run import train

if __name__ == "__main__":
    trainer = train("policy_sft")
