"""The tests' name for `castdata.train.tiny_qwen` (the offline tiny Qwen3 the CPU smoke run also builds)."""

from castdata.train.tiny_qwen import (  # noqa: F401
    MARKUP_TOKENS,
    QWEN3_CHAT_TEMPLATE_PATH,
    build_tiny_qwen3,
    build_tokenizer,
    default_corpus,
)
