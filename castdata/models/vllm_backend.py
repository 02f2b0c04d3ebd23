"""`backend: vllm`: the in-process vLLM engine (`vllm.LLM`), for GPU boxes without a server (extra `castdata[vllm]`).

vLLM's throughput comes from batching, so requests from all concurrently running episodes are gathered by
a `BatchScheduler`: it collects pending requests up to `batch_size` or for `batch_wait_s`, makes one
`LLM.chat` call for them in a worker thread (one call at a time per engine: it is not thread-safe; an agent
and a user on the same model share the engine), and hands each episode its output. Requests that need
different tool lists go in different batches (`LLM.chat` takes one `tools` list). Generated text is parsed
with the Qwen3/hermes `<tool_call>` parser.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from castdata.errors import ConfigError
from castdata.models.base import InfrastructureError, Reply
from castdata.models.chat import ChatBackend, ChatCall, wire_messages
from castdata.models.spec import ModelSpec


@dataclass
class ChatRequest:
    """One conversation for `LLM.chat`, its sampling parameters and its tools (`None`: no tools)."""

    messages: list[dict[str, Any]]
    params: Any
    tools: list[dict[str, Any]] | None = None
    key: Hashable = field(init=False)

    def __post_init__(self) -> None:
        self.key = None if self.tools is None else json.dumps(self.tools, sort_keys=True)


class BatchScheduler:
    """Gathers requests from concurrent coroutines into batches for one blocking batch function.

    `run_batch(requests)` returns one output per request, in order, and is called in a worker thread, one
    batch at a time; a batch holds requests with the same `key` only. If a batch fails, its requests are run
    one by one so that one bad request (say, a prompt longer than the context) fails alone, as an
    `InfrastructureError`.
    """

    def __init__(
        self, run_batch: Callable[[list[ChatRequest]], Sequence[Any]], max_batch: int, max_wait_s: float
    ) -> None:
        if max_batch < 1 or max_wait_s < 0:
            raise ValueError("max_batch must be >= 1 and max_wait_s >= 0")
        self.run_batch = run_batch
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._pending: list[tuple[ChatRequest, asyncio.Future[Any]]] = []
        self._arrived: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None

    async def submit(self, request: ChatRequest) -> Any:
        """The engine's output for one request."""
        loop = asyncio.get_running_loop()
        if self._worker is None or self._worker.done() or self._worker.get_loop() is not loop:
            self._pending, self._arrived = [], asyncio.Event()
            self._worker = loop.create_task(self._work(), name="vllm-batch-scheduler")
        future = loop.create_future()
        self._pending.append((request, future))
        self._arrived.set()
        return await future

    async def _work(self) -> None:
        assert self._arrived is not None
        while True:
            await self._arrived.wait()
            if len(self._pending) < self.max_batch:
                await asyncio.sleep(self.max_wait_s)  # let the other episodes' requests arrive
            batch = self._take()
            if not self._pending:
                self._arrived.clear()
            if batch:
                await self._run(batch)

    def _take(self) -> list[tuple[ChatRequest, asyncio.Future[Any]]]:
        """Up to `max_batch` live requests sharing the first live request's key."""
        live = [(request, future) for request, future in self._pending if not future.done()]
        if not live:
            self._pending = []
            return []
        key = live[0][0].key
        batch = [item for item in live if item[0].key == key][: self.max_batch]
        taken = {id(item[1]) for item in batch}
        self._pending = [item for item in live if id(item[1]) not in taken]
        return batch

    async def _run(self, batch: list[tuple[ChatRequest, asyncio.Future[Any]]]) -> None:
        try:
            outputs = list(await asyncio.to_thread(self.run_batch, [request for request, _ in batch]))
            if len(outputs) != len(batch):
                raise RuntimeError(f"the engine returned {len(outputs)} outputs for {len(batch)} requests")
        except Exception as err:
            if len(batch) > 1:
                for item in batch:
                    await self._run([item])
                return
            _settle(batch[0][1], exception=InfrastructureError(f"vllm: {type(err).__name__}: {err}"))
            return
        for (_, future), output in zip(batch, outputs):
            _settle(future, result=output)

    async def aclose(self) -> None:
        """Stop the worker; pending requests are cancelled."""
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
            for _, future in self._pending:
                future.cancel()
        self._worker = None


def _settle(future: asyncio.Future[Any], *, result: Any = None, exception: BaseException | None = None) -> None:
    if future.done():  # the episode was cancelled meanwhile
        return
    if exception is not None:
        future.set_exception(exception)
    else:
        future.set_result(result)


class VLLMBackend(ChatBackend):
    """Options: `traits`, `engine` (keyword arguments for `vllm.LLM`, e.g. `max_model_len`,
    `gpu_memory_utilization`, `tensor_parallel_size`), `batch_size` (default 256), `batch_wait_s` (default 0.01).

    `engine` and `make_params` (builds one request's `SamplingParams`) default to vLLM's; tests pass stand-ins.
    """

    OPTIONS = ChatBackend.OPTIONS | {"engine", "batch_size", "batch_wait_s"}

    def __init__(self, spec: ModelSpec, *, engine: Any = None, make_params: Callable[..., Any] | None = None) -> None:
        super().__init__(spec)
        self.engine = (
            Engine(engine)
            if engine is not None
            else shared_engine(spec.model, json.dumps(spec.options.get("engine", {}), sort_keys=True))
        )
        self.make_params = make_params or vllm_sampling_params
        self.scheduler = BatchScheduler(
            self._run_batch,
            max_batch=int(spec.options.get("batch_size", 256)),
            max_wait_s=float(spec.options.get("batch_wait_s", 0.01)),
        )

    def _run_batch(self, requests: list[ChatRequest]) -> Sequence[Any]:
        with self.engine.lock:
            return self.engine.llm.chat(
                [request.messages for request in requests],
                sampling_params=[request.params for request in requests],
                use_tqdm=False,
                tools=requests[0].tools,
                chat_template_kwargs=self.spec.chat_template_kwargs or None,
            )

    async def _complete(self, call: ChatCall) -> Reply:
        sampling = self.spec.sampling
        params = self.make_params(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens,
            seed=call.seed,
            json_schema=call.json_schema,
        )
        started = time.perf_counter()
        output = await self.scheduler.submit(ChatRequest(wire_messages(call.messages), params, call.tools))
        completion = output.outputs[0]
        return self.text_reply(completion.text, len(output.prompt_token_ids or ()), len(completion.token_ids), started)

    async def aclose(self) -> None:
        await self.scheduler.aclose()


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError:
        raise ConfigError("backend: 'vllm' needs vLLM, which is not installed: pip install 'castdata[vllm]'") from None
    return vllm


@dataclass
class Engine:
    """A `vllm.LLM` (or a stand-in with its `chat` signature) and the lock that makes its calls one at a time."""

    llm: Any
    lock: threading.Lock = field(default_factory=threading.Lock)


@functools.cache
def shared_engine(model: str, engine_options: str) -> Engine:
    """One engine per (model, engine options) and process: an agent and a user on the same model share it."""
    return Engine(_import_vllm().LLM(model=model, **json.loads(engine_options)))


def vllm_sampling_params(
    *, temperature: float, top_p: float, max_tokens: int, seed: int | None, json_schema: dict[str, Any] | None
) -> Any:
    """vLLM `SamplingParams`; a JSON schema becomes structured output (guided decoding on older vLLM)."""
    sampling_params = _import_vllm().sampling_params
    extra: dict[str, Any] = {}
    if json_schema is not None:
        if hasattr(sampling_params, "StructuredOutputsParams"):
            extra["structured_outputs"] = sampling_params.StructuredOutputsParams(json=json_schema)
        else:
            extra["guided_decoding"] = sampling_params.GuidedDecodingParams(json=json_schema)
    return sampling_params.SamplingParams(
        temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed, **extra
    )
