"""`load_domain`: a domain by name, tau-trait's or (a `tau2-*` name) tau2-bench's, loaded once per process."""

from __future__ import annotations

import functools

from castdata.envs.catalog import DOMAINS
from castdata.envs.domain import Domain
from castdata.errors import UnknownName


@functools.cache
def load_domain(name: str) -> Domain:
    """The domain `name`, loaded once per process (a `tau2-*` name imports tau2-bench, only then)."""
    if name not in DOMAINS:
        raise UnknownName(f"domains: unknown domain '{name}'; allowed: {', '.join(DOMAINS)}")
    if name.startswith("tau2-"):
        from castdata.envs.tau2_domain import Tau2Domain

        return Tau2Domain(name)
    return Domain(name)
