"""One offline round of the CAST loop on the demo's test tasks (`configs/demo_critic_loop.yaml`): pass^k without and
with the replay critic's guard, then the guarded run labelled and built: interceptions, hindsight verdicts on them,
confirmed revisions, rows per source and the critic's precision and recall against hindsight.

    python benchmarks/bench_critic_loop.py [--work /tmp/castdata-bench-loop] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from castdata.builders.dataset import build_dataset
from castdata.config import load_config
from castdata.critic.eval_policy import EvalConfig, run_eval
from castdata.label.run import label_run

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "demo_critic_loop.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/castdata-bench-loop"))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    config: EvalConfig = load_config(CONFIG, EvalConfig, args.overrides)
    started = time.perf_counter()
    comparison = run_eval(config, args.work, show_progress=False)
    collected = time.perf_counter()
    guarded = args.work / "with_critic"
    labels = label_run(guarded)
    labelled = time.perf_counter()
    manifest = build_dataset([guarded], args.work / "dataset")
    built = time.perf_counter()
    result = {
        "pass_k": comparison["pass_k"],
        "interceptions": comparison["interceptions"],
        "hindsight_on_interceptions": labels["interceptions"],
        "rows_per_source": manifest["stats"]["sources"],
        "critic_vs_hindsight": manifest["stats"]["critic"],
        "seconds": {
            "collect_both_arms": round(collected - started, 1),
            "label": round(labelled - collected, 1),
            "build": round(built - labelled, 1),
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
