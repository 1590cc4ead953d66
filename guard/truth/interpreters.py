"""The facts reading decides conditions by (`sys.version_info`, `sys.platform`, the
implementation...), for the interpreter the command runs (issue 27, point 5).

`if sys.version_info < (3, 12):` binds a method for a 3.11 and not for a 3.12, so the answer
must be the command's interpreter's, not patchguard's own. Another interpreter is asked once,
in a small process that prints its facts as JSON; the answer is kept in the git dir's cache,
keyed by the interpreter's path and file identity (size, mtime, inode: a reinstalled or
upgraded interpreter is asked again). patchguard's own interpreter answers without a process.

Light on purpose: guard.truth.symbols takes its own facts from here on every command.
"""

from __future__ import annotations

import os
import sys
from functools import cache
from pathlib import Path

from guard.errors import ConfigError
from guard.git.content_cache import ContentCache
from guard.git.objects import digest

TYPE_CHECKING = False  # typing costs the hooks ~3 ms
if TYPE_CHECKING:
    from typing import Any

FACTS_CACHE_DIR = "patchguard-cache/interpreters"  # in the worktree's git dir
_FACTS_CACHE_KEEP = 64

# Names as reading looks them up (by where they come from: guard.truth.model_names' known values).
# Runs in this process (exec) and in any Python 3 asked (`-I -S`: no site, nothing of the
# environment, so nothing but the interpreter answers).
_FACTS = r"""
import os, sys
facts = {
    "sys.version_info": list(sys.version_info),
    "sys.version_info.major": sys.version_info.major,
    "sys.version_info.minor": sys.version_info.minor,
    "sys.version_info.micro": sys.version_info.micro,
    "sys.platform": sys.platform,
    "sys.byteorder": sys.byteorder,
    "sys.maxsize": sys.maxsize,
    "sys.implementation.name": sys.implementation.name,
    "os.name": os.name,
}
"""


@cache
def own_facts() -> dict[str, Any]:
    """This interpreter's facts, without a process."""
    space: dict[str, Any] = {}
    exec(_FACTS, space)  # the same lines another interpreter runs: one definition of the facts
    return _as_values(space["facts"])


def facts_of(python: str, git_dir: Path) -> dict[str, Any] | None:
    """The facts of `python`, or None where they are patchguard's own (whose parses are kept
    under the model's namespace as they are)."""
    if "/" not in python:  # `--python python3.12`: found on PATH, as running it would
        import shutil

        python = shutil.which(python) or python
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return None
    try:
        status = os.stat(python)
    except OSError as error:
        raise ConfigError(
            f"cannot run the interpreter {python}: {error.strerror}. Pass an existing one with "
            "--python PATH."
        ) from None
    identity = f"{os.path.abspath(python)}\0{status.st_size}\0{status.st_mtime_ns}\0{status.st_ino}"
    cache = ContentCache(git_dir / FACTS_CACHE_DIR, _FACTS_CACHE_KEEP)
    key = digest(identity.encode())
    facts = _loads(cache.get(key))
    if facts is None:
        facts = _ask(python)
        import json

        cache.put(key, json.dumps(facts).encode())
    return None if facts == own_facts() else facts


def _ask(python: str) -> dict[str, Any]:
    import subprocess

    try:
        asked = subprocess.run(
            [python, "-I", "-S", "-c", _FACTS + "print(__import__('json').dumps(facts))"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ConfigError(
            f"cannot ask the interpreter {python} what it is: {error}. Pass another with "
            "--python PATH."
        ) from None
    facts = _loads(asked.stdout.encode()) if asked.returncode == 0 else None
    if facts is None:
        last = (asked.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ConfigError(
            f"cannot ask the interpreter {python} what it is (exit {asked.returncode}): {last}. "
            "Pass a Python 3 with --python PATH."
        )
    return facts


def _loads(data: bytes | None) -> dict[str, Any] | None:
    """The facts in a cache entry or an answer; None for anything else."""
    import json

    try:
        raw = json.loads(data or b"")
    except ValueError:
        return None
    names = set(own_facts())
    if not isinstance(raw, dict) or set(raw) != names:
        return None
    return _as_values(raw)


def _as_values(facts: dict[str, Any]) -> dict[str, Any]:
    """As Python compares them: `sys.version_info` is a tuple (JSON keeps it as a list)."""
    return {**facts, "sys.version_info": tuple(facts["sys.version_info"])}
