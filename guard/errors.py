"""Exceptions that carry patchguard's exit-code contract (0 ok, 1 guard failed, 2 usage/config)."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: this module is on a light path (tests/test_light_paths.py)
if TYPE_CHECKING:
    from collections.abc import Callable

EXIT_OK = 0
EXIT_GUARD_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3  # a bug in patchguard: never 1, which means a guard failed
EXIT_INTERRUPTED = 130
CRASH_LOG_NAME = "patchguard-crash.log"
INTERRUPTED_MESSAGE = "patchguard: interrupted; nothing half-written; run patchguard status"


class PatchguardError(Exception):
    """Base class; the CLI prints the message (never a traceback) and exits with `exit_code`."""

    exit_code = EXIT_USAGE


class ConfigError(PatchguardError):
    """The request cannot be carried out as asked: bad arguments, no repository, broken manifest."""


class GuardFailure(PatchguardError):
    """A guard does not hold: a symbol is missing, a patch cannot be applied or recorded."""

    exit_code = EXIT_GUARD_FAILED


class GuardError(PatchguardError):
    """Raised by `guard.require()`: the code is not as guarded. `problems` lists every reason."""

    def __init__(self, message: str, problems: list[str], exit_code: int = EXIT_GUARD_FAILED):
        super().__init__(message)
        self.problems = problems
        self.exit_code = exit_code


def handled(run: Callable[[], int], crash_dir: Callable[[], str]) -> int:
    """Run a command or hook under the exit-code contract, never a traceback. Ctrl-C is one line:
    writes are atomic and journaled, so nothing is half-written. Anything not ours or click's is
    a bug: one line naming a log in `crash_dir()` (the caller knows the checkout, this module no
    repository), and exit 3."""
    try:
        code = run()
        try:
            sys.stdout.flush()  # a reader that left shows here, not as noise at exit
        except BrokenPipeError:
            silence_stdout()
        return code
    except PatchguardError as error:
        print(f"patchguard: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print(INTERRUPTED_MESSAGE, file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `patchguard show | head -1`: the reader had enough
        silence_stdout()
        return EXIT_OK
    except Exception as error:  # the one place that catches everything, to report it
        clicked = _click_code(error)
        if clicked is not None:
            return clicked
        print(f"patchguard: {one_line(error, crash_dir)}", file=sys.stderr)
        return EXIT_INTERNAL


def _click_code(error: Exception) -> int | None:
    """click's own end of a command, when click was imported (the hooks and `check --quiet` never
    import it, so this module does not either). An abort is Ctrl-C at click's prompt."""
    click = sys.modules.get("click")
    if click is None:
        return None
    if isinstance(error, click.exceptions.Exit):
        return int(error.exit_code)
    if isinstance(error, click.exceptions.Abort):
        print(INTERRUPTED_MESSAGE, file=sys.stderr)
        return EXIT_INTERRUPTED
    if isinstance(error, click.exceptions.ClickException):
        error.show()
        return int(error.exit_code)
    return None


def silence_stdout() -> None:
    """After a reader closed stdout: what is still buffered goes nowhere, without an error at
    exit (Python's documented recipe for SIGPIPE). The command then ends with exit 0: a reader
    that had enough is not a failed guard, even under `set -o pipefail`."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def one_line(error: Exception, crash_dir: Callable[[], str]) -> str:
    """A PatchguardError's message; anything else is a bug, named with its crash log."""
    if isinstance(error, PatchguardError):
        return str(error)
    where = _write_crash_log(error, crash_dir)
    return (
        f"internal error ({type(error).__name__}: {error}); the traceback is in {where}. "
        "Please report it with that file."
    )


def _write_crash_log(error: Exception, crash_dir: Callable[[], str]) -> str:
    """The traceback, argv and versions, in `crash_dir()` when it names one."""
    import platform
    import tempfile
    import time
    import traceback

    try:
        directory = crash_dir()
    except (PatchguardError, OSError):
        directory = tempfile.gettempdir()
    try:
        from importlib.metadata import version

        ours = version("git-patchguard")
    except Exception:  # the log must be written whatever is broken
        ours = "unknown"
    text = (
        f"time: {time.strftime('%Y-%m-%d %H:%M:%S %z')}\n"
        f"argv: {sys.argv}\n"
        f"patchguard: {ours}; python: {sys.version.split()[0]}; {platform.platform()}\n\n"
        + "".join(traceback.format_exception(error))
    )
    path = os.path.join(directory, CRASH_LOG_NAME)
    try:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError:
        return "(no writable place for the log)"
    return path
