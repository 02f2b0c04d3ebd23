"""Hindsight labeling throughput (labels/s) and peak memory on 10,000 scripted trajectories.

Collects scripted noisy-oracle episodes (retail, airline and telehealth test tasks, trials enough to reach
`--episodes`, injected mistakes of the agent and the user at the demo rates of `configs/demo.yaml`), then labels the
run in a fresh process: domain loading
is timed apart, and the process reports its peak resident memory (ru_maxrss) next to its resident memory
once the domains were loaded; wall and CPU time are both reported (one process, one core: on a busy
machine the CPU figure is the steadier one). Labeling streams the run one record at a time, so its memory should not grow
with the number of episodes. It prints, per injected kind, how often the labeler's first critical error is
that mistake (over the failed episodes whose first outcome-breaking mistake is of that kind), and for
`user_deviation`, how often no agent action is blamed in an episode the deviation broke.

    .venv/bin/python benchmarks/bench_label.py [--episodes 10000] [--run-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOMAINS = ["retail", "airline", "telehealth"]
DEMO = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"

CHILD = """
import json, resource, sys, time
from pathlib import Path
from castdata.label.policy import clause_table
from castdata.label.run import label_run
from castdata.envs import load_domain

start = time.perf_counter()
for name in sys.argv[2].split(","):
    load_domain(name), clause_table(name)
loaded_s = time.perf_counter() - start
rss_loaded = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
start, cpu = time.perf_counter(), time.process_time()
stats = label_run(Path(sys.argv[1]))
seconds, cpu_s = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({"seconds": seconds, "cpu_s": cpu_s, "load_s": loaded_s, "rss_loaded_mib": rss_loaded,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "stats": stats}))
"""


def collect_run(out: Path, episodes: int) -> float:
    """Collect at least `episodes` scripted episodes into `out`; returns the seconds it took."""
    from castdata.config import CollectConfig, load_config
    from castdata.envs import load_domain
    from castdata.rollout.collect import collect

    demo = load_config(DEMO)
    tasks = sum(len(load_domain(name).tasks("test")) for name in DOMAINS)
    config = CollectConfig(
        domains=DOMAINS,
        split="test",
        trials=math.ceil(episodes / tasks),
        max_steps=60,
        seed=0,
        agent=demo.agent,
        user=demo.user,
        out=str(out),
    )
    start = time.perf_counter()
    collect(config, out, show_progress=False)
    return time.perf_counter() - start


def main() -> None:
    from castdata.label.stats import USER_KINDS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--run-dir", type=Path, help="collect here (reused when it already holds a run)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.run_dir or Path(tmp) / "run"
        if not (run_dir / "trajectories").is_dir():
            cpu = time.process_time()
            wall = collect_run(run_dir, args.episodes)
            print(f"collected in {wall:.1f} s wall, {time.process_time() - cpu:.1f} s CPU")
        size = sum(p.stat().st_size for p in (run_dir / "trajectories").glob("*.jsonl")) / 2**20
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(run_dir), ",".join(DOMAINS)], capture_output=True, text=True, check=True
        )
        result = json.loads(done.stdout)
    stats = result["stats"]
    labels, episodes = stats["labels"]["total"], stats["trajectories"]["read"]
    injected = stats["injected"]
    print(f"episodes: {episodes} ({size:.0f} MiB of trajectories), labels: {labels}")
    print(
        f"labeling: {result['seconds']:.1f} s wall = {labels / result['seconds']:,.0f} labels/s = {episodes / result['seconds']:,.0f} episodes/s; "
        f"{result['cpu_s']:.1f} s CPU = {labels / result['cpu_s']:,.0f} labels per CPU second (domain loading {result['load_s']:.1f} s apart)"
    )
    print(
        f"memory: peak RSS {result['peak_rss_mib']:.0f} MiB (RSS after loading the domains {result['rss_loaded_mib']:.0f} MiB)"
    )
    print(
        f"first critical error = first injected outcome-breaking mistake: {injected['first_error_matches']} of "
        f"{injected['failed_with_breaking']} failed episodes ({injected['first_error_agreement']:.2%}); "
        f"verifier rejections: {stats['verifier']['programmatic']['rejected']} of {stats['verifier']['programmatic']['checked']}"
    )
    for kind, counts in sorted(injected["kinds"].items()):  # labels/stats.json: per kind of the first breaking mistake
        if counts.get("first_breaking"):
            note = " (the user's fault: no agent action blamed)" if kind in USER_KINDS else ""
            matches = counts.get("first_error_matches", 0)
            print(
                f"  {kind:>20}: first critical error = the mistake in {matches} of {counts['first_breaking']} "
                f"({matches / counts['first_breaking']:.2%}){note}"
            )


if __name__ == "__main__":
    main()
