"""The loopback server speaks OpenAI chat completions and injects faults the real client sees."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import openai
import pytest
from helpers.openai_server import ChatServer, FaultPlan, Outcome
from openai import AsyncOpenAI, OpenAI

MESSAGES: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def tool_responder(body: dict[str, Any]) -> dict[str, Any]:
    """Always call get_weather; dict arguments are JSON-encoded by the server."""
    return {"tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}


def text_responder(body: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "Sunny."}


def client(server: ChatServer, max_retries: int = 0) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="test-key", max_retries=max_retries)


def async_client(server: ChatServer, max_retries: int = 0) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=max_retries)


def ask(c: OpenAI) -> Any:
    return c.chat.completions.create(model="test-model", messages=MESSAGES, tools=TOOLS)


async def ask_async(c: AsyncOpenAI) -> Any:
    return await c.chat.completions.create(model="test-model", messages=MESSAGES, tools=TOOLS)


def test_tool_call_round_trip() -> None:
    with ChatServer(tool_responder) as server, client(server) as c:
        completion = ask(c)
        choice = completion.choices[0]
        call = choice.message.tool_calls[0]
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        assert call.function.name == "get_weather" and call.type == "function" and call.id
        assert choice.finish_reason == "tool_calls"
        assert completion.object == "chat.completion" and completion.model == "test-model"
        usage = completion.usage
        assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
        assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
        assert server.stats.requests[0]["tools"] == TOOLS
        assert server.stats.requests[0]["messages"] == MESSAGES
        assert server.stats.headers[0]["authorization"] == "Bearer test-key"
        assert server.stats.outcomes["ok"] == 1 and server.stats.total == 1


def test_text_reply_and_models_endpoint() -> None:
    with ChatServer(text_responder) as server, client(server) as c:
        completion = c.chat.completions.create(model="m", messages=MESSAGES)
        assert completion.choices[0].message.content == "Sunny."
        assert completion.choices[0].message.tool_calls is None
        assert completion.choices[0].finish_reason == "stop"
        assert [model.id for model in c.models.list()] == ["test-model"]
        assert server.stats.total == 1


def test_async_client_round_trip() -> None:
    async def main(server: ChatServer) -> Any:
        async with async_client(server) as c:
            return await ask_async(c)

    with ChatServer(tool_responder) as server:
        completion = asyncio.run(main(server))
    assert json.loads(completion.choices[0].message.tool_calls[0].function.arguments) == {"city": "Paris"}


def test_429_carries_retry_after() -> None:
    plan = FaultPlan(rate_429=0.99, retry_after_s=1.5, seed=3)
    assert plan.outcome(0) == "429"
    with ChatServer(tool_responder, plan) as server, client(server) as c:
        with pytest.raises(openai.RateLimitError) as info:
            ask(c)
        assert info.value.status_code == 429
        assert info.value.response.headers["retry-after"] == "1.5"
        assert server.stats.outcomes["429"] == 1


def test_500_is_internal_server_error() -> None:
    plan = FaultPlan(rate_500=0.99, seed=3)
    assert plan.outcome(0) == "500"
    with ChatServer(tool_responder, plan) as server, client(server) as c:
        with pytest.raises(openai.InternalServerError):
            ask(c)
        assert server.stats.outcomes["500"] == 1


def test_dropped_connection_is_connection_error() -> None:
    plan = FaultPlan(rate_drop=0.99, seed=3)
    assert plan.outcome(0) == "drop"
    with ChatServer(tool_responder, plan) as server, client(server) as c:
        with pytest.raises(openai.APIConnectionError):
            ask(c)
        assert server.stats.outcomes["drop"] == 1


def test_malformed_arguments_are_not_json() -> None:
    plan = FaultPlan(rate_malformed=0.99, seed=3)
    assert plan.outcome(0) == "malformed"
    with ChatServer(tool_responder, plan) as server, client(server) as c:
        arguments = ask(c).choices[0].message.tool_calls[0].function.arguments
        assert isinstance(arguments, str)
        with pytest.raises(json.JSONDecodeError):
            json.loads(arguments)
        assert server.stats.outcomes["malformed"] == 1


def test_malformed_without_tool_calls_is_ok() -> None:
    with ChatServer(text_responder, FaultPlan(rate_malformed=0.99, seed=3)) as server, client(server) as c:
        assert c.chat.completions.create(model="m", messages=MESSAGES).choices[0].message.content == "Sunny."
        assert server.stats.outcomes["ok"] == 1 and server.stats.outcomes["malformed"] == 0


def test_fail_first_n() -> None:
    with ChatServer(tool_responder, FaultPlan(fail_first_n=2)) as server, client(server) as c:
        for _ in range(2):
            with pytest.raises(openai.InternalServerError):
                ask(c)
        ask(c)
        assert server.stats.outcomes["500"] == 2 and server.stats.outcomes["ok"] == 1


def test_responder_exception_is_500_and_not_retried() -> None:
    def broken(body: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("boom")

    with ChatServer(broken) as server, client(server, max_retries=3) as c:
        with pytest.raises(openai.InternalServerError, match="boom"):
            ask(c)
        assert server.stats.total == 1 and server.stats.outcomes["error"] == 1


def test_latency_is_applied() -> None:
    with ChatServer(tool_responder, FaultPlan(latency_s=0.15)) as server, client(server) as c:
        start = time.monotonic()
        for _ in range(3):
            ask(c)
        assert time.monotonic() - start >= 0.45


def test_concurrent_requests_are_in_flight_together() -> None:
    n = 32

    async def main(server: ChatServer) -> None:
        async with async_client(server) as c:
            await asyncio.gather(*(ask_async(c) for _ in range(n)))

    # each request is held 1 s: long enough for all of them to be opened on a loaded machine (at 0.2 s, a busy
    # suite saw only 27 of 32 at once); one after another they would take 32 s
    with ChatServer(tool_responder, FaultPlan(latency_s=1.0)) as server:
        start = time.monotonic()
        asyncio.run(main(server))
        elapsed = time.monotonic() - start
        assert server.stats.max_in_flight >= n - 2
        assert server.stats.in_flight == 0
        assert server.stats.outcomes["ok"] == n
    assert elapsed < 6.0


def test_outcomes_follow_the_plan() -> None:
    """Sequentially, the i-th request meets plan.outcome(i), as the client classifies it."""
    plan = FaultPlan(rate_429=0.15, rate_500=0.15, rate_drop=0.15, rate_malformed=0.15, seed=11)
    seen: list[Outcome] = []
    with ChatServer(tool_responder, plan) as server, client(server) as c:
        for _ in range(40):
            try:
                arguments = ask(c).choices[0].message.tool_calls[0].function.arguments
            except openai.RateLimitError:
                seen.append("429")
            except openai.InternalServerError:
                seen.append("500")
            except openai.APIConnectionError:
                seen.append("drop")
            else:
                try:
                    json.loads(arguments)
                    seen.append("ok")
                except json.JSONDecodeError:
                    seen.append("malformed")
        expected = [plan.outcome(i) for i in range(40)]
        assert seen == expected
        assert len(set(expected)) == 5
        assert all(server.stats.outcomes[o] == expected.count(o) for o in ("ok", "429", "500", "drop", "malformed"))


def test_client_retries_recover_from_faults() -> None:
    """With 20% failures and max_retries=5, all 50 concurrent requests succeed."""
    n = 50
    plan = FaultPlan(rate_429=0.08, retry_after_s=0.01, rate_500=0.06, rate_drop=0.06, seed=7)

    async def main(server: ChatServer) -> list[Any]:
        async with async_client(server, max_retries=5) as c:
            return await asyncio.gather(*(ask_async(c) for _ in range(n)))

    with ChatServer(tool_responder, plan) as server:
        completions = asyncio.run(main(server))
        stats = server.stats
    assert len(completions) == n
    assert all(json.loads(c.choices[0].message.tool_calls[0].function.arguments) for c in completions)
    # Outcomes depend only on arrival index, so the number of attempts is fixed by the plan.
    planned = [plan.outcome(i) for i in range(stats.total)]
    assert planned.count("ok") == n and planned[-1] == "ok"
    assert stats.outcomes["ok"] == n and stats.total > n
    assert sum(stats.outcomes.values()) == stats.total


def test_stop_closes_idle_connections_quickly() -> None:
    server = ChatServer(tool_responder).start()
    with client(server) as c:
        ask(c)  # leaves a keep-alive connection open
        start = time.monotonic()
        server.stop()
        server.stop()
        assert time.monotonic() - start < 2.5  # half the 5 s it would wait for a connection left open
        with pytest.raises(openai.APIConnectionError):
            ask(c)


def test_fault_plan_rejects_rates_that_never_succeed() -> None:
    with pytest.raises(ValueError):
        FaultPlan(rate_429=0.5, rate_500=0.5)
    with pytest.raises(ValueError):
        FaultPlan(rate_drop=-0.1)
