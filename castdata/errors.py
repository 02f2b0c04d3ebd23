"""The errors a user can cause (bad config, bad files, refused operations): reported in one line, exit 2.

A leaf module: every stage raises these, and the CLI catches `UserError`.
"""


class UserError(Exception):
    """An error the user can fix; its message names the key, file or value and what is allowed."""


class ConfigError(UserError, ValueError):
    """A bad configuration; the message names the key and the allowed values."""


class UnknownName(UserError, ValueError):
    """An unknown domain, split or task id; the message names the allowed values."""


class RunDirConflict(UserError, RuntimeError):
    """The run directory holds a run made with another configuration."""


class InputError(UserError, ValueError):
    """A bad input file or directory; the message names it."""


class MissingExtra(UserError, ModuleNotFoundError):
    """An optional dependency a feature needs is not installed; the message gives the install line."""


class InvalidDataset(InputError):
    """A dataset folder that fails validation (schemas, splits, card, file hashes); the message says what."""


class VersionError(UserError, ValueError):
    """A release version that is not semantic (X.Y.Z), already published, or not published."""


class EndpointError(UserError, RuntimeError):
    """A model endpoint that cannot serve the run (nothing listens, no such host, not a URL, key refused); the
    message names the config field (`agent.base_url`, `agent.api_key_env`), never the key itself."""


class HubRequestError(UserError, RuntimeError):
    """The Hub refused a request (permissions, quota, conflict); the message names the repo and the reason."""


class RunFailed(RuntimeError):
    """A run that produced nothing usable (every episode ended in `infrastructure_error`): one line, exit 1."""


USER_ERRORS: tuple[type[Exception], ...] = (UserError, FileNotFoundError)
