"""The patches' history: every change to the manifest is a commit on `refs/patchguard/history`.

StGit's model: each commit's tree holds `manifest.json` and, under `blobs/`, every blob it
refers to, so `git gc` keeps whatever a patch needs by construction; the first parent is the
state before. So `log` is a walk of first parents, and `undo` one more commit restoring the
state before (the history keeps both). The ref is the truth, moved compare-and-swap;
`manifest.json` is derived from it after every write, for the hooks, which read it with no git.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from contextlib import suppress
from datetime import datetime
from typing import NamedTuple

from guard.errors import EXIT_INTERNAL, ConfigError, GuardError
from guard.git import faults
from guard.git.atomic import atomic_write
from guard.git.gitpaths import HISTORY_REF
from guard.git.lock import held
from guard.git.objects import blob_id
from guard.store.derived import (
    MANIFEST_ENTRY,
    derive_manifest,
    load_manifest,
    not_a_commit,
)
from guard.store.manifest import (
    FileChange,
    Manifest,
    Patch,
    changed_patches,
    now_utc,
    parse_manifest,
    save_manifest,
    validated_bytes,
)

TYPE_CHECKING = False  # not `from typing import ...`, as in the modules the hooks import
if TYPE_CHECKING:
    from typing import Any

    import pygit2

    from guard.git.repo import Repo

BLOBS_ENTRY = "blobs"
TAKEN_OVER = "took over the manifest as found"  # the first state of a manifest found without one
STARTED = "no patches yet"  # the first state of a repository whose first change is a fetch
_NO_REF = "0" * 40  # update-ref's "no such ref": as the old value, not yet there; as the new, gone
_HEAD_TRAILER = "Patchguard-Head"
_TIME_TRAILER = "Patchguard-Time"
_UNDOES_TRAILER = "Patchguard-Undoes"
_NOTE_TRAILER = "Patchguard-Note"  # a state that changed no patch: nothing for undo


class Change(NamedTuple):
    """One commit of the history: what changed, when, at which HEAD."""

    commit: str
    subject: str
    created: float  # seconds since the epoch, as journal entries have it
    head: str | None
    undoes: str | None  # the commit whose change this one took back
    parent: str | None  # the state before it (the first parent)
    note: bool = False  # it changed no patch (a choice recorded at a push)

    def describe(self) -> str:
        """e.g. "re-recorded eagle3 (kimi_k25.py) at 2026-12-01 09:40:12"."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created))
        return f"{self.subject} at {when}"


def current(repo: Repo) -> str | None:
    """The commit the history ref points at; None before the first write. Anything else
    there is refused by name: read as "no history", it would let the next write start the
    history over. (libgit2 only then, to name it: `log` needs none.)"""
    found = repo.read_object(HISTORY_REF)
    if found is not None and found[1] == "commit":
        return found[0]
    import pygit2

    try:
        reference = repo.git.references.get(HISTORY_REF)
        if reference is None:
            return None
        target = repo.git.get(reference.resolve().target)
    except (pygit2.GitError, pygit2.InvalidSpecError, ValueError, KeyError) as error:
        raise ConfigError(
            f"{HISTORY_REF} cannot be read ({error}); nothing was read or changed. Put it back "
            f"where it was: git update-ref {HISTORY_REF} COMMIT (the commit named in "
            f"{repo.layout.derived_from_path}), or delete it: git update-ref -d {HISTORY_REF}"
        ) from None
    if isinstance(target, pygit2.Commit):
        return str(target.id)
    kind = "missing object" if target is None else type(target).__name__.lower()
    raise ConfigError(not_a_commit(repo, str(reference.target), kind))


def save(
    repo: Repo,
    manifest: Manifest,
    change: str,
    *,
    undoes: str | None = None,
    merged: str | None = None,
    note: bool = False,
) -> None:
    """One transaction: the objects, then the transaction file (while it stands, no verified
    key is trusted and the next command derives manifest.json again), the ref moved
    compare-and-swap, manifest.json derived, the file removed. A writer killed anywhere leaves
    the old state or the new one, whole. Only a holder of the store's lock may write, so
    writers in any worktrees take turns instead of refusing each other. `merged` is a fetch's
    second parent."""
    if not held(repo.layout.store_lock_path):
        raise GuardError(
            f"a bug in patchguard: {change!r} would change the patches without holding "
            f"{repo.layout.store_lock_path}; nothing was changed. Report it (the command, "
            "and this line); the command that changes the patches must take the store's "
            "lock (Repo.lock(..., store=True))",
            [],
            exit_code=EXIT_INTERNAL,
        )
    raw = validated_bytes(manifest)
    with repo.writing_objects():
        old = current(repo)
        parent = _parent_for(repo, old)
        if parent is None and merged is not None:  # a first fetch: undo goes back to no patches
            parent = _commit(repo, _tree(repo, validated_bytes(Manifest()), set()), [], STARTED)
        tree = _tree(repo, raw, manifest.blob_ids())
        same = parent is not None and _commit_at(repo, parent).tree_id == tree
        new = None
        if not same or merged is not None or note:
            parents = [p for p in (parent, merged) if p is not None]
            new = _commit(repo, tree, parents, change, undoes, note=note)
    if new is None:  # the state the ref holds already
        if old is None:
            save_manifest(repo.layout.manifest_path, raw)
        else:
            derive_manifest(repo.layout, raw, old)
        repo.manifest_bytes = raw
        return
    said = f"{HISTORY_REF}: {old or 'none'} -> {new}: {change}\n"  # for a person; read by none
    try:
        repo.layout.store_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(repo.layout.transaction_path, said.encode())
    except OSError as error:
        raise ConfigError(
            f"cannot write {repo.layout.transaction_path}: {error.strerror}; nothing was "
            "changed. Free space, or run patchguard as a user who can write the repository."
        ) from None
    faults.point("store-begun")
    try:
        _move_ref(repo, new, old, change)
    except ConfigError:
        repo.layout.transaction_path.unlink(missing_ok=True)
        raise
    faults.point("store-ref-moved")
    try:
        derive_manifest(repo.layout, raw, new)
    except ConfigError:  # "nothing was changed" must hold: the ref goes back where it was
        _move_ref(repo, old or _NO_REF, new, f"back before: {change}")
        repo.layout.transaction_path.unlink(missing_ok=True)
        raise
    faults.point("store-derived")
    repo.manifest_bytes = raw


def _parent_for(repo: Repo, old: str | None) -> str | None:
    """The state this write goes on top of. A manifest the history does not hold is taken
    over as a change of its own (the first, with no history yet), so nothing is lost; one that
    is an earlier state was loaded before another writer's change: refused."""
    loaded = repo.manifest_bytes
    if old is None:
        if not loaded:
            return None
        return _commit(repo, _tree(repo, loaded, _present_blobs(repo, loaded)), [], TAKEN_OVER)
    held = repo.object_id(f"{old}:{MANIFEST_ENTRY}", "blob")
    if blob_id(loaded) == held or (held is None and not loaded):  # or undo of one without
        return old
    if not loaded or any(
        blob_id(loaded) == repo.object_id(f"{c.commit}:{MANIFEST_ENTRY}", "blob")
        for c in walk(repo)
    ):
        raw = repo.file_at(old, MANIFEST_ENTRY)  # the derived file lags the ref: catch it up
        if raw is not None:
            derive_manifest(repo.layout, raw, old)
        raise ConfigError(
            f"the patches changed while this command ran (another patchguard moved "
            f"{HISTORY_REF}); nothing was changed. Run it again."
        )
    taken = _tree(repo, loaded, _present_blobs(repo, loaded))
    return _commit(repo, taken, [old], "took over manifest.json as changed outside patchguard")


def _present_blobs(repo: Repo, raw: bytes) -> set[str]:
    """The blobs a manifest found on disk refers to that the object store still has."""
    import pygit2

    try:
        wanted = Manifest.from_dict(json.loads(raw)).blob_ids()
    except (ValueError, KeyError, TypeError):
        return set()
    return {oid for oid in wanted if pygit2.Oid(hex=oid) in repo.git}


def _tree(repo: Repo, raw: bytes, blobs: set[str]) -> pygit2.Oid:
    import pygit2
    from pygit2.enums import FileMode

    root = repo.git.TreeBuilder()
    root.insert(MANIFEST_ENTRY, repo.git.create_blob(raw), FileMode.BLOB)
    if blobs:
        pinned = repo.git.TreeBuilder()
        for oid in sorted(blobs):
            pinned.insert(oid, pygit2.Oid(hex=oid), FileMode.BLOB)
        root.insert(BLOBS_ENTRY, pinned.write(), FileMode.TREE)
    return root.write()


def _commit(
    repo: Repo,
    tree: pygit2.Oid,
    parents: list[str],
    subject: str,
    undoes: str | None = None,
    *,
    note: bool = False,
) -> str:
    import pygit2

    head = repo.commit_id("HEAD")
    trailers = [f"{_HEAD_TRAILER}: {head or 'none'}", f"{_TIME_TRAILER}: {now_utc()}"]
    if undoes:
        trailers.append(f"{_UNDOES_TRAILER}: {undoes}")
    if note:
        trailers.append(f"{_NOTE_TRAILER}: yes")
    message = f"{subject}\n\n" + "".join(f"{t}\n" for t in trailers)
    try:
        signature = repo.git.default_signature
    except (KeyError, ValueError, pygit2.GitError):  # no user.name: still say which machine
        import socket

        signature = pygit2.Signature("patchguard", f"patchguard@{socket.gethostname()}")
    oids = [pygit2.Oid(hex=p) for p in parents]
    return str(repo.git.create_commit(None, signature, signature, message, tree, oids))


def _move_ref(repo: Repo, new: str, old: str | None, subject: str) -> None:
    """Compare-and-swap: the ref moves only if it still holds `old` (or is still absent)."""
    from guard.git.process import run_git

    update = ["update-ref", "-m", f"patchguard: {subject}", HISTORY_REF, new, old or _NO_REF]
    try:
        run_git(update, repo.workdir)
    except ConfigError:
        if current(repo) != old:
            raise ConfigError(
                f"another patchguard changed the patches at the same moment ({HISTORY_REF} "
                "moved); nothing was changed. Run it again."
            ) from None
        raise


# --- reading the history ---------------------------------------------------------------------


def walk(repo: Repo, start: str | None = None) -> Iterator[Change]:
    """From `start` (default: the ref) back along first parents."""
    oid = start or current(repo)
    while oid is not None:
        change = _change(repo, oid)
        yield change
        oid = change.parent


def _change(repo: Repo, oid: str) -> Change:
    message, committed, parents = _commit_fields(repo, oid)
    subject, _, body = message.partition("\n")
    fields = dict(line.split(": ", 1) for line in body.splitlines() if ": " in line)
    created = float(committed)
    with_time = fields.get(_TIME_TRAILER)
    if with_time:
        with suppress(ValueError):
            created = datetime.fromisoformat(with_time).timestamp()
    head = fields.get(_HEAD_TRAILER)
    return Change(
        commit=oid,
        subject=subject,
        created=created,
        head=None if head in (None, "none") else head,
        undoes=fields.get(_UNDOES_TRAILER),
        parent=parents[0] if parents else None,
        note=_NOTE_TRAILER in fields,
    )


def _commit_fields(repo: Repo, oid: str) -> tuple[str, int, list[str]]:
    """A state's (message, committer time, parent ids), from git's batched cat-file as git
    writes a commit object (headers, a blank line, the message); libgit2 for anything else."""
    found = repo.read_object(oid)
    if found is not None and found[1] == "commit" and b"\n\n" in found[2]:
        headers, _, message = found[2].partition(b"\n\n")
        lines = headers.decode("utf-8", "replace").split("\n")
        parents = [line[7:] for line in lines if line.startswith("parent ")]
        committer = [line.split(" ") for line in lines if line.startswith("committer ")]
        encodings = [line for line in lines if line.startswith("encoding ")]
        timed = len(committer) == 1 and len(committer[0]) >= 3 and committer[0][-2].isdigit()
        if timed and not encodings:  # libgit2 decodes another encoding by its name
            return message.decode("utf-8", "replace"), int(committer[0][-2]), parents
    commit = _commit_at(repo, oid)
    return commit.message, commit.commit_time, [str(p) for p in commit.parent_ids]


def _commit_at(repo: Repo, oid: str) -> pygit2.Commit:
    import pygit2

    return repo.git[oid].peel(pygit2.Commit)


def earlier_versions(repo: Repo, name: str, path: str, depth: int = 20) -> list[FileChange]:
    """What patch `name` held for `path` in the last `depth` states, newest first, each once:
    a worktree may still hold one after the patch was updated elsewhere, and guard.tree.assess
    upgrades it where the definitions alone would call the stale copy applied."""
    found: dict[str, FileChange] = {}
    for change in itertools.islice(walk(repo), depth):
        try:
            patch = manifest_at(repo, change.commit).patch(name)
        except ConfigError:  # a state that is not valid held no version of anything
            continue
        for file_change in patch.files if patch else []:
            if file_change.path == path:
                found.setdefault(file_change.patched_blob, file_change)
    return list(found.values())


EARLIER = "earlier"
LATER = "later"
_MADE_BY = ("re-recorded", "recorded", "fetched", "imported", "resolved")


class Order(NamedTuple):
    """How the version of a patch's file a worktree holds stands to the recorded one: after
    an undo it holds a *later* version, after a fetch an *earlier* one, and the two read
    alike in a file, so it is read from the history, never guessed."""

    held: str  # EARLIER or LATER than the recorded version
    made_by: str  # the change that first held it: "re-recorded", "fetched", ... or ""


def order(repo: Repo, held_blob: str, recorded_blob: str) -> Order | None:
    """By the state that first held each blob: None when the history holds either nowhere.
    Each state pins its blobs in its `blobs/` tree, so that is a tree lookup, no manifest read."""
    import pygit2

    first: dict[str, tuple[int, str]] = {}
    for age, change in enumerate(walk(repo)):  # newest first: the last hit is the oldest
        tree = _commit_at(repo, change.commit).tree
        if BLOBS_ENTRY not in tree:
            continue
        pinned = tree[BLOBS_ENTRY].peel(pygit2.Tree)
        for blob in (held_blob, recorded_blob):
            if blob in pinned:
                first[blob] = (age, change.subject)
    if held_blob not in first or recorded_blob not in first:
        return None
    (held_age, subject), (recorded_age, _) = first[held_blob], first[recorded_blob]
    made_by = next((verb for verb in _MADE_BY if subject.startswith(verb)), "")
    return Order(LATER if held_age < recorded_age else EARLIER, made_by)


def manifest_at(repo: Repo, oid: str | None) -> Manifest:
    """The manifest a state holds, held to the schema: a state pushed in from another
    version, or put on the ref by hand, may not be valid (ConfigError)."""
    if oid is None:
        return Manifest()
    source = f"{HISTORY_REF} at {oid[:10]}"
    raw = repo.file_at(oid, MANIFEST_ENTRY)
    if raw is None:
        # Read as "no patches", a state git cannot give us, or one put together by hand, would
        # tell log, undo and fetch that every patch was dropped there.
        tree = repo.read_object(f"{oid}^{{tree}}")
        held = repo.read_object(f"{oid}:{MANIFEST_ENTRY}")
        raise ConfigError(
            f"{source} "
            + ("is not in this repository" if tree is None else f"holds no {MANIFEST_ENTRY} file")
            + (f" (it is a {held[1]})" if held is not None else "")
            + ": it is not a state of patchguard's history; nothing was read from it"
        )
    return parse_manifest(raw, repo.layout.manifest_path, source=source)


def log_changes(repo: Repo, name: str | None, unknown: str | None = None) -> list[dict[str, Any]]:
    """`patchguard log [NAME]` as --json has it, newest first: entry N is what `show NAME@{N}`
    and `undo --list` call N. A function of the history's tip alone. A state that is not a
    valid manifest changed nothing (its "invalid" says why)."""
    entries = []
    before = Manifest()  # the state before each change: the last valid one, oldest first
    for change in reversed(list(walk(repo))):
        try:
            after, invalid = manifest_at(repo, change.commit), None
        except ConfigError as error:
            after, invalid = before, str(error)
        changed = changed_patches(before, after)
        if name is None or name in changed:
            patches = []
            for patch_name in [name] if name else changed:
                patch = after.patch(patch_name)
                patches.append(
                    {
                        "name": patch_name,
                        "dropped": patch is None,
                        "description": None if patch is None else patch.description,
                    }
                )
            entries.append(
                {
                    "commit": change.commit,
                    "time": datetime.fromtimestamp(change.created).astimezone().isoformat(),
                    "head": change.head,
                    "subject": change.subject,
                    "undoes": change.undoes,
                    "patches": patches,
                    "invalid": invalid,
                }
            )
        before = after
    if name is not None and not entries:
        raise ConfigError(
            unknown
            or f"patch {name} has no history (see `patchguard log` for the patches that have one)"
        )
    return [{"number": number, **entry} for number, entry in enumerate(reversed(entries))]


def patch_version(repo: Repo, text: str) -> Patch:
    """`NAME@{N}`: the patch as change N of `patchguard log NAME` left it."""
    name, _, rest = text.partition("@{")
    if not rest.endswith("}") or not rest[:-1].isdigit():
        raise ConfigError(f"{text}: write NAME@{{N}}, N as `patchguard log {name}` numbers them")
    number = int(rest[:-1])
    found = log_changes(repo, name, f"no patch named {name} in the history; see: patchguard log")
    if number >= len(found):
        raise ConfigError(
            f"patch {name} has {len(found)} version(s) in its history, numbered 0 to "
            f"{len(found) - 1}; see: patchguard log {name}"
        )
    patch = manifest_at(repo, found[number]["commit"]).patch(name)
    if patch is None:
        raise ConfigError(
            f"{text} is the change that dropped {name}; the version before it is "
            f"{name}@{{{number + 1}}}"
        )
    return patch


# --- undo: of both kinds of change, newest first ---------------------------------------------
# A worktree write is kept in the worktree's journal (guard.store.journal), a change to the
# patches here; undo takes back whichever came last, and `undo --list` numbers both from 0 as
# `patchguard log` does: 0 is what `undo` takes back next.

WORKTREE = "worktree"  # an apply, unapply or lift: the files go back
PATCHES = "patches"  # a change to the patches: the manifest goes back


class Undone(NamedTuple):
    """What one undo took back, and the patches it changed."""

    what: str
    patches: list[str]


def undo(repo: Repo) -> Undone:
    from guard.store import journal

    latest = journal.latest_entry(repo)
    changes = undoable(repo)
    if latest is None and not changes:
        raise ConfigError(
            "nothing to undo: no apply or unapply is recorded for this worktree, and the "
            "patches have no change to take back (see: patchguard log)"
        )
    newest = next((e for e in journal.entries(repo) if e.path == latest), None)  # None: damaged
    if latest is not None and (
        not changes or newest is None or newest.created >= changes[0].created
    ):
        entry = journal.undo(repo)  # the newest entry, or a killed one put back
        return Undone(entry.describe(), list(entry.patches))
    change = changes[0]
    try:
        made = manifest_at(repo, change.commit)
    except ConfigError:  # a state that is not valid (pushed from elsewhere): it held nothing
        made = Manifest()
    from guard.store.derived import InvalidHistoryTip

    with repo.lock("undo", store=True):  # a new state holding the manifest from before `change`
        try:
            load_manifest(repo)
        except InvalidHistoryTip as invalid:  # taken back too: the way out its refusal names
            repo.manifest_bytes = invalid.raw  # the state this undo goes on top of
        if current(repo) is None or change not in undoable(repo):
            raise ConfigError("the patches changed meanwhile; nothing was undone. Run it again.")
        restored = manifest_at(repo, change.parent)
        save(repo, restored, f"undid: {change.subject}", undoes=change.commit)
    return Undone(change.describe(), changed_patches(restored, made))


def undo_through(repo: Repo, number: int) -> list[Undone]:
    """Entries 0 to N of `undo --list`, each checked against the list as it stood, so a
    change made meanwhile by another command is never the one taken back."""
    listed = undo_entries(repo)
    if not 0 <= number < len(listed):
        raise ConfigError(
            f"undo {number}: `patchguard undo --list` has {len(listed)} entr"
            f"{'y' if len(listed) == 1 else 'ies'}"
            + (f", numbered 0 to {len(listed) - 1}" if listed else "")
            + "; nothing was undone"
        )
    done: list[Undone] = []
    for expected in listed[: number + 1]:
        now = undo_entries(repo)
        if not now or now[0]["what"] != expected["what"]:
            raise ConfigError(
                f"the list changed while undoing (another command ran); undid {len(done)} of "
                f"{number + 1}. See: patchguard undo --list"
            )
        done.append(undo(repo))
    return done


def undo_entries(repo: Repo) -> list[dict[str, Any]]:
    """Worktree writes and patch changes merged, newest first."""
    from guard.store import journal

    found = [(e.created, WORKTREE, e.describe()) for e in journal.entries(repo)]
    found += [(c.created, PATCHES, c.describe()) for c in undoable(repo)]
    found.sort(key=lambda item: item[0], reverse=True)
    return [
        {
            "number": number,
            "kind": kind,
            "time": datetime.fromtimestamp(created).astimezone().isoformat(),
            "what": what,
        }
        for number, (created, kind, what) in enumerate(found)
    ]


def undoable(repo: Repo) -> list[Change]:
    """The changes `undo` can take back, newest first: not an undo, not one undone, and not
    the manifest as it was found (there was no state before it to go back to)."""
    undone: set[str] = set()
    found = []
    for change in walk(repo):
        if change.undoes is not None:
            undone.add(change.undoes)
        elif change.commit in undone or change.note:
            continue
        elif change.parent is not None or change.subject not in (TAKEN_OVER, STARTED):
            found.append(change)
    return found
