"""A few training steps of each script on the CPU: a tiny random Qwen3 and a locally trained tokenizer (nothing
is downloaded), on a dataset folder from `castdata build`. Proves the recipes, the data and TRL fit together.

    castdata run configs/demo.yaml && python train/smoke_cpu.py runs/demo/dataset [--out out/smoke] [--steps 3]
"""

import argparse
from pathlib import Path

from castdata.train.smoke import run_smoke

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="A dataset folder made by `castdata build` (with a test split).")
    parser.add_argument("--out", type=Path, default=Path("out/smoke"), help="Where the tiny model and the runs go.")
    parser.add_argument("--steps", type=int, default=3, help="Training steps per script.")
    args = parser.parse_args()
    for config, losses in run_smoke(args.dataset, args.out, args.steps).items():
        print(f"{config}: {len(losses)} steps, losses {', '.join(f'{loss:.3f}' for loss in losses)}")
