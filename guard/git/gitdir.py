"""The layout of a checkout as Paths: its files, its own git dir, the shared (common) git dir."""

from __future__ import annotations

import os
import re
from pathlib import Path

from guard.errors import ConfigError
from guard.git.gitpaths import (
    DERIVED_FROM_FILE_NAME,
    HISTORY_REF,
    MANIFEST_FILE_NAME,
    STORE_DIR_NAME,
    TRANSACTION_FILE_NAME,
    find_repository,
    read_ref,
)


class Layout:
    """Not a dataclass: every hook builds one, and dataclasses would bring inspect and ast onto
    the hooks' light path (tests/test_light_paths.py)."""

    def __init__(self, workdir: Path, git_dir: Path, common_dir: Path) -> None:
        self.workdir = workdir
        self.git_dir = git_dir
        self.common_dir = common_dir
        # In the common dir, so every linked worktree shares them.
        self.store_dir = common_dir / STORE_DIR_NAME
        self.manifest_path = self.store_dir / MANIFEST_FILE_NAME
        self.store_lock_path = self.store_dir / "lock"  # held only while the store is rewritten
        # Present from before the history ref moves until manifest.json is derived from it: the
        # hooks and `check` trust no verified key meanwhile (the hook script knows it by name).
        self.transaction_path = self.store_dir / TRANSACTION_FILE_NAME
        # Written after manifest.json: a reader whose history ref names another commit than
        # this file knows the derived manifest is stale without asking git.
        self.derived_from_path = self.store_dir / DERIVED_FROM_FILE_NAME
        # In the worktree's own git dir: a long move in one worktree never keeps another's hook
        # waiting (the hook script knows it by name).
        self.worktree_lock_path = git_dir / "patchguard-lock"
        # Present while patches are out for an unfinished merge or rebase of this worktree: the
        # post-commit hook (which knows it by name) re-applies on the concluding commit.
        self.pending_path = git_dir / "patchguard-pending"
        # git's mark of a `git bisect` in this worktree (its good/bad refs are shared).
        self.bisect_start = git_dir / "BISECT_START"

    def history_tip(self) -> str | None:
        """The commit refs/patchguard/history names, read from its files without git (None:
        no such ref, or one only git can read)."""
        return read_ref(HISTORY_REF, (str(self.common_dir),))

    def has_patches(self) -> bool:
        return self.manifest_path.is_file() or self.history_tip() is not None


def locate(start: Path) -> Layout:
    """Walk up from `start` to the worktree root, as git does (GIT_DIR: see find_repository)."""
    workdir, git_dir, common_dir = find_repository(str(start))
    # patchguard runs git in the worktree's root, where a relative GIT_DIR or GIT_WORK_TREE
    # would name another place.
    for variable, value in (("GIT_DIR", git_dir), ("GIT_WORK_TREE", workdir)):
        if variable in os.environ:
            os.environ[variable] = value
    _refuse_sha256(Path(common_dir))
    return Layout(workdir=Path(workdir), git_dir=Path(git_dir), common_dir=Path(common_dir))


def _refuse_sha256(common_dir: Path) -> None:
    """Every command says so up front, install included (libgit2 reads SHA-1 repositories)."""
    try:
        config = (common_dir / "config").read_text(errors="replace")
    except OSError:
        return
    if re.search(r"^\s*objectformat\s*=\s*sha256\s*$", config, flags=re.M | re.I):
        raise ConfigError(
            f"{common_dir.parent} uses SHA-256 object ids, which patchguard does not support "
            "yet; nothing was changed. Use a SHA-1 clone of the repository."
        )


def read_manifest_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"no manifest at {path}: nothing is guarded in this repository yet. "
            "Run `patchguard record NAME` or `patchguard require SPEC` first."
        ) from None
    except OSError as error:  # a directory in its place, no permission to read it
        raise ConfigError(
            f"cannot read {path}: {error.strerror}; remove what stands there (it is derived "
            "from refs/patchguard/history again), or run patchguard as a user who may read it"
        ) from None
