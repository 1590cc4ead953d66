"""The manifest: which patches exist, what they change, and which symbols they guarantee.

The runtime records are NamedTuples, cheap to define for every command (no code changes a list
of theirs in place, so an empty default is shared); they mirror guard.store.schema's models (a
test keeps them in step). Importing pydantic costs more than a whole hook, so the content hash of
every manifest that passed the schema is remembered beside it, and the same bytes are then read
with json alone; in the namespace of patchguard's own code: another version's schema may refuse
what this one's passed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, NamedTuple

from guard.errors import ConfigError
from guard.git.atomic import atomic_write
from guard.git.objects import REGULAR_MODE, blob_id
from guard.git.own_code import model_namespace

SCHEMA_VERSION = 1
VALIDATED_FILE = "validated"  # beside manifest.json: content hashes that passed the schema
_KEEP_VALIDATED = 16


class Resolution(NamedTuple):
    """The same change, made by hand on another version of upstream's file (`resolve`)."""

    base_blob: str  # upstream's file where it was resolved (HEAD's, at `commit`)
    patched_blob: str
    diff: str
    commit: str
    created_at: str


class FileChange(NamedTuple):
    """One file of a patch, as recorded: enough to re-apply it by 3-way merge."""

    path: str
    base_blob: str | None
    patched_blob: str
    diff: str
    added_symbols: list[str] = []  # noqa: RUF012
    mode: str = REGULAR_MODE  # git's file mode: a file the patch creates gets it back
    resolutions: list[Resolution] = []  # noqa: RUF012


class Patch(NamedTuple):
    """A named local change that patchguard keeps in the working tree."""

    name: str
    description: str
    created_at: str  # ISO 8601, UTC
    base_commit: str
    files: list[FileChange]
    requires: list[str] = []  # noqa: RUF012


class Manifest(NamedTuple):
    """Everything patchguard guards in one repository (shared by its linked worktrees)."""

    schema_version: int = SCHEMA_VERSION
    patches: list[Patch] = []  # noqa: RUF012
    guards: list[str] = []  # noqa: RUF012

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        """The records of JSON the schema passed, which may leave out a field with a default."""
        patches = []
        for patch in data.get("patches", []):
            files = []
            for change in patch["files"]:
                resolutions = [Resolution(**r) for r in change.get("resolutions", [])]
                files.append(FileChange(**{**change, "resolutions": resolutions}))
            patches.append(Patch(**{"description": "", **patch, "files": files}))
        return cls(**{**data, "patches": patches})

    def patch(self, name: str) -> Patch | None:
        return next((p for p in self.patches if p.name == name), None)

    def blob_ids(self) -> set[str]:
        """Every blob the manifest refers to; these are pinned against gc."""
        return {
            oid
            for patch in self.patches
            for change in patch.files
            for oid in (
                change.base_blob,
                change.patched_blob,
                *(blob for r in change.resolutions for blob in (r.base_blob, r.patched_blob)),
            )
            if oid is not None
        }


def as_dict(record: Resolution | FileChange | Patch | Manifest) -> dict[str, Any]:
    """A record of this module as JSON holds it: its fields, the records in its lists too."""
    return {
        name: [as_dict(v) if isinstance(v, FileChange | Patch | Resolution) else v for v in value]
        if isinstance(value, list)
        else value
        for name, value in record._asdict().items()
    }


def changed_patches(before: Manifest, after: Manifest) -> list[str]:
    """The patches whose recording differs from `before` to `after` (added and dropped too)."""
    names = dict.fromkeys(p.name for p in after.patches + before.patches)
    return [name for name in names if after.patch(name) != before.patch(name)]


def select_patches(
    manifest: Manifest, names: Sequence[str], hint: str = ". See `patchguard list`."
) -> list[Patch]:
    """Patches by name in manifest order; all of them when no names are given. `hint` ends
    the refusal of an unknown name; `{}` in it is the first unknown name."""
    unknown = [n for n in names if manifest.patch(n) is None]
    if unknown:
        known = ", ".join(p.name for p in manifest.patches) or "none"
        raise ConfigError(
            f"no patch named {', '.join(unknown)} (recorded: {known})" + hint.format(unknown[0])
        )
    return [p for p in manifest.patches if not names or p.name in names]


def parse_manifest(
    raw: bytes, path: Path, *, source: str | None = None, remedy: str | None = None
) -> Manifest:
    """`path` is the manifest.json beside which validated contents are remembered; `source`
    names where `raw` came from in a refusal (default: that path)."""
    digest = validated_key(raw)
    if digest in _validated(path):
        return Manifest.from_dict(json.loads(raw))
    from guard.store.schema import validate_manifest

    data = validate_manifest(raw, Path(source) if source else path, remedy=remedy)
    _remember_validated(path, digest)
    return Manifest.from_dict(data)


def validated_bytes(manifest: Manifest) -> bytes:
    """The bytes of a manifest about to be written, refused when the schema would refuse them."""
    from guard.store import schema

    data = as_dict(manifest)
    schema.validate_data(schema.Manifest, data, "refusing to write an invalid manifest")
    return (json.dumps(data, indent=2) + "\n").encode()


def save_manifest(path: Path, raw: bytes) -> None:
    """Write validated bytes (validated_bytes) atomically, remember them as valid."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, raw)
    except OSError as error:  # a full disk, a file-size limit (EFBIG), a read-only git dir
        raise ConfigError(
            f"cannot write {path}: {error.strerror}; nothing was changed (writes are atomic: "
            "the manifest is as it was). Free space, or run patchguard as a user who can "
            "write the repository, then run the command again"
        ) from None
    _remember_validated(path, validated_key(raw))


def validated_key(raw: bytes) -> str:
    """How the bytes are remembered as valid: by content, for this patchguard's schema."""
    return f"{model_namespace()}-{blob_id(raw)}"


def _validated(manifest_path: Path) -> list[str]:
    try:
        return (manifest_path.parent / VALIDATED_FILE).read_text().split()
    except (OSError, UnicodeDecodeError):
        return []


def _remember_validated(manifest_path: Path, digest: str) -> None:
    """A cache: when it cannot be written (read-only checkout), the next read validates again."""
    known = [d for d in _validated(manifest_path) if d != digest][-(_KEEP_VALIDATED - 1) :]
    with suppress(OSError):
        atomic_write(
            manifest_path.parent / VALIDATED_FILE,
            "".join(f"{d}\n" for d in [*known, digest]).encode(),
        )


def now_utc() -> str:
    """A record's timestamp, as the schema's date-time reads it."""
    from datetime import UTC, datetime  # here: only a write stamps a time

    return datetime.now(UTC).isoformat().replace("+00:00", "Z")
