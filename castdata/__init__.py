"""castdata: build, publish and train on critique datasets for tool-calling agents (CAST)."""

from castdata.version import __version__

__all__ = ["__version__", "load"]


def load(source: str, config: str, version: str | None = None, **kwargs):
    """One config as a `datasets.DatasetDict`: of a Hub release pinned to its tag `vX.Y.Z` (`source` = ORG/NAME,
    `version` = X.Y.Z; see `castdata.hub.download`), or, without a version, of a local folder from `castdata build`."""
    if version is None:
        from pathlib import Path

        from castdata.hub.local import load_local

        return load_local(Path(source), config)
    from castdata.hub.download import load as load_release

    return load_release(source, config, version, **kwargs)
