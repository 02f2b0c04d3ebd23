"""The openai backend against the loopback server: tool calls, usage and cost, retries, Retry-After,
timeouts, adaptive concurrency, the API key read at call time, and what the request carries."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from helpers.openai_calls import ASK, KEY_ENV, run, spec_for, weather
from helpers.openai_server import ChatServer, FaultPlan

from castdata.errors import ConfigError
from castdata.models.base import InfrastructureError
from castdata.models.limits import AdaptiveLimiter
from castdata.models.openai_backend import OpenAIBackend
from castdata.models.spec import ModelSpec, Sampling

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, "sk-test-first")
    return "sk-test-first"


def test_tool_call_usage_and_cost() -> None:
    with ChatServer(weather) as server:
        spec = spec_for(server, price_in_per_mtok=2.0, price_out_per_mtok=8.0)
        reply = run(lambda b: b.chat(ASK, tools=TOOLS), spec)
    (call,) = reply.tool_calls
    assert (call.name, call.arguments, call.raw_arguments) == ("get_weather", {"city": "Paris"}, '{"city": "Paris"}')
    usage = reply.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0 and usage.latency_s > 0
    assert usage.cost_usd == pytest.approx((usage.prompt_tokens * 2.0 + usage.completion_tokens * 8.0) / 1e6)


def test_request_carries_sampling_seed_schema_and_template_kwargs() -> None:
    schema = {"type": "object", "properties": {"verdict": {"type": "string"}}}
    with ChatServer(weather) as server:
        spec = spec_for(
            server,
            sampling=Sampling(temperature=0.7, top_p=0.9, max_tokens=77, seed=5),
            chat_template_kwargs={"enable_thinking": False},
        )
        reply = run(lambda b: b.complete(ASK, json_schema=schema), spec)
        body = server.stats.requests[0]
    assert reply.content == "Sunny." and not reply.tool_calls
    assert (body["temperature"], body["top_p"], body["max_completion_tokens"], body["seed"]) == (0.7, 0.9, 77, 5)
    assert body["response_format"]["json_schema"]["schema"] == schema
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "tools" not in body


def test_recorded_tool_calls_go_out_as_json_strings() -> None:
    history = [
        *ASK,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "sunny"},
    ]
    with ChatServer(weather) as server:
        run(lambda b: b.chat(history, tools=TOOLS), spec_for(server))
        sent = server.stats.requests[0]["messages"]
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris"}'
    assert history[1]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}  # the record is untouched


def test_text_tool_calls_from_a_server_without_a_tool_parser() -> None:
    def raw_qwen(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "content": '<think>need weather</think>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
        }

    with ChatServer(raw_qwen) as server:
        reply = run(lambda b: b.chat(ASK, tools=TOOLS), spec_for(server))
    assert reply.content is None
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("get_weather", {"city": "Oslo"})]


def test_malformed_arguments_are_kept_raw() -> None:
    with ChatServer(weather, FaultPlan(rate_malformed=0.99)) as server:
        reply = run(lambda b: b.chat(ASK, tools=TOOLS), spec_for(server))
    (call,) = reply.tool_calls
    assert call.arguments is None and call.name == "get_weather"
    assert call.raw_arguments == '{"city": "Paris"}'[: len('{"city": "Paris"}') // 2]


def test_retries_ride_out_429_500_and_dropped_connections() -> None:
    faults = FaultPlan(rate_429=0.15, rate_500=0.15, rate_drop=0.15, retry_after_s=0.001, seed=7)
    with ChatServer(weather, faults) as server:
        replies = run(lambda b: asyncio.gather(*(b.chat(ASK, tools=TOOLS) for _ in range(40))), spec_for(server))
        outcomes = dict(server.stats.outcomes)
    assert all(r.tool_calls[0].arguments == {"city": "Paris"} for r in replies)
    assert outcomes["ok"] == 40 and min(outcomes["429"], outcomes["500"], outcomes["drop"]) > 0


def test_truncated_bodies_and_empty_choices_are_retried() -> None:
    faults = FaultPlan(rate_truncated=0.3, rate_empty=0.3, seed=5)
    with ChatServer(weather, faults) as server:
        burst = lambda b: asyncio.gather(*(b.chat(ASK, tools=TOOLS) for _ in range(30)))  # noqa: E731
        replies = run(burst, spec_for(server, max_retries=30))
        outcomes = dict(server.stats.outcomes)
    assert all(r.tool_calls[0].arguments == {"city": "Paris"} for r in replies)
    assert outcomes["ok"] == 30 and min(outcomes["truncated"], outcomes["empty"]) > 0


def test_truncated_bodies_count_against_max_retries() -> None:
    with ChatServer(weather, FaultPlan(rate_truncated=0.99)) as server:
        with pytest.raises(InfrastructureError, match="gave up after 3 attempts; last error: JSONDecodeError"):
            run(lambda b: b.chat(ASK), spec_for(server, max_retries=2))
        assert server.stats.total == 3
    with ChatServer(weather, FaultPlan(rate_empty=0.99)) as server:
        with pytest.raises(InfrastructureError, match=r"gave up after 2 attempts; last error: BadResponse.*no choices"):
            run(lambda b: b.chat(ASK), spec_for(server, max_retries=1))
        assert server.stats.total == 2


def first_seed(predicate) -> int:
    return next(seed for seed in range(10_000) if predicate(seed))


def test_retry_after_is_honoured() -> None:
    seed = first_seed(
        lambda s: (
            FaultPlan(rate_429=0.5, seed=s).outcome(0) == "429" and FaultPlan(rate_429=0.5, seed=s).outcome(1) == "ok"
        )
    )
    with ChatServer(weather, FaultPlan(rate_429=0.5, retry_after_s=0.3, seed=seed)) as server:
        started = time.perf_counter()
        run(lambda b: b.chat(ASK), spec_for(server))
        elapsed = time.perf_counter() - started
        assert server.stats.total == 2
    # the backoff alone (at most 2 ms) would not wait 0.3 s; 4 s leaves a busy machine room
    assert 0.3 <= elapsed < 4.0


def test_exhausted_retries_are_an_infrastructure_error() -> None:
    with ChatServer(weather, FaultPlan(fail_first_n=1000)) as server:
        with pytest.raises(InfrastructureError, match="gave up after 3 attempts"):
            run(lambda b: b.chat(ASK), spec_for(server, max_retries=2))
        assert server.stats.total == 3


def test_timeouts_are_retried_then_given_up() -> None:
    with ChatServer(weather, FaultPlan(latency_s=2.0)) as server:
        started = time.perf_counter()
        with pytest.raises(InfrastructureError):
            run(lambda b: b.chat(ASK), spec_for(server, timeout_s=0.2, max_retries=1))
        assert time.perf_counter() - started < 1.5
        assert server.stats.total == 2


@pytest.mark.parametrize("key", ["sk-test-first", "gsk_live.9f8e7d6c5b4a", "Bearer-ish:0123456789"])
def test_permanent_errors_are_not_retried_and_keys_in_them_are_redacted(key: str, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, key)

    def broken(body: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError(f"Incorrect API key provided: {key}")

    with ChatServer(broken) as server:  # answers 500 with x-should-retry: false
        with pytest.raises(InfrastructureError, match=r"Incorrect API key provided: \[redacted\]") as caught:
            run(lambda b: b.chat(ASK), spec_for(server))
        assert server.stats.total == 1
    assert key not in str(caught.value)


def test_concurrency_is_bounded_and_cut_on_rate_limits() -> None:
    async def burst(backend: OpenAIBackend) -> float:
        await asyncio.gather(*(backend.chat(ASK) for _ in range(60)))
        return backend.limiter.limit

    with ChatServer(weather, FaultPlan(latency_s=0.02, rate_429=0.3, retry_after_s=0.001, seed=1)) as server:
        limit = run(burst, spec_for(server, max_concurrency=8, max_retries=20))
        assert server.stats.max_in_flight <= 8
        assert server.stats.outcomes["429"] > 0
    assert limit < 8


def test_limiter_cuts_once_per_generation_and_grows_back() -> None:
    limiter = AdaptiveLimiter(16)

    async def main() -> None:
        async with limiter.slot() as first, limiter.slot() as second:
            limiter.rate_limited(first)
            limiter.rate_limited(second)  # same burst: no second cut
        assert (limiter.limit, limiter.capacity) == (8.0, 8)
        for _ in range(200):
            async with limiter.slot():
                limiter.succeeded()
        assert limiter.limit == 16.0

    asyncio.run(main())


def test_limiter_admits_waiters_as_slots_free() -> None:
    limiter = AdaptiveLimiter(2)
    peak = 0

    async def job() -> None:
        nonlocal peak
        async with limiter.slot():
            peak = max(peak, limiter.in_flight)
            await asyncio.sleep(0.001)

    async def main() -> None:
        await asyncio.wait_for(asyncio.gather(*(job() for _ in range(20))), 5)

    asyncio.run(main())
    assert peak == 2 and limiter.in_flight == 0


def test_api_key_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    async def two_calls(backend: OpenAIBackend) -> None:
        await backend.chat(ASK)
        monkeypatch.setenv(KEY_ENV, "sk-test-rotated")
        await backend.chat(ASK)

    with ChatServer(weather) as server:
        spec = spec_for(server)
        run(two_calls, spec)
        assert [h["authorization"] for h in server.stats.headers] == ["Bearer sk-test-first", "Bearer sk-test-rotated"]
    assert "sk-test" not in spec.model_dump_json()


def test_missing_key_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ConfigError, match=KEY_ENV):
        OpenAIBackend(ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV))
    with pytest.raises(ConfigError, match="api_key_env: required"):
        OpenAIBackend(ModelSpec(backend="openai", model="gpt-4o"))
    with pytest.raises(ConfigError, match="unknown openai option"):
        OpenAIBackend(
            ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:9/v1", options={"mistakes": {}})
        )
