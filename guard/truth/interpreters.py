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
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")

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
        import shutil  # here: it loads bz2 and lzma, which a check of this Python never needs

        python = shutil.which(python) or python
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return None
    print_facts = "print(__import__('json').dumps(facts))"
    facts = _asked(python, git_dir, "", ["-I", "-S", "-c", _FACTS + print_facts], _loads)
    return None if facts == own_facts() else facts


def cannot_run(python: str, why: object) -> ConfigError:
    """The refusal wherever `python` cannot be started: one text for every place that tries."""
    return ConfigError(
        f"cannot run the interpreter {python}: {why}. Pass an existing one with --python PATH."
    )


def _asked(
    python: str, git_dir: Path, kind: str, arguments: list[str], load: Callable[[Any], T | None]
) -> T:
    """The JSON `python arguments...` prints, as `load` reads it (None: not an answer), kept
    by `kind` and the interpreter's path and file identity (see the module's docstring)."""
    try:
        status = os.stat(python)
    except OSError as error:
        raise cannot_run(python, error.strerror) from None
    identity = (
        f"{kind}{os.path.abspath(python)}\0{status.st_size}\0{status.st_mtime_ns}\0{status.st_ino}"
    )
    cache = ContentCache(git_dir / FACTS_CACHE_DIR, _FACTS_CACHE_KEEP)
    key = digest(identity.encode())
    answer = _json(cache.get(key), load)
    if answer is None:
        try:
            asked = subprocess.run([python, *arguments], capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ConfigError(
                f"cannot ask the interpreter {python} what it is: {error}. Pass another with "
                "--python PATH."
            ) from None
        answer = _json(asked.stdout, load) if asked.returncode == 0 else None
        if answer is None:
            said = asked.stderr.decode(errors="replace").strip().splitlines()
            raise ConfigError(
                f"cannot ask the interpreter {python} what it is (exit {asked.returncode}): "
                f"{(said or ['(no output)'])[-1]}. Pass a Python 3 with --python PATH."
            )
        cache.put(key, asked.stdout)
    return answer


def _json(data: bytes | None, load: Callable[[Any], T | None]) -> T | None:
    try:
        return load(json.loads(data or b""))
    except ValueError:
        return None


def _loads(raw: Any) -> dict[str, Any] | None:
    """The facts in a cache entry or an answer; None for anything else."""
    if not isinstance(raw, dict) or set(raw) != set(own_facts()):
        return None
    return _as_values(raw)


def _as_values(facts: dict[str, Any]) -> dict[str, Any]:
    """As Python compares them: `sys.version_info` is a tuple (JSON keeps it as a list)."""
    return {**facts, "sys.version_info": tuple(facts["sys.version_info"])}


# `-I` without `-S`: site-packages and the .pth files' entries (an editable install) are on
# the path, nothing of the environment is.
_SEARCH = (
    "import sys, json; print(json.dumps(['.'.join(map(str, sys.version_info[:3])), sys.path]))"
)


def search_path(python: str, git_dir: Path) -> tuple[str, list[str]]:
    """The version of `python` ("3.11.7") and its module search path, asked once and kept by the
    interpreter's file identity as its facts are: what it has installed is read from that path
    on each use (a `pip install` changes no interpreter)."""
    if os.path.abspath(python) == os.path.abspath(sys.executable):  # a venv's is not its base's
        return ".".join(map(str, sys.version_info[:3])), list(sys.path)
    return _asked(python, git_dir, "search\0", ["-I", "-c", _SEARCH], _search_answer)


def _search_answer(raw: Any) -> tuple[str, list[str]] | None:
    """A version and a path, from a cache entry or an answer; None for anything else."""
    match raw:
        case [str() as version, list() as path] if all(isinstance(p, str) for p in path):
            return version, path
    return None
