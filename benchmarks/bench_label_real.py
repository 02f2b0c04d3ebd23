"""The labeler against careful human judgement, on real agents' episodes (`tests/golden_real`).

Imports the golden set's tau-bench result files (GPT-4.1 retail, GPT-4o airline; see tests/golden_real/README.md)
into a fresh run directory, labels it, and prints, for each part of the set and for all together, the agreement
table: for failed episodes, where the labeler's first critical error falls against the hand-marked step (exact /
exact on the second annotator's step / adjacent / wrong / none / user fault blamed / rightly no blame), the
false-alarm rate on successful episodes, and the precision of each signal (rule or replay check).

    .venv/bin/python benchmarks/bench_label_real.py [--golden tests/golden_real] [--rows]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from castdata.imports.tau_bench import import_tau_bench
from castdata.label.agreement import Agreement, agreement, read_judgements
from castdata.label.run import label_run, read_labels

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden_real"


def _print(title: str, result: Agreement, rows: bool) -> None:
    failures = result.failures
    total = sum(failures.values())
    print(f"== {title}: failed episodes: {total}")
    for key in ("exact", "exact_other", "adjacent", "wrong", "none", "user_fault_blamed", "no_blame"):
        print(f"  {key:18s} {failures[key]:3d}  {failures[key] / max(1, total):6.1%}")
    print(f"  first-error accuracy (exact or rightly no blame): {result.first_error_accuracy:.1%}")
    print(
        f"successful episodes: {result.successes}, with an invalid flag: {result.successes_flagged} "
        f"({result.successes_flagged / max(1, result.successes):.1%}), with a false one (false alarms): "
        f"{result.false_alarms} ({result.false_alarms / max(1, result.successes):.1%}); flags {result.flags}, "
        f"true {result.true_flags} (precision {result.flag_precision:.1%})"
    )
    print("signal precision (right / wrong):")
    for name, counts in sorted(result.signals.items()):
        print(f"  {name:32s} {counts['right']:3d} / {counts['wrong']:3d}")
    if rows:
        for row in result.rows:
            if row["class"] not in ("exact", "no_blame"):
                print(json.dumps(row), file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", type=Path, default=GOLDEN)
    parser.add_argument("--rows", action="store_true", help="also print every failed episode and false flag")
    args = parser.parse_args()
    parts = json.loads((args.golden / "parts.json").read_text())  # each part: its judgements and result files
    judgements = {part: read_judgements(args.golden / spec["judgements"]) for part, spec in parts.items()}
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        for spec in parts.values():
            for source in spec["sources"]:
                import_tau_bench(
                    [args.golden / source["file"]], run, source["domain"], trial_offset=source.get("trial_offset", 0)
                )
        label_run(run)
        labels = read_labels(run)
    for part, judged in judgements.items():
        _print(part, agreement(judged, labels), args.rows)
    every = {episode: judged for part in judgements.values() for episode, judged in part.items()}
    _print("all parts", agreement(every, labels), rows=False)


if __name__ == "__main__":
    main()
