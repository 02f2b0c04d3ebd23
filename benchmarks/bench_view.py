"""`castdata view` on 10,000 episodes: page generation time, file size, and how fast Chromium opens it.

Collects and labels scripted noisy-oracle episodes (as `bench_label.py` does: retail, airline and telehealth test
tasks, demo mistake rates) unless `--run-dir` already holds a labelled run, then writes the page in a fresh
process (wall, CPU, peak RSS, bytes). With Chromium at /usr/bin/chromium and the `playwright` package, it opens
the page headless and times the index (until its first rows show) and an episode of the first and of the last
block (decompressed on demand).

    .venv/bin/python benchmarks/bench_view.py [--episodes 10000] [--run-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_label import collect_run

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.browser import BROWSER_ARGS, CHROMIUM

CHILD = """
import json, resource, sys, time
from pathlib import Path
from castdata.view import write_view

start, cpu = time.perf_counter(), time.process_time()
written = write_view(Path(sys.argv[1]), Path(sys.argv[2]))
print(json.dumps({**written, "seconds": time.perf_counter() - start, "cpu_s": time.process_time() - cpu,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def open_in_chromium(page: Path, first: str, last: str) -> dict[str, float]:
    """Seconds until the index shows its rows, then until an episode of the first and of the last block shows."""
    from playwright.sync_api import sync_playwright

    timings = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        tab = browser.new_page()
        tab.set_default_timeout(120_000)
        start = time.perf_counter()
        tab.goto(page.as_uri())
        tab.wait_for_selector("table.index tbody tr")
        timings["index"] = time.perf_counter() - start
        for name, key in (("first episode", first), ("last episode", last)):
            start = time.perf_counter()
            tab.evaluate(f"location.hash = {json.dumps('#episode=' + key)}")
            tab.wait_for_selector(f"h1:text-is({json.dumps(key)})")
            timings[name] = time.perf_counter() - start
        browser.close()
    return timings


def ensure_labelled(run_dir: Path, episodes: int) -> None:
    """Collect and label `episodes` scripted episodes into `run_dir`, unless it holds labels already."""
    if (run_dir / "labels").is_dir():
        return
    from castdata.label.run import label_run

    print(f"collected in {collect_run(run_dir, episodes):.1f} s")
    start = time.perf_counter()
    label_run(run_dir)
    print(f"labelled in {time.perf_counter() - start:.1f} s")


def write_page(run_dir: Path, page: Path) -> dict:
    """Write the page in a fresh process; what it wrote, its times and its peak memory."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(run_dir), str(page)], capture_output=True, text=True, check=True, timeout=1800
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--run-dir", type=Path, help="collect and label here (reused when it already holds labels)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir, page = args.run_dir or Path(tmp) / "run", Path(tmp) / "view.html"
        ensure_labelled(run_dir, args.episodes)
        result = write_page(run_dir, page)
        records = [p for folder in ("trajectories", "labels") for p in (run_dir / folder).glob("*.jsonl")]
        size = sum(p.stat().st_size for p in records) / 2**20
        print(f"episodes: {result['episodes']} ({size:.0f} MiB of trajectories and labels)")
        print(
            f"page: {result['bytes'] / 2**20:.1f} MiB, written in {result['seconds']:.1f} s wall, "
            f"{result['cpu_s']:.1f} s CPU, peak RSS {result['peak_rss_mib']:.0f} MiB"
        )
        if not CHROMIUM.exists():
            print(f"no Chromium at {CHROMIUM}: opening not timed")
            return
        index = json.loads(page.read_text().split('id="castdata-index">', 1)[1].split("</script>", 1)[0])
        timings = open_in_chromium(page, index["rows"][0]["key"], index["rows"][-1]["key"])
        print("headless Chromium: " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in timings.items()))


if __name__ == "__main__":
    main()
