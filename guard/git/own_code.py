"""The namespace of everything patchguard keeps: its own code, the interpreter and libgit2.

A kept verdict, parse, merge or replay is a function of its inputs and of the code that
computed it: all of the installed package (a rule may live in any module, the hook template,
the package's data). Every kept answer is kept under model_namespace(), so after an upgrade in
place (`pip install -U`, an edit of a source install) nothing the old code kept is trusted. The
hooks bake none of it: they start this Python, which computes it.
"""

from __future__ import annotations

import os
import sys

from guard.git.objects import blob_id, digest

_PACKAGE = os.path.dirname(os.path.dirname(__file__))  # guard/: this is guard/git/
_SITE = os.path.dirname(_PACKAGE)  # where the launcher sits beside the package
_COMPILED = (".so", ".pyd", ".dylib")
_namespace: list[str] = []  # the namespace, then the model_files() it was computed from


def model_namespace(known: tuple[list[str], list[str]] | None = None) -> str:
    """The digest of all the code a kept answer depends on, for this interpreter. Hashing the
    package would cost `check --quiet` a good part of its time, so `known` (as the verified
    cache holds it, beside its model_files()) is taken while model_files() is the same. The
    identity is taken before the content is read: a file changed meanwhile matches no look."""
    if not _namespace:
        identity = model_files()
        if known is not None and known[0] == [identity] and len(known[1]) == 1:
            _namespace[:] = [known[1][0], identity]
        else:
            _namespace[:] = [_kept(identity) or _computed(identity), identity]
    return _namespace[0]


# The namespace beside its identity, for the processes that read no verified cache (`check
# --json`, status, a re-apply): in the package's byte-code cache, one per install, as .pyc files.
_KEPT = os.path.join(_PACKAGE, "__pycache__", "patchguard-namespace")


def _kept(identity: str) -> str | None:
    try:
        with open(_KEPT, encoding="ascii") as handle:
            kept_identity, namespace = handle.read().split()
    except (OSError, ValueError):  # none, unreadable or damaged: computed again
        return None
    return namespace if kept_identity == identity else None


def _computed(identity: str) -> str:
    from pathlib import Path  # here, not at the top: this module is on the light paths

    from guard.git.atomic import atomic_write

    sources, compiled = _installed_files()
    hashed = b"".join(Path(path).read_bytes() for path in [*sources, *_versions()])
    facts = "\0".join([_interpreter_facts(), *map(_identity, compiled)])
    namespace = blob_id(hashed + facts.encode())[:16]
    try:  # a package that cannot be written computes it each time
        os.makedirs(os.path.dirname(_KEPT), exist_ok=True)
        atomic_write(Path(_KEPT), f"{identity} {namespace}\n".encode(), durable=False)
    except OSError:
        pass
    return namespace


def model_files() -> str:
    """The installed files' names, sizes, modification times and inodes (a reinstall or an
    edit changes them), and the interpreter: what model_namespace() is kept beside."""
    sources, compiled = _installed_files()
    parts = [_interpreter_facts(), *map(_identity, [*sources, *compiled])]
    return digest("\0".join(parts).encode())[:16]


def _installed_files() -> tuple[list[str], list[str]]:
    """(patchguard's own files, read by content: every file of the package, its launcher and
    its hook template; pygit2's compiled files, known by identity)."""
    sources = _files_below(_PACKAGE)
    if not os.path.isdir(os.path.join(_PACKAGE, "_data", "hooks")):  # a source checkout
        sources += _files_below(os.path.join(_SITE, "hooks"))
    sources += _existing([os.path.join(_SITE, "patchguard_entry.py")])
    compiled: list[str] = []
    for entry in sys.path:  # as `import pygit2` finds it, without importing it
        pygit2 = os.path.join(entry or ".", "pygit2")
        if os.path.isdir(pygit2):
            for folder in (pygit2, os.path.join(pygit2, ".dylibs"), pygit2 + ".libs"):
                found = [n for n in _names(folder) if n.endswith(_COMPILED) or ".so." in n]
                compiled += [os.path.join(folder, name) for name in found]
            break
    return sources, compiled


def _versions() -> list[str]:
    """The metadata of patchguard's and pygit2's installs, which names their versions (a
    reinstall rewrites every file of _installed_files(): their identity needs no more)."""
    found = []
    for entry in sys.path:
        for name in _names(entry or "."):
            if name.endswith(".dist-info") and name.startswith(("git_patchguard-", "pygit2-")):
                found += _existing([os.path.join(entry or ".", name, "METADATA")])
    return found


def _files_below(root: str) -> list[str]:
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        if entry.name == "__pycache__" or entry.name.endswith(".pyc"):
            continue
        found += _files_below(entry.path) if entry.is_dir() else [entry.path]
    return found


def _names(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def _existing(paths: list[str]) -> list[str]:
    return [path for path in paths if os.path.isfile(path)]


def _identity(path: str) -> str:
    found = os.stat(path)
    return f"{path}\0{found.st_size}\0{found.st_mtime_ns}\0{found.st_ino}"


def _interpreter_facts() -> str:
    return f"{sys.version}\0{sys.platform}\0{os.name}\0{sys.maxsize}\0{sys.byteorder}"


def computed_from() -> str:
    """The model_files() identity model_namespace() stands for: kept beside it."""
    model_namespace()
    return _namespace[1]
