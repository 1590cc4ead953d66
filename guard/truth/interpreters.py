"""The facts reading decides conditions by (`sys.version_info`, `sys.platform`...), for the
interpreter the command runs: `if sys.version_info < (3, 12):` binds a method for a 3.11 only.
Another interpreter is asked once, its answer kept in the git dir's cache by its path and file
identity (size, mtime, inode: a reinstalled or upgraded interpreter is asked again).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from guard.errors import ConfigError
from guard.git.content_cache import ContentCache
from guard.git.objects import digest

if TYPE_CHECKING:
    from typing import Any

FACTS_CACHE_DIR = "patchguard-cache/interpreters"  # in the worktree's git dir
_FACTS_CACHE_KEEP = 64

# Names as reading looks them up (by where they come from: guard.truth.model_names' known values).
# Runs in this process (exec) and in any Python 3 asked (`-I`: nothing of the environment, so
# nothing but the interpreter answers; site-packages and the .pth files' entries, an editable
# install's, are on the path it prints with them).
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
    space: dict[str, Any] = {}
    exec(_FACTS, space)  # the same lines another interpreter runs: one definition of the facts
    return _as_values(space["facts"])


def facts_of(python: str, git_dir: Path) -> dict[str, Any] | None:
    """The facts of `python`, or None where they are patchguard's own (whose parses are kept
    under the model's namespace as they are)."""
    if "/" not in python:  # `--python python3.12`: found on PATH, as running it would
        import shutil  # here: it loads bz2 and lzma, which a check of this Python never needs

        python = shutil.which(python) or python
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return None
    facts = _asked(python, git_dir)[0]
    return None if facts == own_facts() else facts


def search_path(python: str, git_dir: Path) -> tuple[str, list[str]]:
    """("3.11.7", sys.path) of `python`: what it has installed is read from that path on each use
    (a `pip install` changes no interpreter)."""
    own = os.path.abspath(python) == os.path.abspath(sys.executable)  # a venv's is not its base's
    facts, path = (own_facts(), list(sys.path)) if own else _asked(python, git_dir)
    return ".".join(map(str, facts["sys.version_info"][:3])), path


def cannot_run(python: str, why: object) -> ConfigError:
    return ConfigError(
        f"cannot run the interpreter {python}: {why}. Pass an existing one with --python PATH."
    )


def _asked(python: str, git_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """Cached by path and file identity (see the module's docstring)."""
    try:
        status = os.stat(python)
    except OSError as error:
        raise cannot_run(python, error.strerror) from None
    identity = f"{os.path.abspath(python)}\0{status.st_size}\0{status.st_mtime_ns}\0{status.st_ino}"
    cache = ContentCache(git_dir / FACTS_CACHE_DIR, _FACTS_CACHE_KEEP)
    key = digest(identity.encode())
    answer = _answer(cache.get(key))
    if answer is None:
        ask = _FACTS + "print(__import__('json').dumps([facts, sys.path]))"
        try:
            asked = subprocess.run([python, "-I", "-c", ask], capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ConfigError(
                f"cannot ask the interpreter {python} what it is: {error}. Pass another with "
                "--python PATH."
            ) from None
        answer = _answer(asked.stdout) if asked.returncode == 0 else None
        if answer is None:
            said = asked.stderr.decode(errors="replace").strip().splitlines()
            raise ConfigError(
                f"cannot ask the interpreter {python} what it is (exit {asked.returncode}): "
                f"{(said or ['(no output)'])[-1]}. Pass a Python 3 with --python PATH."
            )
        cache.put(key, asked.stdout)
    return answer


def _answer(data: bytes | None) -> tuple[dict[str, Any], list[str]] | None:
    """The facts and the path in a cache entry or an answer (its last line: what site-packages
    runs may print first); None for anything else."""
    try:
        raw = json.loads((data or b"\n").splitlines()[-1])
    except ValueError:
        return None
    match raw:
        case [dict() as facts, list() as path] if set(facts) == set(own_facts()) and all(
            isinstance(p, str) for p in path
        ):
            return _as_values(facts), path
    return None


def _as_values(facts: dict[str, Any]) -> dict[str, Any]:
    """As Python compares them: `sys.version_info` is a tuple (JSON keeps it as a list)."""
    return {**facts, "sys.version_info": tuple(facts["sys.version_info"])}
