"""`castdata report`: pass^k against a hand computation, and the CLI's JSON output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from math import comb

import pytest
from helpers.records import record

from castdata.report import pass_hat_k, summarize
from castdata.rundir import RecordWriter, RunDir


@pytest.fixture
def run_dir(tmp_path):
    # task 0: 3 of 4 succeed; task 1: 4 of 4; task 2: 1 of 4, plus an infrastructure error that must not count
    outcomes = {0: [1, 1, 0, 1], 1: [1, 1, 1, 1], 2: [0, 0, 1, 0]}
    writer = RecordWriter()
    for task_id, results in outcomes.items():
        for trial, ok in enumerate(results):
            writer.append(
                RunDir(tmp_path).trajectory_file("retail", "test"), record(task_id, trial, bool(ok)).to_json()
            )
    writer.append(
        RunDir(tmp_path).trajectory_file("retail", "test"), record(2, 4, False, "infrastructure_error").to_json()
    )
    writer.close()
    return tmp_path


def test_pass_hat_k_definition():
    assert pass_hat_k(4, 3, 2) == comb(3, 2) / comb(4, 2) == 0.5
    assert pass_hat_k(4, 0, 1) == 0.0 and pass_hat_k(4, 4, 4) == 1.0


def test_report_matches_hand_computation(run_dir):
    (group,) = summarize(run_dir)["groups"]
    expected = {
        1: (3 / 4 + 1 + 1 / 4) / 3,
        2: (3 / 6 + 1 + 0) / 3,
        3: (1 / 4 + 1 + 0) / 3,
        4: (0 + 1 + 0) / 3,
    }
    assert group["pass_k"] == pytest.approx(expected)
    assert group["episodes"] == 13 and group["infrastructure_errors"] == 1
    assert group["terminations"] == {"infrastructure_error": 1, "user_stop": 12}
    assert group["mean_turns"] == 1.0


def test_report_counts_a_task_per_domain_split_and_id(tmp_path):
    # retail train task 0 always succeeds, retail test task 0 never: two tasks, not one with 4 of 8
    writer = RecordWriter()
    for split, ok in (("train", True), ("test", False)):
        for trial in range(4):
            writer.append(
                RunDir(tmp_path).trajectory_file("retail", split), record(0, trial, ok, split=split).to_json()
            )
    writer.close()
    groups = {group["split"]: group for group in summarize(tmp_path)["groups"]}
    assert groups["train"]["pass_k"] == {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0} and groups["train"]["tasks"] == 1
    assert groups["test"]["pass_k"] == {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0} and groups["test"]["tasks"] == 1


def test_report_cli_json(run_dir):
    out = subprocess.run(
        [sys.executable, "-m", "castdata.cli", "report", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["groups"][0]["pass_k"]["4"] == pytest.approx(1 / 3)
    wide = {**os.environ, "COLUMNS": "200"}
    table = subprocess.run(
        [sys.executable, "-m", "castdata.cli", "report", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        env=wide,
    )
    assert "pass^4" in table.stdout and "0.333" in table.stdout
