"""Test-wide isolation."""

from __future__ import annotations

import os
from pathlib import Path

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


@pytest.fixture(scope="session")
def demo_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The full demo run, labelled, and the dataset built from it: made once per test session (under xdist, once
    for all workers, behind a file lock). Read-only for the tests that share it."""
    from filelock import FileLock
    from helpers.build import labelled_run

    from castdata.builders.dataset import MANIFEST, build_dataset

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / "demo-build"
    with FileLock(str(shared / "demo-build.lock")):
        if not (root / "dataset" / MANIFEST).exists():
            build_dataset([labelled_run(root / "run")], root / "dataset")
    return root / "run", root / "dataset"
