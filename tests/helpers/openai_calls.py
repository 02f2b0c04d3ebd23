"""Calls of the openai backend against the loopback chat server: a spec for it, one question, its answer."""

from __future__ import annotations

import asyncio
from typing import Any

from castdata.models.openai_backend import OpenAIBackend
from castdata.models.spec import ModelSpec
from helpers.openai_server import ChatServer

KEY_ENV = "CASTDATA_TEST_OPENAI_KEY"
ASK = [{"role": "user", "content": "Weather in Paris?"}]


def weather(body: dict[str, Any]) -> dict[str, Any]:
    """Calls the tool when offered tools, else answers in text."""
    if body.get("tools"):
        return {"tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}
    return {"content": "Sunny."}


def spec_for(server: ChatServer, **overrides: Any) -> ModelSpec:
    """The openai backend's spec for `server`, with quick retries (`overrides` replace fields)."""
    fields: dict[str, Any] = {
        "backend": "openai",
        "model": "test-model",
        "base_url": server.base_url,
        "api_key_env": KEY_ENV,
        "max_retries": 8,
        "options": {"retry_backoff_s": 0.002},
        **overrides,
    }
    return ModelSpec(**fields)


def run(coro_fn, spec: ModelSpec) -> Any:
    """Open a backend, run `coro_fn(backend)`, close it."""

    async def main() -> Any:
        backend = OpenAIBackend(spec)
        try:
            return await coro_fn(backend)
        finally:
            await backend.aclose()

    return asyncio.run(main())
