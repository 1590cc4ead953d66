"""Helpers shared by test files (fixtures stay in conftest)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

NOBODY = 65534


def as_another_user() -> list[str]:
    """The command prefix that runs a program as `nobody`; skips the test where it cannot."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run as another user")
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    if subprocess.run([*prefix, sys.executable, "-c", "import guard"]).returncode != 0:
        pytest.skip("this checkout of patchguard is not readable by another user")
    return prefix


@contextmanager
def home_others_can_read() -> Iterator[Path]:
    """A directory outside pytest's private temp tree, which another user may enter."""
    home = Path(tempfile.mkdtemp(prefix="patchguard-other-user-"))
    try:
        home.chmod(0o755)
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def stash_then_checkout(root: Path, target: str, trace: Path) -> tuple[str, int]:
    """`git stash`, then a checkout of `target` whose hooks re-apply what it took: (the
    checkout's stderr, the git processes its hooks started, as GIT_TRACE counts them)."""
    subprocess.run(["git", "stash", "-q"], cwd=root, check=True, capture_output=True)
    trace.write_text("")  # GIT_TRACE appends
    moved = subprocess.run(
        ["git", "-c", "maintenance.auto=false", "checkout", "-q", target],
        cwd=root,
        env={**os.environ, "GIT_TRACE": str(trace)},
        capture_output=True,
        text=True,
    )
    assert moved.returncode == 0, moved.stderr
    return moved.stderr, trace.read_text().count("trace: built-in: git ") - 1  # the checkout


def run_patchguard(
    root: Path, env: dict[str, str], args: tuple[str, ...], check: int | None
) -> subprocess.CompletedProcess[str]:
    """The installed CLI, as a user runs it in `root`: never a traceback; `check` is the exit."""
    result = subprocess.run(
        ["patchguard", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in result.stderr, result.stderr
    if check is not None:
        assert result.returncode == check, result.stdout + result.stderr
    return result
