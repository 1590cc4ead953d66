"""The processes a hunt starts, each in a session of its own, and ended as a whole.

A benchmark or a server spawns helpers (sglang's scheduler and detokenizer, a shell's
background job). Left alive, one reparented to PID 1 keeps the server's port (the next server
cannot bind, the old one answers). So the command leads a process group of its own, and the
hunt ends the whole group and waits until none of it is left before it moves on. A process
that moved into another session escapes that: a port it still holds is named by `port_holder`.
Zombies that a PID 1 never reaps (some containers) count as gone where /proc tells them apart.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from guard.errors import ConfigError

GRACE_SECONDS = 10.0  # between SIGTERM and SIGKILL
_GONE_AFTER_KILL = 10.0  # what SIGKILL may take (a process in uninterruptible sleep)
_POLL = 0.05
_PROC = Path("/proc")


class Group:
    def __init__(
        self,
        argv: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        stdout: IO[bytes],
    ) -> None:
        self.popen = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.pgid = self.popen.pid

    def exited(self) -> bool:
        """Whether the leader (the command itself) has exited; its helpers may live on."""
        return self.popen.poll() is not None

    def signal(self, number: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, number)

    def gone(self) -> bool:
        """No process of the group is left (zombies no one reaps do not count)."""
        self.popen.poll()  # reap the leader: a zombie of ours would keep the group alive
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return not _any_alive(self.pgid)

    def end(self) -> bool:
        """SIGTERM to the whole group, SIGKILL after GRACE_SECONDS; True once none of it is left."""
        if self.gone():
            return True
        self.signal(signal.SIGTERM)
        if wait_until(self.gone, GRACE_SECONDS):
            return True
        self.signal(signal.SIGKILL)
        return wait_until(self.gone, _GONE_AFTER_KILL)


def wait_until(condition: Callable[[], bool], seconds: float, poll: float = _POLL) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True


def _any_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` is not a zombie (True without /proc: kill(2) decides)."""
    if not _PROC.is_dir():
        return True
    found = (_stat(entry) for entry in _PROC.iterdir() if entry.name.isdigit())
    return any(
        fields and int(fields[2]) == pgid and fields[0] not in ("Z", "X") for fields in found
    )


def _stat(entry: Path) -> list[str] | None:
    """A process's /proc stat after "pid (comm) ": its state, parent, group...; None if gone."""
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


@dataclass
class Finished:
    status: int  # as a shell reports it (128+N: signal N); meaningless when timed_out or stopped
    output: str
    timed_out: bool = False


def run_grouped(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout: float | None,
    stop_asked: Callable[[], bool],
    started: Callable[[Group | None], None],
) -> Finished:
    """Run `argv` in a session of its own until the command itself exits, then end the rest of
    its group. Its output goes to a file, as the server's does: a helper left holding it open
    cannot make the run wait, as one holding a pipe would. Past `timeout` seconds, or
    `GRACE_SECONDS` after a stop was asked, the whole group is ended. `started` is told the
    group (to pass signals on), and None once it is over."""
    with tempfile.TemporaryFile() as output:
        try:
            group = Group(argv, cwd, env, output)
        except OSError as error:
            raise ConfigError(f"cannot start {argv[0]}: {error.strerror}") from None
        start = time.monotonic()
        stop_since: float | None = None
        timed_out = False
        started(group)
        try:
            while not group.exited():
                now = time.monotonic()
                if timeout is not None and now - start > timeout:
                    timed_out = True
                    break
                if stop_asked():
                    stop_since = now if stop_since is None else stop_since
                    if now - stop_since > GRACE_SECONDS:
                        break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    group.popen.wait(0.1)
        finally:
            group.end()
            started(None)
        output.seek(0)
        text = output.read().decode(errors="replace")
    code = group.popen.poll()
    if code is None:  # the leader outlived SIGKILL
        code = -signal.SIGKILL
    return Finished(code if code >= 0 else 128 - code, text, timed_out)


# --- ports ---------------------------------------------------------------------------------------


def port_holder(host: str, port: int) -> str | None:
    """Who listens on `port` and how to stop it, or None when it is free (without /proc, a
    connection attempt to `host` decides)."""
    tables = [_PROC / "net" / name for name in ("tcp", "tcp6")]
    if not any(table.exists() for table in tables):
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            return _held_by(port, None)
        return None
    inodes = set()
    for table in tables:
        with contextlib.suppress(OSError):
            for line in table.read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(f"socket:[{inode}]")
    if not inodes:
        return None
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return _held_by(port, entry)
    return _held_by(port, None)


def _held_by(port: int, entry: Path | None) -> str:
    """The listener's process (None: another user's, or no /proc) and the line that stops it."""
    if entry is None:
        return f"port {port} is in use by a process patchguard cannot see; stop it first"
    command = ""
    with contextlib.suppress(OSError):
        command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    command = command.strip()
    shown = command if len(command) <= 80 else command[:77] + "..."
    # The whole group (a server left by a hunt killed outright: sglang's launcher with its
    # schedulers, in the session the hunt gave it), or its workers live on with the GPUs'
    # memory; never patchguard's own group (nor init's).
    stat = _stat(entry)
    group = int(stat[2]) if stat else None
    whole = group is not None and group not in (1, os.getpgrp())
    stop = f"kill -- -{group}" if whole else f"kill {entry.name}"
    return (
        f"port {port} is held by pid {entry.name} ({shown}), left from an earlier run? "
        f"stop it: {stop}"
    )
