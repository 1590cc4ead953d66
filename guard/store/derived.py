"""manifest.json, derived from the history ref: how every reader gets the patches.

The hooks read manifest.json, a copy of the history's newest state that names the commit it was
made from (manifest.from). A reader that finds the copy stale (the ref moved, or a change was cut
off) rebuilds it from the ref, so the next command completes what a killed writer began before
it decides anything. An invalid newest state is refused, never copied.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from guard.errors import ConfigError
from guard.git.atomic import atomic_write
from guard.git.gitdir import Layout, read_manifest_bytes
from guard.git.gitpaths import HISTORY_REF
from guard.git.lock import if_free
from guard.git.objects import blob_id
from guard.git.repo import Repo
from guard.store.fastpath import derived_from_history
from guard.store.manifest import Manifest, parse_manifest, save_manifest

MANIFEST_ENTRY = "manifest.json"  # in the tree of each state of the history
_EARLIER_STATES = 50  # how far back a stale manifest.json, or the last valid state, is looked for


class InvalidHistoryTip(ConfigError):
    """The history ref's newest state is not a valid manifest; `undo` takes it back."""

    def __init__(self, message: str, raw: bytes) -> None:
        super().__init__(message)
        self.raw = raw


def derive_manifest(layout: Layout, raw: bytes, commit: str) -> None:
    """manifest.json from the history commit `commit`, then the name of that commit, then the
    transaction file gone: the last steps of every change to the patches."""
    save_manifest(layout.manifest_path, raw)
    try:
        atomic_write(layout.derived_from_path, f"{commit}\n".encode())
        layout.transaction_path.unlink(missing_ok=True)
    except OSError as error:  # a directory in its place, a read-only store
        raise ConfigError(
            f"cannot write {layout.derived_from_path}: {error.strerror}; remove what stands "
            "there, or run patchguard as a user who can write the repository, then run the "
            "command again"
        ) from None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def load_manifest(repo: Repo, missing_ok: bool = False) -> Manifest:
    """The patches as the history holds them now, validated; the bytes are kept in
    `manifest_bytes` (for the verified cache, and as the base a writer changes)."""
    path = repo.layout.manifest_path
    held = _history_if_derived_is_stale(repo)
    if held is not None:
        repo.manifest_bytes = held
        return parse_manifest(held, path)
    if missing_ok and not path.exists():
        repo.manifest_bytes = b""
        return Manifest()
    repo.manifest_bytes = read_manifest_bytes(path)
    return parse_manifest(repo.manifest_bytes, path, remedy=_derived_remedy(repo))


def _history_if_derived_is_stale(repo: Repo) -> bytes | None:
    """The history's manifest (validated) when manifest.json lags the ref or is gone; else
    None (manifest.json is the truth to read). Two small file reads when all is well, and no
    git. A hand edit stays, for the next change to take over (history._parent_for), unless the
    ref moved meanwhile too: then neither is chosen for the user."""
    layout = repo.layout
    try:
        derived: bytes | None = layout.manifest_path.read_bytes()
    except OSError:
        derived = None
    if derived is not None and derived_from_history(str(layout.common_dir)):
        return None
    cut_off = layout.transaction_path.exists()
    named = _read_text(layout.derived_from_path)
    found = repo.read_object(HISTORY_REF)
    if found is None:
        return None
    if found[1] != "commit":
        raise ConfigError(not_a_commit(repo, found[0], found[1]))
    tip = found[0]
    held = _valid_history_manifest(repo, tip)
    ours = None if derived is None else blob_id(derived)
    if (  # gone, or an earlier state (a kill after the ref moved, a push into this checkout)
        ours is None
        or ours == blob_id(held)
        or cut_off
        or (named is not None and ours == repo.object_id(f"{named}:{MANIFEST_ENTRY}", "blob"))
        or _is_earlier_state(repo, tip, ours)
    ):
        _derive(repo, held, tip)
        return held
    if named is not None and named != tip:
        raise ConfigError(
            f"{layout.manifest_path} was edited by hand, and {HISTORY_REF} moved since it "
            f"was derived (from {named[:10]} to {tip[:10]}: a push into this checkout?); "
            "nothing was changed. Keep the history's patches: delete the file, and it is "
            "derived again. Keep your edit: make it again after that, with patchguard "
            "record or require."
        )
    return None


def _is_earlier_state(repo: Repo, tip: str, blob: str) -> bool:
    """Is `blob` the manifest of one of the newest states of the history below `tip`?"""
    names = [f"{tip}~{depth}:{MANIFEST_ENTRY}" for depth in range(1, _EARLIER_STATES)]
    return any(found and found[0] == blob for found in repo.read_objects(names))


def _derived_remedy(repo: Repo) -> str | None:
    """What to do about a manifest.json the schema refuses, where a history holds the
    patches: deleting it loses nothing but a hand edit."""
    if repo.layout.history_tip() is None:
        return None
    return (
        f"it is derived from {HISTORY_REF}: delete it and patchguard derives it again "
        "(losing only an edit made to it by hand), or fix that edit"
    )


def not_a_commit(repo: Repo, oid: str, kind: str) -> str:
    """The refusal of a history ref that is no commit, with the way back where there is one."""
    known = _read_text(repo.layout.derived_from_path)
    if known is not None and repo.object_id(known, "commit"):
        way_back = f"put it back where it was: git update-ref {HISTORY_REF} {known}"
    else:
        way_back = (
            "delete it to start the history again from manifest.json: "
            f"git update-ref -d {HISTORY_REF}"
        )
    return (
        f"{HISTORY_REF} points at a {kind} ({oid[:10]}), not a commit: patchguard's history "
        f"is a chain of commits, so nothing was read or changed. To go on, {way_back}"
    )


def _valid_history_manifest(repo: Repo, tip: str) -> bytes:
    """The manifest of the history's newest state, refused when the schema refuses it (a
    push from another version, a hand update-ref), naming the last valid version."""
    held = repo.file_at(tip, MANIFEST_ENTRY)
    where = f"{HISTORY_REF} at {tip[:10]} ({_subject(repo, tip)})"
    if held is None:
        raise InvalidHistoryTip(
            f"{where} holds no manifest.json: it is not a state of patchguard's history; "
            f"{_way_back(repo, tip, undo=False)}",
            b"",
        )
    try:
        parse_manifest(held, repo.layout.manifest_path)
    except ConfigError:
        from guard.store.schema import validate_manifest  # pydantic: only for a refusal

        try:
            validate_manifest(held, Path(where), remedy=_way_back(repo, tip))
        except ConfigError as error:
            raise InvalidHistoryTip(str(error), held) from None
        raise
    return held


def _way_back(repo: Repo, tip: str, *, undo: bool = True) -> str:
    """The last valid state below `tip` (or, off its line, the one manifest.json was
    derived from), and the command that returns to it: `undo` where that is one step."""
    known = _read_text(repo.layout.derived_from_path)
    candidates = [f"{tip}~{depth}" for depth in range(1, _EARLIER_STATES)]
    for name in [*candidates, *([known] if known else [])]:
        found = repo.read_object(name)
        if found is None or found[1] != "commit":
            continue
        raw = repo.file_at(found[0], MANIFEST_ENTRY)
        if raw is None:
            continue
        try:
            parse_manifest(raw, repo.layout.manifest_path)
        except ConfigError:
            continue
        back = (
            "`patchguard undo` takes the bad change back"
            if undo and name == candidates[0]
            else f"put it back: git update-ref {HISTORY_REF} {found[0]}"
        )
        return (
            f"nothing was read from it. The last valid version is {found[0][:10]} "
            f"({_subject(repo, found[0])}); {back}"
        )
    return (
        "nothing was read from it, and no earlier version is valid either; delete the ref "
        f"to start again from manifest.json: git update-ref -d {HISTORY_REF}"
    )


def _subject(repo: Repo, commit: str) -> str:
    found = repo.read_object(commit)
    message = found[2].split(b"\n\n", 1)[-1] if found is not None else b""
    return message.split(b"\n", 1)[0].decode(errors="replace") or "no subject"


def _derive(repo: Repo, held: bytes, tip: str) -> None:
    """Rebuild manifest.json from the ref, unless another patchguard is changing the patches
    (it derives its own) or the ref moved off `tip`; a read-only store stays as it is."""
    with if_free(repo.layout.store_lock_path) as free:
        now = repo.read_object(HISTORY_REF) if free else None
        if now is not None and now[0] == tip:
            with suppress(ConfigError):
                derive_manifest(repo.layout, held, tip)
