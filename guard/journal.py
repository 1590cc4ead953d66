"""Undo for apply and unapply: before a working file changes, its old bytes are kept.

Each operation gets an entry under the worktree's git dir: the previous content of every file
it touches, saved (and fsynced) before the file is replaced. `patchguard undo` puts the last
entry back. Only the newest entries are kept.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from guard.atomic import atomic_write
from guard.errors import ConfigError, GuardFailure
from guard.fastpath import blob_id
from guard.manifest import parse_manifest
from guard.worktree_paths import UnsafePath

TYPE_CHECKING = False  # not `from typing import ...`: typing costs the hooks ~3 ms
if TYPE_CHECKING:
    from guard.repo import Repo

UNDO_DIR_NAME = "patchguard-undo"
KEEP_ENTRIES = 10


class Journal:
    """The record of one apply/unapply, written before the working files it describes."""

    def __init__(self, git_dir: Path, operation: str) -> None:
        self.root = git_dir / UNDO_DIR_NAME
        self.operation = operation
        self.entry: Path | None = None
        self.files: list[dict[str, str | None]] = []
        self.patches: list[str] = []

    def before_write(
        self, path: str, before: bytes | None, after: bytes | None, patch: str
    ) -> None:
        """Keep `before` durably; only then may the caller replace the file."""
        if self.entry is not None:
            self._keep(self.entry, path, before, after, patch)
            return
        self.entry = self._new_entry()
        try:
            self._keep(self.entry, path, before, after, patch)
        except OSError:  # nothing was kept: leave no half-made entry behind
            _remove_tree(self.entry)
            self.entry, self.files, self.patches = None, [], []
            raise

    def _keep(
        self, entry: Path, path: str, before: bytes | None, after: bytes | None, patch: str
    ) -> None:
        if patch not in self.patches:
            self.patches.append(patch)
        after_blob = None if after is None else blob_id(after)
        known = next((f for f in self.files if f["path"] == path), None)
        if known is not None:  # a second patch on the same file: the first `before` stands
            known["after_blob"] = after_blob
        else:
            saved = None
            if before is not None:
                saved = f"before-{len(self.files)}"
                atomic_write(entry / saved, before)
            self.files.append({"path": path, "before": saved, "after_blob": after_blob})
        self._save()

    def _save(self) -> None:
        assert self.entry is not None
        record = {
            "operation": self.operation,
            "patches": self.patches,
            "created": time.time(),
            "files": self.files,
        }
        atomic_write(self.entry / "journal.json", json.dumps(record, indent=2).encode())

    def _new_entry(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        entries = _entries(self.root)
        for stale in entries[: max(0, len(entries) - KEEP_ENTRIES + 1)]:
            _remove_tree(stale)
        entry = self.root / f"{time.time_ns():020d}-{self.operation}"
        entry.mkdir()
        return entry


def _entries(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "journal.json").is_file())


@dataclass(frozen=True)
class Entry:
    """One apply or unapply that `undo` can revert."""

    path: Path
    operation: str
    patches: list[str]
    created: float
    files: list[str]

    def describe(self) -> str:
        """e.g. "the unapply of eagle3 at 2026-12-01 03:59:12 (path/to/file.py)"."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created))
        names = ", ".join(self.patches) or "patches"
        files = f" ({', '.join(self.files)})" if self.files else ""
        return f"the {self.operation} of {names} at {when}{files}"


def entries(repo: Repo) -> list[Entry]:
    """What `undo` can revert, newest first; a damaged entry is left out."""
    found = []
    for path in reversed(_entries(repo.layout.git_dir / UNDO_DIR_NAME)):
        try:
            found.append(_read(path))
        except GuardFailure:
            continue
    return found


def latest_entry(repo: Repo) -> Path | None:
    found = _entries(repo.layout.git_dir / UNDO_DIR_NAME)
    return found[-1] if found else None


def _read(path: Path) -> Entry:
    try:
        record = json.loads((path / "journal.json").read_text())
        return Entry(
            path,
            str(record["operation"]),
            [str(name) for name in record.get("patches", [])],
            float(record["created"]),
            [str(item["path"]) for item in record["files"]],
        )
    except (OSError, ValueError, KeyError, TypeError):
        raise GuardFailure(f"the undo entry {path.name} is gone or damaged") from None


def undo(repo: Repo, entry_path: Path | None = None) -> Entry:
    """Put back the files of the last apply/unapply (or of one entry); refuse if any was edited since."""
    entry_path = entry_path or latest_entry(repo)
    if entry_path is None:
        raise ConfigError(
            "nothing to undo: no apply, unapply or drop is recorded for this worktree"
        )
    entry = _read(entry_path)
    record = json.loads((entry_path / "journal.json").read_text())
    restores: list[tuple[str, bytes | None]] = []
    edited = []
    for item in record["files"]:
        before = (entry_path / item["before"]).read_bytes() if item["before"] else None
        try:
            current = repo.read_raw(item["path"])
        except UnsafePath:  # a link now (a checkout since): never restored through
            edited.append(item["path"])
            continue
        current_blob = None if current is None else blob_id(current)
        if current_blob != item["after_blob"] and current != before:
            edited.append(item["path"])
        restores.append((item["path"], before))
    manifest = record.get("manifest")
    if manifest and blob_id(repo.layout.manifest_path.read_bytes()) != manifest["after_blob"]:
        edited.append(str(repo.layout.manifest_path))
    if edited:
        raise GuardFailure(
            f"not undone: {', '.join(edited)} changed after the last {entry.operation}, and "
            "undo would lose those edits. Save them elsewhere, then run patchguard undo again."
        )
    if manifest:  # an entry from before the history (guard.history): a drop or resolve
        saved = (entry_path / manifest["before"]).read_bytes()
        repo.load_manifest()
        repo.save_manifest(
            parse_manifest(saved, repo.layout.manifest_path), f"undid: {entry.describe()}"
        )
    for path, before in reversed(restores):
        if before is None:
            repo.delete_file(path)
        else:
            repo.write_raw(path, before)
    _remove_tree(entry_path)
    return entry


def _remove_tree(path: Path) -> None:
    import shutil  # only when an entry goes

    shutil.rmtree(path, ignore_errors=True)
