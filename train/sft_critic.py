"""Fine-tune a Qwen3 critic on `critic_sft` with TRL's SFTTrainer.

Each row is (system: critic instructions + the domain policy with clause ids + the tool schemas; user: the
conversation so far and the proposed action; assistant: the structured critique as JSON, `verdict` last). The
loss covers the assistant turn only (`assistant_only_loss`: TRL swaps in its Qwen3 training template, which
carries `{% generation %}` markers); rows ask for no thinking (`chat_template_kwargs`).

    python train/sft_critic.py --config configs/train/critic_qwen3_0.6b.yaml
    accelerate launch train/sft_critic.py --config configs/train/critic_qwen3_1.7b.yaml
    accelerate launch --config_file zero3.yaml train/sft_critic.py --config configs/train/critic_qwen3_8b.yaml

`--set KEY=VALUE` overrides a recipe key, e.g. `--set dataset.path=runs/demo/dataset --set dataset.repo=null`.
"""

from castdata.train.run import train

if __name__ == "__main__":
    trainer = train("critic_sft")
