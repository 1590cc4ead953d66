"""The nearly free path: "nothing the verdict depends on changed since it was last verified".

A verified state is keyed by content, never by mtime or by commit id: the git blob id of the
manifest and of every guarded file in the worktree (as `git hash-object --no-filters
--stdin-paths` prints them), then HEAD's entries for those files (as `git ls-tree` prints
them: mode, type, id and path; a file HEAD lacks has no line). That is all a verdict reads,
so a commit that touches no guarded file keeps the key, and a checkout to another commit with
the same guarded files finds it. The hook scripts compute the same key in sh with those two
git calls before starting Python at all; `patchguard check` computes it here with nothing but
os, _sha1 and one `git ls-tree`. A missing, corrupt or outdated cache only means a miss, so
the slow path (which writes the cache after a successful check) runs and decides.
"""

from __future__ import annotations

import os

from guard.errors import PatchguardError
from guard.gitpaths import find_repository

TYPE_CHECKING = False  # importing typing or collections would cost this path more than its work
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

try:  # the bare C module: hashlib would cost more than the whole fast path
    from _sha1 import sha1
except ImportError:  # pragma: no cover - CPython built without it
    from hashlib import sha1

CACHE_DIR_NAME = "patchguard-cache"  # per worktree: inside that worktree's own git dir
PATHS_FILE = "paths"
VERIFIED_FILE = "verified"
MAX_VERIFIED = 32
# HEAD's entries for the guarded files, exactly as the hook scripts ask for them.
HEAD_LISTING = ("--literal-pathspecs", "ls-tree", "--full-tree", "HEAD", "--")


def blob_id(data: bytes) -> str:
    """The id git gives these bytes as a blob (what `git hash-object --no-filters` prints)."""
    return str(sha1(b"blob %d\0" % len(data) + data).hexdigest())


def make_key(blobs: Iterable[str], head_listing: str) -> str:
    """One line, as the sh hooks build it: each blob id and each line of HEAD's listing, each
    followed by a space."""
    lines = head_listing.split("\n")
    if lines[-1] == "":
        lines.pop()
    return "".join(part + " " for part in (*blobs, *lines))


def head_listing(workdir: str, paths: Sequence[str]) -> str | None:
    """`git ls-tree` of HEAD for `paths` (the key's second half), or None when git fails.

    Started with posix_spawn and pipes: the subprocess module alone would cost this path
    more than the git process does.
    """
    out_read, out_write = os.pipe()
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        pid = os.posix_spawnp(
            "git",
            ["git", "-C", workdir, *HEAD_LISTING, *paths],
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, devnull, 0),
                (os.POSIX_SPAWN_DUP2, out_write, 1),
                (os.POSIX_SPAWN_DUP2, devnull, 2),
            ],
        )
    except OSError:
        os.close(out_read)
        return None
    finally:
        os.close(out_write)
        os.close(devnull)
    chunks = []
    with os.fdopen(out_read, "rb") as output:
        while chunk := output.read(65536):
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return None
    return b"".join(chunks).decode("utf-8", "surrogateescape")


def is_verified(start: str) -> bool:
    """True only when this exact content was verified before; any doubt means False."""
    try:
        workdir, git_dir, common_dir = find_repository(start)
        cache = os.path.join(git_dir, CACHE_DIR_NAME)
        with open(os.path.join(cache, PATHS_FILE), encoding="utf-8") as handle:
            paths = handle.read().split("\n")[:-1]
        blobs = []
        for path in [manifest_path(common_dir), *(os.path.join(workdir, p) for p in paths)]:
            with open(path, "rb") as handle:
                blobs.append(blob_id(handle.read()))
        with open(os.path.join(cache, VERIFIED_FILE), encoding="utf-8") as handle:
            keys = handle.read().split("\n")
        if not any(key.startswith(blobs[0]) for key in keys):
            return False  # no key for this manifest: spare the git call
        listing = head_listing(workdir, paths)
        return listing is not None and make_key(blobs, listing) in keys
    except (OSError, UnicodeDecodeError, PatchguardError):
        return False


def manifest_path(common_dir: str) -> str:
    """This checkout's own manifest: never named in the cache, so a copied checkout (cp -a)
    hashes its own manifest, not the one it was copied from."""
    return os.path.join(common_dir, "patchguard", "manifest.json")


def remember(
    git_dir: str,
    workdir: str,
    manifest_bytes: bytes,
    contents: Mapping[str, bytes],
) -> None:
    """Record that this content passed `check`, with HEAD's entries for it as they are now.

    The cache lists worktree-relative paths only; it is skipped when a path cannot be listed
    safely one per line, or when the cache cannot be written (a read-only git dir).
    """
    if any("\n" in path or "\r" in path for path in contents):
        return
    paths = sorted(contents)
    listing = head_listing(workdir, paths)
    if listing is None:
        return
    key = make_key([blob_id(manifest_bytes), *(blob_id(contents[p]) for p in paths)], listing)
    try:
        _write_key(os.path.join(git_dir, CACHE_DIR_NAME), paths, key)
    except OSError:
        return  # a read-only git dir: the next check takes the full path again


def _write_key(cache: str, paths: Sequence[str], key: str) -> None:
    from pathlib import Path

    from guard.atomic import atomic_write

    os.makedirs(cache, exist_ok=True)
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
    keys = [*[k for k in keys if k != key][-(MAX_VERIFIED - 1) :], key]
    if not same_paths:
        # Old keys go before the new listing does, so no reader pairs a stale key with new paths.
        atomic_write(Path(verified_file), b"")
        atomic_write(Path(paths_file), listing.encode())
    atomic_write(Path(verified_file), "".join(k + "\n" for k in keys).encode())
