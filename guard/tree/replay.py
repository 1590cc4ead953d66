"""A re-apply seen before is replayed: the same files, patches and HEAD give the same writes.

A regression hunt takes the patches out and puts them back over and over: every `git stash`
and checkout, and the hook re-applies the same patches onto the same files. What a re-apply
writes depends on exactly what the verified key holds (guard.store.fastpath: the manifest, the
guarded files, HEAD's entries for them). So after a re-apply that ended verified, the bytes it
wrote are kept under the key of the files before it; when a hook meets that key again, and the
key after it is still verified, it writes those bytes through the journal (all or nothing,
undoable, as apply writes) and is done: nothing is parsed, merged or checked again, and the
modules that would (guard.tree.assess, guard.truth.symbols) are never imported.

Never replayed: a file with a CR (its bytes on disk depend on git's line-ending settings,
which no key holds), and a patch that creates or deletes a file (the key needs every file).
Entries are checksummed (guard.git.content_cache) and each kept file is checked against its blob
id: a damaged entry only means the full re-apply runs.
"""

from __future__ import annotations

import json

from guard.git.content_cache import ContentCache
from guard.git.objects import blob_id
from guard.git.worktree_paths import UnsafePath, one_walk
from guard.store.fastpath import CACHE_DIR_NAME
from guard.store.journal import Journal

TYPE_CHECKING = False  # not `from typing import ...`: typing costs the hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Sequence

    from guard.git.repo import Repo
    from guard.store.fastpath import CurrentKey
    from guard.tree.patching import PatchOutcome


REPLAYS_DIR = "replays"  # in the worktree's patchguard-cache
_KEEP = 1024  # a re-apply of 40 files keeps 41 entries (its record and the bytes)


def replay(repo: Repo, before: CurrentKey | None) -> list[tuple[str, list[str]]] | None:
    """Write what the re-apply from the files as `before` found them wrote: (patch, paths) in
    the order it applied them. None, having written nothing, when no such re-apply is known or
    its result is no longer verified.

    The caller holds the worktree's lock from before `before` was read (after journal.recover)
    until remember(): the files cannot change in between.
    """
    if before is None:
        return None
    cache = _cache(repo)
    try:
        record = json.loads(cache.get(_entry_name(before.key)) or b"null")
        writes = [(str(w["path"]), str(w["blob"]), str(w["patch"])) for w in record["writes"]]
        if record["before"] != before.key or record["after"] not in before.keys:
            return None  # another key's entry, or its result is no longer verified
    except (ValueError, TypeError, KeyError):
        return None
    if not {path for path, _, _ in writes} <= set(before.paths):
        return None  # only the guarded files the key holds are ever written
    if before.unmerged() is not False:
        return None  # a conflict git left: the full re-apply says so, and writes nothing
    kept = {blob: cache.get(blob) for _, blob, _ in writes}
    if any(data is None or blob_id(data) != blob for blob, data in kept.items()):
        return None
    journal = Journal(repo.layout.git_dir, "apply")
    done: dict[str, list[str]] = {}
    with one_walk():  # nothing but these writes changes the tree in between
        try:
            for path, blob, patch in writes:
                on_disk = repo.read_raw(path)
                if on_disk is None or b"\r" in on_disk:
                    journal.discard()
                    return None
                after = kept[blob]
                assert after is not None
                journal.before_write(path, on_disk, after, patch, (repo.permissions(path), None))
                done.setdefault(patch, []).append(path)
        except UnsafePath:
            journal.discard()
            return None  # a link now: the full re-apply says what it is
        journal.write(repo)
    return list(done.items())


def remember(
    repo: Repo,
    before: CurrentKey | None,
    after: CurrentKey | None,
    outcomes: Sequence[PatchOutcome],
) -> None:
    """After a re-apply that ended verified (`after`, read once it was), keep what it wrote
    under the key of the files before it (see the module's docstring for what is never kept)."""
    written = [(path, o.verdict.name) for o in outcomes for path in o.written]
    if before is None or after is None or not written:
        return
    if not after.verified or after.paths != before.paths:
        return  # not verified, or the guarded paths changed: nothing to replay from
    cache = _cache(repo)
    writes = []
    for path, patch in written:
        data = repo.read_raw(path)
        if data is None or b"\r" in data:
            return
        cache.put(blob_id(data), data)
        writes.append({"path": path, "blob": blob_id(data), "patch": patch})
    record = {"before": before.key, "after": after.key, "writes": writes}
    cache.put(_entry_name(before.key), json.dumps(record).encode())


def _entry_name(key: str) -> str:
    return "from-" + blob_id(key.encode())


def _cache(repo: Repo) -> ContentCache:
    return ContentCache(repo.layout.git_dir / CACHE_DIR_NAME / REPLAYS_DIR, _KEEP)
