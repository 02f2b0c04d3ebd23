"""Model backends: `open_backend(spec)` gives the backend a spec names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from castdata.models.spec import ModelSpec, Sampling

if TYPE_CHECKING:
    from castdata.models.base import Backend


def open_backend(spec: ModelSpec) -> Backend:
    """The backend for a model spec (imports heavy dependencies only for the backend asked for)."""
    if spec.backend == "scripted":
        from castdata.models.scripted import ScriptedBackend

        return ScriptedBackend(spec)
    raise ValueError(f"backend: '{spec.backend}' is not available in this version; allowed: scripted")


__all__ = ["ModelSpec", "Sampling", "open_backend"]
