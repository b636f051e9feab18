"""User-facing errors: each becomes one line on stderr and a distinct exit code (see README)."""


class MTError(Exception):
    """An error the user can fix; printed without a traceback."""

    exit_code = 1


class ConfigError(MTError):
    exit_code = 3


class DataError(MTError):
    exit_code = 4


class CheckpointError(MTError):
    exit_code = 5


class RunError(MTError):
    exit_code = 6
