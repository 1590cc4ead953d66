"""The hooks' re-apply and a move's lift and put-back, replayed when seen before: the same
files, patches and HEAD give the same writes.

A hunt, and every `git stash` and checkout, re-apply the same patches onto the same files over
and over. What a re-apply writes depends only on the verified key (guard.store.fastpath), so
the bytes a verified one wrote are kept under the key of the files before it, and written again
through the journal (all or nothing, undoable) when that key comes back still verified: nothing
is parsed, merged or checked, and guard.tree.assess is never imported. A move's lift is kept
and replayed alike.

Never replayed: a file with a CR that git converts (its bytes then depend on settings no key
holds), a patch that creates or deletes a file (the key needs every file), what another
patchguard wrote (guard.git.content_cache), or a damaged entry: the full re-apply runs.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeVar

from guard.errors import GuardFailure
from guard.git.content_cache import ContentCache
from guard.git.objects import blob_id
from guard.git.worktree_paths import UnsafePath, one_walk
from guard.store.fastpath import CACHE_DIR_NAME, current_key
from guard.store.journal import Journal, latest_entry

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from guard.git.repo import Repo
    from guard.store.fastpath import CurrentKey
    from guard.tree.patching import PatchOutcome
    from guard.tree.verdicts import CheckReport


REPLAYS_DIR = "replays"  # in the worktree's patchguard-cache
_KEEP = 1024  # a re-apply of 40 files keeps 41 entries (its record and the bytes)
_Said = TypeVar("_Said")


class ReplayedOutcome:
    """A replayed put-back's PatchOutcome and its own verdict (state: a PatchVerdict's value).
    Only put-backs where every patch ended as asked are kept, so `ok` and nothing to add."""

    __slots__ = ("name", "state", "written")
    ok = True
    message = ""

    def __init__(self, name: str, state: str, written: list[str]) -> None:
        self.name, self.state, self.written = name, state, written

    @property
    def verdict(self) -> ReplayedOutcome:
        return self


def reapply(
    repo: Repo,
) -> tuple[Sequence[PatchOutcome | ReplayedOutcome], CheckReport | None]:
    """Every patch re-applied, as a hook and a move's put-back do; the caller holds the
    worktree's lock, so the files cannot change between the keys read here and the writes.
    The report is None when the result's key is verified (green). One that wrote nothing is
    kept too: a move's put-back after git left the lifted files alone reads its states there."""
    before = current_key(str(repo.workdir))
    replayed = _put_back(repo, before)
    if replayed is not None:
        return replayed, None
    from guard.tree import assess, patching
    from guard.tree.worktree import Worktree

    tree = Worktree(repo)
    outcomes = patching.apply(repo, allow_mid_operation=True, tree=tree)
    ok = all(o.ok for o in outcomes)
    after = current_key(str(repo.workdir))
    report = None
    if not (ok and after is not None and after.verified):
        report = assess.check(repo, tree)
        after = current_key(str(repo.workdir))  # verified now if the check was green
    if ok and before and after and after.verified and after.paths == before.paths:
        written = [(path, o.verdict.name) for o in outcomes for path in o.written]
        states = [[o.verdict.name, str(o.verdict.state)] for o in outcomes]
        _keep(repo, "from", before, written, after=after.key, patches=states)
    return outcomes, report


def _put_back(repo: Repo, before: CurrentKey | None) -> list[ReplayedOutcome] | None:
    """Write what the re-apply from the files as `before` found them wrote, and each patch's
    outcome; None, having written nothing, when none is known or no longer verified."""
    if before is None:
        return None

    def states(record: Any) -> list[tuple[str, str]] | None:
        if record["after"] not in before.keys:
            return None  # its result is no longer verified
        # decided by the model: the one that verified `after`
        return [(str(name), str(state)) for name, state in record["patches"]]

    done = _write_recorded(repo, before, "from", "apply", states)
    if done is None:
        return None
    return [ReplayedOutcome(name, state, done[1].get(name, [])) for name, state in done[0]]


def _write_recorded(
    repo: Repo, before: CurrentKey, kind: str, operation: str, said: Callable[[Any], _Said | None]
) -> tuple[_Said, dict[str, list[str]], Journal] | None:
    """Write the kept bytes of the `kind` record under `before`'s key as one journaled
    `operation`: what `said` reads of the record, the paths by patch, and the journal. None,
    having written nothing, where none is known (or `said` reads None) or the full path has
    something to say (an unmerged or unguarded file, a kept file damaged, a CR, a link)."""
    cache = _cache(repo)
    try:
        record = json.loads(cache.get(_name(kind, before.key)) or b"null")
        writes = [(str(w["path"]), str(w["blob"]), str(w["patch"])) for w in record["writes"]]
        found = said(record) if record["before"] == before.key else None  # not another key's
    except (ValueError, TypeError, KeyError):
        return None
    if found is None:
        return None
    if not {path for path, _, _ in writes} <= set(before.paths) or before.unmerged() is not False:
        return None  # beyond the guarded files, or a conflict git left: the full path says so
    kept = {blob: cache.get(blob) for _, blob, _ in writes}
    if any(data is None for data in kept.values()):
        return None
    journal = Journal(repo.layout.git_dir, operation)
    done: dict[str, list[str]] = {}
    with one_walk():  # nothing but these writes changes the tree in between
        try:
            for path, blob, patch in writes:
                on_disk = repo.read_raw(path)
                if on_disk is None or not _as_git_leaves_it(repo, path, on_disk, kept[blob]):
                    journal.discard()
                    return None
                after = kept[blob]
                assert after is not None
                journal.before_write(path, on_disk, after, patch, (repo.permissions(path), None))
                done.setdefault(patch, []).append(path)
        except UnsafePath:
            journal.discard()
            return None  # a link now: the full re-apply says what it is
        # Each kept file held to its blob id as the journal has just computed it (a second
        # SHA-1 of every file would cost a replay of 40 files ~5 ms).
        if {f["path"]: f["after_blob"] for f in journal.files} != {p: b for p, b, _ in writes}:
            journal.discard()
            return None
        journal.write(repo)
    return found, done, journal


# --- a move's lift ---------------------------------------------------------------------------


def lift(repo: Repo) -> tuple[list[str], Path | None]:
    """Take every applied patch out, as a move does before git runs, under the worktree's lock
    as for reapply(): the patches taken out, and the journal entry (None when none). Replayed
    when seen before from a verified tree; else unapply's `whole`: all out cleanly, or none."""
    before = current_key(str(repo.workdir))
    verified = before if before is not None and before.verified else None
    if verified is not None:
        replayed = _write_recorded(
            repo,
            verified,
            "lift",
            "unapply",
            lambda record: [str(name) for name in record["lifted"]],
        )
        if replayed is not None:
            return replayed[0], replayed[2].entry
    from guard.tree import patching

    outcomes = patching.unapply(repo, allow_mid_operation=True, whole=True)
    stuck = [o for o in outcomes if not o.ok]
    if stuck:
        reasons = "; ".join(f"patch {o.verdict.name}: {o.message}" for o in stuck)
        raise GuardFailure(
            f"cannot lift the patches, so git was not run and nothing changed: {reasons}. "
            "Your own edits touch the patch there: keep them in it (patchguard resolve NAME "
            "where the patch does not merge as recorded, patchguard record NAME FILE on its "
            "base) or save them elsewhere (git stash), then run the command again."
        )
    lifted = [o.verdict.name for o in outcomes if o.written]
    if verified is not None:  # kept, in its order, for the next time
        written = [(path, o.verdict.name) for o in reversed(outcomes) for path in o.written]
        _keep(repo, "lift", verified, written, lifted=lifted)
    return lifted, latest_entry(repo) if lifted else None


def _keep(
    repo: Repo, kind: str, before: CurrentKey, written: Sequence[tuple[str, str]], **said: object
) -> None:
    """Keep the bytes of each written (path, patch) as they are now, by blob id, and the record
    of them under `before`'s key; nothing when a file is gone or has a CR."""
    cache = _cache(repo)
    writes = []
    for path, patch in written:
        data = repo.read_raw(path)
        if data is None or not _as_git_leaves_it(repo, path, data):
            return
        cache.put(blob_id(data), data)
        writes.append({"path": path, "blob": blob_id(data), "patch": patch})
    record = {"before": before.key, "writes": writes, **said}
    cache.put(_name(kind, before.key), json.dumps(record).encode())


def _as_git_leaves_it(repo: Repo, path: str, *contents: bytes | None) -> bool:
    """Whether these contents of `path` are the same bytes whatever git's line-ending settings:
    without a CR, or for a path git converts nothing of (no `text`/`eol` attribute, no
    autocrlf), as asked of git now. A project may commit CRLF files (one of sglang's model
    files is): without this, one such file among 40 sent every re-apply down the full path."""
    if not any(b"\r" in data for data in contents if data is not None):
        return True
    conversion = repo.conversion(path)
    return not conversion.text and conversion.refusal is None and not conversion.ident


def _name(kind: str, key: str) -> str:
    return f"{kind}-" + blob_id(key.encode())


def _cache(repo: Repo) -> ContentCache:
    return ContentCache(repo.layout.git_dir / CACHE_DIR_NAME / REPLAYS_DIR, _KEEP)
