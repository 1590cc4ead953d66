"""Bundles: every patch and its content in one validated JSON file, to carry to another clone."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, Literal

from pydantic import Field

from guard.errors import ConfigError
from guard.git.atomic import atomic_write
from guard.git.eol import cannot_rebuild
from guard.git.objects import blob_id
from guard.git.repo import Repo
from guard.store import history
from guard.store import manifest as runtime
from guard.store.derived import load_manifest
from guard.store.manifest import select_patches
from guard.store.schema import SCHEMA_VERSION, Manifest, ObjectId, Strict, parse_versioned

BUNDLE_FORMAT: Final = "patchguard.bundle"


class Bundle(Strict):
    """A self-contained export: the manifest, and the bytes of every blob it refers to."""

    format: Literal["patchguard.bundle"] = Field(description="Always 'patchguard.bundle'.")
    schema_version: int = Field(
        ge=SCHEMA_VERSION, le=SCHEMA_VERSION, description=f"This patchguard reads {SCHEMA_VERSION}."
    )
    manifest: Manifest
    blobs: dict[ObjectId, str] = Field(description="Blob id -> content, base64.")


def export_bundle(repo: Repo, names: Sequence[str] = ()) -> str:
    """Every patch and guard, or only the patches named (their guards are the patches' own)."""
    manifest = load_manifest(repo)
    if names:
        hint = "; to write the bundle to a file: patchguard export -o {}"
        manifest = manifest._replace(patches=select_patches(manifest, names, hint), guards=[])
    blobs = {oid: base64.b64encode(repo.blob(oid)).decode() for oid in sorted(manifest.blob_ids())}
    bundle = Bundle.model_validate(
        {
            "format": BUNDLE_FORMAT,
            "schema_version": SCHEMA_VERSION,
            "manifest": runtime.as_dict(manifest),
            "blobs": blobs,
        }
    )
    return bundle.model_dump_json(indent=2) + "\n"


def write_bundle(path: Path, text: str) -> None:
    try:
        atomic_write(path, text.encode())
    except OSError as error:
        raise ConfigError(f"cannot write the bundle to {path}: {error.strerror}") from None


def read_bundle(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"no bundle at {path}; name the file `patchguard export` wrote") from None
    except OSError as error:
        raise ConfigError(f"cannot read the bundle {path}: {error.strerror}") from None


def parse_bundle(source: str, raw: bytes) -> tuple[runtime.Manifest, dict[str, str]]:
    """Validate everything before anything is written: schema, blob integrity, completeness."""
    bundle = parse_versioned(
        raw, f"bundle {source}", Bundle, "export it again with `patchguard export`"
    )
    for oid, encoded in bundle.blobs.items():
        try:
            content = base64.b64decode(encoded, validate=True)
            damage = "" if blob_id(content) == oid else "does not match its id"
        except binascii.Error as error:
            damage = f"is not base64 ({error})"
        if damage:
            raise ConfigError(
                f"bundle {source}: the content of blob {oid} {damage}; the bundle is damaged, "
                "export it again with `patchguard export`"
            )
    manifest = runtime.Manifest.from_dict(bundle.manifest.model_dump(mode="json"))
    missing = manifest.blob_ids() - set(bundle.blobs)
    if missing:
        raise ConfigError(
            f"bundle {source} lacks the content of {len(missing)} blob(s); export it again "
            "with `patchguard export`"
        )
    return manifest, bundle.blobs


def import_bundle(repo: Repo, source: str, raw: bytes) -> tuple[list[str], list[str]]:
    """Add the bundle's patches and guards; same-named patches are replaced (and said so).
    Returns what it did, line by line, and the patches whose recording it changed."""
    bundled, blobs = parse_bundle(source, raw)
    with repo.lock("import", store=True):
        refuse_unimportable(repo, bundled.patches, lambda oid: base64.b64decode(blobs[oid]))
        for encoded in blobs.values():
            repo.store_blob(base64.b64decode(encoded))
        current = load_manifest(repo, missing_ok=True)
        incoming = {p.name: p for p in bundled.patches}
        lines = [_import_line(current.patch(name), patch) for name, patch in incoming.items()]
        changed_patches = [n for n, p in incoming.items() if current.patch(n) != p]
        patches = [incoming.pop(p.name, p) for p in current.patches] + list(incoming.values())
        guards = list(dict.fromkeys([*current.guards, *bundled.guards]))
        lines += [f"imported guard {g}" for g in bundled.guards if g not in current.guards]
        changed = current._replace(patches=patches, guards=guards)
        if changed != current:  # the same bundle twice: nothing to write, nothing to undo
            history.save(repo, changed, f"imported from {source}: {', '.join(lines)}")
        return lines, changed_patches


def refuse_unimportable(
    repo: Repo, patches: Sequence[runtime.Patch], content: Callable[[str], bytes]
) -> None:
    """Before patches from elsewhere (a bundle, a fetch) are written: every path must be one
    git would write here, and every file one this checkout's conversions can rebuild."""
    for patch in patches:
        for change in patch.files:
            repo.worktree_path(change.path)  # refuses paths that escape through symlinks
            oids = [oid for oid in (change.base_blob, change.patched_blob) if oid]
            refusal = repo.conversion(change.path).refuses(*map(content, oids))
            if refusal is not None:
                raise ConfigError(
                    f"cannot import patch {patch.name}: "
                    + cannot_rebuild(change.path, refusal)
                    + " in this checkout; nothing was imported. Import it where that "
                    "attribute is not set."
                )


def _import_line(held: runtime.Patch | None, incoming: runtime.Patch) -> str:
    if held is None:
        return f"imported patch {incoming.name}"
    if held == incoming:
        return f"kept patch {incoming.name} (the bundle's is the same)"
    return f"replaced patch {incoming.name}"
