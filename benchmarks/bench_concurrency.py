"""Throughput of model calls at concurrency 1, 8, 64, 256 against the loopback OpenAI-compatible server with a
fixed latency per request, as a fraction of the ideal (concurrency / latency): castdata's openai backend
(asyncio, one process) side by side with tau-trait's way (litellm `completion` in a ThreadPoolExecutor).

The server runs in its own process so that its threads do not compete with the client for the GIL. Each
runner keeps `concurrency` callers busy in a closed loop (each starts within the first latency period, as
episodes do), and counts the calls that finish inside a measuring window after a warm-up.

    .venv/bin/python benchmarks/bench_concurrency.py [--latency 0.1] [--seconds 3] [--levels 1,8,64,256] [--no-tau]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

MESSAGES = [{"role": "user", "content": "Where is my order #W2378156?"}]
REPLY = {"content": "Your order #W2378156 was delivered yesterday."}


def _answer(body: dict) -> dict:
    return REPLY


def _serve(latency_s: float, urls: multiprocessing.Queue, stop: multiprocessing.Event) -> None:
    from helpers.openai_server import ChatServer, FaultPlan

    with ChatServer(_answer, FaultPlan(latency_s=latency_s)) as server:
        urls.put(server.base_url)
        stop.wait()


class Window:
    """Counts calls that finish between `start` and `end` (thread-safe)."""

    def __init__(self, warmup_s: float, seconds: float) -> None:
        self.start = time.perf_counter() + warmup_s
        self.end = self.start + seconds
        self.count = 0
        self._lock = threading.Lock()

    def open(self) -> bool:
        return time.perf_counter() < self.end

    def done(self) -> None:
        now = time.perf_counter()
        if self.start <= now <= self.end:
            with self._lock:
                self.count += 1

    def rate(self) -> float:
        return self.count / (self.end - self.start)


def castdata_rate(url: str, concurrency: int, latency_s: float, seconds: float) -> float:
    """Calls/s of castdata's openai backend with `concurrency` concurrent callers."""
    from castdata.models.openai_backend import OpenAIBackend
    from castdata.models.spec import ModelSpec

    async def main() -> float:
        backend = OpenAIBackend(
            ModelSpec(backend="openai", model="bench", base_url=url, max_concurrency=concurrency, max_retries=0)
        )
        window = Window(warmup_s=2 * latency_s + 0.3, seconds=seconds)

        async def caller(index: int) -> None:
            await asyncio.sleep(latency_s * index / concurrency)
            while window.open():
                await backend.complete(MESSAGES)
                window.done()

        try:
            await asyncio.gather(*(caller(i) for i in range(concurrency)))
        finally:
            await backend.aclose()
        return window.rate()

    return asyncio.run(main())


def tau_trait_rate(url: str, concurrency: int, latency_s: float, seconds: float) -> float:
    """Calls/s of litellm `completion` in a ThreadPoolExecutor of `concurrency` workers (tau-trait's runner).
    A call that fails or hangs (litellm waits 600 s by default; we allow 30) just does not count."""
    import litellm

    window = Window(warmup_s=2 * latency_s + 0.3, seconds=seconds)

    def caller(index: int) -> None:
        time.sleep(latency_s * index / concurrency)
        while window.open():
            try:
                litellm.completion(
                    model="openai/bench", api_base=url, api_key="bench", messages=MESSAGES, temperature=0.0, timeout=30
                )
            except Exception as err:
                print(
                    f"tau-trait runner, concurrency {concurrency}: {type(err).__name__}: {str(err)[:200]}",
                    file=sys.stderr,
                )
                continue
            window.done()

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(caller, range(concurrency)))
    return window.rate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.1, help="server latency per request, seconds")
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring window per run")
    parser.add_argument("--levels", default="1,8,64,256", help="concurrency levels, comma-separated")
    parser.add_argument("--no-tau", action="store_true", help="skip the tau-trait (litellm) runner")
    args = parser.parse_args()
    levels = [int(level) for level in args.levels.split(",")]
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download

    context = multiprocessing.get_context("spawn")
    urls, stop = context.Queue(), context.Event()
    server = context.Process(target=_serve, args=(args.latency, urls, stop), daemon=True)
    server.start()
    try:
        url = urls.get(timeout=30)
        load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
        print(
            f"loopback server {url}, latency {args.latency * 1000:.0f} ms, {os.cpu_count()} CPUs (load average {load}), "
            f"window {args.seconds:.0f} s per run"
        )
        # castdata first: litellm's import and worker threads would otherwise share the process with it
        ours = {level: castdata_rate(url, level, args.latency, args.seconds) for level in levels}
        theirs = (
            {} if args.no_tau else {level: tau_trait_rate(url, level, args.latency, args.seconds) for level in levels}
        )
        print(
            f"{'concurrency':>11} {'ideal/s':>8} {'castdata/s':>11} {'fraction':>8} {'tau-trait/s':>12} {'fraction':>8}"
        )
        for level in levels:
            ideal = level / args.latency
            row = f"{level:>11} {ideal:>8.0f} {ours[level]:>11.1f} {ours[level] / ideal:>8.3f}"
            if level in theirs:
                row += f" {theirs[level]:>12.1f} {theirs[level] / ideal:>8.3f}"
            print(row)
    finally:
        stop.set()
        server.join(timeout=10)


if __name__ == "__main__":
    main()
