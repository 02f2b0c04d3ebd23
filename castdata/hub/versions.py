"""Dataset releases on the Hub: a semantic version `X.Y.Z` (optionally `-prerelease`) is the git tag `vX.Y.Z`."""

from __future__ import annotations

import re

from castdata.errors import InputError, VersionError
from castdata.hub.api import hub_errors
from castdata.hub.options import REPO_PATTERN

SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?")
REPO_ID = re.compile(REPO_PATTERN)


def parse_version(text: str) -> str:
    """`X.Y.Z` from `X.Y.Z` or `vX.Y.Z`; VersionError for anything that is not a semantic version."""
    version = text[1:] if text.startswith("v") else text
    if not SEMVER.fullmatch(version):
        raise VersionError(f"version {text!r} is not a semantic version; use X.Y.Z, e.g. 1.0.0 (or 1.0.0-rc.1)")
    return version


def tag_of(version: str) -> str:
    """The git tag of a release."""
    return f"v{parse_version(version)}"


def check_repo_id(repo: str) -> str:
    """`ORG/NAME`, or InputError."""
    if not REPO_ID.fullmatch(repo):
        raise InputError(f"repo {repo!r} is not ORG/NAME")
    return repo


def version_key(version: str) -> tuple:
    """Sort key in semantic-version precedence (a prerelease sorts before its release)."""
    major, minor, patch, pre = SEMVER.fullmatch(version).groups()
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
    return (int(major), int(minor), int(patch), 0 if pre else 1, parts)


def list_versions(repo: str) -> list[tuple[str, str]]:
    """(version, commit) of every release tag of a dataset repo, oldest version first."""
    from huggingface_hub import HfApi

    with hub_errors(check_repo_id(repo)):
        refs = HfApi().list_repo_refs(repo, repo_type="dataset")
    found = [
        (tag.name[1:], tag.target_commit)
        for tag in refs.tags
        if tag.name.startswith("v") and SEMVER.fullmatch(tag.name[1:])
    ]
    return sorted(found, key=lambda item: version_key(item[0]))
