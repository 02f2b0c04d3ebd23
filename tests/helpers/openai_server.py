"""Loopback OpenAI-compatible chat-completions server with fault injection, for tests.

Example::

    def responder(body: dict) -> dict:
        return {"role": "assistant", "content": "hi"}

    with ChatServer(responder, FaultPlan(rate_429=0.1, retry_after_s=0.01, seed=1)) as server:
        client = OpenAI(base_url=server.base_url, api_key="test-key")
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert server.stats.outcomes["ok"] == 1

Only the standard library is used. Requests are handled by a ``ThreadingHTTPServer`` (one
daemon thread per connection, HTTP/1.1 keep-alive) bound to 127.0.0.1 on an ephemeral port.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, cast

Message = dict[str, Any]
Responder = Callable[[dict[str, Any]], Message]
Outcome = Literal["ok", "429", "500", "401", "drop", "truncated", "empty", "malformed", "error"]
OUTCOMES: tuple[Outcome, ...] = ("ok", "429", "500", "401", "drop", "truncated", "empty", "malformed", "error")

_CHAT_PATH = "/v1/chat/completions"
_MODELS_PATH = "/v1/models"
_STOP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class FaultPlan:
    """Which chat-completion requests fail, and how.

    The outcome of the request with arrival index ``i`` (0-based, counting every chat request,
    retries included) is a pure function of ``(seed, i)``; see :meth:`outcome`. Draws are
    independent per request and the rates sum to less than 1, so a client that retries
    eventually gets a clean response.
    """

    latency_s: float = 0.0
    """Sleep before answering every chat request, whatever its outcome."""
    rate_429: float = 0.0
    """Probability of HTTP 429 (rate limited)."""
    retry_after_s: float = 0.0
    """Value of the ``Retry-After`` header sent with each 429."""
    rate_500: float = 0.0
    """Probability of HTTP 500."""
    rate_drop: float = 0.0
    """Probability of closing the connection without sending any response."""
    rate_truncated: float = 0.0
    """Probability of a 200 whose JSON body is cut in half (``Content-Length`` matching the cut body)."""
    rate_empty: float = 0.0
    """Probability of a 200 completion with an empty ``choices`` list."""
    rate_malformed: float = 0.0
    """Probability of a 200 whose tool-call ``arguments`` are truncated (not valid JSON).
    Applies only when the responder's message has tool calls; otherwise the request is ok."""
    fail_first_n: int = 0
    """The first ``n`` requests are answered with HTTP 500 regardless of the rates."""
    api_key: str | None = None
    """When set, every request (``/models`` included) without ``Authorization: Bearer <api_key>`` gets a 401
    whose body quotes the key it was sent, as real servers do."""
    models_route: bool = True
    """False: ``GET /models`` answers 404, as servers without that route do."""
    seed: int = 0

    def __post_init__(self) -> None:
        rates = (
            self.rate_429,
            self.rate_500,
            self.rate_drop,
            self.rate_truncated,
            self.rate_empty,
            self.rate_malformed,
        )
        if any(not 0.0 <= rate <= 1.0 for rate in rates) or sum(rates) >= 1.0:
            raise ValueError(f"fault rates must lie in [0, 1] and sum to < 1, got {rates}")
        if self.latency_s < 0 or self.retry_after_s < 0 or self.fail_first_n < 0:
            raise ValueError("latency_s, retry_after_s and fail_first_n must be >= 0")

    def outcome(self, index: int) -> Outcome:
        """Planned outcome of the ``index``-th chat request (``malformed`` may still end ``ok``)."""
        if index < self.fail_first_n:
            return "500"
        draw = random.Random(f"{self.seed}:{index}").random()
        faults: tuple[tuple[Outcome, float], ...] = (
            ("429", self.rate_429),
            ("500", self.rate_500),
            ("drop", self.rate_drop),
            ("truncated", self.rate_truncated),
            ("empty", self.rate_empty),
            ("malformed", self.rate_malformed),
        )
        for outcome, rate in faults:
            if draw < rate:
                return outcome
            draw -= rate
        return "ok"


@dataclass
class ServerStats:
    """Live counters of chat-completion requests; written under ``lock``, safe to read anytime.

    ``outcomes`` is counted before the response is written, so a client that has its answer
    already sees it counted. ``error`` counts responder exceptions (answered with HTTP 500 and
    ``x-should-retry: false``, so clients do not retry them).
    """

    total: int = 0
    outcomes: dict[Outcome, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    in_flight: int = 0
    max_in_flight: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Parsed request bodies, in arrival order."""
    headers: list[dict[str, str]] = field(default_factory=list)
    """Request headers (lower-cased names), aligned with ``requests``."""
    models_requests: int = 0
    """``GET`` requests (``/models`` probes) that got past the key check."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


class _HTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its :class:`ChatServer` and is quiet about disconnects."""

    daemon_threads = True
    request_queue_size = 512

    def __init__(self, owner: ChatServer) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore connection errors (client went away, server stopping); report the rest."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """HTTP plumbing; the decisions are made by :meth:`ChatServer._chat`."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes

    @property
    def owner(self) -> ChatServer:
        return cast(_HTTPServer, self.server).owner

    def setup(self) -> None:
        super().setup()
        self.owner._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.owner._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging."""

    def refused_key(self) -> bool:
        """Answer 401 (quoting the key sent) when the server wants a key and did not get it; True if it did."""
        wanted = self.owner.faults.api_key
        sent = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        if wanted is None or sent == wanted:
            return False
        self.owner._record("401")
        self.send_json(401, _error_body(f"Incorrect API key provided: {sent}", "invalid_api_key"))
        return True

    def do_GET(self) -> None:
        if self.path.rstrip("/") != _MODELS_PATH or not self.owner.faults.models_route:
            self.send_json(404, _error_body(f"no route for GET {self.path}", "not_found"))
            return
        if self.refused_key():
            return
        with self.owner.stats.lock:
            self.owner.stats.models_requests += 1
        model = {"id": "test-model", "object": "model", "created": 0, "owned_by": "castdata-tests"}
        self.send_json(200, {"object": "list", "data": [model]})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != _CHAT_PATH:
            self.send_json(404, _error_body(f"no route for POST {self.path}", "not_found"))
            return
        if self.refused_key():
            return
        try:
            body = json.loads(raw)
        except ValueError as exc:
            self.send_json(400, _error_body(f"invalid JSON body: {exc}", "invalid_request_error"))
            return
        if not isinstance(body, dict):
            self.send_json(400, _error_body("body must be a JSON object", "invalid_request_error"))
        elif body.get("stream"):
            self.send_json(400, _error_body("streaming is not supported", "invalid_request_error"))
        else:
            self.owner._chat(self, body)

    def send_json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None, cut: bool = False
    ) -> None:
        """Write a complete JSON response with Content-Length (keeps the connection reusable); `cut` sends
        only the first half of the JSON text."""
        data = json.dumps(payload).encode()
        data = data[: len(data) // 2] if cut else data
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class ChatServer:
    """OpenAI-compatible ``POST /v1/chat/completions`` and ``GET /v1/models`` on loopback.

    ``responder`` gets the parsed request body and returns the assistant message, e.g.
    ``{"content": None, "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}``.
    Missing ``role``/``content``/tool-call ``id``/``type`` are filled in and dict ``arguments``
    are JSON-encoded. The responder is called only for requests planned ``ok`` or ``malformed``,
    so injected 429/500/drop/truncated/empty faults never advance a stateful responder.
    """

    def __init__(self, responder: Responder, faults: FaultPlan | None = None) -> None:
        self.responder = responder
        self.faults = faults or FaultPlan()
        self.stats = ServerStats()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._connections_changed = threading.Condition()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``; valid after :meth:`start`."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> ChatServer:
        """Bind an ephemeral port and serve from a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="chat-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, wake sleeping handlers, close open connections; idempotent and bounded."""
        if self._httpd is None or self._stopping.is_set():
            return
        self._httpd.shutdown()
        with self._connections_changed:
            self._stopping.set()
            for conn in self._connections:
                _shutdown_socket(conn)
            self._connections_changed.wait_for(lambda: not self._connections, timeout=_STOP_TIMEOUT_S)
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=_STOP_TIMEOUT_S)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _track(self, conn: socket.socket) -> None:
        with self._connections_changed:
            self._connections.add(conn)
            if self._stopping.is_set():
                _shutdown_socket(conn)

    def _untrack(self, conn: socket.socket) -> None:
        with self._connections_changed:
            self._connections.discard(conn)
            self._connections_changed.notify_all()

    def _record(self, outcome: Outcome) -> None:
        with self.stats.lock:
            self.stats.outcomes[outcome] += 1

    def _chat(self, handler: _Handler, body: dict[str, Any]) -> None:
        """Answer one chat-completion request according to the fault plan."""
        stats = self.stats
        with stats.lock:
            index = stats.total
            stats.total += 1
            stats.requests.append(body)
            stats.headers.append({name.lower(): value for name, value in handler.headers.items()})
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            self._stopping.wait(self.faults.latency_s)
            self._answer(handler, body, index, self.faults.outcome(index))
        finally:
            with stats.lock:
                stats.in_flight -= 1

    def _answer(self, handler: _Handler, body: dict[str, Any], index: int, planned: Outcome) -> None:
        if planned == "429":
            self._record("429")
            retry_after = {"Retry-After": format(self.faults.retry_after_s, "g")}
            handler.send_json(429, _error_body("injected rate limit", "rate_limit_exceeded"), retry_after)
            return
        if planned == "500":
            self._record("500")
            handler.send_json(500, _error_body("injected server error", "server_error"))
            return
        if planned == "drop":
            self._record("drop")
            handler.close_connection = True
            return
        if planned in ("truncated", "empty"):
            self._record(planned)
            message = {"role": "assistant", "content": "this reply never arrives whole"}
            completion = _completion(body, message, index)
            if planned == "empty":
                completion["choices"] = []
            handler.send_json(200, completion, cut=planned == "truncated")
            return
        try:
            message = _normalise_message(self.responder(body), index)
        except Exception as exc:  # report responder bugs to the client instead of hanging it
            self._record("error")
            error = _error_body(f"responder raised {exc!r}", "server_error")
            handler.send_json(500, error, {"x-should-retry": "false"})
            return
        tool_calls = message.get("tool_calls")
        outcome: Outcome = "malformed" if planned == "malformed" and tool_calls else "ok"
        if outcome == "malformed":
            for call in tool_calls:
                arguments = call["function"]["arguments"]
                call["function"]["arguments"] = arguments[: len(arguments) // 2]
        self._record(outcome)
        handler.send_json(200, _completion(body, message, index))


def _shutdown_socket(conn: socket.socket) -> None:
    """Wake a handler blocked on this connection; its own thread then closes it."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)


def _error_body(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _normalise_message(message: Message, index: int) -> Message:
    """Copy the responder's message, filling OpenAI defaults and JSON-encoding dict arguments."""
    out: Message = {"role": "assistant", "content": None, **message}
    out.pop("tool_calls", None)
    calls = []
    for i, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        arguments = function.get("arguments", "{}")
        calls.append(
            {
                "id": call.get("id") or f"call_{index}_{i}",
                "type": "function",
                "function": {
                    "name": function["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
    if calls:
        out["tool_calls"] = calls
    return out


def _estimate_tokens(text: str) -> int:
    return len(text) // 4


def _completion(body: dict[str, Any], message: Message, index: int) -> dict[str, Any]:
    """Build a ``chat.completion`` object with deterministic token usage."""
    prompt_text = json.dumps([body.get("messages", []), body.get("tools", [])])
    completion_text = (message.get("content") or "") + "".join(
        call["function"]["name"] + call["function"]["arguments"] for call in message.get("tool_calls", [])
    )
    prompt_tokens = _estimate_tokens(prompt_text)
    completion_tokens = _estimate_tokens(completion_text)
    return {
        "id": f"chatcmpl-{index}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "test-model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
