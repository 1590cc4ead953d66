"""Every `git` command patchguard runs: the one home of how git is started, what it inherits,
and how its failure is said. Light to import: a command can start git before it imports the
rest of what it needs (`stamp` starts `git status` so).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from guard.errors import ConfigError

_OUT_OF_REACH = [False]  # set by out_of_reach_of_ctrl_c
# `git status` of the tracked files, without refreshing the index file: a read-only command
# writes nothing. Its paths are the repository's, from any directory (porcelain).
STATUS = ("--no-optional-locks", "status", "--porcelain=v2", "-z", "-uno", "--no-renames")


@contextmanager
def out_of_reach_of_ctrl_c() -> Iterator[None]:
    """While a hunt runs (guard.hunt.hunt): the terminal's Ctrl-C reaches the benchmark and
    patchguard, which stops between runs, and never one of patchguard's own git commands
    halfway (a checkout cut off, an `ls-files` killed and read as git failing)."""
    _OUT_OF_REACH[0] = True
    try:
        yield
    finally:
        _OUT_OF_REACH[0] = False


def run_git(
    args: Sequence[str],
    cwd: Path | str,
    *,
    passthrough: bool = False,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Captured (the default), a failure raises ConfigError carrying the command and git's
    stderr. With `passthrough`, git gets the terminal, its status is returned as a shell would
    report it (128+N when a signal ended it), and Ctrl-C goes to git alone: patchguard waits to
    put the patches back."""
    if not passthrough:
        return start_git(args, cwd, env=env).result()
    command = ["git", *args]
    try:
        with signals_to(_outlive_child, signal.SIGINT, signal.SIGQUIT):
            result = subprocess.run(command, cwd=cwd, env=_environment(env), text=True)
    except OSError as error:
        raise cannot_run(command, error) from None
    if result.returncode < 0:
        result.returncode = 128 - result.returncode
    return result


def run_git_bytes(args: Sequence[str], cwd: Path | str) -> subprocess.CompletedProcess[bytes]:
    """A captured git command whose output is bytes, its status left to the caller: `git
    merge-file` writes a file's content and counts its conflicts in the status."""
    command = ["git", *args]
    try:
        return subprocess.run(
            command, cwd=cwd, capture_output=True, start_new_session=_OUT_OF_REACH[0]
        )
    except OSError as error:
        raise cannot_run(command, error) from None


class StartedGit:
    """A captured git command under way: result() waits for it, as run_git() would have."""

    def __init__(self, command: list[str], cwd: Path | str, process: subprocess.Popen[str]):
        self.command, self.cwd, self.process = command, cwd, process

    def result(self) -> subprocess.CompletedProcess[str]:
        try:
            stdout, stderr = self.process.communicate()
        except BaseException:  # Ctrl-C while waiting: git goes too, as subprocess.run does
            self.discard()
            raise
        result = subprocess.CompletedProcess(self.command, self.process.returncode, stdout, stderr)
        if result.returncode == -signal.SIGINT:
            # The user's Ctrl-C, not git failing: a git started as it came was still in our
            # process group (between fork and its setsid) with the handlers reset.
            raise KeyboardInterrupt
        if result.returncode != 0:
            lines = result.stderr.strip().splitlines()
            # git's own reason comes first ("fatal: 'x' does not appear to be a git
            # repository"); what follows is often advice ("Please make sure ... exists.")
            said = [line for line in lines if line.startswith(("fatal:", "error:"))][:1]
            said = said or lines[-1:]
            raise ConfigError(
                f"`{' '.join(self.command)}` failed in {self.cwd}: "
                f"{said[0] if said else f'exit {result.returncode}'}"
            )
        return result

    def discard(self) -> None:
        """No answer wanted (the command that started it failed first): git ends now."""
        self.process.kill()
        with self.process:  # closes git's pipes and reaps it
            pass


def start_git(
    args: Sequence[str], cwd: Path | str, *, env: Mapping[str, str] | None = None
) -> StartedGit:
    """A captured run_git() started now and answered by result(): git works while the caller
    does something else (another git command, imports, reading files)."""
    command = ["git", *args]
    try:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=_environment(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="surrogateescape",  # a path's bytes, as os.fsdecode keeps them
            start_new_session=_OUT_OF_REACH[0],
        )
    except OSError as error:
        raise cannot_run(command, error) from None
    return StartedGit(command, cwd, process)


def _environment(env: Mapping[str, str] | None) -> dict[str, str] | None:
    return {**os.environ, **env} if env else None


def changed_tracked(listing: list[str]) -> list[str]:
    """Tracked files whose worktree content differs from HEAD (staged or not), from STATUS's
    `listing`: an ordinary entry's path follows 8 fields, an unmerged one's 10 (a file a sparse
    checkout leaves out is no change)."""
    fields = {"1": 8, "u": 10}
    return sorted(
        entry.split(" ", fields[entry[0]])[-1] for entry in listing if entry[:1] in fields
    )


def cannot_run(command: list[str], error: OSError) -> ConfigError:
    return ConfigError(f"cannot run `{' '.join(command)}`: {error}. Is git on PATH?")


def _outlive_child(_number: int, _frame: object) -> None:
    """A handler, not SIG_IGN: an ignored signal stays ignored in the child across exec."""


@contextmanager
def signals_to(handler: Callable[[int, object], None], *numbers: int) -> Iterator[None]:
    previous = {number: signal.signal(number, handler) for number in numbers}
    try:
        yield
    finally:
        for number, earlier in previous.items():
            signal.signal(number, earlier)
