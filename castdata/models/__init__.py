"""Model backends: `open_backend(spec)` gives the backend a spec names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from castdata.models.spec import ModelSpec, Sampling

if TYPE_CHECKING:
    from castdata.models.base import Backend


def open_backend(spec: ModelSpec, where: str | None = None) -> Backend:
    """The backend for a model spec (imports heavy dependencies only for the backend asked for). With `where`
    (the spec's place in the config, e.g. `agent`), a bad spec is a `ConfigError` naming the full dotted key."""
    if where is None:
        return _open(spec)
    from castdata.errors import ConfigError

    try:
        return _open(spec)
    except (ConfigError, ValueError, TypeError) as err:  # the backends' own checks of `options` and the key
        raise ConfigError(f"{where}.{err}") from None


def _open(spec: ModelSpec) -> Backend:
    if spec.backend == "scripted":
        from castdata.models.scripted import ScriptedBackend

        return ScriptedBackend(spec)
    if spec.backend == "openai":
        from castdata.models.openai_backend import OpenAIBackend

        return OpenAIBackend(spec)
    if spec.backend == "vllm":
        from castdata.models.vllm_backend import VLLMBackend  # imports vllm itself only when the engine loads

        return VLLMBackend(spec)
    if spec.backend == "transformers":
        from castdata.models.transformers_backend import TransformersBackend

        return TransformersBackend(spec)
    raise ValueError(f"backend: unknown backend '{spec.backend}'; allowed: scripted, openai, vllm, transformers")


__all__ = ["ModelSpec", "Sampling", "open_backend"]
