"""User-facing errors: each becomes one line on stderr and a distinct exit code (docs/errors.md)."""

import errno


class MTError(Exception):
    """An error the user can fix; printed without a traceback."""

    exit_code = 1


class UsageError(MTError):
    """Options of a command that cannot go together, found by the command (mt.commands), not
    the parser: worded and numbered as the parser's usage errors are."""

    exit_code = 2

    def __init__(self, command: str, option: str, problem: str):
        """option: as the parser names it: an option quoted ("'--attention'"), an argument
        not ("CONFIG")."""
        super().__init__(f"Invalid value for {option}: {problem} (see 'mt {command} --help')")


class ConfigError(MTError):
    exit_code = 3


class DataError(MTError):
    exit_code = 4


class CheckpointError(MTError):
    exit_code = 5


class VocabError(CheckpointError):
    """A vocabulary that is missing, unreadable or malformed (it belongs to a run: exit code 5)."""


class RunError(MTError):
    exit_code = 6


class FileSystemError(MTError):
    """Reading or writing failed in the operating system: permissions, a full disk, and so on."""

    exit_code = 7


class OutputClosed(MTError):
    """Whoever read stdout stopped reading (`mt translate ... | head -1`): normal shell use, so
    the command ends quietly with exit 0 (docs/errors.md), as when the input ended."""

    exit_code = 0


class ServerError(MTError):
    """`mt serve` cannot listen where it was told: the port is taken, not allowed, or the host
    is not an address of this machine."""

    exit_code = 8


_ADVICE = {
    errno.ENOSPC: "free some disk space and try again",
    errno.EDQUOT: "free some space within your disk quota and try again",
    errno.EACCES: "check the permissions",
    errno.EPERM: "check the permissions",
    errno.EROFS: "choose a writable location",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "check the path",
    errno.EISDIR: "give a file, not a directory",
}


def os_error_message(e: OSError, path: object = None) -> str:
    """One line for an OSError: the file, what went wrong, and what to do when that is clear."""
    where = path if path is not None else e.filename
    text = e.strerror or str(e) or type(e).__name__
    advice = _ADVICE.get(e.errno)
    return (f"{where}: " if where else "") + text + (f"; {advice}" if advice else "")
