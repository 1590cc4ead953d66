"""The nearly free path: "nothing the verdict depends on changed since it was last verified".

The one implementation of the key, for `check` and the hooks, with nothing but os and _sha1. A
key is content, never mtime or commit id: the digests of the manifest and of every guarded file,
then HEAD's entries for those files as `git ls-tree` prints them (all a verdict reads), so a
checkout to another commit with the same guarded files finds it. HEAD's entries cost no git
process for a commit the cache has seen, nor when the index is HEAD's tree. Keys live under the
namespace of all of patchguard's code: an upgrade trusts none of an older one's. Any doubt is a
miss: the slow path decides, and writes the cache.
"""

from __future__ import annotations

import os

from guard.errors import PatchguardError
from guard.git.gitpaths import (
    DERIVED_FROM_FILE_NAME,
    HISTORY_REF,
    MANIFEST_FILE_NAME,
    STORE_DIR_NAME,
    TRANSACTION_FILE_NAME,
    find_repository,
    read_head,
    read_ref,
)
from guard.git.index_file import IndexFile
from guard.git.index_file import checksum as index_checksum
from guard.git.objects import digest
from guard.git.own_code import model_namespace
from guard.git.worktree_paths import checked_path, one_walk, read_if_regular

TYPE_CHECKING = False  # importing typing or collections would cost this path more than its work
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from guard.git.repo import Repo

CACHE_DIR_NAME = "patchguard-cache"  # per worktree: inside that worktree's own git dir
VERIFIED_FILE = "verified"
# The file: this first line, then `NAME VALUE` per value for NAME in SECTIONS, then `end` (a torn
# file lacks it). Values hold no newline (remember() skips such paths). "heads" maps a commit to
# its entries; "absent" and "present" are paths looked up but not read, which must stay so for
# the keys to hold (guard.tree.worktree.Worktree.exists); "merged" holds the checksums of index
# files read whole that held none of the paths unmerged; "model" is the model_namespace() that
# verified them, "model_files" the identity of the files it was computed from.
_HEAD = "patchguard verified keys 2"
_END = "end"
SECTIONS = ("paths", "keys", "heads", "absent", "present", "model", "merged", "model_files")
MAX_VERIFIED = 32
MAX_MERGED = 8


def make_key(digests: Iterable[str], entries: str) -> str:
    return "".join(found + " " for found in digests) + entries


def head_entries(
    workdir: str, common_dir: str, commit: str, paths: Sequence[str], index: IndexFile | None
) -> str | None:
    """`git ls-tree`'s lines for `paths` in `commit`, each followed by a space, as a key holds
    them; from the index file when it can say, else from git (None: git failed)."""
    found = None if index is None else index.tree_entries(common_dir, commit, paths)
    if found is not None:
        return "".join(f"{mode:06o} {kind} {oid}\t{path} " for mode, kind, oid, path in found)
    ls_tree = ["--literal-pathspecs", "ls-tree", "--full-tree", commit, "--", *paths]
    listing = _git_output(workdir, ls_tree)  # each line ends in "\n" (a name in it is quoted)
    return None if listing is None else listing.replace("\n", " ")


def _git_output(workdir: str, args: Sequence[str]) -> str | None:
    import subprocess

    try:
        command = ["git", "-C", workdir, *args]
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError:
        return None
    return done.stdout.decode("utf-8", "surrogateescape") if done.returncode == 0 else None


class CurrentKey:
    """The key of a worktree's content as it is now, with what it was looked up in."""

    def __init__(
        self,
        key: str,
        paths: list[str],
        keys: list[str],
        workdir: str,
        git_dir: str,
        index: IndexFile | None,
        merged: list[str],
    ) -> None:
        self.key = key
        self.paths = paths  # the guarded paths the key covers
        self.keys = keys  # the keys verified for them
        self.workdir = workdir
        self.git_dir = git_dir
        self.index = index  # when HEAD's entries were read from it: not read again
        self.merged = merged
        self._verified: bool | None = None

    @property
    def verified(self) -> bool:
        if self._verified is None:
            self._verified = self.key in self.keys and self.unmerged() is False
        return self._verified

    def unmerged(self) -> bool | None:
        """Does git's index hold unmerged entries for any of the paths (None: git failed)? No
        key holds the index, yet a conflict resolved by hand back to verified bytes, without
        `git add`, is still a conflict (guard.tree.assess)."""
        index = self.index
        known = index.checksum if index is not None else index_checksum(self.git_dir)
        if known is not None and known in self.merged:
            return False
        index = index if index is not None else IndexFile.read(self.git_dir)
        said = None if index is None else index.unmerged(self.paths)
        if said is not None:
            return said
        listing = ["--literal-pathspecs", "ls-files", "--unmerged", "--", *self.paths]
        found = _git_output(self.workdir, listing)
        return None if found is None else found != ""


def is_verified(start: str) -> bool:
    """CurrentKey.verified for the content as it is now; any doubt means False."""
    found = current_key(start)
    return found is not None and found.verified


def current_key(start: str) -> CurrentKey | None:
    """The key of the content as it is now, or None when the cache cannot say (no cache, a
    file missing, no key for this manifest)."""
    try:
        workdir, git_dir, common_dir = find_repository(start)
        with open(os.path.join(git_dir, CACHE_DIR_NAME, VERIFIED_FILE), encoding="utf-8") as f:
            found = parse_verified(f.read())
        paths, keys, commits, absent, present, model, merged, model_files_seen = found
        if model != [model_namespace((model_files_seen, model))]:
            return None  # verified by another Python, or another patchguard
        heads = dict(line.split(" ", 1) for line in commits)  # ValueError without a space
        if any(os.path.lexists(os.path.join(workdir, p)) for p in absent) or not all(
            os.path.exists(os.path.join(workdir, p)) for p in present
        ):
            return None  # a module appeared or went where the verdict looked
        with one_walk():  # a link or a nested repository now: the full path says so
            for path in paths:
                checked_path(workdir, path, (git_dir, common_dir))
        if not derived_from_history(common_dir):
            return None  # manifest.json is not the patches: guard.store.derived reads them
        digests = []
        # This checkout's own manifest, never one named in the cache: a copied checkout (cp -a)
        # hashes its own, not the one it was copied from.
        own = os.path.join(common_dir, STORE_DIR_NAME, MANIFEST_FILE_NAME)
        for path in [own, *(os.path.join(workdir, p) for p in paths)]:
            content = read_if_regular(path)[1]
            if content is None:
                return None  # not a file now (a FIFO would never answer): the full path says so
            digests.append(digest(content))
        if not any(key.startswith(digests[0]) for key in keys):
            return None  # no key for this manifest: spare the git call
        head = read_head(git_dir, common_dir)
        entries = heads.get(head or "")
        index = None
        if entries is None:
            index = IndexFile.read(git_dir)
            entries = head_entries(workdir, common_dir, head or "HEAD", paths, index)
            if entries is None:
                return None
        key = make_key(digests, entries)
        return CurrentKey(key, paths, keys, workdir, git_dir, index, merged)
    except (OSError, UnicodeDecodeError, ValueError, PatchguardError):
        return None


def parse_verified(text: str) -> list[list[str]]:
    """The values of each of SECTIONS, as remember() wrote them; ValueError for anything else
    (a torn, damaged or foreign file is a miss)."""
    lines = text.split("\n")
    if lines[0] != _HEAD or lines[-2:] != [_END, ""]:
        raise ValueError("not a verified file")
    found: dict[str, list[str]] = {name: [] for name in SECTIONS}
    for line in lines[1:-2]:
        name, space, value = line.partition(" ")
        if name not in found or not space:
            raise ValueError("not a verified file")
        found[name].append(value)
    return list(found.values())


def derived_from_history(common_dir: str) -> bool:
    """Is manifest.json the patches as they are: no change to them cut off, and derived from
    the history ref's commit (or there is no history ref)?"""
    store = os.path.join(common_dir, STORE_DIR_NAME)
    if os.path.exists(os.path.join(store, TRANSACTION_FILE_NAME)):
        return False
    tip = read_ref(HISTORY_REF, (common_dir,))
    if tip is None:
        return True  # no history (or a store only git reads): manifest.json as it is
    try:
        with open(os.path.join(store, DERIVED_FROM_FILE_NAME), encoding="utf-8") as handle:
            return handle.read().strip() == tip
    except (OSError, UnicodeDecodeError):
        return False


def remember(
    repo: Repo,
    head: str,
    contents: Mapping[str, bytes],
    looked_up: tuple[Iterable[str], Iterable[str]],
) -> None:
    """Record that this content passed `check` at commit `head` (the commit whose files the
    verdict read), while the paths of `looked_up` were (absent, present), with the manifest and
    git's index as the check read them."""
    absent, present = (set(paths) for paths in looked_up)
    if any("\n" in path or "\r" in path for path in (*contents, *absent, *present)):
        return
    paths, index = sorted(contents), repo.index_file
    entries = head_entries(str(repo.workdir), str(repo.layout.common_dir), head, paths, index)
    if entries is None:
        return
    key = make_key([digest(repo.manifest_bytes), *(digest(contents[p]) for p in paths)], entries)
    merged = index.checksum if index is not None and index.unmerged(paths) is False else None
    from contextlib import suppress
    from pathlib import Path

    from guard.git.atomic import atomic_write
    from guard.git.own_code import computed_from

    cache = os.path.join(repo.layout.git_dir, CACHE_DIR_NAME)
    verified_file = os.path.join(cache, VERIFIED_FILE)
    try:
        with open(verified_file, encoding="utf-8") as handle:
            known = parse_verified(handle.read())
    except (OSError, UnicodeDecodeError, ValueError):
        known = [[] for _ in SECTIONS]
    known_paths, keys, commits, was_absent, was_present, model, indexes, _ = known
    if known_paths != paths or model != [model_namespace()]:
        keys, commits, was_absent, was_present, indexes = [], [], [], [], []  # other paths or model
    keys = [key, *[k for k in keys if k != key]][:MAX_VERIFIED]  # newest first
    if merged is not None:
        indexes = [merged, *[i for i in indexes if i != merged]][:MAX_MERGED]
    commits = [f"{head} {entries}", *[c for c in commits if not c.startswith(head + " ")]]
    # Every key holds only while every path any of them looked up stays as it was then.
    sections = {
        "paths": paths,
        "keys": keys,
        "heads": commits[:MAX_VERIFIED],
        "absent": sorted(absent.union(was_absent)),
        "present": sorted(present.union(was_present)),
        "model": [model_namespace()],
        "merged": indexes,
        "model_files": [computed_from()],
    }
    text = "".join(f"{name} {value}\n" for name, values in sections.items() for value in values)
    try:
        os.makedirs(cache, exist_ok=True)
        # The keys of a patchguard whose hooks computed them in sh: such hooks, left in place by
        # an upgrade until `patchguard install` rewrites them, would still trust them.
        with suppress(OSError):
            os.unlink(os.path.join(cache, "verified.sh"))
        # A cache, never flushed: a torn file fails parse_verified.
        atomic_write(Path(verified_file), f"{_HEAD}\n{text}{_END}\n".encode(), durable=False)
    except OSError:
        return  # a read-only git dir: the next check takes the full path again
