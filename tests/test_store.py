"""The run directory (`castdata.rundir`): the latest record of an episode wins, whichever file holds it; torn
lines; the manifest reads and writes back byte for byte."""

from __future__ import annotations

import json

import pytest
from helpers.records import record

from castdata.errors import InputError
from castdata.rundir import RecordWriter, RunDir, finished_keys, read_trajectories


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


COLLECTED = {
    "schema": "castdata.run/1",
    "config": {"domains": ["retail"], "seed": 0},
    "config_fingerprint": "0123456789abcdef",
    "versions": {"castdata": "0.1.0", "python": "3.11.7"},
    "started_at": 1.5,
    "ended_at": None,
    "counts": {"planned": 4, "finished": 3},
}
IMPORTED = {  # `castdata import`'s manifest: no config, fields of its own
    "schema": "castdata.run/1",
    "import": {"format": "tau-bench", "domain": "retail", "split": "test"},
    "sources": [{"name": "a.json", "sha256": "ab", "refused": []}],
    "counts": {"episodes": 2},
    "versions": {"castdata": "0.1.0"},
}


@pytest.mark.parametrize("manifest", [COLLECTED, IMPORTED], ids=["collected", "imported"])
def test_a_manifest_reads_and_writes_back_byte_for_byte(tmp_path, manifest):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    written = path.read_bytes()
    run = RunDir(tmp_path)
    read = run.manifest()
    assert read.counts == manifest["counts"] and read.config == manifest.get("config")
    run.write_manifest(read)
    assert path.read_bytes() == written


def test_a_bad_manifest_is_named_with_its_field(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"counts": {"finished": "many"}}))
    with pytest.raises(InputError, match=r"manifest\.json: not a run manifest: counts\.finished: "):
        RunDir(tmp_path).manifest()
    assert RunDir(tmp_path / "new").manifest() is None
