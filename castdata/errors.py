"""The errors a user can cause (bad config, bad files, refused operations): reported in one line, exit 2."""

from castdata.config import ConfigError
from castdata.envs.domain import UnknownName
from castdata.rollout.collect import RunDirConflict


class InputError(ValueError):
    """A bad input file or directory; the message names it."""


USER_ERRORS: tuple[type[Exception], ...] = (ConfigError, UnknownName, RunDirConflict, InputError, FileNotFoundError)
