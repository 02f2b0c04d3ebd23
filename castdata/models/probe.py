"""The endpoint probe: every distinct OpenAI-compatible server (and key) of a run answers once before the first
episode, so a dead endpoint or a refused key stops the run with one line and nothing written.

The probe is `GET /models`; a server without that route (404, 405) gets one tiny chat completion instead. A
refused connection, an unknown host, a URL that is no http(s) URL, no answer in time, or a 401/403 is an
`EndpointError` naming the config field (`agent.base_url`, `agent.api_key_env` and the variable's name, never
the key). Anything else (5xx, 429, odd bodies) passes: the run's own retries deal with it.
"""

from __future__ import annotations

import asyncio
import os
import socket

from castdata.errors import EndpointError
from castdata.models.spec import ModelSpec
from castdata.redact import remember

PROBE_TIMEOUT_S = 30.0
NO_ROUTE = (404, 405)


async def probe_endpoints(specs: dict[str, ModelSpec | None]) -> None:
    """Probe the endpoint of every `openai` spec (keyed by its place in the config, e.g. `agent`), once per
    distinct (URL, key variable)."""
    from castdata.models.openai_backend import base_urls

    seen: set[tuple[str, str | None]] = set()
    for where, spec in specs.items():
        if spec is None or spec.backend != "openai":
            continue
        field = f"{where}.options.base_urls" if "base_urls" in spec.options else f"{where}.base_url"
        for url in base_urls(spec):
            if (url, spec.api_key_env) not in seen:
                seen.add((url, spec.api_key_env))
                await _probe(spec, url, field, f"{where}.api_key_env")


async def _probe(spec: ModelSpec, url: str, url_field: str, key_field: str) -> None:
    import openai

    from castdata.models.openai_backend import NO_KEY

    if spec.api_key_env is not None and not os.environ.get(spec.api_key_env):
        raise EndpointError(f"{key_field}: environment variable {spec.api_key_env} is not set")
    key = remember(os.environ[spec.api_key_env]) if spec.api_key_env else NO_KEY
    timeout = min(spec.timeout_s, PROBE_TIMEOUT_S)
    client = openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0, timeout=timeout)
    try:
        try:
            await asyncio.wait_for(client.models.list(), timeout)
        except openai.APIStatusError as err:
            if err.status_code not in NO_ROUTE:
                raise
            ping = client.chat.completions.create(
                model=spec.model, messages=[{"role": "user", "content": "ping"}], max_completion_tokens=1
            )
            await asyncio.wait_for(ping, timeout)
    except openai.APIStatusError as err:
        if err.status_code in (401, 403):
            raise EndpointError(_refused(spec, url, key_field, err.status_code)) from None
    except (openai.APIConnectionError, asyncio.TimeoutError) as err:
        raise EndpointError(f"{url_field}: cannot reach {url} ({_unreachable(err, timeout)})") from None
    except Exception:
        pass
    finally:
        await client.close()


def _refused(spec: ModelSpec, url: str, key_field: str, status: int) -> str:
    if spec.api_key_env is None:
        return f"{key_field}: not set, and {url} requires a key (HTTP {status}); name the variable that holds it"
    return f"{key_field}: {url} refused the key in ${spec.api_key_env} (HTTP {status}); check that variable"


def _unreachable(err: BaseException, timeout: float) -> str:
    """Why a connection failed, from the exception chain: refused, unknown host, not a URL, or no answer."""
    import httpx2

    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused: is the server running?"
        if isinstance(seen, socket.gaierror):
            return "unknown host"
        if isinstance(seen, (httpx2.UnsupportedProtocol, httpx2.InvalidURL)):
            return "not an http(s) URL"
        seen = seen.__cause__ or seen.__context__
    if isinstance(err, (asyncio.TimeoutError, httpx2.TimeoutException)) or "timed out" in str(err).lower():
        return f"no answer within {timeout:g} s"
    return str(err) or type(err).__name__
