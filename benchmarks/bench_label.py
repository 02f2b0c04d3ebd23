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
from collections import Counter
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
    from castdata.config import CollectConfig
    from castdata.envs import load_domain
    from castdata.rollout.collect import collect

    from castdata.config import load_config

    demo = load_config(DEMO)
    tasks = sum(len(load_domain(name).tasks("test")) for name in DOMAINS)
    config = CollectConfig(domains=DOMAINS, split="test", trials=math.ceil(episodes / tasks), max_steps=60, seed=0,
                           agent=demo.agent, user=demo.user, out=str(out))
    start = time.perf_counter()
    collect(config, out, show_progress=False)
    return time.perf_counter() - start


def agreement_by_kind(run_dir: Path) -> dict[str, Counter]:
    """Per kind of the first outcome-breaking injected mistake of a failed episode: episodes, and those whose first
    critical error is that mistake (for user_deviation: whose labels blame no agent action)."""
    from castdata.label.schema import Label
    from castdata.rollout.store import read_trajectories

    firsts: dict[str, int | None] = {}
    for path in (run_dir / "labels").glob("*.*.jsonl"):
        for line in path.read_text().splitlines():
            label = Label.model_validate_json(line)
            firsts.setdefault(label.trajectory_id, None)
            if label.first_critical_error:
                firsts[label.trajectory_id] = label.step
    found: dict[str, Counter] = {}
    for record in read_trajectories(run_dir):
        breaking = [m for m in record.injected_mistakes if m.outcome_breaking and not m.intercepted]
        breaking.sort(key=lambda m: m.step)
        if record.outcome.reward == 1.0 or not breaking or record.id not in firsts:
            continue
        first = breaking[0]
        counts = found.setdefault(first.kind, Counter())
        counts["episodes"] += 1
        found_first = firsts[record.id]
        counts["agree"] += found_first is None if first.kind == "user_deviation" else found_first == first.step
    return dict(sorted(found.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--run-dir", type=Path, help="collect here (reused when it already holds a run)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.run_dir or Path(tmp) / "run"
        if not (run_dir / "trajectories").is_dir():
            print(f"collected in {collect_run(run_dir, args.episodes):.1f} s")
        size = sum(p.stat().st_size for p in (run_dir / "trajectories").glob("*.jsonl")) / 2**20
        done = subprocess.run([sys.executable, "-c", CHILD, str(run_dir), ",".join(DOMAINS)], capture_output=True, text=True, check=True)
        result = json.loads(done.stdout)
        result["by_kind"] = agreement_by_kind(run_dir)
    stats = result["stats"]
    labels, episodes = stats["labels"]["total"], stats["trajectories"]["read"]
    injected = stats["injected"]
    print(f"episodes: {episodes} ({size:.0f} MiB of trajectories), labels: {labels}")
    print(f"labeling: {result['seconds']:.1f} s wall = {labels / result['seconds']:,.0f} labels/s = {episodes / result['seconds']:,.0f} episodes/s; "
          f"{result['cpu_s']:.1f} s CPU = {labels / result['cpu_s']:,.0f} labels per CPU second (domain loading {result['load_s']:.1f} s apart)")
    print(f"memory: peak RSS {result['peak_rss_mib']:.0f} MiB (RSS after loading the domains {result['rss_loaded_mib']:.0f} MiB)")
    print(f"first critical error = first injected outcome-breaking mistake: {injected['first_error_matches']} of "
          f"{injected['failed_with_breaking']} failed episodes ({injected['first_error_agreement']:.2%}); "
          f"verifier rejections: {stats['verifier']['programmatic']['rejected']} of {stats['verifier']['programmatic']['checked']}")
    for kind, counts in result["by_kind"].items():
        note = " (no agent action blamed)" if kind == "user_deviation" else ""
        print(f"  {kind:>20}: first critical error = the mistake in {counts['agree']} of {counts['episodes']} "
              f"({counts['agree'] / counts['episodes']:.2%}){note}")


if __name__ == "__main__":
    main()
