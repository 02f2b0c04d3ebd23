"""Released datasets from the Hub, pinned to a version's tag: files (`castdata download`) or `datasets` objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from castdata.builders.card import CARD
from castdata.builders.dataset import MANIFEST
from castdata.builders.features import CONFIGS
from castdata.errors import InputError, VersionError
from castdata.hub.api import hub_errors
from castdata.hub.versions import list_versions, parse_version, tag_of


def _released_tag(repo: str, version: str) -> str:
    """The tag of a published version; VersionError naming the published ones otherwise."""
    version = parse_version(version)
    released = [v for v, _ in list_versions(repo)]
    if version not in released:
        raise VersionError(f"{repo}: version {version} is not released; released: {', '.join(released) or 'none'}")
    return tag_of(version)


def _check_config(config: str | None) -> None:
    if config is not None and config not in CONFIGS:
        raise InputError(f"config {config!r} is unknown; choose one of: {', '.join(CONFIGS)}")


def download(repo: str, version: str, config: str | None = None, out: Path | None = None) -> Path:
    """Download a release (or one config of it, with the card and manifest) into `out` (default: the Hub cache)."""
    from huggingface_hub import snapshot_download

    _check_config(config)
    tag = _released_tag(repo, version)
    patterns = [f"{config}/*", CARD, MANIFEST] if config else None
    with hub_errors(repo):
        return Path(snapshot_download(repo, repo_type="dataset", revision=tag, allow_patterns=patterns, local_dir=out))


def load(repo: str, config: str, version: str, **kwargs: Any):
    """`datasets.load_dataset(repo, config, revision="vX.Y.Z")`: a DatasetDict of the release's splits."""
    import datasets

    _check_config(config)
    return datasets.load_dataset(repo, config, revision=_released_tag(repo, version), **kwargs)
