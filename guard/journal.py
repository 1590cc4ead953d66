"""Undo for apply and unapply: before a working file changes, its old bytes are kept.

Each operation gets an entry under the worktree's git dir: the previous content of every file
it touches, saved (and fsynced) before the file is replaced. `patchguard undo` puts the last
entry back. Only the newest entries are kept.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from guard.atomic import atomic_write
from guard.errors import ConfigError, GuardFailure
from guard.fastpath import blob_id

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

    def before_write(self, path: str, before: bytes | None, after: bytes | None) -> None:
        """Keep `before` durably; only then may the caller replace the file."""
        if self.entry is None:
            self.entry = self._new_entry()
        after_blob = None if after is None else blob_id(after)
        known = next((f for f in self.files if f["path"] == path), None)
        if known is not None:  # a second patch on the same file: the first `before` stands
            known["after_blob"] = after_blob
        else:
            saved = None
            if before is not None:
                saved = f"before-{len(self.files)}"
                atomic_write(self.entry / saved, before)
            self.files.append({"path": path, "before": saved, "after_blob": after_blob})
        record = {"operation": self.operation, "created": time.time(), "files": self.files}
        atomic_write(self.entry / "journal.json", json.dumps(record, indent=2).encode())

    def _new_entry(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        entries = _entries(self.root)
        for stale in entries[: max(0, len(entries) - KEEP_ENTRIES + 1)]:
            shutil.rmtree(stale, ignore_errors=True)
        entry = self.root / f"{time.time_ns():020d}-{self.operation}"
        entry.mkdir()
        return entry


def _entries(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "journal.json").is_file())


def latest_entry(repo: Repo) -> Path | None:
    entries = _entries(repo.layout.git_dir / UNDO_DIR_NAME)
    return entries[-1] if entries else None


def undo(repo: Repo, entry: Path | None = None) -> tuple[str, list[str]]:
    """Put back the files of the last apply/unapply (or of `entry`); refuse if any was edited since."""
    entry = entry or latest_entry(repo)
    if entry is None:
        raise ConfigError("nothing to undo: no apply or unapply is recorded for this worktree")
    try:
        record = json.loads((entry / "journal.json").read_text())
    except (OSError, ValueError):
        raise GuardFailure(f"the undo entry {entry.name} is gone or damaged") from None
    restores: list[tuple[str, bytes | None]] = []
    edited = []
    for item in record["files"]:
        before = (entry / item["before"]).read_bytes() if item["before"] else None
        current = repo.read_file(item["path"])
        current_blob = None if current is None else blob_id(current)
        if current_blob != item["after_blob"] and current != before:
            edited.append(item["path"])
        restores.append((item["path"], before))
    if edited:
        raise GuardFailure(
            f"not undone: {', '.join(edited)} changed after the last {record['operation']}, and "
            "undo would lose those edits. Save them elsewhere, then run patchguard undo again."
        )
    for path, before in reversed(restores):
        if before is None:
            repo.delete_file(path)
        else:
            repo.write_file(path, before)
    shutil.rmtree(entry)
    return record["operation"], [path for path, _ in restores]
