"""Crash-safe file replacement: a reader sees either the old bytes or the new ones, never a mix."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

TEMP_SUFFIX = ".patchguard-tmp"


def atomic_write(path: Path, data: bytes, mode: int | None = None, *, durable: bool = True) -> None:
    """`durable=False` leaves out the fsyncs, for what something else makes safe from a power
    loss: a journal that keeps the old bytes, a checksum that turns a torn entry into a miss."""
    try:
        keep_mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        keep_mode = new_file_mode() if mode is None else mode
    # Private until renamed, as tempfile.mkstemp's (an import a re-applying hook need not pay)
    tmp_name = str(path.parent / f".{path.name}.{os.getpid()}-{time.time_ns()}{TEMP_SUFFIX}")
    fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            if durable:
                tmp.flush()
                os.fsync(tmp.fileno())
        os.chmod(tmp_name, keep_mode)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    if durable:  # the rename itself
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def new_file_mode(executable: bool = False) -> int:
    """The permission bits git gives a file it checks out (mode 100644 or 100755), umask applied."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if executable else 0o666) & ~umask


def remove_stale_temporaries(path: Path) -> None:
    """Temp files a killed writer left beside `path`; call only while holding the writers' lock.
    Each directory is listed once per hold: while it is held, no other writer can leave a new
    one, except a process that inherits the hold (guard.ops.moves forgets the listings after)."""
    directory = str(path.parent)
    if directory not in _stale:
        try:
            names = os.listdir(directory)
        except OSError:
            return
        # Names compared as strings (a glob compiles a pattern per file)
        _stale[directory] = [name for name in names if name.endswith(TEMP_SUFFIX)]
    prefix = f".{path.name}."
    for name in [name for name in _stale[directory] if name.startswith(prefix)]:
        (path.parent / name).unlink(missing_ok=True)
        _stale[directory].remove(name)


_stale: dict[str, list[str]] = {}  # by directory: the temp files found there, not removed yet


def forget_stale_listings() -> None:
    """The writers' lock is newly held (guard.git.lock): a writer may have died meanwhile."""
    _stale.clear()
