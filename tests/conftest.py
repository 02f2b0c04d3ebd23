"""Test-wide isolation."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def private_datasets_cache(tmp_path_factory, monkeypatch):
    """Each test gets its own `datasets` cache: `datasets` caches a local dataset folder under the folder's name,
    not its contents, so two tests' `.../dataset` folders would otherwise share (stale) cached rows."""
    cache = tmp_path_factory.mktemp("hf-datasets-cache")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache))
    try:
        import datasets
    except ImportError:
        return
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
