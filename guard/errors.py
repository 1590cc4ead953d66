"""Exceptions that carry patchguard's exit-code contract (0 ok, 1 guard failed, 2 usage/config)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_GUARD_FAILED = 1
EXIT_USAGE = 2


class PatchguardError(Exception):
    """Base class; the CLI prints the message (never a traceback) and exits with `exit_code`."""

    exit_code = EXIT_USAGE


class ConfigError(PatchguardError):
    """The request cannot be carried out as asked: bad arguments, no repository, broken manifest."""

    exit_code = EXIT_USAGE


class GuardFailure(PatchguardError):
    """A guard does not hold: a symbol is missing, a patch cannot be applied or recorded."""

    exit_code = EXIT_GUARD_FAILED


class GuardError(PatchguardError):
    """Raised by `guard.require()`: the code is not as guarded. `problems` lists every reason."""

    def __init__(self, message: str, problems: list[str], exit_code: int = EXIT_GUARD_FAILED):
        super().__init__(message)
        self.problems = problems
        self.exit_code = exit_code
