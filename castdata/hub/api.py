"""Hub calls through huggingface_hub (endpoint and token from its usual settings), with one-line errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from castdata.errors import HubRequestError, InputError


@contextmanager
def hub_errors(repo: str) -> Iterator[None]:
    """Turn the Hub's refusals into user errors naming the repo (never the token)."""
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    try:
        yield
    except RepositoryNotFoundError:
        raise InputError(f"{repo}: no such dataset repo, or no access to it (is a Hub token set?)") from None
    except HfHubHTTPError as err:
        raise HubRequestError(f"{repo}: the Hub refused the request: {str(err).splitlines()[0]}") from None
