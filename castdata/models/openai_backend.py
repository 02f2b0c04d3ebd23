"""`backend: openai`: the official async OpenAI client, for OpenAI and any OpenAI-compatible server
(`vllm serve ... --enable-auto-tool-choice --tool-call-parser hermes`, SGLang).

Native tool calls; a server without a tool-call parser that leaves `<tool_call>` blocks in the text is
parsed too. Retries (429, 408, 409, 5xx, timeouts, dropped connections, 200s whose body is not JSON or is cut
short, completions without choices) with backoff and `Retry-After` are ours (the client's own are off), inside
an adaptive concurrency limit for the endpoint. The API key is read from `os.environ[spec.api_key_env]` at each
request and never kept in the spec.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import time
from contextlib import nullcontext
from typing import Any

import httpx2
import openai

from castdata.errors import ConfigError
from castdata.models.base import Reply, ToolCall
from castdata.models.chat import ChatBackend, ChatCall, wire_messages
from castdata.models.limits import AdaptiveLimiter
from castdata.models.retry import RetryPolicy, Transient, call_with_retries
from castdata.models.spec import ModelSpec, is_http_url
from castdata.models.toolcall_parser import json_object, parse_tool_calls
from castdata.redact import remember

NO_KEY = "EMPTY"  # what local servers without authentication get (the convention of vLLM's docs)


class BadResponse(RuntimeError):
    """A 200 that is no usable completion (no `choices`, or not a completion object at all): transient."""


class OpenAIBackend(ChatBackend):
    """Chat completions over HTTP. Options: `traits` (user simulator), `retry_backoff_s` (first backoff
    ceiling, default 1), `retry_backoff_max_s` (default 60), `base_urls` (several servers of one model instead
    of `base_url`: each takes up to `max_concurrency` requests, and each request goes to the one with the
    fewest outstanding)."""

    OPTIONS = ChatBackend.OPTIONS | {"retry_backoff_s", "retry_backoff_max_s", "base_urls"}

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        self.urls = base_urls(spec)
        if spec.api_key_env is None and spec.base_url is None and "base_urls" not in spec.options:
            raise ConfigError("api_key_env: required for the OpenAI API (the name of the variable holding the key)")
        if spec.api_key_env is not None and not remember(os.environ.get(spec.api_key_env)):
            raise ConfigError(f"api_key_env: environment variable {spec.api_key_env} is not set")
        self.limiter = AdaptiveLimiter(spec.max_concurrency * len(self.urls))
        self.outstanding = dict.fromkeys(self.urls, 0)
        self.permits: Any = None  # set by a cluster executor: `permits.hold(url)` bounds requests cluster-wide
        self.policy = RetryPolicy(
            max_retries=spec.max_retries,
            base_s=float(spec.options.get("retry_backoff_s", 1.0)),
            max_s=float(spec.options.get("retry_backoff_max_s", 60.0)),
            timeout_s=spec.timeout_s,
        )
        self.rng = random.Random()
        self.clients = {
            url: openai.AsyncOpenAI(
                base_url=url,
                api_key=self._api_key,
                max_retries=0,
                timeout=spec.timeout_s,
                http_client=_http_client(spec.max_concurrency),
            )
            for url in self.urls
        }

    async def _api_key(self) -> str:
        """Called by the client before each request; the value is remembered for redaction."""
        return remember(os.environ[self.spec.api_key_env]) if self.spec.api_key_env else NO_KEY

    def _request(self, call: ChatCall) -> dict[str, Any]:
        """The `chat.completions.create` arguments of one call."""
        sampling = self.spec.sampling
        request: dict[str, Any] = {
            "model": self.spec.model,
            "messages": wire_messages(call.messages),
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_completion_tokens": sampling.max_tokens,
        }
        if call.tools:
            request["tools"] = call.tools
        if call.seed is not None:
            request["seed"] = call.seed
        if call.json_schema is not None:
            schema = {"name": "output", "schema": call.json_schema}
            request["response_format"] = {"type": "json_schema", "json_schema": schema}
        if self.spec.chat_template_kwargs:  # vLLM and SGLang read these; OpenAI itself does not take them
            request["extra_body"] = {"chat_template_kwargs": self.spec.chat_template_kwargs}
        return request

    async def _complete(self, call: ChatCall) -> Reply:
        request = self._request(call)
        started = time.perf_counter()
        completion = await call_with_retries(
            lambda: self._send(request),
            policy=self.policy,
            limiter=self.limiter,
            classify=classify,
            what=f"{self.spec.label} at {', '.join(self.urls)}",
            rng=self.rng,
        )
        message = completion.choices[0].message
        parsed = parse_tool_calls(message.content or "")
        calls = [
            ToolCall(
                id=call.id,
                name=call.function.name,
                arguments=json_object(call.function.arguments),
                raw_arguments=call.function.arguments,
            )
            for call in message.tool_calls or []
            if call.type == "function"
        ]
        usage = completion.usage
        return Reply(
            content=parsed.content or None,
            tool_calls=calls or parsed.tool_calls,
            usage=self.usage(
                usage.prompt_tokens if usage else 0,
                usage.completion_tokens if usage else 0,
                time.perf_counter() - started,
            ),
        )

    async def _send(self, request: dict[str, Any]) -> Any:
        """One attempt, at the endpoint with the fewest outstanding requests (inside the backend-wide limit, so
        none has more than `max_concurrency`), holding a cluster-wide permit when a cluster executor set one."""
        url = min(self.urls, key=self.outstanding.__getitem__)
        self.outstanding[url] += 1
        try:
            async with self.permits.hold(url) if self.permits else nullcontext():
                completion = await self.clients[url].chat.completions.create(**request)
        finally:
            self.outstanding[url] -= 1
        if not getattr(completion, "choices", None):
            raise BadResponse(f"{url} answered 200 with no choices: {str(completion)[:200]}")
        return completion

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.close()


def base_urls(spec: ModelSpec) -> list[str]:
    """The servers of a spec: `options.base_urls`, else `base_url`, else `$OPENAI_BASE_URL` or the OpenAI API."""
    urls = spec.options.get("base_urls")
    if urls is None:
        return [spec.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"]
    if spec.base_url is not None:
        raise ConfigError("options.base_urls: give either base_url or options.base_urls, not both")
    if not isinstance(urls, list) or not urls or not all(is_http_url(url) for url in urls):
        raise ConfigError(f"options.base_urls: must be a non-empty list of http(s) URLs (got {urls!r})")
    return list(dict.fromkeys(urls))


def _http_client(max_concurrency: int) -> httpx2.AsyncClient:
    """A connection pool as large as the concurrency; aiohttp when installed (about twice httpx's
    throughput at a few hundred concurrent requests)."""
    limits = httpx2.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency)
    try:
        return openai.DefaultAioHttpClient(limits=limits)
    except RuntimeError:  # the openai[aiohttp] extra is not installed
        return openai.DefaultAsyncHttpxClient(limits=limits)


def classify(err: BaseException) -> Transient | None:
    """Transient: connection errors, timeouts, 408, 409, 429 and 5xx (unless the server says not to retry), and
    a 200 whose body is not JSON (cut short), not a completion, or has no choices."""
    if isinstance(err, (json.JSONDecodeError, openai.APIResponseValidationError, BadResponse)):
        return Transient()
    if isinstance(err, openai.APIStatusError):
        headers = err.response.headers
        if headers.get("x-should-retry") == "false":
            return None
        status = err.status_code
        if status in (408, 409, 429) or status >= 500:
            return Transient(rate_limited=status == 429, retry_after_s=retry_after(headers))
        return None
    if isinstance(err, openai.APIConnectionError):  # timeouts included
        return Transient()
    return None


def retry_after(headers: httpx2.Headers) -> float | None:
    """Seconds the server asks us to wait: `retry-after-ms`, or `retry-after` in seconds or as an HTTP date."""
    if "retry-after-ms" in headers:
        try:
            return float(headers["retry-after-ms"]) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
