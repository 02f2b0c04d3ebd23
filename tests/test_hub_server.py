"""The loopback Hub (tests/helpers/hub_server.py) works with the real huggingface_hub and datasets clients.

The clients read HF_ENDPOINT and friends at import time, so they run in a fresh subprocess
(`CLIENT_SCRIPT`) that configures the environment first; it records what it saw in a JSON file
that the tests below check, one aspect each.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers.hub_server import HubServer

REPO = "castdata/demo"
PARQUET = "a/train-00000-of-00001.parquet"

CLIENT_SCRIPT = r'''
import json, sys
from pathlib import Path

tests_dir, url, work, out = sys.argv[1:5]
sys.path.insert(0, tests_dir)
from helpers.hub_server import configure_hf_env

work = Path(work)
configure_hf_env(url, work / "hf_home")

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError,
)

REPO, PARQUET = "castdata/demo", "a/train-00000-of-00001.parquet"
README = """---
license: mit
configs:
- config_name: a
  data_files:
  - split: train
    path: a/train-*.parquet
---
# Demo dataset
"""
api = HfApi()
res = {}


def release(name, rows):
    folder = work / name
    (folder / "a").mkdir(parents=True)
    (folder / "README.md").write_text(README)
    pq.write_table(pa.Table.from_pylist(rows), folder / PARQUET)
    return folder


def n_commits(revision="main"):
    return len(api.list_repo_commits(REPO, repo_type="dataset", revision=revision))


def error_of(call):
    try:
        call()
    except HfHubHTTPError as err:
        return [type(err).__name__, err.response.status_code]
    return None


# Repos
res["repo_url"] = str(api.create_repo(REPO, repo_type="dataset"))
res["exist_ok"] = str(api.create_repo(REPO, repo_type="dataset", exist_ok=True))
res["create_twice"] = error_of(lambda: api.create_repo(REPO, repo_type="dataset"))
api.create_repo("castdata/secret", repo_type="dataset", private=True)
res["private"] = api.dataset_info("castdata/secret").private

# Release v1.0.0: one commit with the card and the data, then a tag
v1_rows = [{"id": 1, "text": "one"}, {"id": 2, "text": "two"}]
before = n_commits()
info = api.upload_folder(repo_id=REPO, repo_type="dataset", folder_path=release("v1", v1_rows), commit_message="v1")
res["v1_new_commits"] = n_commits() - before
res["v1_files"] = sorted(api.list_repo_files(REPO, repo_type="dataset", revision=info.oid))
res["v1_lfs"] = {f.path: f.lfs is not None for f in api.list_repo_tree(REPO, repo_type="dataset", recursive=True) if f.path.endswith((".md", ".parquet"))}
api.create_tag(REPO, repo_type="dataset", tag="v1.0.0", revision=info.oid)
res["v1_commit"] = info.oid

# Re-uploading the unchanged release makes no commit
before = n_commits()
api.upload_folder(repo_id=REPO, repo_type="dataset", folder_path=work / "v1", commit_message="again")
res["unchanged_new_commits"] = n_commits() - before

# Release v1.1.0 with changed data
v2_rows = [{"id": 1, "text": "uno"}, {"id": 2, "text": "dos"}, {"id": 3, "text": "tres"}]
info = api.upload_folder(repo_id=REPO, repo_type="dataset", folder_path=release("v2", v2_rows), commit_message="v2")
api.create_tag(REPO, repo_type="dataset", tag="v1.1.0")
res["v2_commit"] = info.oid
refs = api.list_repo_refs(REPO, repo_type="dataset")
res["tags"] = {t.name: t.target_commit for t in refs.tags}
res["tag_twice"] = error_of(lambda: api.create_tag(REPO, repo_type="dataset", tag="v1.0.0"))
card = api.dataset_info(REPO, revision="v1.0.0")
res["info_v1"] = {"sha": card.sha, "configs": card.card_data.configs, "siblings": sorted(s.rfilename for s in card.siblings)}

# Loading and downloading at tags
for tag in ("v1.0.0", "v1.1.0"):
    res[f"load_{tag}"] = datasets.load_dataset(REPO, "a", revision=tag)["train"].to_list()
res["download_v1"] = pq.read_table(hf_hub_download(REPO, PARQUET, repo_type="dataset", revision="v1.0.0")).to_pylist()
snap = Path(snapshot_download(REPO, repo_type="dataset", revision="v1.0.0"))
res["snapshot_files"] = sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_file())
res["snapshot_rows"] = pq.read_table(snap / PARQUET).to_pylist()

# A branch whose name holds a slash
api.create_branch(REPO, repo_type="dataset", branch="release/2024", revision="v1.0.0")
api.upload_file(repo_id=REPO, repo_type="dataset", path_or_fileobj=b"notes\n", path_in_repo="notes/x.txt", revision="release/2024")
res["branch_file"] = Path(hf_hub_download(REPO, "notes/x.txt", repo_type="dataset", revision="release/2024")).read_text()
res["branches"] = [b.name for b in api.list_repo_refs(REPO, repo_type="dataset").branches]
res["branch_tree"] = sorted(f.path for f in api.list_repo_tree(REPO, "notes", repo_type="dataset", revision="release/2024"))

# DatasetDict.push_to_hub creates the repo, then a second push replaces the shards
pushed = datasets.DatasetDict({
    "train": datasets.Dataset.from_dict({"x": [1, 2, 3]}),
    "test": datasets.Dataset.from_dict({"x": [4]}),
})
pushed.push_to_hub("castdata/pushed", config_name="b")
second = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"x": [7, 8]})})
commit = second.push_to_hub("castdata/pushed", config_name="b")
loaded = datasets.load_dataset("castdata/pushed", "b", revision=commit.oid)
res["pushed"] = {split: list(loaded[split]["x"]) for split in loaded}
res["pushed_files"] = sorted(api.list_repo_files("castdata/pushed", repo_type="dataset"))

# Model repos too
api.create_repo("castdata/model")
api.upload_file(repo_id="castdata/model", path_or_fileobj=b"{}", path_in_repo="config.json")
res["model_file"] = Path(hf_hub_download("castdata/model", "config.json")).read_text()

# Errors
res["missing_repo"] = error_of(lambda: api.dataset_info("castdata/missing"))
res["missing_repo_download"] = error_of(lambda: hf_hub_download("castdata/missing", "README.md", repo_type="dataset"))
res["missing_revision"] = error_of(lambda: hf_hub_download(REPO, "README.md", repo_type="dataset", revision="v9"))
res["missing_file"] = error_of(lambda: hf_hub_download(REPO, "nope.txt", repo_type="dataset", revision="v1.0.0"))

Path(out).write_text(json.dumps(res))
'''


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory):
    with HubServer(tmp_path_factory.mktemp("hub")) as server:
        yield server


@pytest.fixture(scope="module")
def seen(hub: HubServer, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Run the client scenario once against the server and return what it recorded."""
    work = tmp_path_factory.mktemp("client")
    out = work / "results.json"
    args = [str(Path(__file__).parent), hub.url, str(work), str(out)]
    proc = subprocess.run([sys.executable, "-c", CLIENT_SCRIPT, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads(out.read_text())


def test_create_repo(seen: dict, hub: HubServer) -> None:
    assert seen["repo_url"] == f"{hub.url}/datasets/{REPO}"
    assert seen["exist_ok"] == seen["repo_url"]
    assert seen["create_twice"] == ["HfHubHTTPError", 409]
    assert seen["private"] is True


def test_upload_folder_is_one_commit_with_parquet_in_lfs(seen: dict) -> None:
    assert seen["v1_new_commits"] == 1
    assert seen["v1_files"] == [".gitattributes", "README.md", PARQUET]
    assert seen["v1_lfs"] == {"README.md": False, PARQUET: True}


def test_unchanged_upload_makes_no_commit(seen: dict) -> None:
    assert seen["unchanged_new_commits"] == 0


def test_tags_and_refs(seen: dict) -> None:
    assert seen["tags"] == {"v1.0.0": seen["v1_commit"], "v1.1.0": seen["v2_commit"]}
    assert seen["tag_twice"] == ["HfHubHTTPError", 409]
    assert seen["info_v1"]["sha"] == seen["v1_commit"]
    assert seen["info_v1"]["configs"] == [
        {"config_name": "a", "data_files": [{"split": "train", "path": "a/train-*.parquet"}]}
    ]
    assert seen["info_v1"]["siblings"] == [".gitattributes", "README.md", PARQUET]


def test_load_dataset_at_tags(seen: dict) -> None:
    assert seen["load_v1.0.0"] == [{"id": 1, "text": "one"}, {"id": 2, "text": "two"}]
    assert seen["load_v1.1.0"] == [{"id": 1, "text": "uno"}, {"id": 2, "text": "dos"}, {"id": 3, "text": "tres"}]


def test_downloads_at_tag(seen: dict) -> None:
    assert seen["download_v1"] == seen["load_v1.0.0"]
    assert seen["snapshot_files"] == [".gitattributes", "README.md", PARQUET]
    assert seen["snapshot_rows"] == seen["load_v1.0.0"]


def test_branch_with_slash(seen: dict) -> None:
    assert seen["branches"] == ["main", "release/2024"]
    assert seen["branch_file"] == "notes\n"
    assert seen["branch_tree"] == ["notes/x.txt"]


def test_push_to_hub(seen: dict) -> None:
    assert seen["pushed"] == {"train": [7, 8]}
    assert ".gitattributes" in seen["pushed_files"] and "README.md" in seen["pushed_files"]
    data_files = [f for f in seen["pushed_files"] if f.startswith("b/")]
    assert data_files and all(f.startswith("b/train-") for f in data_files)  # the old test shard is gone


def test_model_repo(seen: dict) -> None:
    assert seen["model_file"] == "{}"


def test_missing_repo_revision_and_file(seen: dict) -> None:
    assert seen["missing_repo"] == ["RepositoryNotFoundError", 404]
    assert seen["missing_repo_download"] == ["RepositoryNotFoundError", 404]
    assert seen["missing_revision"] == ["RevisionNotFoundError", 404]
    assert seen["missing_file"] == ["RemoteEntryNotFoundError", 404]


def test_requests_are_recorded(seen: dict, hub: HubServer) -> None:
    methods_paths = set(hub.requests)
    assert ("POST", "/api/repos/create") in methods_paths
    assert ("POST", f"/api/datasets/{REPO}/tag/main") in methods_paths
    assert ("POST", f"/api/datasets/{REPO}/commit/release/2024") in methods_paths  # unquoted
    assert any(method == "PUT" and path.startswith("/lfs-upload/") for method, path in hub.requests)


def test_range_requests(seen: dict, hub: HubServer) -> None:
    url = f"{hub.url}/datasets/{REPO}/resolve/release%2F2024/notes/x.txt"
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Range": "bytes=1-3"})) as resp:
        assert (resp.status, resp.read(), resp.headers["Content-Range"]) == (206, b"ote", "bytes 1-3/6")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(url, headers={"Range": "bytes=6-"}))
    assert err.value.code == 416
