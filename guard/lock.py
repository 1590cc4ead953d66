"""One writer at a time per repository: hooks of two worktrees, or a hook racing a manual apply.

flock(2) on a file in the shared git dir: the kernel drops the lock when its holder dies, so a
lock left by a killed process is stale by construction and taken over at once.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from guard.errors import ConfigError

TIMEOUT_VARIABLE = "PATCHGUARD_LOCK_TIMEOUT"
DEFAULT_TIMEOUT_SECONDS = 30.0


@contextmanager
def exclusive(lock_path: Path, operation: str) -> Iterator[None]:
    """Hold the repository's lock while `operation` writes; wait a bounded time for it."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    timeout = float(os.environ.get(TIMEOUT_VARIABLE, DEFAULT_TIMEOUT_SECONDS))
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
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
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {operation}, since {time.ctime()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing releases the flock
