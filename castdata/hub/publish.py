"""`castdata publish`: a validated dataset folder -> one commit on the repo's main branch, tagged `vX.Y.Z`.

Nothing is uploaded when the version is not semantic, already released, or the folder fails validation. The
card and manifest are uploaded with the release filled in (repo and version: the card's loading lines);
files of the previous release that the new one lacks are deleted in the same commit. The token comes from
huggingface_hub's usual sources (`HF_TOKEN`, `hf auth login`) and castdata never reads or writes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from castdata.builders.card import CARD, render_card
from castdata.builders.dataset import MANIFEST
from castdata.builders.validate import validate_dataset
from castdata.errors import VersionError
from castdata.hub.api import hub_errors, require_token
from castdata.hub.versions import check_repo_id, list_versions, parse_version, tag_of

KEEP_REMOTE = frozenset({".gitattributes"})


@dataclass
class Release:
    """What a publish does (or, in a dry run, would do)."""

    repo: str
    version: str
    private: bool
    repo_exists: bool
    parent: str | None  # the head of main the commit builds on; None for a new repo
    uploads: dict[str, bytes | Path] = field(default_factory=dict)  # path in repo -> content
    deletions: list[str] = field(default_factory=list)
    commit: str | None = None

    @property
    def tag(self) -> str:
        return tag_of(self.version)

    @property
    def message(self) -> str:
        return f"Release {self.tag}"

    def load_line(self, config: str = "critic_sft") -> str:
        """The exact `load_dataset` call for users of this release."""
        return f'load_dataset("{self.repo}", "{config}", revision="{self.tag}")'

    def describe(self) -> list[str]:
        """The plan, one line each: repo, commit, files with sizes, deletions, tag."""
        lines = [
            f"repo: {self.repo} (dataset{', private' if self.private else ''}; {'exists' if self.repo_exists else 'will be created'})"
        ]
        lines.append(f'commit on main: "{self.message}", parent {self.parent or "(none: first commit)"}')
        for path, content in sorted(self.uploads.items()):
            size = len(content) if isinstance(content, bytes) else content.stat().st_size
            lines.append(f"  upload {path} ({size} bytes)")
        lines += [f"  delete {path}" for path in self.deletions]
        lines.append(f"tag: {self.tag} on that commit")
        return lines


def _remote_state(api, repo: str) -> tuple[bool, str | None, list[str]]:
    """(repo exists, head of main, files at that head)."""
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        info = api.dataset_info(repo, revision="main")
    except RepositoryNotFoundError:
        return False, None, []
    except RevisionNotFoundError:
        return True, None, []
    return True, info.sha, [sibling.rfilename for sibling in info.siblings or []]


def plan_release(dataset_dir: Path, repo: str, version: str, private: bool = False) -> Release:
    """Validate everything and work out the commit; uploads nothing. Raises VersionError or InvalidDataset."""
    from huggingface_hub import HfApi

    version = parse_version(version)
    check_repo_id(repo)
    manifest = validate_dataset(dataset_dir)
    with hub_errors(repo):
        exists, parent, remote_files = _remote_state(HfApi(), repo)
    if exists:
        released = dict(list_versions(repo))
        if version in released:
            raise VersionError(
                f"{repo}: version {version} is already released (tag {tag_of(version)} at {released[version][:12]}); publish a new version"
            )
    release = Release(repo, version, private, exists, parent)
    info = {"repo": repo, "version": version}
    for path in sorted(p for p in dataset_dir.rglob("*") if p.is_file()):
        release.uploads[path.relative_to(dataset_dir).as_posix()] = path
    release.uploads[CARD] = render_card(manifest, info).encode()
    release.uploads[MANIFEST] = (
        json.dumps({**manifest, "release": info}, indent=2, ensure_ascii=False) + "\n"
    ).encode()
    release.deletions = sorted(set(remote_files) - set(release.uploads) - KEEP_REMOTE)
    return release


def publish(
    dataset_dir: Path,
    repo: str,
    version: str,
    *,
    private: bool = False,
    dry_run: bool = False,
    echo: Callable[[str], None] = print,
) -> Release:
    """Publish a dataset folder as release `version` of `repo` (see the module docstring)."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    if not dry_run:
        parse_version(version)
        require_token(check_repo_id(repo))
    release = plan_release(dataset_dir, repo, version, private)
    if dry_run:
        echo("dry run: nothing uploaded. Would publish:")
        for line in release.describe():
            echo(line)
        return release
    api = HfApi()
    operations = [
        CommitOperationAdd(path_in_repo=path, path_or_fileobj=content) for path, content in release.uploads.items()
    ]
    operations += [CommitOperationDelete(path_in_repo=path) for path in release.deletions]
    with hub_errors(repo):
        if not release.repo_exists:
            api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        info = api.create_commit(
            repo, operations, commit_message=release.message, repo_type="dataset", parent_commit=release.parent
        )
        release.commit = info.oid
        api.create_tag(repo, tag=release.tag, tag_message=release.message, revision=release.commit, repo_type="dataset")
    echo(f"published {repo} {release.tag} (commit {release.commit})")
    echo("load it with:")
    echo("  from datasets import load_dataset")
    echo(f"  {release.load_line()}")
    return release
