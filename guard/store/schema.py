"""The manifest's schema: pydantic models that validate it (scripts/generate.py writes `schemas/`).

Every manifest is validated here before patchguard uses it, so a hand-broken file is reported
by name and field, never half-used (guard.store.manifest says why only new bytes come here).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from guard.errors import ConfigError
from guard.git.worktree_paths import name_problem
from guard.store.spec import parse_spec

SCHEMA_VERSION = 1


def _repo_path(value: str) -> str:
    """A path inside the worktree as git's verify_path allows it."""
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _spec(value: str) -> str:
    spec = parse_spec(value)
    _repo_path(spec.path)
    return value


ObjectId = Annotated[
    str,
    Field(pattern=r"^[0-9a-f]{40}([0-9a-f]{24})?$", description="A git object id (hex)."),
]
RepoPath = Annotated[
    str,
    AfterValidator(_repo_path),
    Field(description="A path relative to the repository root, with '/' separators."),
]
SymbolSpec = Annotated[
    str,
    AfterValidator(_spec),
    Field(
        description="A required symbol, like a pytest node id: path/to/file.py::Class.method",
        examples=["python/sglang/srt/models/kimi_k25.py::KimiK25ForConditionalGeneration.forward"],
    ),
]
PatchName = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
        description="Letters, digits, '.', '_' and '-'; starts with a letter or digit.",
    ),
]


_Model = TypeVar("_Model", bound=BaseModel)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Resolution(Strict):
    """The same change made by hand on another version of upstream's file (`patchguard resolve`)."""

    base_blob: ObjectId = Field(description="Blob id of upstream's file where it was resolved.")
    patched_blob: ObjectId = Field(description="Blob id of that file with the change made by hand.")
    diff: str = Field(description="Unified diff from base to patched, for people to read.")
    commit: ObjectId = Field(description="HEAD when the resolution was made.")
    created_at: datetime = Field(description="When the resolution was made (UTC).")


class FileChange(Strict):
    """One file of a patch, as recorded: enough to re-apply it by 3-way merge."""

    path: RepoPath
    base_blob: ObjectId | None = Field(
        description="Blob id of the file at the base commit; null when the patch adds the file."
    )
    patched_blob: ObjectId = Field(description="Blob id of the file with the patch applied.")
    diff: str = Field(description="Unified diff from base to patched, for people to read.")
    added_symbols: list[str] = Field(
        default_factory=list,
        description="Qualified names whose def/class line the patch adds (decides 'upstream').",
    )
    mode: Literal["100644", "100755"] = Field(
        default="100644",
        description="git's mode of the patched file (100755: executable). A file "
        "the patch creates gets it back; an existing file keeps its own.",
    )
    resolutions: list[Resolution] = Field(
        default_factory=list,
        description="The change made by hand on other versions of upstream's file; moves merge "
        "from the version whose base is nearest to the file at hand.",
    )


class Patch(Strict):
    """A named local change that patchguard keeps in the working tree."""

    name: PatchName
    description: str = Field(default="", description="What the patch is for (record -m).")
    created_at: datetime = Field(description="When the patch was recorded (UTC).")
    base_commit: ObjectId = Field(description="HEAD when the patch was recorded.")
    files: list[FileChange] = Field(min_length=1, description="The files the patch changes.")
    requires: list[SymbolSpec] = Field(
        default_factory=list, description="Symbols that must exist whenever the patch is in place."
    )


class Manifest(Strict):
    """Everything patchguard guards in one repository (shared by its linked worktrees)."""

    schema_version: int = Field(
        description=f"Format version; this patchguard reads {SCHEMA_VERSION}.",
        ge=SCHEMA_VERSION,
        le=SCHEMA_VERSION,
    )
    patches: list[Patch] = Field(default_factory=list, description="Applied in this order.")
    guards: list[SymbolSpec] = Field(
        default_factory=list,
        description="Symbols that must not disappear, with no patch behind them.",
    )

    @field_validator("patches")
    @classmethod
    def _names_are_unique(cls, patches: list[Patch]) -> list[Patch]:
        """Every command finds a patch by its name: a second of one name would be unreachable,
        and apply would write both."""
        names = [patch.name for patch in patches]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"patch name {', '.join(twice)} is used more than once")
        return patches


class Bundle(Strict):
    """A self-contained export: the manifest, and the bytes of every blob it refers to."""

    format: Literal["patchguard.bundle"] = Field(description="Always 'patchguard.bundle'.")
    schema_version: int = Field(
        ge=SCHEMA_VERSION, le=SCHEMA_VERSION, description=f"This patchguard reads {SCHEMA_VERSION}."
    )
    manifest: Manifest
    blobs: dict[ObjectId, str] = Field(description="Blob id -> content, base64.")


def validate_manifest(raw: bytes, path: Path, *, remedy: str | None = None) -> dict[str, Any]:
    """The manifest's JSON as validated data, or a ConfigError naming the file and field."""
    model = parse_versioned(
        raw,
        f"manifest {path}",
        Manifest,
        remedy or "restore it from a bundle (`patchguard import`) or remove it and record again",
    )
    return model.model_dump(mode="json")


def validate_data(model: type[BaseModel], data: dict[str, Any], what: str) -> None:
    """Refuse data about to be written that the schema would refuse on the next read."""
    try:
        model.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{what}: {describe_validation(error)}") from None


def parse_versioned(raw: bytes | str, source: str, model: type[_Model], remedy: str) -> _Model:
    """JSON to a validated model; anything else is a ConfigError naming `source`, then `remedy`."""
    try:
        data: Any = json.loads(raw.decode() if isinstance(raw, bytes) else raw)  # JSON is UTF-8
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{source} is not valid JSON ({error}); {remedy}") from None
    except RecursionError:  # what json does with thousands of nested brackets
        raise ConfigError(
            f"{source} is nested too deeply to be a patchguard file (not what patchguard "
            f"writes); {remedy}"
        ) from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, int) and version != SCHEMA_VERSION:
        raise ConfigError(
            f"{source} has schema_version {version}; this patchguard reads version "
            f"{SCHEMA_VERSION}. Use the patchguard that wrote it, or upgrade."
        )
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{source} is invalid: {describe_validation(error)}; {remedy}") from None


def describe_validation(error: ValidationError) -> str:
    """'patches.0.files.1.path: must be relative ...' for the first few errors."""
    parts = []
    for item in error.errors()[:5]:
        field = ".".join(str(loc) for loc in item["loc"]) or "(top level)"
        parts.append(f"field {field}: {item['msg']}")
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
