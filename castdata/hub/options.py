"""The `publish:` section of a pipeline config: where `castdata run` releases the dataset."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

REPO_PATTERN = r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*"


class PublishOptions(BaseModel):
    """A release: dataset repo `ORG/NAME`, semantic version `X.Y.Z`, visibility when the repo is created."""

    model_config = ConfigDict(extra="forbid")

    repo: str = Field(pattern=f"^{REPO_PATTERN}$")
    version: str
    private: bool = False
