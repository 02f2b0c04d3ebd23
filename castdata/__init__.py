"""castdata: build, publish and train on critique datasets for tool-calling agents (CAST)."""

__version__ = "0.1.0"


def load(repo: str, config: str, version: str, **kwargs):
    """A released config as a `datasets.DatasetDict`, pinned to the tag `vX.Y.Z` (see `castdata.hub.download`)."""
    from castdata.hub.download import load as load_release

    return load_release(repo, config, version, **kwargs)
