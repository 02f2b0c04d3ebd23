"""Episodes/s of a demo-style collection against the loopback OpenAI-compatible server with a fixed latency per
request: the local executor side by side with the Ray executor at 1, 2 and 4 workers on this machine.

Agent and user are openai backends; the server answers as the scripted noisy oracle and scripted user
(`tests/test_backend_collect.Playbook`) after `--latency` seconds, in its own process so that its threads do
not compete with the collector for the GIL. Each worker runs `--concurrency` episodes at once; Ray workers are
started by an untimed warm-up run before the timed ones, as on a cluster that is already up.

    .venv/bin/python benchmarks/bench_scaleout.py [--latency 0.1] [--tasks 0-63] [--trials 2] [--concurrency 8] [--unit 16] [--repeat 1]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

KEY_ENV = "CASTDATA_BENCH_KEY"
WORKERS = (1, 2, 4)


def _serve(latency_s: float, urls: multiprocessing.Queue, stop: multiprocessing.Event) -> None:
    from helpers.openai_server import ChatServer, FaultPlan
    from test_backend_collect import Playbook

    with ChatServer(Playbook("retail", "test"), FaultPlan(latency_s=latency_s)) as server:
        urls.put(server.base_url)
        stop.wait()


def config_for(url: str, args: argparse.Namespace, workers: int | None, tasks: str):
    """The collection; `workers` None runs it on the local executor."""
    from castdata.config import CollectConfig

    endpoint = {"backend": "openai", "base_url": url, "api_key_env": KEY_ENV, "max_concurrency": 1024}
    executor = (
        {"ray": {"num_workers": workers, "episodes_per_task_batch": args.unit, "resources": {"CPU": 1}}}
        if workers
        else "local"
    )
    return CollectConfig(
        domains=["retail"],
        split="test",
        tasks=tasks,
        trials=args.trials,
        concurrency=args.concurrency,
        max_steps=40,
        agent={**endpoint, "model": "agent"},
        user={**endpoint, "model": "user"},
        executor=executor,
    )


def timed(config, out: Path) -> tuple[int, int, float]:
    """(episodes, model requests, seconds) of one collection into `out`."""
    from castdata.rollout.collect import collect
    from castdata.rundir import read_trajectories

    started = time.perf_counter()
    collect(config, out, show_progress=False)
    seconds = time.perf_counter() - started
    records = read_trajectories(out)
    requests = sum(1 for r in records for meta in r.meta if meta.usage is not None)
    return len(records), requests, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.1, help="server latency per request, seconds")
    parser.add_argument("--tasks", default="0-63", help="retail test tasks, 'START-END'")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8, help="episodes at once per worker (and locally)")
    parser.add_argument(
        "--unit", type=int, default=16, help="episodes per work unit (executor.ray.episodes_per_task_batch)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per row; the fastest counts (for a busy machine)")
    args = parser.parse_args()
    os.environ[KEY_ENV] = "sk-bench"  # before ray.init: workers inherit it
    import ray

    context = multiprocessing.get_context("spawn")
    urls, stop = context.Queue(), context.Event()
    server = context.Process(target=_serve, args=(args.latency, urls, stop), daemon=True)
    server.start()
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    try:
        url = urls.get(timeout=60)
        ray.init(
            address="local", num_cpus=max(WORKERS), _temp_dir=ray_dir, include_dashboard=False, log_to_driver=False
        )
        with tempfile.TemporaryDirectory() as tmp:
            timed(config_for(url, args, max(WORKERS), "0-3"), Path(tmp) / "warmup")
            print(
                f"loopback server {url}, latency {args.latency * 1000:.0f} ms, {os.cpu_count()} CPUs "
                f"(load average {os.getloadavg()[0]:.1f}), retail test tasks "
                f"{args.tasks} x {args.trials} trials, {args.concurrency} episodes at once per worker, units of {args.unit}"
            )
            print(
                f"{'executor':<22} {'episodes':>8} {'requests':>8} {'seconds':>8} {'episodes/s':>10} {'requests/s':>10} {'x local':>8}"
            )
            rows = [
                ("local", None, args.concurrency),
                (f"local x{max(WORKERS)} concurrency", None, args.concurrency * max(WORKERS)),
            ]
            rows += [(f"ray, {n} worker{'s' if n > 1 else ''}", n, args.concurrency) for n in WORKERS]
            base = None
            for index, (name, workers, concurrency) in enumerate(rows):
                config = config_for(url, args, workers, args.tasks).model_copy(update={"concurrency": concurrency})
                episodes, requests, seconds = min(
                    (timed(config, Path(tmp) / f"run{index}.{attempt}") for attempt in range(args.repeat)),
                    key=lambda row: row[2],
                )
                base = base or episodes / seconds
                print(
                    f"{name:<22} {episodes:>8} {requests:>8} {seconds:>8.2f} {episodes / seconds:>10.2f} "
                    f"{requests / seconds:>10.1f} {episodes / seconds / base:>8.2f}",
                    flush=True,
                )
    finally:
        ray.shutdown()
        stop.set()
        server.join(timeout=10)


if __name__ == "__main__":
    main()
