"""One writer at a time per worktree, and per manifest: a hook racing a manual apply, two records.

flock(2): the kernel drops a lock when its holder dies, so one a killed process left is taken
over at once. A lock is re-entrant in its process, and the processes its holder starts (a `git
bisect run` step under `patchguard git`) inherit that one hold through HELD_VARIABLE: the holder
waits on them, and would otherwise deadlock against its own children.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from guard.errors import ConfigError
from guard.git.atomic import forget_stale_listings

TYPE_CHECKING = False  # not typing's: this module is on a light path (tests/test_light_paths.py)

TIMEOUT_VARIABLE = "PATCHGUARD_LOCK_TIMEOUT"
HELD_VARIABLE = "PATCHGUARD_LOCK_HELD"
DEFAULT_TIMEOUT_SECONDS = 30.0

_depth: dict[Path, int] = {}


def _timeout() -> float:
    text = os.environ.get(TIMEOUT_VARIABLE, "")
    try:
        value = float(text) if text else DEFAULT_TIMEOUT_SECONDS
    except ValueError:
        value = -1.0
    if not value >= 0:  # also rejects nan
        raise ConfigError(
            f"{TIMEOUT_VARIABLE}={text!r} is not a number of seconds; set it to e.g. 30, or unset it"
        )
    return value


def held(lock_path: Path) -> bool:
    """This process holds the lock already, or the holder that started it does."""
    return bool(_depth.get(lock_path)) or held_by_parent(lock_path)


def held_by_parent(lock_path: Path) -> bool:
    return os.environ.get(HELD_VARIABLE) == str(lock_path)


@contextmanager
def exclusive(lock_path: Path, operation: str, timeout: float | None = None) -> Iterator[None]:
    """Hold `lock_path`, waiting at most `timeout` seconds (else TIMEOUT_VARIABLE's)."""
    if held(lock_path):
        _depth[lock_path] = _depth.get(lock_path, 0) + 1
        try:
            yield
        finally:
            _depth[lock_path] -= 1
        return
    timeout = _timeout() if timeout is None else timeout
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:  # a user who may read the repository but not write it
        raise ConfigError(
            f"cannot take the lock {lock_path}: {error.strerror}; patchguard {operation} "
            "writes into the repository, and nothing was changed. Run it as a user who can "
            "write there (the repository's owner)."
        ) from None
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
                    raise ConfigError(
                        f"{lock_path} has been held for more than {timeout:g}s by another "
                        f"patchguard ({holder}). Wait for it to finish, or raise "
                        f"{TIMEOUT_VARIABLE}."
                    ) from None
                time.sleep(0.05)
        with contextlib.suppress(OSError):  # who holds it, for a waiter's message: a full
            os.ftruncate(fd, 0)  # disk only leaves that unsaid (the write then says why)
            os.pwrite(fd, f"pid {os.getpid()}, {operation}, since {time.ctime()}\n".encode(), 0)
        _depth[lock_path] = 1
        forget_stale_listings()
        try:
            yield
        finally:
            _depth[lock_path] = 0
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing releases the flock


@contextmanager
def if_free(lock_path: Path) -> Iterator[bool]:
    """True, holding `lock_path`, if it is free now; else False (held, or a read-only git dir).
    For repairs that may wait for the next command (a derived file rebuilt by a reader)."""
    hold = contextlib.ExitStack()
    try:
        hold.enter_context(exclusive(lock_path, "repair", timeout=0.0))
    except (ConfigError, OSError):
        yield False
        return
    with hold:
        yield True


if TYPE_CHECKING:
    from typing import Any, Protocol, TypeVar

    class _Lockable(Protocol):
        def lock(self, operation: str, store: bool = ...) -> AbstractContextManager[None]: ...

    _Operation = TypeVar("_Operation", bound=Callable[..., Any])


def locked(operation: str, *, store: bool = False) -> Callable[[_Operation], _Operation]:
    """Run a library call that writes under its repository's locks (its first argument's);
    `store`: it changes the patches, so it holds the store's lock too (Repo.lock)."""

    def decorate(function: _Operation) -> _Operation:
        @functools.wraps(function)
        def run_locked(repo: _Lockable, *args: Any, **kwargs: Any) -> Any:
            with repo.lock(operation, store=store):
                return function(repo, *args, **kwargs)

        return run_locked  # type: ignore[return-value]  # same signature, by wraps

    return decorate
