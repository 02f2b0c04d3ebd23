"""A loopback Hugging Face Hub for tests.

`HubServer` speaks enough of the Hub HTTP API (repos, commits, LFS uploads, tags and branches, tree
listings, file downloads) for the real `huggingface_hub` and `datasets` clients to publish and load
datasets with no network. Call `configure_hf_env(server.url, home)` *before* importing the clients:
they read their settings once, at import time.

Storage, under the root given to the constructor:
    blobs/<sha256>                    file contents, content-addressed
    repos/<type>s/<ns>/<name>.json    {"private", "created", "refs": {"heads", "tags"}, "commits"}
Each commit is an immutable snapshot {"parent", "message", "date", "tree": {path: entry}} where an
entry is {"sha256", "size", "lfs", "oid"} (`oid` is the git blob id, of the pointer file for LFS).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

import yaml

URL_PREFIXES = {"model": "", "dataset": "datasets/", "space": "spaces/"}
LFS_SUFFIXES = (".parquet", ".arrow", ".bin", ".safetensors", ".pt", ".npy", ".npz", ".zip", ".gz", ".zst")
LFS_MIN_SIZE = 10 * 1024 * 1024
GITATTRIBUTES = b"".join(b"*%s filter=lfs diff=lfs merge=lfs -text\n" % suffix.encode() for suffix in LFS_SUFFIXES)


@dataclass
class Reply:
    """An HTTP answer: a JSON-able body, or raw bytes."""

    status: int = 200
    body: Any = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


class HubError(Exception):
    """A failure answered the Hub's way: JSON `{"error"}` plus `X-Error-Code`/`X-Error-Message`."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict | None = None, **extra: Any):
        super().__init__(message)
        headers = {"X-Error-Message": message, **({"X-Error-Code": code} if code else {}), **(headers or {})}
        self.reply = Reply(status, {"error": message, **extra}, headers)


def git_blob_oid(data: bytes) -> str:
    """The git object id of a blob with this content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file that git stores in place of an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def front_matter(text: str) -> dict | None:
    """The YAML metadata block of a README, or None; raises yaml.YAMLError when it is malformed."""
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    data = yaml.safe_load(text[3:end]) if end > 0 else None
    return data if isinstance(data, dict) else None


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _lfs_entry(sha256: str, size: int) -> dict:
    return {"sha256": sha256, "size": size, "lfs": True, "oid": git_blob_oid(lfs_pointer(sha256, size))}


def _file_info(path: str, entry: dict) -> dict:
    """A file as the tree and paths-info endpoints list it."""
    info = {"type": "file", "oid": entry["oid"], "size": entry["size"], "path": path}
    if entry["lfs"]:
        pointer_size = len(lfs_pointer(entry["sha256"], entry["size"]))
        info["lfs"] = {"oid": entry["sha256"], "size": entry["size"], "pointerSize": pointer_size}
    return info


def _folder_info(tree: dict, path: str) -> dict:
    """A folder as the tree and paths-info endpoints list it (its oid hashes its contents)."""
    content = sorted((p, e["oid"]) for p, e in tree.items() if p.startswith(path + "/"))
    return {"type": "directory", "oid": hashlib.sha1(json.dumps(content).encode()).hexdigest(), "path": path}


def _byte_range(header: str, size: int) -> tuple[int, int]:
    """The inclusive (start, end) of a `Range: bytes=...` header; 416 when it starts past the end."""
    start, _, end = header.removeprefix("bytes=").split(",")[0].strip().partition("-")
    if not start:
        first, last = max(size - int(end), 0), size - 1
    else:
        first, last = int(start), min(int(end), size - 1) if end else size - 1
    if first >= size:
        raise HubError(416, "Range Not Satisfiable", headers={"Content-Range": f"bytes */{size}"})
    return first, last


class _Hub:
    """The endpoints' logic over the on-disk storage. Callers hold `lock` around every call."""

    def __init__(self, root: Path, url: str):
        self.root, self.url = root, url
        self.lock = threading.Lock()
        (root / "blobs").mkdir(parents=True, exist_ok=True)

    # -- storage --------------------------------------------------------------------------------

    def _repo_path(self, repo_type: str, repo_id: str) -> Path:
        return self.root / "repos" / f"{repo_type}s" / f"{repo_id}.json"

    def _load(self, repo_type: str, repo_id: str) -> dict:
        path = self._repo_path(repo_type, repo_id)
        if not path.exists():
            raise HubError(404, f"Repository not found: {repo_type} {repo_id}", "RepoNotFound")
        return json.loads(path.read_text())

    def _save(self, repo_type: str, repo_id: str, repo: dict) -> None:
        path = self._repo_path(repo_type, repo_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_suffix(".tmp").write_text(json.dumps(repo))
        path.with_suffix(".tmp").replace(path)

    def _blob(self, sha256: str) -> Path:
        return self.root / "blobs" / sha256

    def _regular_entry(self, data: bytes) -> dict:
        sha256 = hashlib.sha256(data).hexdigest()
        self._blob(sha256).write_bytes(data)
        return {"sha256": sha256, "size": len(data), "lfs": False, "oid": git_blob_oid(data)}

    def _repo_url(self, repo_type: str, repo_id: str) -> str:
        return f"{self.url}/{URL_PREFIXES[repo_type]}{repo_id}"

    @staticmethod
    def _resolve(repo: dict, revision: str) -> str:
        """The commit id a branch, tag, full commit id or commit id prefix (7+ chars) points at."""
        refs = repo["refs"]
        commit = refs["heads"].get(revision) or refs["tags"].get(revision)
        if commit is None and len(revision) >= 7:
            commit = next((c for c in repo["commits"] if c.startswith(revision)), None)
        if commit is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return commit

    def _snapshot(self, repo: dict, revision: str) -> tuple[str, dict]:
        commit = self._resolve(repo, revision)
        return commit, repo["commits"][commit]

    @staticmethod
    def _new_commit(repo: dict, branch: str, tree: dict, message: str) -> str:
        """Record a snapshot on top of `branch` (created if new) and move the branch to it."""
        parent = repo["refs"]["heads"].get(branch)
        snapshot = {"parent": parent, "message": message, "date": _now(), "tree": tree}
        commit = hashlib.sha1(json.dumps(snapshot, sort_keys=True).encode() + os.urandom(8)).hexdigest()
        repo["commits"][commit] = snapshot
        repo["refs"]["heads"][branch] = commit
        return commit

    # -- repos and metadata ---------------------------------------------------------------------

    def create_repo(self, payload: dict) -> Reply:
        repo_type, namespace = payload.get("type") or "model", payload.get("organization")
        if not namespace:
            raise HubError(400, "This test hub needs a namespace: use repo ids like 'user/name'")
        repo_id = f"{namespace}/{payload['name']}"
        if self._repo_path(repo_type, repo_id).exists():
            # exist_ok callers read the url from this answer
            url = self._repo_url(repo_type, repo_id)
            raise HubError(409, f"You already created this {repo_type} repo", url=url)
        private = bool(payload.get("private")) or payload.get("visibility") == "private"
        repo = {"private": private, "created": _now(), "refs": {"heads": {}, "tags": {}}, "commits": {}}
        tree = {".gitattributes": self._regular_entry(GITATTRIBUTES)}  # as the Hub's first commit
        self._new_commit(repo, "main", tree, "initial commit")
        self._save(repo_type, repo_id, repo)
        return Reply(200, {"url": self._repo_url(repo_type, repo_id), "name": repo_id, "id": repo_id})

    @staticmethod
    def validate_yaml(payload: dict) -> Reply:
        try:
            front_matter(payload["content"])
        except yaml.YAMLError as err:
            return Reply(400, {"errors": [{"message": f"Invalid YAML: {err}"}], "warnings": []})
        return Reply(200, {"errors": [], "warnings": []})

    def repo_info(self, repo_type: str, repo_id: str, revision: str) -> Reply:
        repo = self._load(repo_type, repo_id)
        commit, snapshot = self._snapshot(repo, revision)
        tree = snapshot["tree"]
        card = None
        if "README.md" in tree:
            try:
                card = front_matter(self._blob(tree["README.md"]["sha256"]).read_text())
            except yaml.YAMLError:
                card = None
        siblings = []
        for path, entry in sorted(tree.items()):
            sibling = {"rfilename": path, "size": entry["size"], "blobId": entry["oid"]}
            if entry["lfs"]:
                lfs = _file_info(path, entry)["lfs"]
                sibling["lfs"] = {"sha256": lfs["oid"], "size": lfs["size"], "pointerSize": lfs["pointerSize"]}
            siblings.append(sibling)
        info = {
            "id": repo_id,
            "author": repo_id.split("/")[0],
            "sha": commit,
            "private": repo["private"],
            "gated": False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "createdAt": repo["created"],
            "lastModified": snapshot["date"],
            "siblings": siblings,
        }
        if card is not None:
            info["cardData"] = card
        return Reply(200, info)

    def list_refs(self, repo_type: str, repo_id: str) -> Reply:
        refs = self._load(repo_type, repo_id)["refs"]

        def listing(kind: str, prefix: str) -> list[dict]:
            return [{"name": n, "ref": f"{prefix}{n}", "targetCommit": c} for n, c in sorted(refs[kind].items())]

        return Reply(
            200,
            {
                "branches": listing("heads", "refs/heads/"),
                "tags": listing("tags", "refs/tags/"),
                "converts": [],
                "pullRequests": [],
            },
        )

    def list_commits(self, repo_type: str, repo_id: str, revision: str) -> Reply:
        repo = self._load(repo_type, repo_id)
        commit, commits = self._resolve(repo, revision), []
        while commit is not None:
            snapshot = repo["commits"][commit]
            title, _, message = snapshot["message"].partition("\n")
            commits.append(
                {
                    "id": commit,
                    "title": title,
                    "message": message.strip(),
                    "date": snapshot["date"],
                    "authors": [{"user": repo_id.split("/")[0]}],
                }
            )
            commit = snapshot["parent"]
        return Reply(200, commits)

    def create_tag(self, repo_type: str, repo_id: str, revision: str, payload: dict) -> Reply:
        repo = self._load(repo_type, repo_id)
        commit, tag = self._resolve(repo, revision), payload["tag"]
        if tag in repo["refs"]["tags"]:
            raise HubError(409, f"Tag {tag} already exists")
        repo["refs"]["tags"][tag] = commit
        self._save(repo_type, repo_id, repo)
        return Reply(200, {})

    def create_branch(self, repo_type: str, repo_id: str, branch: str, payload: dict) -> Reply:
        repo = self._load(repo_type, repo_id)
        if branch in repo["refs"]["heads"]:
            raise HubError(409, f"Branch {branch} already exists")
        repo["refs"]["heads"][branch] = self._resolve(repo, payload.get("startingPoint") or "main")
        self._save(repo_type, repo_id, repo)
        return Reply(200, {})

    # -- listings -------------------------------------------------------------------------------

    def tree(self, repo_type: str, repo_id: str, revision: str, path: str, recursive: bool) -> Reply:
        """Folders first, then files; only direct children unless `recursive`."""
        commit, snapshot = self._snapshot(self._load(repo_type, repo_id), revision)
        tree, path = snapshot["tree"], path.strip("/")
        prefix = f"{path}/" if path else ""
        folders, files = set(), []
        for file_path in tree:
            if not file_path.startswith(prefix):
                continue
            parts = file_path[len(prefix) :].split("/")
            if recursive:
                folders.update(prefix + "/".join(parts[:i]) for i in range(1, len(parts)))
                files.append(file_path)
            elif len(parts) > 1:
                folders.add(prefix + parts[0])
            else:
                files.append(file_path)
        if path and not files and not folders:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": commit})
        listing = [_folder_info(tree, f) for f in sorted(folders)]
        return Reply(200, listing + [_file_info(f, tree[f]) for f in sorted(files)])

    def paths_info(self, repo_type: str, repo_id: str, revision: str, paths: list[str]) -> Reply:
        """Files and folders among `paths`; missing ones are left out."""
        _, snapshot = self._snapshot(self._load(repo_type, repo_id), revision)
        tree, infos = snapshot["tree"], []
        for path in (p.strip("/") for p in paths):
            if path in tree:
                infos.append(_file_info(path, tree[path]))
            elif any(p.startswith(path + "/") for p in tree):
                infos.append(_folder_info(tree, path))
        return Reply(200, infos)

    # -- uploads --------------------------------------------------------------------------------

    def preupload(self, repo_type: str, repo_id: str, revision: str, payload: dict) -> Reply:
        """Binary, data or large files go to LFS, text to git; `oid` is the current remote version."""
        commit, snapshot = self._snapshot(self._load(repo_type, repo_id), revision)
        files = []
        for file in payload["files"]:
            sample = base64.b64decode(file["sample"])
            lfs = file["path"].endswith(LFS_SUFFIXES) or file["size"] >= LFS_MIN_SIZE or b"\0" in sample
            remote = snapshot["tree"].get(file["path"])
            oid = None if remote is None else remote["sha256"] if remote["lfs"] else remote["oid"]
            mode = "lfs" if lfs else "regular"
            files.append({"path": file["path"], "uploadMode": mode, "shouldIgnore": False, "oid": oid})
        return Reply(200, {"files": files, "commitOid": commit})

    def lfs_batch(self, repo_type: str, repo_id: str, payload: dict) -> Reply:
        """git-lfs batch API: an upload href for each object not stored yet."""
        self._load(repo_type, repo_id)
        if payload.get("operation") != "upload":
            raise HubError(400, "Only LFS uploads are supported")
        objects = []
        for obj in payload["objects"]:
            answer = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if not self._blob(obj["oid"]).exists():
                href = f"{self.url}/lfs-upload/{obj['oid']}"
                answer["actions"] = {"upload": {"href": href, "expires_in": 3600}}
            objects.append(answer)
        return Reply(200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"})

    def store_lfs(self, sha256: str, data: bytes) -> Reply:
        if hashlib.sha256(data).hexdigest() != sha256:
            raise HubError(400, f"Uploaded content does not match sha256 {sha256}")
        self._blob(sha256).write_bytes(data)
        return Reply(200, {})

    def commit(self, repo_type: str, repo_id: str, branch: str, ndjson: bytes, create_pr: bool) -> Reply:
        """Apply NDJSON operations (header, file, lfsFile, deletedFile, deletedFolder) to `branch`."""
        if create_pr:
            raise HubError(400, "Pull requests are not supported by this test hub")
        repo = self._load(repo_type, repo_id)
        head = repo["refs"]["heads"].get(branch)
        if head is None:
            raise HubError(404, f"Invalid rev id: {branch} is not a branch", "RevisionNotFound")
        lines = [json.loads(line) for line in ndjson.splitlines() if line.strip()]
        if not lines or lines[0]["key"] != "header":
            raise HubError(400, "A commit starts with a header line")
        header, tree = lines[0]["value"], dict(repo["commits"][head]["tree"])
        parent = header.get("parentCommit")
        if parent and not head.startswith(parent):
            raise HubError(412, f"Parent commit {parent} is not the head of {branch} ({head})")
        for line in lines[1:]:
            key, value = line["key"], line["value"]
            path = value["path"].strip("/")
            if key == "file":
                data = value["content"]
                tree[path] = self._regular_entry(
                    base64.b64decode(data) if value.get("encoding") == "base64" else data.encode()
                )
            elif key == "lfsFile":
                blob = self._blob(value["oid"])
                if not blob.exists():
                    raise HubError(422, f"LFS object {value['oid']} of {path} was never uploaded")
                tree[path] = _lfs_entry(value["oid"], blob.stat().st_size)
            elif key == "deletedFile":
                if tree.pop(path, None) is None:
                    raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
            elif key == "deletedFolder":
                doomed = [p for p in tree if p.startswith(path + "/")]
                if not doomed:
                    raise HubError(404, f"A folder with this name doesn't exist: {path}", "EntryNotFound")
                for doomed_path in doomed:
                    del tree[doomed_path]
            else:
                raise HubError(400, f"Unsupported commit operation: {key}")
        message = header["summary"] + (f"\n\n{header['description']}" if header.get("description") else "")
        commit = self._new_commit(repo, branch, tree, message)
        self._save(repo_type, repo_id, repo)
        return Reply(
            200,
            {
                "success": True,
                "commitOid": commit,
                "commitMessage": header["summary"],
                "hookOutput": "",
                "commitUrl": f"{self._repo_url(repo_type, repo_id)}/commit/{commit}",
                "pullRequestUrl": None,
            },
        )

    # -- downloads ------------------------------------------------------------------------------

    def resolve(self, repo_type: str, repo_id: str, revision: str, path: str, byte_range: str | None) -> Reply:
        """A file's bytes with the headers `hf_hub_download` checks; honours `Range`."""
        commit, snapshot = self._snapshot(self._load(repo_type, repo_id), revision)
        entry = snapshot["tree"].get(path)
        if entry is None:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": commit})
        data = self._blob(entry["sha256"]).read_bytes()
        etag = f'"{entry["sha256"] if entry["lfs"] else entry["oid"]}"'
        headers = {"X-Repo-Commit": commit, "ETag": etag, "Accept-Ranges": "bytes"}
        if entry["lfs"]:
            headers.update({"X-Linked-Etag": etag, "X-Linked-Size": str(entry["size"])})
        if not byte_range:
            return Reply(200, data, headers)
        first, last = _byte_range(byte_range, len(data))
        headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
        return Reply(206, data[first : last + 1], headers)


class _Handler(BaseHTTPRequestHandler):
    """Parses requests, routes them to `_Hub` under its lock, and writes the replies."""

    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        raw_path, _, query = self.path.partition("?")
        body = self._read_body()
        self.server.requests.append((self.command, unquote(raw_path)))
        try:
            with self.server.hub.lock:
                reply = self._route([unquote(s) for s in raw_path.strip("/").split("/")], parse_qs(query), body)
        except HubError as err:
            reply = err.reply
        except Exception as err:  # a bug or malformed request: answer instead of hanging the client
            traceback.print_exc()
            reply = HubError(500, f"{type(err).__name__}: {err}").reply
        self._send(reply)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _handle

    def _read_body(self) -> bytes:
        """The request body, plain or with chunked transfer encoding (used by LFS uploads)."""
        if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))
        chunks = []
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            chunks.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline().strip():  # trailers, up to the closing empty line
            pass
        return b"".join(chunks)

    def _send(self, reply: Reply) -> None:
        is_bytes = isinstance(reply.body, bytes)
        body = reply.body if is_bytes else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        headers = {"Content-Type": "application/octet-stream" if is_bytes else "application/json", **reply.headers}
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _route(self, segs: list[str], query: dict[str, list[str]], body: bytes) -> Reply:
        """Dispatch on the path segments, which were split before unquoting (revisions may hold '/')."""
        hub, method = self.server.hub, self.command
        if segs[0] == "api":
            match (method, segs[1:]):
                case ("POST", ["repos", "create"]):
                    return hub.create_repo(json.loads(body))
                case ("POST", ["validate-yaml"]):
                    return hub.validate_yaml(json.loads(body))
                case (_, [("models" | "datasets" | "spaces") as kind, namespace, name, *rest]):
                    return self._route_repo_api(kind[:-1], f"{namespace}/{name}", rest, query, body)
        elif method == "PUT" and len(segs) == 2 and segs[0] == "lfs-upload":
            return hub.store_lfs(segs[1], body)
        else:
            repo_type = "model"
            if segs[0] in ("datasets", "spaces"):
                repo_type, segs = segs[0][:-1], segs[1:]
            match (method, segs):
                case ("POST", [namespace, name, "info", "lfs", "objects", "batch"]) if name.endswith(".git"):
                    return hub.lfs_batch(repo_type, f"{namespace}/{name[:-4]}", json.loads(body))
                case ("GET" | "HEAD", [namespace, name, "resolve", revision, *path]) if path:
                    byte_range = self.headers.get("Range")
                    return hub.resolve(repo_type, f"{namespace}/{name}", revision, "/".join(path), byte_range)
        raise HubError(404, f"This test hub has no route for {method} {self.path}")

    def _route_repo_api(self, repo_type: str, repo_id: str, rest: list[str], query: dict, body: bytes) -> Reply:
        """The `/api/{type}s/{namespace}/{name}/...` endpoints."""
        hub = self.server.hub
        match (self.command, rest):
            case ("GET", []):
                return hub.repo_info(repo_type, repo_id, "main")
            case ("GET", ["revision", revision]):
                return hub.repo_info(repo_type, repo_id, revision)
            case ("GET", ["refs"]):
                return hub.list_refs(repo_type, repo_id)
            case ("GET", ["commits", revision]):
                return hub.list_commits(repo_type, repo_id, revision)
            case ("GET", ["tree", revision, *path]):
                recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
                return hub.tree(repo_type, repo_id, revision, "/".join(path), recursive)
            case ("POST", ["paths-info", revision]):
                return hub.paths_info(repo_type, repo_id, revision, parse_qs(body.decode()).get("paths", []))
            case ("POST", ["preupload", revision]):
                return hub.preupload(repo_type, repo_id, revision, json.loads(body))
            case ("POST", ["commit", branch]):
                return hub.commit(repo_type, repo_id, branch, body, bool(query.get("create_pr")))
            case ("POST", ["tag", revision]):
                return hub.create_tag(repo_type, repo_id, revision, json.loads(body))
            case ("POST", ["branch", branch]):
                return hub.create_branch(repo_type, repo_id, branch, json.loads(body or b"{}"))
        raise HubError(404, f"This test hub has no route for {self.command} {self.path}")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    hub: _Hub
    requests: list[tuple[str, str]]


class HubServer:
    """A loopback Hub on 127.0.0.1 (ephemeral port), served from a daemon thread.

    `url` is known once started; `requests` lists the (method, unquoted path) of every request.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.url = ""
        self.requests: list[tuple[str, str]] = []
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> HubServer:
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._httpd.hub = _Hub(self.root, self.url)
        self._httpd.requests = self.requests
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="hub-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = self._thread = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def configure_hf_env(url: str, home: Path) -> None:
    """Point huggingface_hub and datasets at `url`, with all caches under `home`.

    Call it before importing either client: both read these settings once, at import time.
    """
    for name in (
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",  # offline mode blocks loopback too
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_DATASETS_CACHE",
        "HF_XET_CACHE",
        "HF_ASSETS_CACHE",
        "HF_TOKEN_PATH",
        "HF_STORED_TOKENS_PATH",
        "HUGGING_FACE_HUB_TOKEN",
    ):
        os.environ.pop(name, None)
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY"), "127.0.0.1", "localhost"]))
    os.environ.update(
        {
            "HF_ENDPOINT": url,
            "HF_HOME": str(home),
            "HF_TOKEN": "hf_loopback_test_token",
            "HF_HUB_DISABLE_XET": "1",  # Xet uploads cannot be served; plain LFS can
            "HF_UPDATE_DOWNLOAD_COUNTS": "0",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
            "NO_PROXY": no_proxy,
            "no_proxy": no_proxy,
        }
    )
