"""The run directory store: the latest record of an episode wins, whichever file holds it; torn lines."""

from __future__ import annotations

import pytest
from helpers.records import record

from castdata.errors import InputError
from castdata.rundir import RecordWriter, finished_keys, read_trajectories


def test_latest_record_wins_across_files(tmp_path):
    failed = record(0, 0, False, "infrastructure_error")
    failed.ended_at = 10.0
    rerun = record(0, 0, True)
    rerun.ended_at = 20.0
    writer = RecordWriter()
    # a later local rerun lands in a file that sorts before the Ray unit file holding the failure
    writer.append(tmp_path / "trajectories" / "retail.test.jsonl", rerun.to_json())
    writer.append(tmp_path / "trajectories" / "retail.test.unit-a-0-0.jsonl", failed.to_json())
    writer.close()
    (only,) = read_trajectories(tmp_path)
    assert only.outcome.reward == 1.0
    assert finished_keys(tmp_path) == {("retail", "test", 0, 0)}


def test_a_torn_last_line_is_skipped_and_a_bad_line_named(tmp_path):
    path = tmp_path / "trajectories" / "retail.test.jsonl"
    path.parent.mkdir()
    path.write_text(record(0, 0, True).to_json() + "\n" + record(0, 1, True).to_json()[:50])
    assert [r.trial for r in read_trajectories(tmp_path)] == [0]
    path.write_text(record(0, 0, True).to_json() + '\n{"no": 1}\n')
    with pytest.raises(InputError, match=r"retail\.test\.jsonl:2: not a trajectories record"):
        read_trajectories(tmp_path)
