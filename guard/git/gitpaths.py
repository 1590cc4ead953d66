"""Find a checkout's git directories with os.path only: this runs on every hook's fast path."""

from __future__ import annotations

import os

from guard.errors import ConfigError

# patchguard's files (guard.git.gitdir.Layout names them all); these few are here because the
# fast path reads them with nothing but os.
STORE_DIR_NAME = "patchguard"
MANIFEST_FILE_NAME = "manifest.json"  # in STORE_DIR_NAME: what every reader of the patches reads
TRANSACTION_FILE_NAME = "transaction"  # a change to the patches under way; the hooks know it
DERIVED_FROM_FILE_NAME = "manifest.from"  # the history commit manifest.json was derived from
HISTORY_REF = "refs/patchguard/history"
# In each worktree's own git dir: the undo journal's entries, each a directory with its file.
UNDO_DIR_NAME = "patchguard-undo"
JOURNAL_FILE = "journal.json"

TYPE_CHECKING = False  # not typing's: this module is on a light path (tests/test_light_paths.py)
if TYPE_CHECKING:
    from collections.abc import Sequence

# git's global options that take the next word as their value (git.c, handle_options).
_GIT_OPTIONS_WITH_VALUE = frozenset(
    {"-C", "-c", "--config-env", "--namespace", "--shallow-file", "--attr-source"}
)
# Global options that point git at another git dir or worktree than the directory it runs in.
_GIT_ELSEWHERE = ("--git-dir", "--work-tree", "--bare")


def find_repository(start: str) -> tuple[str, str, str]:
    """(worktree root, its git dir, the common git dir), walking up from `start` as git does.
    GIT_DIR and GIT_WORK_TREE (git sets GIT_DIR for every hook, and our git commands inherit
    both) are honoured when they name that checkout; otherwise refused: patchguard would read
    one repository while git acts on another."""
    git_dir_variable = os.environ.get("GIT_DIR")
    work_tree_variable = os.environ.get("GIT_WORK_TREE")
    if git_dir_variable is None and work_tree_variable is None:
        return _walk_up(start)
    base = os.path.realpath(start)
    top = os.path.realpath(os.path.join(base, work_tree_variable)) if work_tree_variable else None
    try:
        found = _walk_up(top or start)
        if git_dir_variable is not None:
            used = os.path.realpath(os.path.join(base, git_dir_variable))
        else:  # git still finds its git dir from the current directory
            used = _walk_up(start)[1]
    except ConfigError as error:
        raise _not_one_checkout(str(error).rstrip(".")) from None
    if top is not None and top != found[0]:
        raise _not_one_checkout(f"GIT_WORK_TREE is inside the working tree {found[0]}")
    if top is None and git_dir_variable is not None and base != found[0]:
        # git's rule: GIT_DIR without GIT_WORK_TREE (or core.worktree) makes the current
        # directory the top of the working tree; a move from a subdirectory would check the
        # whole tree out below it
        raise _not_one_checkout(
            f"with GIT_DIR and no GIT_WORK_TREE, git takes {base} as the top of the working "
            f"tree, not {found[0]}"
        )
    if used != found[1]:
        raise _not_one_checkout(
            f"the working tree {found[0]} has its git dir at {found[1]}; git would use {used}"
        )
    return found


def crash_dir(args: Sequence[str]) -> str:
    """A crash log goes into the git dir of the checkout a command ran in (`patchguard -C DIR`,
    `args` being the command line's words after `patchguard`)."""
    group = args[1:2] if args[:1] == ["-C"] else []
    return find_repository(os.path.join(os.getcwd(), *group))[1]


def _not_one_checkout(why: str) -> ConfigError:
    shown = ", ".join(
        f"{name}={os.environ[name]}" for name in ("GIT_DIR", "GIT_WORK_TREE") if name in os.environ
    )
    return ConfigError(
        f"{shown} does not name one checkout ({why}), so patchguard and the git commands it "
        "runs would act on different repositories; unset GIT_DIR and GIT_WORK_TREE, or point "
        "them at one checkout's own git dir and top"
    )


def _walk_up(start: str) -> tuple[str, str, str]:
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
    """Where `git ARGS` started in `start` works (each `-C DIR` relative to the one before):
    `patchguard git -C OTHER stash pop` must lift OTHER's patches. --git-dir and the like are
    refused, not guessed."""
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
    return read_ref(head[len("ref: ") :], (git_dir, common_dir))


def read_ref(ref: str, bases: Sequence[str]) -> str | None:
    """What `ref` names, from the files as git resolves them: the loose ref in each of `bases`
    (a worktree's git dir, then the common dir), then the last base's packed-refs; None when
    no file names it (absent, or in a store git alone reads)."""
    for base in bases:
        try:
            with open(os.path.join(base, ref), encoding="utf-8") as handle:
                return handle.read().strip() or None
        except OSError:
            continue
    try:
        with open(os.path.join(bases[-1], "packed-refs"), encoding="utf-8") as handle:
            suffix = " " + ref
            for line in handle:
                if line.rstrip("\n").endswith(suffix):
                    return line.split(" ", 1)[0]
    except OSError:
        pass
    return None
