"""Offline tiny Qwen3: a random-weight `Qwen3ForCausalLM` with a locally trained tokenizer and the real chat template.

The CPU smoke run (`train/smoke_cpu.py`) and the tests cannot download `Qwen/Qwen3-0.6B`, so `build_tiny_qwen3`
makes a stand-in that exercises the same code paths:

- a byte-level BPE tokenizer with Qwen2/Qwen3's normalizer, pre-tokenizer split and decoder, trained on a small
  deterministic corpus, plus Qwen3's chat and tool markup tokens (`<|im_start|>`, `<tool_call>`, `<think>`, ...),
  with the same special/non-special split as the real tokenizer, so `skip_special_tokens=True` keeps `<think>`;
- the chat template byte-identical to the one Qwen3 ships (`castdata/templates/qwen3.jinja`), so TRL recognises it
  and swaps in its `{% generation %}` training template when `assistant_only_loss=True`;
- a `Qwen3ForCausalLM` small enough to build, save, load, generate and train in about a second on CPU.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

QWEN3_CHAT_TEMPLATE_PATH = Path(__file__).resolve().parent.parent / "templates" / "qwen3.jinja"
"""The chat template shipped by `Qwen/Qwen3-0.6B` (and the other hybrid-thinking Qwen3 checkpoints)."""

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Added tokens Qwen3 marks special: dropped by `decode(..., skip_special_tokens=True)`."""

MARKUP_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
"""Added tokens Qwen3 keeps as plain (non-special) tokens: always atomic, kept when decoding."""

PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"

# Qwen2/Qwen3 pre-tokenization pattern (as in `transformers.models.qwen2.tokenization_qwen2`).
_QWEN_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

_NUM_ATTENTION_HEADS = 4
_NUM_KEY_VALUE_HEADS = 2
_MAX_POSITION_EMBEDDINGS = 8192

_CUSTOMERS = (
    "Yusuf Rossi",
    "Mei Davis",
    "Olivia Smith",
    "Raj Patel",
    "Sofia Garcia",
    "Liam Johnson",
    "Aarav Kim",
    "Fatima Khan",
    "Noah Brown",
    "Chen Wei",
    "Isabella Lopez",
    "Omar Haddad",
)
_ITEMS = (
    "wireless headphones",
    "water bottle",
    "hiking boots",
    "desk lamp",
    "mechanical keyboard",
    "yoga mat",
    "coffee maker",
    "backpack",
    "smart watch",
    "office chair",
    "bluetooth speaker",
    "running shoes",
    "air purifier",
    "digital camera",
    "electric kettle",
    "gaming mouse",
    "tea kettle",
    "sunglasses",
)
_CITIES = (
    "Boston",
    "Denver",
    "Seattle",
    "Chicago",
    "Austin",
    "Phoenix",
    "Miami",
    "Portland",
    "Atlanta",
    "Houston",
    "Philadelphia",
    "San Francisco",
    "New York",
    "Los Angeles",
)
_USER_LINES = (
    "Hi, I'm {customer}. I need help with my order of {item}.",
    "Can you tell me where my {item} is? I live in {city}.",
    "I'd like to return the {item}; it arrived damaged and the box was torn.",
    "Please exchange my {item} for a different color or size.",
    "My flight from {city} was cancelled, can I get a refund or a voucher?",
    "What's the status of order #W{number}? It has been pending for a week.",
    "I want to change the shipping address to my new apartment in {city}.",
    "Could you cancel the reservation? My plans changed because of a family emergency.",
    "I was charged twice for the same {item}, which is really frustrating.",
    "Do you have a cheaper option, maybe economy instead of business class?",
    "My email is {email} and my zip code is {zip}.",
    "Honestly I don't remember the order number, sorry about that.",
    "Can I upgrade my membership and add two checked bags for the trip?",
    "Never mind, please transfer me to a human supervisor.",
)
_AGENT_LINES = (
    "Sure, {customer}! Let me look up your account first.",
    "I found order #W{number} with the {item}. It ships to {city} tomorrow.",
    "Your refund of ${number}.00 has been issued to the original payment method.",
    "I'm sorry about that. I can exchange the {item} at no extra cost.",
    "Could you confirm the zip code on your account, please?",
    "Is there anything else I can help you with today?",
    "Before I proceed, please confirm: cancel reservation {code} and refund the gift card balance. (yes/no)",
    "According to our policy, basic economy tickets cannot be modified after booking.",
    "The replacement {item} should arrive within five to seven business days.",
    "I've updated the default address to {city}; you'll receive a confirmation email shortly.",
    "Unfortunately, that order was already delivered, so it can only be returned or exchanged.",
    "I have verified your identity. Which item would you like to return?",
    "Travel insurance covers cancellations for health or weather reasons only.",
    "Thank you for your patience. I'm transferring you to a human agent now.",
)
# Prose in the style of an agent policy, for a wider vocabulary than the dialogue lines give.
_POLICY_TEXT = (
    "As a customer service agent, you can help users cancel or modify pending orders, return or exchange "
    "delivered orders, modify their default user address, or provide information about their own profile, "
    "orders, and related products.",
    "At the beginning of the conversation, you have to authenticate the user identity by locating their user id "
    "via email, or via name and zip code. This has to be done even when the user already provides the user id.",
    "Before taking consequential actions that update the database, you must list the action details and obtain "
    "explicit user confirmation to proceed. You should not make up any information or procedures, and you should "
    "not give subjective recommendations or comments.",
    "You should at most make one tool call at a time, and if you take a tool call, you should not respond to the "
    "user at the same time. If you respond to the user, you should not make a tool call.",
    "You should deny user requests that are against this policy. You should transfer the user to a human agent if "
    "and only if the request cannot be handled within the scope of your actions.",
    "Each reservation has a reservation id, user id, trip type, flights, passengers, payment methods, created "
    "time, baggages, and travel insurance information. Each flight has a flight number, an origin, a destination, "
    "a scheduled departure and arrival time, and the number of available seats for each cabin class.",
    "The refund will be added to the user's gift card balance immediately if the original payment was a gift "
    "card, otherwise it will take five to seven business days to process.",
    "Critique: the agent skipped the identity check and issued the refund without explicit confirmation, which "
    "violates the policy. A better next action would be to ask for the email address first.",
    "Verdict: the proposed action is correct, the arguments match the user's request, and the tool call is "
    "consistent with the conversation so far.",
)
_TOOLS = (
    ("get_order_details", "Get the status and details of an order.", ("order_id",)),
    ("find_user_id_by_email", "Find a user id by email.", ("email",)),
    ("find_user_id_by_name_zip", "Find a user id by name and zip code.", ("first_name", "last_name", "zip")),
    ("cancel_pending_order", "Cancel a pending order.", ("order_id", "reason")),
    ("exchange_delivered_order_items", "Exchange delivered items.", ("order_id", "item_ids", "new_item_ids")),
    ("return_delivered_order_items", "Return delivered items.", ("order_id", "item_ids", "payment_method_id")),
    ("modify_user_address", "Modify the default address of a user.", ("user_id", "address1", "city", "state", "zip")),
    ("get_reservation_details", "Get the details of a reservation.", ("reservation_id",)),
    ("search_direct_flight", "Search direct flights between two cities on a date.", ("origin", "destination", "date")),
    ("transfer_to_human_agents", "Transfer the user to a human agent, with a summary of the issue.", ("summary",)),
)
"""(name, description, string arguments) of tools in the style of tau-bench's retail and airline domains."""
# Fixed text the Qwen3 chat template renders around tools, so it tokenizes compactly.
_TEMPLATE_TEXT = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>",
    "system\nYou are a helpful customer service agent.\n",
    "user\n",
    "assistant\n<think>\n\n</think>\n\n",
)


def _tool_schema(name: str, description: str, args: tuple[str, ...]) -> dict[str, Any]:
    """An OpenAI-style function schema whose arguments are all required strings."""
    properties = {arg: {"type": "string", "description": f"The {arg.replace('_', ' ')}."} for arg in args}
    parameters = {"type": "object", "properties": properties, "required": list(args)}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def default_corpus() -> list[str]:
    """A deterministic corpus of customer-service dialogue, policy prose, tool schemas, tool calls and results."""
    corpus = [*_TEMPLATE_TEXT, *_POLICY_TEXT]
    corpus.extend(json.dumps(_tool_schema(*tool)) for tool in _TOOLS)
    for index, (customer, item) in enumerate(itertools.product(_CUSTOMERS, _ITEMS)):
        first_name, last_name = customer.split()
        fields = {
            "customer": customer,
            "item": item,
            "city": _CITIES[index % len(_CITIES)],
            "number": 1000000 + 7919 * index,
            "email": f"{first_name.lower()}.{last_name.lower()}{index}@example.com",
            "zip": f"{10000 + 613 * index}",
            "code": f"{index * 104729:06X}",
        }
        corpus.extend(line.format(**fields) for line in _USER_LINES + _AGENT_LINES)
        arguments = {"first_name": first_name, "last_name": last_name, "zip": fields["zip"]}
        corpus.append(json.dumps({"name": "find_user_id_by_name_zip", "arguments": arguments}))
        order = {"order_id": f"#W{fields['number']}", "status": "delivered", "items": [{"name": item}]}
        corpus.append(json.dumps(order))
    return corpus


def build_tokenizer(corpus: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Train a Qwen-style byte-level BPE tokenizer on `corpus`, with Qwen3's added tokens and chat template.

    `vocab_size` counts the added tokens; the result is smaller when the corpus runs out of merges.
    """
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_QWEN_PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIAL_TOKENS) - len(MARKUP_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS])
    tokenizer.add_tokens([AddedToken(token, special=False, normalized=False) for token in MARKUP_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=None,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=None,
        model_max_length=_MAX_POSITION_EMBEDDINGS,
        clean_up_tokenization_spaces=False,
        chat_template=QWEN3_CHAT_TEMPLATE_PATH.read_text(encoding="utf-8"),
    )


def build_tiny_qwen3(
    out_dir: Path,
    *,
    corpus: list[str] | None = None,
    vocab_size: int = 3000,
    hidden_size: int = 64,
    layers: int = 2,
    seed: int = 0,
) -> Path:
    """Save a tiny random-weight Qwen3 causal LM, its tokenizer and a greedy generation config to `out_dir`.

    The model has 4 query and 2 key/value heads (grouped-query attention and q/k norms, like Qwen3), an MLP three
    times `hidden_size` wide, tied embeddings and float32 weights; `seed` fixes them without touching the caller's
    RNG. `corpus` defaults to `default_corpus()`. Load the result with `AutoModelForCausalLM.from_pretrained(out_dir)`
    and `AutoTokenizer.from_pretrained(out_dir)`.
    """
    if hidden_size % _NUM_ATTENTION_HEADS:
        raise ValueError(f"hidden_size must be a multiple of {_NUM_ATTENTION_HEADS}, got {hidden_size}")
    tokenizer = build_tokenizer(default_corpus() if corpus is None else corpus, vocab_size)
    pad_id, eos_id = tokenizer.convert_tokens_to_ids([PAD_TOKEN, EOS_TOKEN])
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=3 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=_NUM_ATTENTION_HEADS,
        num_key_value_heads=_NUM_KEY_VALUE_HEADS,
        head_dim=hidden_size // _NUM_ATTENTION_HEADS,
        max_position_embeddings=_MAX_POSITION_EMBEDDINGS,
        max_window_layers=layers,
        tie_word_embeddings=True,
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    # Qwen3 stops on either end token; greedy decoding keeps tests deterministic.
    model.generation_config = GenerationConfig(
        bos_token_id=pad_id, eos_token_id=[eos_id, pad_id], pad_token_id=pad_id, do_sample=False
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
