"""`--server CMD`: the server a benchmark talks to, started from the checkout at each commit.

The server runs the code being measured, so it is started after the patches are in place at a
commit and stopped before the hunt moves on (and after every --runs-per-start runs, so a run
never measures a server that earlier runs warmed or wore down). Its port must be free before a
start: a server left from an earlier run would answer in place of the new one (which fails to
bind).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from guard.errors import GuardFailure
from guard.hunt.processes import Group, port_holder, wait_until

SERVER_LOG = "patchguard-server.log"  # in the worktree's git dir, rewritten at each start
_PORT_FREE_WITHIN = 5.0  # after the group is gone: a listener's socket closes with its last
# process, so a port still held then is held by one that left the group (it may be on its way out)
_GPU_SETTLE_WITHIN = 120.0
_GPU_SLACK_MIB = 512  # memory another process may take meanwhile, not the server's
_TAIL_LINES = 10
_POLL = 0.2


@dataclass(frozen=True)
class ServerSpec:
    command: str  # one shell line
    ready_url: str | None
    ready_line: str | None  # a regular expression searched in each line of its output
    ready_timeout: float
    runs_per_start: int

    @property
    def address(self) -> tuple[str, int] | None:
        """The host and port of the --ready URL (None with --ready-line: no port to watch)."""
        if self.ready_url is None:
            return None
        parts = urlsplit(self.ready_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return parts.hostname or "127.0.0.1", port


class Server:
    def __init__(self, spec: ServerSpec, log: Path, progress: Callable[[str], None]) -> None:
        self.spec = spec
        self.log = log
        self.progress = progress
        self.group: Group | None = None
        self.runs = 0  # runs against the running server
        self.gpu_before: list[int] | None = None

    def alive(self) -> bool:
        return self.group is not None and not self.group.exited()

    def start(
        self, cwd: Path, env: Mapping[str, str], where: str, stop_asked: Callable[[], bool]
    ) -> str | None:
        """None once it is ready, else why not (it is stopped again); a held port: GuardFailure."""
        address = self.spec.address
        if address is not None and (holder := port_holder(*address)) is not None:
            raise GuardFailure(
                f"{holder}; nothing was measured (a server "
                "already there would answer in place of the one started from the checkout)"
            )
        self.gpu_before = _gpu_memory()
        shown = self.log.relative_to(cwd) if self.log.is_relative_to(cwd) else self.log
        self.progress(f"server starting at {where} (its output: {shown})")
        began = time.monotonic()
        with self.log.open("wb") as log:
            self.group = Group(["sh", "-c", self.spec.command], cwd, env, log)
        self.runs = 0
        why = self._wait_ready(stop_asked)
        if why is None:
            self.progress(f"server ready after {time.monotonic() - began:.1f} s")
            return None
        self.stop()
        return why

    def _wait_ready(self, stop_asked: Callable[[], bool]) -> str | None:
        deadline = time.monotonic() + self.spec.ready_timeout
        pattern = None if self.spec.ready_line is None else re.compile(self.spec.ready_line)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
        while not stop_asked():
            if pattern is not None:
                if any(pattern.search(line) for line in self._log_lines()):
                    return None
            elif self.spec.ready_url is not None and _answers_2xx(opener, self.spec.ready_url):
                return None
            if not self.alive():
                return f"the server exited before it was ready: {self.tail()}"
            if time.monotonic() > deadline:
                return (
                    f"the server was not ready within {self.spec.ready_timeout:g} s "
                    f"(--ready-timeout): {self.tail()}"
                )
            time.sleep(_POLL)
        return "stopped"

    def _log_lines(self) -> list[str]:
        try:
            return self.log.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def tail(self) -> str:
        return " | ".join(self._log_lines()[-_TAIL_LINES:]) or "(no output)"

    def stop(self) -> None:
        if self.group is None:
            return
        group, self.group = self.group, None
        if not group.end():
            raise GuardFailure(
                f"the server's processes (group {group.pgid}) outlived SIGKILL; stop them: "
                f"kill -KILL -- -{group.pgid}"
            )
        address = self.spec.address
        if address is not None:
            wait_until(lambda: port_holder(*address) is None, _PORT_FREE_WITHIN, _POLL)
            if (holder := port_holder(*address)) is not None:
                raise GuardFailure(
                    f"the server was stopped, but {holder} "
                    "(a process that left the server's session cannot be stopped with it)"
                )
        self._wait_gpus()
        self.progress("server stopped")

    def _wait_gpus(self) -> None:
        """Back to the memory used before the start (bounded: another job may hold some)."""
        before = self.gpu_before
        if before is None:
            return

        def back() -> bool:
            now = _gpu_memory()
            return now is None or all(
                u <= b + _GPU_SLACK_MIB for u, b in zip(now, before, strict=False)
            )

        if not wait_until(back, _GPU_SETTLE_WITHIN, 0.5):
            self.progress(
                f"the GPUs' memory is still at {_gpu_memory()} MiB (was {before} MiB before the "
                "server started); going on"
            )


def _answers_2xx(opener: urllib.request.OpenerDirector, url: str) -> bool:
    try:
        with opener.open(url, timeout=5) as answer:
            return 200 <= int(answer.status) < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _gpu_memory() -> list[int] | None:
    """Memory used on each GPU in MiB, as nvidia-smi reports it (None without it)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        answer = subprocess.run(
            [smi, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return [int(line.strip()) for line in answer.stdout.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
