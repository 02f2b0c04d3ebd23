"""Fine-tuning Qwen3 critics and policies on castdata datasets with TRL (extra `castdata[train]`).

`recipe` is pure Python (validate recipes without the ML stack); `data`, `model` and `run` import datasets,
transformers, trl and peft inside their functions.
"""
