"""Release versions: what counts as a semantic version, how releases sort, and what a repo id is."""

from __future__ import annotations

import pytest

from castdata.errors import InputError, VersionError
from castdata.hub.versions import check_repo_id, parse_version, tag_of, version_key


@pytest.mark.parametrize("text, version", [("1.0.0", "1.0.0"), ("v2.10.3", "2.10.3"), ("1.0.0-rc.1", "1.0.0-rc.1")])
def test_semantic_versions(text: str, version: str) -> None:
    assert parse_version(text) == version
    assert tag_of(text) == f"v{version}"


@pytest.mark.parametrize("text", ["1.0", "1", "01.0.0", "1.0.0.0", "v", "latest", "1.0.0+build", "1.0.0-"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(VersionError, match="not a semantic version"):
        parse_version(text)


def test_releases_sort_by_precedence() -> None:
    versions = ["1.10.0", "1.2.0", "1.2.0-rc.2", "0.9.9", "1.2.0-rc.10", "1.2.0-beta", "2.0.0"]
    assert sorted(versions, key=version_key) == [
        "0.9.9",
        "1.2.0-beta",
        "1.2.0-rc.2",
        "1.2.0-rc.10",
        "1.2.0",
        "1.10.0",
        "2.0.0",
    ]


def test_repo_ids() -> None:
    assert check_repo_id("castdata/retail-critic_v1.2") == "castdata/retail-critic_v1.2"
    for bad in ("retail", "a/b/c", "/b", "a/", "a b/c"):
        with pytest.raises(InputError, match="not ORG/NAME"):
            check_repo_id(bad)
