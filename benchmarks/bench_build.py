"""`castdata build` at scale: wall time, peak memory and bytes on disk for every config, from N scripted episodes.

Collects and labels N episodes of retail's train tasks with the offline demo agent (cached in --work between
runs), then times the build alone in a fresh process and compares the Parquet bytes with the raw JSONL.

    python benchmarks/bench_build.py [--episodes 10000] [--work /tmp/castdata-bench-build]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TASKS = 500  # retail ships 500 train tasks

BUILD = """
import json, resource, sys, time
from pathlib import Path
from castdata.builders.dataset import build_dataset
start, cpu = time.perf_counter(), time.process_time()
manifest = build_dataset([Path(sys.argv[1])], Path(sys.argv[2]))
print(json.dumps({"wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "rows": {c: sum(e["rows"] for e in s.values()) for c, s in manifest["configs"].items()}}))
"""


def castdata(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "castdata.cli", *args], check=True, stdout=subprocess.DEVNULL)


def prepare(work: Path, episodes: int) -> Path:
    """A labelled run of `episodes` retail train episodes (reused when it is already there)."""
    run_dir = work / "run"
    if (run_dir / "labels" / "stats.json").is_file():
        return run_dir
    config = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    config.update(
        domains=["retail"], split="train", tasks=f"0-{min(episodes, TASKS) - 1}", trials=max(1, episodes // TASKS)
    )
    path = work / "bench.yaml"
    work.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    castdata("collect", str(path), "--out", str(run_dir), "--quiet")
    castdata("label", str(run_dir), "--json")
    return run_dir


def size(paths) -> int:
    return sum(path.stat().st_size for path in paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/castdata-bench-build"))
    args = parser.parse_args()

    run_dir = prepare(args.work, args.episodes)
    out = args.work / "dataset"
    measured = json.loads(
        subprocess.run(
            [sys.executable, "-c", BUILD, str(run_dir), str(out)], check=True, capture_output=True, text=True
        ).stdout
    )
    trajectories = size((run_dir / "trajectories").glob("*.jsonl"))
    labels = size((run_dir / "labels").glob("*.jsonl"))
    episodes = measured["rows"]["trajectories"]
    print(
        f"{episodes} episodes, {measured['rows']['labels']} labels; raw JSONL: trajectories {trajectories / 2**20:.1f} MiB, labels {labels / 2**20:.1f} MiB"
    )
    print(
        f"build: {measured['wall_s']:.1f} s wall, {measured['cpu_s']:.1f} s CPU ({1000 * measured['wall_s'] / episodes:.2f} ms/episode), peak RSS {measured['peak_rss_mib']:.0f} MiB"
    )
    print(f"{'config':<14}{'rows':>10}{'MiB':>10}  vs raw")
    for config, rows in measured["rows"].items():
        mib = size(out.glob(f"{config}/*.parquet")) / 2**20
        raw = {"trajectories": trajectories, "labels": labels}.get(config)
        print(f"{config:<14}{rows:>10}{mib:>10.2f}  {f'{raw / 2**20 / mib:.1f}x smaller' if raw else ''}")
    total = size(p for p in out.rglob("*") if p.is_file())
    print(
        f"{'dataset total':<24}{total / 2**20:>10.2f}  raw JSONL total {(trajectories + labels) / 2**20:.1f} MiB ({(trajectories + labels) / total:.1f}x)"
    )


if __name__ == "__main__":
    main()
