"""Import tau-trait's domain modules without running its package `__init__` files.

`tau_trait/__init__.py` and `tau_trait/envs/__init__.py` import tau-trait's user simulator, which imports
litellm (about 7 s) and builds OpenAI clients at import (fails without `OPENAI_API_KEY`). castdata only
needs the domains' data, tools, policies and tasks, which import nothing of that. So, when tau-trait's
packages are not imported yet, we register them as bare packages (their `__path__` only) and import the
submodules we need. If the caller imported tau-trait normally first, its real modules are used as they are.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path
from types import ModuleType


def _package_dir() -> Path:
    spec = importlib.util.find_spec("tau_trait")  # finds, does not import, a top-level package
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("tau-trait is not installed: pip install tau-trait")
    return Path(next(iter(spec.submodule_search_locations)))


def _bare_package(name: str, path: Path) -> None:
    if name in sys.modules:
        return
    spec = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
    spec.submodule_search_locations = [str(path)]
    module = types.ModuleType(name)
    module.__spec__ = spec
    module.__path__ = [str(path)]
    module.__package__ = name
    sys.modules[name] = module


def import_domain_module(domain: str, submodule: str) -> ModuleType:
    """Import `tau_trait.envs.<domain>.<submodule>` (e.g. `tools`, `data`, `wiki`, `tasks_test`)."""
    root = _package_dir()
    _bare_package("tau_trait", root)
    _bare_package("tau_trait.envs", root / "envs")
    _bare_package(f"tau_trait.envs.{domain}", root / "envs" / domain)
    return importlib.import_module(f"tau_trait.envs.{domain}.{submodule}")


def tau_trait_version() -> str:
    """The installed tau-trait version."""
    from importlib.metadata import version

    return version("tau-trait")
