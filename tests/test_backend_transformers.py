"""The transformers backend end to end with a tiny random Qwen3: its output is noise, the record must be sane."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from helpers.tiny_qwen import build_tiny_qwen3  # noqa: E402

from castdata.envs import load_domain  # noqa: E402
from castdata.models import open_backend  # noqa: E402
from castdata.models.spec import ModelSpec, Sampling  # noqa: E402
from castdata.models.toolcall_parser import parse_tool_calls  # noqa: E402
from castdata.records import Trajectory  # noqa: E402
from castdata.rollout.episode import run_episode  # noqa: E402

MAX_TOKENS = 24


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3-backend"))


def spec(model_dir: Path, **sampling: float) -> ModelSpec:
    return ModelSpec(
        backend="transformers",
        model=str(model_dir),
        sampling=Sampling(max_tokens=MAX_TOKENS, **sampling),
        chat_template_kwargs={"enable_thinking": False},
    )


def test_episode_with_noise_is_recorded_sanely(model_dir: Path) -> None:
    domain = load_domain("telehealth")
    agent_spec, user_spec = spec(model_dir), spec(model_dir, temperature=1.0, seed=3)

    async def main() -> Trajectory:
        agent, user = open_backend(agent_spec), open_backend(user_spec)
        try:
            return await run_episode(
                domain, domain.task("test", 0), 0, 7, agent, user, agent_spec, user_spec, max_steps=3
            )
        finally:
            await agent.aclose()
            await user.aclose()

    record = asyncio.run(main())
    assert Trajectory.model_validate_json(record.to_json()) == record
    assert record.outcome.termination_reason in {"max_steps", "user_stop", "transfer", "too_many_errors", "user_error"}
    assert record.messages[0]["role"] == "system" and len(record.meta) == len(record.messages)
    agent_turns = [i for i, m in enumerate(record.messages) if m["role"] == "assistant"]
    if record.outcome.termination_reason != "user_error":
        assert record.messages[1]["role"] == "user" and record.messages[1]["content"]
    for index in agent_turns:
        usage = record.meta[index].usage
        assert (
            usage.prompt_tokens > 4000 and 0 < usage.completion_tokens <= MAX_TOKENS
        )  # policy and tools in the prompt
        if record.messages[index].get("tool_calls"):
            assert record.messages[index + 1]["role"] == "tool"


def test_template_tool_calls_parse_back(model_dir: Path) -> None:
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    call = {"name": "get_order_details", "arguments": {"order_id": "#W1"}}
    history = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"type": "function", "function": call},
                {"type": "function", "function": {**call, "arguments": {"order_id": "#W2"}}},
            ],
        },
    ]
    text = tokenizer.apply_chat_template(history, tokenize=False, enable_thinking=False)
    assistant = text.rsplit("<|im_start|>assistant\n", 1)[1].removesuffix("<|im_end|>\n")
    parsed = parse_tool_calls(assistant)
    assert parsed.content == "Checking."
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [
        ("get_order_details", {"order_id": "#W1"}),
        ("get_order_details", {"order_id": "#W2"}),
    ]
