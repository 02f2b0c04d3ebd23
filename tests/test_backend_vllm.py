"""The vllm backend's batch scheduler, with a stand-in engine that has `vllm.LLM.chat`'s signature."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from castdata.envs import load_domain
from castdata.errors import ConfigError
from castdata.models import open_backend
from castdata.models.base import InfrastructureError
from castdata.models.scripted import ScriptedBackend
from castdata.models.spec import ModelSpec, Sampling
from castdata.models.vllm_backend import VLLMBackend
from castdata.rollout.episode import run_episode

LOOKUP = '<tool_call>\n{"name": "find_user_id_by_email", "arguments": {"email": "nobody@example.com"}}\n</tool_call>'
CLOSING = "<think>\nDone.\n</think>\n\nThank you. Is there anything else I can help you with?"


class StandInEngine:
    """Answers like a Qwen3 agent (two lookups, then a closing line) after a short 'GPU' pause; records batches."""

    def __init__(self, step_s: float = 0.02, fail_on: str | None = None) -> None:
        self.step_s = step_s
        self.fail_on = fail_on
        self.batches: list[int] = []
        self.tools_seen: list[Any] = []
        self.busy = threading.Lock()  # asserts calls never overlap

    def chat(
        self,
        messages,
        sampling_params=None,
        use_tqdm=True,
        lora_request=None,
        chat_template=None,
        chat_template_content_format="auto",
        add_generation_prompt=True,
        continue_final_message=False,
        tools=None,
        chat_template_kwargs=None,
        mm_processor_kwargs=None,
    ) -> list[SimpleNamespace]:
        assert self.busy.acquire(blocking=False), "overlapping engine calls"
        try:
            assert len(sampling_params) == len(messages)
            if self.fail_on and any(self.fail_on in json.dumps(conversation) for conversation in messages):
                raise ValueError("prompt longer than max_model_len")
            self.batches.append(len(messages))
            self.tools_seen.append(tools)
            time.sleep(self.step_s)
            return [self._answer(conversation) for conversation in messages]
        finally:
            self.busy.release()

    @staticmethod
    def _answer(conversation: list[dict[str, Any]]) -> SimpleNamespace:
        turns = sum(1 for message in conversation if message["role"] == "assistant")
        text = LOOKUP if turns < 2 else CLOSING
        return SimpleNamespace(
            prompt_token_ids=list(range(len(json.dumps(conversation)) // 4)),
            outputs=[SimpleNamespace(text=text, token_ids=list(range(len(text) // 4)))],
        )


def backend(engine: StandInEngine, **options: Any) -> VLLMBackend:
    spec = ModelSpec(backend="vllm", model="Qwen/Qwen3-8B", sampling=Sampling(temperature=0.6, seed=1), options=options)
    return VLLMBackend(spec, engine=engine, make_params=lambda **params: params)


def test_concurrent_episodes_are_batched() -> None:
    domain = load_domain("retail")
    engine = StandInEngine()
    agent_spec, user_spec = ModelSpec(backend="vllm", model="Qwen/Qwen3-8B"), ModelSpec(model="scripted-user")

    async def main() -> list:
        agent, user = backend(engine, batch_size=64), ScriptedBackend(user_spec)
        try:
            return await asyncio.gather(
                *(
                    run_episode(domain, domain.task("test", index), 0, index, agent, user, agent_spec, user_spec)
                    for index in range(32)
                )
            )
        finally:
            await agent.aclose()

    records = asyncio.run(main())
    assert all(r.outcome.termination_reason == "user_stop" for r in records)
    assert all(sum(1 for m in r.messages if m["role"] == "tool") == 2 for r in records)
    assert sum(engine.batches) == 32 * 3
    assert len(engine.batches) <= 12 and max(engine.batches) >= 16  # batches, not 96 single requests
    assert all(tools == domain.tool_schemas for tools in engine.tools_seen)
    usage = records[0].meta[2].usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0


def test_batches_respect_the_size_limit_and_group_by_tools() -> None:
    engine = StandInEngine(step_s=0.01)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]

    async def main() -> list:
        vllm = backend(engine, batch_size=5)
        try:
            asks = [vllm.chat([{"role": "user", "content": str(i)}], tools=tools if i % 2 else None) for i in range(20)]
            return await asyncio.gather(*asks)
        finally:
            await vllm.aclose()

    replies = asyncio.run(main())
    assert len(replies) == 20 and max(engine.batches) <= 5 and sum(engine.batches) == 20
    assert sorted(engine.tools_seen, key=str).count(None) >= 2 and tools in engine.tools_seen
    assert replies[1].tool_calls[0].name == "find_user_id_by_email"


def test_a_failing_request_fails_alone() -> None:
    engine = StandInEngine(fail_on="poison")

    async def main() -> list:
        vllm = backend(engine)
        try:
            asks = [vllm.chat([{"role": "user", "content": "poison" if i == 3 else "fine"}]) for i in range(8)]
            return await asyncio.gather(*asks, return_exceptions=True)
        finally:
            await vllm.aclose()

    results = asyncio.run(main())
    assert isinstance(results[3], InfrastructureError) and "max_model_len" in str(results[3])
    assert all(not isinstance(r, Exception) for i, r in enumerate(results) if i != 3)


def test_sampling_parameters_and_seed_reach_the_engine() -> None:
    seen: list[dict[str, Any]] = []

    class Recording(StandInEngine):
        def chat(self, messages, sampling_params=None, **kwargs):
            seen.extend(sampling_params)
            return super().chat(messages, sampling_params, **kwargs)

    async def main() -> None:
        vllm = backend(Recording())
        try:
            await vllm.complete([{"role": "user", "content": "judge"}], json_schema={"type": "object"})
        finally:
            await vllm.aclose()

    asyncio.run(main())
    assert seen == [
        {"temperature": 0.6, "top_p": 1.0, "max_tokens": 1024, "seed": 1, "json_schema": {"type": "object"}}
    ]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_vllm_names_the_extra() -> None:
    with pytest.raises(ConfigError, match=r"pip install 'castdata\[vllm\]'"):
        open_backend(ModelSpec(backend="vllm", model="Qwen/Qwen3-8B"))
