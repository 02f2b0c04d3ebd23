"""Hub calls through huggingface_hub (endpoint and token from its usual settings), with one-line errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from castdata.errors import HubRequestError, InputError


@contextmanager
def hub_errors(repo: str) -> Iterator[None]:
    """Turn the Hub's refusals, and a Hub that cannot be reached (offline, `HF_HUB_OFFLINE=1`, a dead
    `HF_ENDPOINT`), into user errors naming the repo (never the token)."""
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    try:
        yield
    except RepositoryNotFoundError:
        raise InputError(f"{repo}: no such dataset repo, or no access to it (is a Hub token set?)") from None
    except HfHubHTTPError as err:
        raise HubRequestError(f"{repo}: the Hub refused the request: {str(err).splitlines()[0]}") from None
    except (httpx2.TransportError, ConnectionError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        reason = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else reason
        raise HubRequestError(f"{repo}: cannot reach the Hub at {constants.ENDPOINT} ({reason})") from None


def require_token(repo: str) -> None:
    """A `HubRequestError` when no Hub token is set (`HF_TOKEN`, `hf auth login`): publishing needs one."""
    from huggingface_hub import get_token

    if not get_token():
        raise HubRequestError(f"{repo}: no Hub token; set HF_TOKEN or run `hf auth login` (a token with write access)")
