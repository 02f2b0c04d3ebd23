"""Model specs: which backend and model plays a role (agent, user, teacher, critic), and how it samples.

A spec never holds a secret: `api_key_env` is the *name* of an environment variable.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Backend = Literal["scripted", "openai", "vllm", "transformers"]
_URL = re.compile(r"https?://[^\s/:]+(:\d+)?(/\S*)?")


def is_http_url(value: object) -> bool:
    """Whether `value` is an http(s) URL with a host (what an OpenAI-compatible `base_url` must be)."""
    return isinstance(value, str) and _URL.fullmatch(value) is not None


class Sampling(BaseModel):
    """Sampling parameters passed to the backend."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024
    seed: int | None = None


class ModelSpec(BaseModel):
    """One model in one role. `options` holds backend-specific knobs (for `scripted`: `mistakes`)."""

    model_config = ConfigDict(extra="forbid")

    backend: Backend = "scripted"
    model: str = "noisy-oracle"
    base_url: str | None = None
    api_key_env: str | None = None
    sampling: Sampling = Field(default_factory=Sampling)
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    max_concurrency: int = Field(default=64, ge=1)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=6, ge=0)
    price_in_per_mtok: float | None = None
    price_out_per_mtok: float | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        if value is not None and not is_http_url(value):
            raise ValueError("must be an http:// or https:// URL with a host, e.g. http://localhost:8000/v1")
        return value

    @property
    def label(self) -> str:
        """Short human-readable name, e.g. `scripted:noisy-oracle`."""
        return f"{self.backend}:{self.model}"
