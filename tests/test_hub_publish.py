"""Publishing, listing, downloading and loading releases with the real huggingface_hub and datasets clients,
against the loopback Hub (tests/helpers/hub_server.py).

The clients read their settings at import, so the client side runs in a fresh process (`CLIENT`) with the
loopback environment; it drives the `castdata` commands and `castdata.load`, and records what it saw.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers.build import hub_env, labelled_run
from helpers.hub_server import HubServer

from castdata.builders.dataset import build_dataset
from castdata.builders.features import CONFIGS
from castdata.builders.options import BuildOptions

REPO = "castdata/demo"
TOKEN = "hf_castdataLoopbackSecret0123456789"

CLIENT = r"""
import json, sys
from pathlib import Path

import datasets
from huggingface_hub import HfApi, hf_hub_download
from typer.testing import CliRunner

import castdata
from castdata.builders.features import CONFIGS
from castdata.builders.options import BuildOptions
from castdata.cli import app

work, out = Path(sys.argv[1]), Path(sys.argv[2])
REPO, api, runner, res = "castdata/demo", HfApi(), CliRunner(), {"outputs": []}


def cli(*args):
    result = runner.invoke(app, list(args))
    res["outputs"].append(result.output)
    return {"code": result.exit_code, "output": result.output}


def commits(revision="main"):
    return [c.commit_id for c in api.list_repo_commits(REPO, repo_type="dataset", revision=revision)]


def tags():
    return {t.name: t.target_commit for t in api.list_repo_refs(REPO, repo_type="dataset").tags}


res["not_semver"] = cli("publish", str(work / "v1"), "--repo", REPO, "--version", "1.0")
res["invalid"] = cli("publish", str(work / "tampered"), "--repo", "castdata/tampered", "--version", "1.0.0")
res["invalid_repo_created"] = api.repo_exists("castdata/tampered", repo_type="dataset")
res["dry_run"] = cli("publish", str(work / "v1"), "--repo", REPO, "--version", "1.0.0", "--dry-run")
res["dry_run_repo_created"] = api.repo_exists(REPO, repo_type="dataset")

res["v1"] = cli("publish", str(work / "v1"), "--repo", REPO, "--version", "1.0.0")
before_v2 = commits()
res["v2"] = cli("publish", str(work / "v2"), "--repo", REPO, "--version", "v1.1.0")
res["v2_new_commits"] = len(commits()) - len(before_v2)
res["tags"] = tags()
res["tag_commits"] = {tag: commits(tag)[0] for tag in res["tags"]}

main_before = commits()
res["republish"] = cli("publish", str(work / "v2"), "--repo", REPO, "--version", "1.0.0")
res["republish_changed"] = commits() != main_before or tags() != res["tags"]
res["v3"] = cli("publish", str(work / "v3"), "--repo", REPO, "--version", "1.2.0")
res["v3_files"] = sorted(api.list_repo_files(REPO, repo_type="dataset", revision="v1.2.0"))
res["versions"] = cli("versions", REPO)
res["private"] = cli("publish", str(work / "v1"), "--repo", "castdata/secret", "--version", "0.1.0", "--private")
res["private_flag"] = api.dataset_info("castdata/secret").private

res["loads"] = {}
for version, folder in (("1.0.0", "v1"), ("1.1.0", "v2"), ("1.2.0", "v3")):
    for config in CONFIGS:
        hub = castdata.load(REPO, config, version)
        local = datasets.load_dataset(str(work / folder), config)
        res["loads"][f"{version}/{config}"] = {
            "splits": {split: len(hub[split]) for split in hub},
            "same_rows": set(hub) == set(local) and all(hub[s].data.table.equals(local[s].data.table) for s in hub),
        }
res["card_v2"] = Path(hf_hub_download(REPO, "README.md", repo_type="dataset", revision="v1.1.0")).read_text()
res["manifest_v2"] = json.loads(Path(hf_hub_download(REPO, "castdata.json", repo_type="dataset", revision="v1.1.0")).read_text())
res["download"] = cli("download", REPO, "--version", "1.0.0", "--config", "critic_sft", "--out", str(work / "dl"))
res["downloaded"] = sorted(str(p.relative_to(work / "dl")) for p in (work / "dl").rglob("*") if p.is_file() and ".cache" not in p.parts)
res["download_missing"] = cli("download", REPO, "--version", "9.9.9")
out.write_text(json.dumps(res))
"""


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`v1` and a changed `v2` (more tasks) of the demo dataset, `v3`: v2 in shards of 50 rows (other file
    names), and `tampered`: v1 with one file changed."""
    work = tmp_path_factory.mktemp("releases")
    runs = tmp_path_factory.mktemp("runs")
    for name, tasks in (("v1", "0-2"), ("v2", "0-4")):
        manifest = build_dataset([labelled_run(runs / name / "demo", split="test", tasks=tasks, trials=3)], work / name)
        assert list(manifest["configs"]) == list(CONFIGS), "every config has rows"
    build_dataset([runs / "v2" / "demo"], work / "v3", BuildOptions(shard_rows=50))
    shutil.copytree(work / "v1", work / "tampered")
    shard = next((work / "tampered").glob("critic_sft/*.parquet"))
    pq.write_table(pq.read_table(shard).slice(1), shard)
    return work


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory):
    with HubServer(tmp_path_factory.mktemp("hub")) as server:
        yield server


@pytest.fixture(scope="module")
def seen(hub: HubServer, releases: Path) -> dict:
    out = releases / "seen.json"
    env = hub_env(hub.url, releases / "hf_home", TOKEN)
    proc = subprocess.run(
        [sys.executable, "-c", CLIENT, str(releases), str(out)], env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    return {**json.loads(out.read_text()), "stderr": proc.stderr, "stdout": proc.stdout}


def test_refusals_upload_nothing(seen: dict) -> None:
    assert seen["not_semver"]["code"] == 2 and "not a semantic version" in seen["not_semver"]["output"]
    assert seen["invalid"]["code"] == 2 and "does not match the sha256" in seen["invalid"]["output"]
    assert seen["invalid_repo_created"] is False
    assert seen["republish"]["code"] == 2 and "version 1.0.0 is already released" in seen["republish"]["output"]
    assert seen["republish_changed"] is False


def test_dry_run_lists_files_and_commit_without_uploading(seen: dict) -> None:
    output = seen["dry_run"]["output"]
    assert seen["dry_run"]["code"] == 0 and seen["dry_run_repo_created"] is False
    assert 'commit on main: "Release v1.0.0"' in output and "will be created" in output
    for path in ("README.md", "castdata.json", "critic_sft/test-00000-of-00001.parquet", "plots/pass_k.png"):
        assert f"upload {path} (" in output


def test_each_release_is_one_tagged_commit(seen: dict) -> None:
    assert seen["v1"]["code"] == 0 and seen["v2"]["code"] == 0
    assert 'load_dataset("castdata/demo", "critic_sft", revision="v1.0.0")' in seen["v1"]["output"]
    assert seen["v2_new_commits"] == 1
    assert set(seen["tags"]) == {"v1.0.0", "v1.1.0"}
    assert seen["tags"] == seen["tag_commits"]
    assert seen["tags"]["v1.0.0"] != seen["tags"]["v1.1.0"]


def test_versions_lists_every_release(seen: dict) -> None:
    assert seen["versions"]["code"] == 0
    listed = [line.split("\t") for line in seen["versions"]["output"].splitlines()]
    assert listed[:2] == [["1.0.0", seen["tags"]["v1.0.0"]], ["1.1.0", seen["tags"]["v1.1.0"]]]
    assert [version for version, _ in listed] == ["1.0.0", "1.1.0", "1.2.0"]


def test_a_release_replaces_the_files_of_the_previous_one(seen: dict) -> None:
    assert seen["v3"]["code"] == 0
    shards = [path for path in seen["v3_files"] if path.startswith("critic_sft/")]
    assert len(shards) > 1 and all(path.endswith(f"-of-{len(shards):05d}.parquet") for path in shards)
    assert seen["loads"]["1.2.0/critic_sft"]["same_rows"]
    assert seen["loads"]["1.2.0/critic_sft"]["splits"] == seen["loads"]["1.1.0/critic_sft"]["splits"]


def test_private_repo(seen: dict) -> None:
    assert seen["private"]["code"] == 0 and seen["private_flag"] is True


def test_every_config_loads_pinned_to_its_release(seen: dict) -> None:
    for config in CONFIGS:
        old, new = seen["loads"][f"1.0.0/{config}"], seen["loads"][f"1.1.0/{config}"]
        assert old["same_rows"] and new["same_rows"], config
        assert old["splits"] != new["splits"], config


def test_published_card_and_manifest_name_the_release(seen: dict) -> None:
    assert 'load_dataset("castdata/demo", "critic_sft", revision="v1.1.0")' in seen["card_v2"]
    assert seen["manifest_v2"]["release"] == {"repo": REPO, "version": "1.1.0"}


def test_download_one_config(seen: dict) -> None:
    assert seen["download"]["code"] == 0
    assert seen["downloaded"] == ["README.md", "castdata.json", "critic_sft/test-00000-of-00001.parquet"]
    assert seen["download_missing"]["code"] == 2
    assert "version 9.9.9 is not released; released: 1.0.0, 1.1.0" in seen["download_missing"]["output"]


def test_the_token_is_never_written(seen: dict, hub: HubServer, releases: Path) -> None:
    assert seen["v1"]["code"] == 0, "the publishing used the token"
    texts = [seen["stdout"], seen["stderr"], *seen["outputs"]]
    assert not any(TOKEN in text for text in texts)
    for root in (hub.root, releases):
        for path in root.rglob("*"):
            if path.is_file():
                assert TOKEN.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("case", ["dead endpoint", "offline", "no token"])
def test_an_unreachable_hub_or_a_missing_token_is_one_line(case: str, releases: Path, tmp_path: Path) -> None:
    env = hub_env("http://127.0.0.1:9", tmp_path / "hf_home", TOKEN)  # nothing listens on port 9
    args = ["publish", str(releases / "v1"), "--repo", REPO, "--version", "1.0.0"]
    if case == "offline":
        env["HF_HUB_OFFLINE"] = "1"
    if case == "no token":
        env.pop("HF_TOKEN")
    else:
        args.append("--dry-run")
    command = [sys.executable, "-m", "castdata.cli", *args]
    shown = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 2 and len(shown.stderr.splitlines()) == 1, shown.stderr[-3000:]
    expected = {
        "dead endpoint": "cannot reach the Hub at http://127.0.0.1:9",
        "offline": "(HF_HUB_OFFLINE is set)",
        "no token": "no Hub token; set HF_TOKEN or run `hf auth login`",
    }[case]
    assert shown.stderr.startswith(f"error: {REPO}: ") and expected in shown.stderr and TOKEN not in shown.stderr
