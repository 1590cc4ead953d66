"""Find a checkout's git directories with os.path only: this runs on every hook's fast path."""

from __future__ import annotations

import os

from guard.errors import ConfigError

TYPE_CHECKING = False  # typing costs the hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Sequence

# git's global options that take the next word as their value (git.c, handle_options).
_GIT_OPTIONS_WITH_VALUE = frozenset(
    {"-C", "-c", "--config-env", "--namespace", "--shallow-file", "--attr-source"}
)
# Global options that point git at another git dir or worktree than the directory it runs in.
_GIT_ELSEWHERE = ("--git-dir", "--work-tree", "--bare")


def find_repository(start: str) -> tuple[str, str, str]:
    """(worktree root, its git dir, the common git dir), walking up from `start` as git does."""
    start = os.path.realpath(start)
    if not os.path.isdir(start):
        raise ConfigError(f"{start} is not a directory; pass an existing directory to -C")
    directory = start
    while True:
        dot_git = os.path.join(directory, ".git")
        if os.path.isdir(dot_git):
            return directory, dot_git, _common_dir(dot_git)
        if os.path.isfile(dot_git):
            git_dir = _follow_gitfile(dot_git)
            return directory, git_dir, _common_dir(git_dir)
        if os.path.isfile(os.path.join(directory, "HEAD")) and os.path.isdir(
            os.path.join(directory, "objects")
        ):
            raise ConfigError(
                f"{directory} is a bare repository: patchguard guards working trees. "
                "Run it in a clone or a worktree (`git worktree add`)."
            )
        parent = os.path.dirname(directory)
        if parent == directory:
            raise ConfigError(
                f"{start} is not inside a git working tree. Run patchguard in your checkout, "
                "or pass -C DIR."
            )
        directory = parent


def git_start_directory(args: Sequence[str], start: str) -> str:
    """The directory `git ARGS`, started in `start`, works in: git's own global options before
    the subcommand are followed, each `-C DIR` relative to the one before, as git does.

    `patchguard git -C OTHER stash pop` must lift OTHER's patches, not those of the directory
    it was typed in. `--git-dir`, `--work-tree` and `--bare` would make git act on another
    repository or worktree than that directory holds: refused rather than guessed.
    """
    directory = start
    words = iter(args)
    for word in words:
        if not word.startswith("-"):
            break  # the subcommand: the rest is its own
        name = word.split("=", 1)[0]
        if name in _GIT_ELSEWHERE:
            raise ConfigError(
                f"patchguard git does not take git's {name}: it lifts the patches of the "
                f"worktree git runs in. Use -C DIR instead (patchguard git -C DIR ...)"
            )
        if word in _GIT_OPTIONS_WITH_VALUE:
            value = next(words, "")
            if word == "-C":
                directory = os.path.join(directory, value)
    return directory


def _follow_gitfile(dot_git: str) -> str:
    with open(dot_git, encoding="utf-8", errors="replace") as handle:
        text = handle.read().strip()
    if not text.startswith("gitdir:"):
        raise ConfigError(
            f"{dot_git} is not a valid gitfile (expected 'gitdir: PATH'); repair it with "
            "`git worktree repair`"
        )
    target = text[len("gitdir:") :].strip()
    return os.path.realpath(os.path.join(os.path.dirname(dot_git), target))


def _common_dir(git_dir: str) -> str:
    pointer = os.path.join(git_dir, "commondir")
    if not os.path.isfile(pointer):
        return git_dir
    with open(pointer, encoding="utf-8") as handle:
        return os.path.realpath(os.path.join(git_dir, handle.read().strip()))


def read_head(git_dir: str, common_dir: str) -> str | None:
    """HEAD's commit id from the files (loose ref or packed-refs); None when unsure."""
    try:
        with open(os.path.join(git_dir, "HEAD"), encoding="utf-8") as handle:
            head = handle.read().strip()
    except OSError:
        return None
    if not head.startswith("ref: "):
        return head or None
    ref = head[len("ref: ") :]
    for base in (git_dir, common_dir):
        try:
            with open(os.path.join(base, ref), encoding="utf-8") as handle:
                return handle.read().strip() or None
        except OSError:
            continue
    try:
        with open(os.path.join(common_dir, "packed-refs"), encoding="utf-8") as handle:
            suffix = " " + ref
            for line in handle:
                if line.rstrip("\n").endswith(suffix):
                    return line.split(" ", 1)[0]
    except OSError:
        pass
    return None
