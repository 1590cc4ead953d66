"""All-or-nothing writes with undo, for apply, unapply, undo and drop.

Each operation gets an entry under the worktree's git dir: the old bytes (and permission bits)
of every file it touches, in one pack, and the mark `writing`, flushed with three fsyncs however
many files (Journal.mark_writing). Only then are the files replaced, each atomically but not
flushed (as git does not flush a checkout: the pack holds their old bytes), and the entry marked
`done`, for `patchguard undo`. So a set of files changes whole or not at all: a write that fails
puts back the files written before it, and a writer killed in between leaves its entry
`writing`, which the next writer puts back first (recover). Kept bytes carry their blob id, so
a damaged copy is never put back.
"""

from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from guard.errors import ConfigError, GuardFailure
from guard.git import faults
from guard.git.atomic import TEMP_SUFFIX, atomic_write
from guard.git.gitpaths import JOURNAL_FILE, UNDO_DIR_NAME
from guard.git.objects import blob_id
from guard.git.worktree_paths import UnsafePath, one_walk

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from guard.git.repo import Repo

KEEP_ENTRIES = 10
PACK_FILE = "before.pack"  # the old bytes of every file of the entry, flushed with one fsync
WRITING = "writing"  # the old bytes are kept; files may be half replaced
DONE = "done"  # every file is replaced: an entry for `undo`
_passing = False  # inside passing(): the writes are a hunt's own moves, not the user's


@contextmanager
def passing() -> Iterator[None]:
    """Writes that are all or nothing as ever, but leave nothing for `undo`: a regression
    hunt's own moves, which the user did not make (the hunt puts the tree back), so `undo`
    still takes back the user's last change, and the user's entries are not pruned for them."""
    global _passing
    before, _passing = _passing, True
    try:
        yield
    finally:
        _passing = before


class Journal:
    """The record of one operation's writes, kept before the working files it describes."""

    def __init__(self, git_dir: Path, operation: str) -> None:
        self.root = git_dir / UNDO_DIR_NAME
        self.operation = operation
        self.entry: Path | None = None
        self.files: list[dict[str, Any]] = []
        self.patches: list[str] = []
        self._writes: dict[str, tuple[bytes | None, int | None]] = {}  # path: (after, its mode)
        self._kept = bytearray()  # every file's old bytes, one after the other (PACK_FILE)

    def before_write(
        self,
        path: str,
        before: bytes | None,
        after: bytes | None,
        patch: str,
        modes: tuple[int | None, int | None] = (None, None),
    ) -> None:
        """`after` None deletes; `modes`: the file's permission bits before, and those a file
        that is created gets. Nothing is on disk before write(): discarding changes nothing."""
        if patch not in self.patches:
            self.patches.append(patch)
        after_blob = None if after is None else blob_id(after)
        known = next((f for f in self.files if f["path"] == path), None)
        if known is not None:  # a second patch on the same file: the first `before` stands
            known["after_blob"] = after_blob
            created_mode = self._writes[path][1]
        else:
            kept: dict[str, Any] = {"before": None}
            if before is not None:
                kept = {
                    "before": PACK_FILE,
                    "offset": len(self._kept),
                    "size": len(before),
                    "before_blob": blob_id(before),
                }
                self._kept += before
            self.files.append(
                {"path": path, **kept, "before_mode": modes[0], "after_blob": after_blob}
            )
            created_mode = modes[1]
        self._writes[path] = (after, created_mode)

    def write(self, repo: Repo) -> None:
        if not self._writes:
            return
        entry = self.mark_writing()
        faults.point("journal-marked")
        with one_walk():  # one package's directories walked once, however many files
            for path, (after, mode) in self._writes.items():
                try:
                    _put(repo, path, after, mode)
                    faults.point("journal-first-file")
                except OSError as error:
                    stuck, said = _roll_back(repo, entry, self._record(WRITING))
                    if not stuck:
                        self.discard()
                    raise ConfigError(
                        f"cannot write {path}: {error.strerror}; {said}. Free space or "
                        "make it writable, then run the command again."
                    ) from None
        faults.point("journal-written")
        if _passing:  # every file is written: the entry has served its all-or-nothing
            self.discard()
            return
        self._save(DONE, durable=False)  # lost: recover() finds every file as written

    def mark_writing(self) -> Path:
        """The one flushed step. Three fsyncs: the pack, the journal, then the entry's
        directory, which makes both names durable at once. A power loss before that may keep the
        journal's name without the pack's, but then no file was written yet, and recover() reads
        the entry as one killed before its journal."""
        try:  # the old bytes first, then the mark that names them
            self.root.mkdir(parents=True, exist_ok=True)
            entries = [] if _passing else _entries(self.root)  # a passing entry is gone at once
            for stale in entries[: max(0, len(entries) - KEEP_ENTRIES + 1)]:
                _remove_tree(stale)
            entry = self.root / f"{time.time_ns():020d}-{self.operation}"
            entry.mkdir()
            self.entry = entry
            with open(entry / PACK_FILE, "xb") as pack:
                pack.write(self._kept)
                pack.flush()
                os.fsync(pack.fileno())
            self._save(WRITING, durable=True)
            return entry
        except OSError as error:
            paths = ", ".join(self._writes)  # before discard() forgets them
            self.discard()
            raise ConfigError(
                f"cannot keep the undo copy of {paths} in {self.root}: "
                f"{error.strerror}; nothing was changed (free space, or make the git dir writable)"
            ) from None

    def discard(self) -> None:
        """Forget the entry: the change it was for did not happen."""
        if self.entry is not None:
            _remove_tree(self.entry)
        self.entry, self.files, self.patches = None, [], []
        self._writes, self._kept = {}, bytearray()

    def _record(self, state: str) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "state": state,
            "patches": self.patches,
            "created": time.time(),
            "files": self.files,
        }

    def _save(self, state: str, *, durable: bool) -> None:
        assert self.entry is not None
        raw = json.dumps(self._record(state), indent=2).encode()
        atomic_write(self.entry / JOURNAL_FILE, raw, durable=durable)


def _put(repo: Repo, path: str, content: bytes | None, mode: int | None) -> None:
    if content is None:
        repo.worktree_path(path).unlink(missing_ok=True)
    else:
        repo.write_raw(path, content, mode)


def _roll_back(repo: Repo, entry: Path, record: dict[str, Any]) -> tuple[list[str], str]:
    """Put every file the entry wrote back as it was before; leave files nobody wrote alone.
    Returns the files left neither as before nor as written, and what became of each file."""
    stuck = (
        f"not put back (its earlier content is kept in {entry}; the next patchguard apply, "
        "unapply or undo tries again)"
    )
    fates: dict[str, list[str]] = {"put back as it was": [], "not touched": [], stuck: []}
    for item in reversed(record["files"]):
        path = item["path"]
        try:
            before = kept_before(entry, item)
        except GuardFailure:
            fates[stuck].insert(0, path)  # its copy did not survive: keep what was written
            continue
        current = repo.read_raw(path)
        if current == before:
            fate = "not touched"
        elif not _as_written(current, item):
            fate = stuck  # not what this entry wrote: keep that edit
        else:
            try:
                _put(repo, path, before, item.get("before_mode"))
            except OSError:
                fate = stuck
            else:
                fate = "put back as it was"
        fates[fate].insert(0, path)
    said = "; ".join(f"{', '.join(paths)} {fate}" for fate, paths in fates.items() if paths)
    return fates[stuck], ("" if fates[stuck] else "nothing was changed: ") + said


def recover(repo: Repo) -> Entry | None:
    """Finish what a killed writer left, before anything else is written (under the lock);
    returns the entry whose files were put back, if any. Every writer of entries calls this
    first, so only the newest entry can be unfinished, and only it is read: the hooks pay for
    one entry, not ten."""
    root = repo.layout.git_dir / UNDO_DIR_NAME
    try:
        path = root / max(filter(_is_entry_name, os.listdir(root)))  # names sort by time
        for name in os.listdir(path):  # atomic_write's temp files, beside each kept file
            if name.endswith(TEMP_SUFFIX):
                (path / name).unlink(missing_ok=True)
    except (OSError, ValueError):  # no undo directory, no entry in it, or a file named as one
        return None
    try:
        record = json.loads((path / JOURNAL_FILE).read_text())
        if record.get("state", DONE) != WRITING:
            return None
        entry = _entry(path, record)
        lost_pack = not (path / PACK_FILE).exists() and any(
            item.get("before") == PACK_FILE for item in record["files"]
        )
    except FileNotFoundError:  # killed before its journal
        lost_pack = True
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # damaged: `undo` says so when it gets there
    if lost_pack:  # or a power loss before mark_writing's last fsync: nothing was written for it
        _remove_tree(path)
        return None
    # Every file as written: it is done. Otherwise its files go back, but one edited since
    # stays as edited: then `undo` lists the entry, and refuses to lose that edit.
    written = all(_as_written(repo.read_raw(item["path"]), item) for item in record["files"])
    if written or _roll_back(repo, path, record)[0]:
        atomic_write(path / JOURNAL_FILE, json.dumps({**record, "state": DONE}, indent=2).encode())
        return None
    _remove_tree(path)
    return entry


def _is_entry_name(name: str) -> bool:
    """Named as mark_writing names an entry: a stray file or directory beside the entries
    (which may sort after them) is neither recovered nor removed."""
    return name[:20].isdigit() and name[20:21] == "-"


def _as_written(current: bytes | None, item: dict[str, Any]) -> bool:
    """Is `current` what the entry wrote to the file (None: it deleted it)?"""
    return bool((None if current is None else blob_id(current)) == item["after_blob"])


def _entries(root: Path) -> list[Path]:
    """The entries, oldest first, by the one rule recover() uses too (_is_entry_name)."""
    if not root.is_dir():
        return []
    found = (p for p in root.iterdir() if _is_entry_name(p.name))
    return sorted(p for p in found if (p / JOURNAL_FILE).is_file())


class Entry(NamedTuple):
    """One apply, unapply or drop that `undo` can revert."""

    path: Path
    operation: str
    patches: list[str]
    created: float
    files: list[str]
    interrupted: bool = False  # a killed writer's: the next writer puts its files back

    def describe(self) -> str:
        """e.g. "the unapply of eagle3 at 2026-12-01 03:59:12 (path/to/file.py)"."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created))
        names = ", ".join(self.patches) or "patches"
        files = f" ({', '.join(self.files)})" if self.files else ""
        state = "interrupted " if self.interrupted else ""
        return f"the {state}{self.operation} of {names} at {when}{files}"


def entries(repo: Repo) -> list[Entry]:
    """What `undo` can revert, newest first; a damaged entry is left out."""
    found = []
    for path in reversed(_entries(repo.layout.git_dir / UNDO_DIR_NAME)):
        try:
            found.append(_read(path)[0])
        except GuardFailure:
            continue
    return found


def latest_entry(repo: Repo) -> Path | None:
    found = _entries(repo.layout.git_dir / UNDO_DIR_NAME)
    return found[-1] if found else None


def _read(path: Path) -> tuple[Entry, dict[str, Any]]:
    try:
        record = json.loads((path / JOURNAL_FILE).read_text())
        return _entry(path, record), record
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise GuardFailure(f"the undo entry {path.name} is gone or damaged") from None


def _entry(path: Path, record: dict[str, Any]) -> Entry:
    return Entry(
        path,
        str(record["operation"]),
        [str(name) for name in record.get("patches", [])],
        float(record["created"]),
        [str(item["path"]) for item in record["files"]],
        record.get("state", DONE) == WRITING,
    )


def undo(repo: Repo, entry_path: Path | None = None) -> Entry:
    """Put back the files of the last operation (or of one entry), as one more journaled
    write; refuse if any was edited since. It changes no patch (guard.store.history.undo
    does), so a move's own put-back never waits for another worktree's record."""
    with repo.lock("undo"):
        recovered = recover(repo)
        if recovered is not None and entry_path is None:  # killed half done: the last undo
            return recovered
        entry_path = entry_path or latest_entry(repo)
        if entry_path is None:
            raise ConfigError(
                "nothing to undo: no apply, unapply or drop is recorded for this worktree"
            )
        entry, record = _read(entry_path)
        restores: list[tuple[str, bytes | None, bytes | None, int | None]] = []
        edited = []
        for item in record["files"]:
            before = kept_before(entry_path, item)
            try:
                current = repo.read_raw(item["path"])
            except UnsafePath:  # a link now (a checkout since): never restored through
                edited.append(item["path"])
                continue
            if not _as_written(current, item) and current != before:
                edited.append(item["path"])
            restores.append((item["path"], current, before, item.get("before_mode")))
        if edited:
            raise GuardFailure(
                f"not undone: {', '.join(edited)} changed after the last {entry.operation}, and "
                "undo would lose those edits. Save them elsewhere, then run patchguard undo again."
            )
        putting_back = Journal(repo.layout.git_dir, "undo")
        for path, current, before, mode in reversed(restores):
            putting_back.before_write(
                path, current, before, ", ".join(entry.patches), (repo.permissions(path), mode)
            )
        putting_back.write(repo)
        # the entry first: a kill before the next line leaves an undo to redo
        _remove_tree(entry_path)
        putting_back.discard()
        return entry


def forget(entry: Path) -> None:
    """Drop one finished entry that is no change of the user's (a regression hunt's own lift,
    put back to other bytes or left by a killed hunt); anything but an entry is left alone."""
    if entry.parent.name == UNDO_DIR_NAME and (entry / JOURNAL_FILE).is_file():
        _remove_tree(entry)


def kept_before(entry: Path, item: dict[str, Any]) -> bytes | None:
    """The bytes an entry kept of a file before it wrote it (None: there was no file);
    GuardFailure when the copy is not the one kept (torn by a power loss). An earlier
    patchguard kept one file each, with no blob id to check against."""
    if not item["before"]:
        return None
    try:
        with (entry / str(item["before"])).open("rb") as kept:
            if "offset" in item:
                kept.seek(int(item["offset"]))
                before = kept.read(int(item["size"]))
            else:
                before = kept.read()
    except OSError:  # deleted by hand, or by a tool cleaning .git
        raise GuardFailure(f"the undo entry {entry.name} is gone or damaged") from None
    if item.get("before_blob", blob_id(before)) != blob_id(before):
        raise GuardFailure(
            f"the undo copy of {item['path']} in {entry} is damaged (its bytes are not the ones "
            "kept); the file is left as it is"
        )
    return before


def _remove_tree(path: Path) -> None:
    """An entry's files, then the entry, ignoring errors; shutil.rmtree only for what else is
    in it: shutil loads the bz2 and lzma modules, which every re-apply would pay for."""
    try:
        for name in os.listdir(path):
            os.unlink(path / name)
        os.rmdir(path)
    except OSError:
        import shutil

        shutil.rmtree(path, ignore_errors=True)
