"""The nearly free path: "nothing guarded changed since it was last verified".

A verified state is keyed by content, never by mtime: HEAD's commit id, then the git blob
id of the manifest and of every guarded file, as `git rev-parse HEAD` and
`git hash-object --no-filters --stdin-paths` print them. The hook scripts compute the same
key in sh before starting Python at all; `patchguard check` computes it here with nothing
but os and _sha1. A missing, corrupt or outdated cache only means a miss, so the slow path
(which writes the cache after a successful check) runs and decides.
"""

from __future__ import annotations

import os

from guard.errors import PatchguardError
from guard.gitpaths import find_repository, read_head

TYPE_CHECKING = False  # importing typing or collections would cost this path more than its work
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

try:  # the bare C module: hashlib would cost more than the whole fast path
    from _sha1 import sha1
except ImportError:  # pragma: no cover - CPython built without it
    from hashlib import sha1

CACHE_DIR_NAME = "patchguard-cache"  # per worktree: inside that worktree's own git dir
PATHS_FILE = "paths"
VERIFIED_FILE = "verified"
MAX_VERIFIED = 32


def blob_id(data: bytes) -> str:
    """The id git gives these bytes as a blob (what `git hash-object --no-filters` prints)."""
    return str(sha1(b"blob %d\0" % len(data) + data).hexdigest())


def make_key(head: str, blobs: Iterable[str]) -> str:
    """One line: the sh hooks build it by joining output lines with spaces, trailing one kept."""
    return "".join(part + " " for part in (head, *blobs))


def is_verified(start: str) -> bool:
    """True only when this exact content was verified before; any doubt means False."""
    try:
        workdir, git_dir, common_dir = find_repository(start)
        cache = os.path.join(git_dir, CACHE_DIR_NAME)
        head = read_head(git_dir, common_dir)
        if head is None:
            return False
        with open(os.path.join(cache, PATHS_FILE), encoding="utf-8") as handle:
            paths = handle.read().split("\n")[:-1]
        blobs = []
        for path in [manifest_path(common_dir), *(os.path.join(workdir, p) for p in paths)]:
            with open(path, "rb") as handle:
                blobs.append(blob_id(handle.read()))
        key = make_key(head, blobs)
        with open(os.path.join(cache, VERIFIED_FILE), encoding="utf-8") as handle:
            return any(line == key for line in handle.read().split("\n"))
    except (OSError, UnicodeDecodeError, PatchguardError):
        return False


def manifest_path(common_dir: str) -> str:
    """This checkout's own manifest: never named in the cache, so a copied checkout (cp -a)
    hashes its own manifest, not the one it was copied from."""
    return os.path.join(common_dir, "patchguard", "manifest.json")


def remember(
    git_dir: str,
    manifest_bytes: bytes,
    head: str,
    contents: Mapping[str, bytes],
) -> None:
    """Record that this content passed `check`; skipped when a path cannot be listed safely.

    The cache lists worktree-relative paths only; a cache that cannot be written is skipped.
    """
    if any("\n" in path or "\r" in path for path in contents):
        return
    try:
        _write_key(os.path.join(git_dir, CACHE_DIR_NAME), manifest_bytes, head, contents)
    except OSError:
        return  # a read-only git dir: the next check takes the full path again


def _write_key(cache: str, manifest_bytes: bytes, head: str, contents: Mapping[str, bytes]) -> None:
    from pathlib import Path

    from guard.atomic import atomic_write

    os.makedirs(cache, exist_ok=True)
    paths = sorted(contents)
    listing = "".join(path + "\n" for path in paths)
    paths_file = os.path.join(cache, PATHS_FILE)
    verified_file = os.path.join(cache, VERIFIED_FILE)
    try:
        with open(paths_file, encoding="utf-8") as handle:
            same_paths = handle.read() == listing
        with open(verified_file, encoding="utf-8") as handle:
            keys = [line for line in handle.read().split("\n") if line] if same_paths else []
    except (OSError, UnicodeDecodeError):
        same_paths, keys = False, []
    key = make_key(head, [blob_id(manifest_bytes), *(blob_id(contents[p]) for p in paths)])
    keys = [*[k for k in keys if k != key][-(MAX_VERIFIED - 1) :], key]
    if not same_paths:
        # Old keys go before the new listing does, so no reader pairs a stale key with new paths.
        atomic_write(Path(verified_file), b"")
        atomic_write(Path(paths_file), listing.encode())
    atomic_write(Path(verified_file), "".join(k + "\n" for k in keys).encode())
