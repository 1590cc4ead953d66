"""Locate a checkout's git directories with plain file reads, so the hooks' fast path needs no pygit2."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from guard.errors import ConfigError

STORE_DIR_NAME = "patchguard"


@dataclass(frozen=True)
class Layout:
    """Where a worktree's files, its own git dir and the shared (common) git dir are."""

    workdir: Path
    git_dir: Path
    common_dir: Path

    @property
    def store_dir(self) -> Path:
        """patchguard's files: in the common dir, so every linked worktree shares them."""
        return self.common_dir / STORE_DIR_NAME

    @property
    def manifest_path(self) -> Path:
        return self.store_dir / "manifest.json"


def locate(start: Path) -> Layout:
    """Walk up from `start` to the worktree root, as git does (without GIT_DIR tricks)."""
    start = start.resolve()
    if not start.is_dir():
        raise ConfigError(f"{start} is not a directory; pass an existing directory to -C")
    for directory in (start, *start.parents):
        dot_git = directory / ".git"
        if dot_git.is_dir():
            git_dir = dot_git
        elif dot_git.is_file():
            git_dir = _follow_gitfile(dot_git)
        else:
            if (directory / "HEAD").is_file() and (directory / "objects").is_dir():
                raise ConfigError(
                    f"{directory} is a bare repository: patchguard guards working trees. "
                    "Run it in a clone or a worktree (`git worktree add`)."
                )
            continue
        return Layout(workdir=directory, git_dir=git_dir, common_dir=_common_dir(git_dir))
    raise ConfigError(
        f"{start} is not inside a git working tree. Run patchguard in your checkout, or pass -C DIR."
    )


def _follow_gitfile(dot_git: Path) -> Path:
    text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
    if not text.startswith("gitdir:"):
        raise ConfigError(f"{dot_git} is not a valid gitfile (expected 'gitdir: PATH')")
    target = Path(text.removeprefix("gitdir:").strip())
    return (dot_git.parent / target).resolve()


def _common_dir(git_dir: Path) -> Path:
    pointer = git_dir / "commondir"
    if pointer.is_file():
        return (git_dir / pointer.read_text(encoding="utf-8").strip()).resolve()
    return git_dir
