"""The offline tiny Qwen3 loads, renders Qwen3 tool-calling chats, generates, and masks assistant turns for SFT."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
chat_template_utils = pytest.importorskip("trl.chat_template_utils")

from helpers.tiny_qwen import MARKUP_TOKENS, QWEN3_CHAT_TEMPLATE_PATH, build_tiny_qwen3  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_order_details",
            "description": "Get the status and details of an order.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string", "description": "The order id, such as '#W0000000'."}},
                "required": ["order_id"],
            },
        },
    }
]
SYSTEM = "You are a helpful customer service agent for an online retail store."
USER = "Hi, where is my order #W1000007? It was supposed to arrive yesterday."
TOOL_RESULT = json.dumps({"order_id": "#W1000007", "status": "delivered", "city": "Denver"})
ANSWER = "Your order #W1000007 was delivered to Denver yesterday."
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": USER},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "get_order_details", "arguments": {"order_id": "#W1000007"}}}
        ],
    },
    {"role": "tool", "name": "get_order_details", "content": TOOL_RESULT},
    {"role": "assistant", "content": ANSWER},
]
TOOL_CALL_TEXT = '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W1000007"}}\n</tool_call>'


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


@pytest.fixture(scope="module")
def tokenizer(model_dir: Path) -> transformers.PreTrainedTokenizerBase:
    return transformers.AutoTokenizer.from_pretrained(model_dir)


def test_model_and_tokenizer_reload(model_dir: Path, tokenizer: transformers.PreTrainedTokenizerBase) -> None:
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir)

    assert isinstance(model, transformers.Qwen3ForCausalLM)
    assert (model_dir / "model.safetensors").is_file()
    assert model.config.vocab_size == len(tokenizer)
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"
    assert model.generation_config.eos_token_id == [tokenizer.eos_token_id, tokenizer.pad_token_id]
    assert tokenizer.chat_template == QWEN3_CHAT_TEMPLATE_PATH.read_text(encoding="utf-8")
    # TRL keeps a byte-exact copy of the Qwen3 template (checked weekly against the Hub) to recognise Qwen3 by.
    assert tokenizer.chat_template == chat_template_utils.qwen3_chat_template


def test_tokenizer_is_byte_level(tokenizer: transformers.PreTrainedTokenizerBase) -> None:
    text = "Ünïcode never seen in training: 你好 🚚 — ok\t\r\n"

    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_added_tokens_are_atomic_and_only_chat_tokens_are_special(
    tokenizer: transformers.PreTrainedTokenizerBase,
) -> None:
    for token in MARKUP_TOKENS:
        assert tokenizer.convert_ids_to_tokens(tokenizer.encode(token)) == [token]

    ids = tokenizer.encode("<|im_start|>assistant\n<think>\nok\n</think>\n\nDone.<|im_end|>")

    assert tokenizer.decode(ids, skip_special_tokens=True) == "assistant\n<think>\nok\n</think>\n\nDone."


def test_build_is_deterministic(model_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_qwen3(tmp_path)

    for path in sorted(model_dir.iterdir()):
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name


def test_custom_corpus_and_sizes(tmp_path: Path) -> None:
    out = build_tiny_qwen3(tmp_path, corpus=["How can I help you today?"] * 4, vocab_size=300, hidden_size=32, layers=1)
    tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    config = transformers.AutoConfig.from_pretrained(out)

    assert len(tokenizer) <= 300
    assert (config.vocab_size, config.hidden_size, config.num_hidden_layers) == (len(tokenizer), 32, 1)


def test_chat_template_renders_tools_tool_calls_and_responses(tokenizer: transformers.PreTrainedTokenizerBase) -> None:
    text = tokenizer.apply_chat_template(
        MESSAGES[:-1], tools=TOOLS, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )

    assert text.startswith(f"<|im_start|>system\n{SYSTEM}\n\n# Tools\n")
    assert f"<tools>\n{json.dumps(TOOLS[0])}\n</tools>" in text
    assert f"<|im_start|>user\n{USER}<|im_end|>\n<|im_start|>assistant\n{TOOL_CALL_TEXT}<|im_end|>\n" in text
    assert f"<|im_start|>user\n<tool_response>\n{TOOL_RESULT}\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_generate(model_dir: Path, tokenizer: transformers.PreTrainedTokenizerBase) -> None:
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir)
    inputs = tokenizer.apply_chat_template(
        MESSAGES[:2],
        tools=TOOLS,
        add_generation_prompt=True,
        enable_thinking=False,
        return_dict=True,
        return_tensors="pt",
    )
    prompt_length = inputs["input_ids"].shape[1]

    output = model.generate(**inputs, max_new_tokens=8)

    assert output.shape[0] == 1
    assert prompt_length < output.shape[1] <= prompt_length + 8
    assert torch.equal(output[0, :prompt_length], inputs["input_ids"][0])


def test_trl_training_template_masks_exactly_the_assistant_turns(
    tokenizer: transformers.PreTrainedTokenizerBase,
) -> None:
    # TRL recognises the tokenizer's template as Qwen3's and hands back its `{% generation %}` variant.
    training_template = chat_template_utils.get_training_chat_template(tokenizer)
    assert training_template == chat_template_utils.qwen3_training_chat_template

    encoding = tokenizer.apply_chat_template(
        MESSAGES,
        tools=TOOLS,
        chat_template=training_template,
        enable_thinking=False,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    ids, mask = encoding["input_ids"], encoding["assistant_masks"]
    spans: list[list[int]] = []
    for position, (token_id, masked) in enumerate(zip(ids, mask)):
        if masked:
            if position == 0 or not mask[position - 1]:
                spans.append([])
            spans[-1].append(token_id)

    # Each assistant turn, from its (empty) thinking block through `<|im_end|>\n`, and nothing else.
    assert [tokenizer.decode(span) for span in spans] == [
        f"<think>\n\n</think>\n\n{TOOL_CALL_TEXT}<|im_end|>\n",
        f"<think>\n\n</think>\n\n{ANSWER}<|im_end|>\n",
    ]
    unmasked = tokenizer.decode([token_id for token_id, masked in zip(ids, mask) if not masked])
    for text in (SYSTEM, USER, TOOL_RESULT, "<tools>"):
        assert text in unmasked
    assert unmasked.count("<|im_start|>assistant\n") == 2
    assert chat_template_utils.is_chat_template_stop_token_trained(tokenizer, chat_template=training_template)
