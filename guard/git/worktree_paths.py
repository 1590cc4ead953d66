"""Where patchguard may read and write in a worktree: git's own rules for a checkout.

A repository can commit symbolic links: with `tools -> .git` committed, `tools/config` names
`.git/config`, inside the worktree, so neither the name alone nor "does it resolve outside"
shows it. As git (symlinks.c, read-cache.c's verify_path), no path beyond a link or with a
`.git` component; nor into a nested repository or a git dir under another name. Only os calls:
this runs on every re-applying hook.
"""

from __future__ import annotations

import os
import stat

from guard.errors import ConfigError

TYPE_CHECKING = False  # not typing's: this module is on a light path (tests/test_light_paths.py)
if TYPE_CHECKING:
    from collections.abc import Iterable


class UnsafePath(ConfigError):
    """A repository path patchguard must not read or write through; the message says why."""

    def __init__(
        self, message: str, link_target: str | None = None, repository: str | None = None
    ) -> None:
        super().__init__(message)
        self.link_target = link_target  # the path itself is a link to this (as readlink says)
        self.repository = repository  # the nested repository the path lies in


def read_if_regular(path: str | os.PathLike[str]) -> tuple[int, bytes | None]:
    """The file's mode and, for a regular file only, its bytes. Opened without waiting: a FIFO
    (or a device) at a guarded path would never answer a read, and hang whatever reads it.
    FileNotFoundError and NotADirectoryError as `open` raises them."""
    handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    mode = os.fstat(handle).st_mode
    if not stat.S_ISREG(mode):
        os.close(handle)
        return mode, None
    with os.fdopen(handle, "rb") as opened:
        return mode, opened.read()


def name_problem(path: str) -> str | None:
    """Why `path` is not a name git would check out (verify_path), or None when it is."""
    if not path or "\0" in path or "\\" in path:
        return "must be a non-empty POSIX path without NUL or backslash"
    if path.startswith("/"):
        return "must be relative to the repository root, not absolute"
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "must be a normalised path with no '.' or '..' components"
    if any(is_git_dir_name(part) for part in parts):
        return "must not have a .git component (a repository's own files)"
    return None


# The code points HFS+ ignores in a name: `.g\u200cit` is `.git` there (git's next_hfs_char).
_HFS_IGNORED = dict.fromkeys(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)


def is_git_dir_name(part: str) -> bool:
    """As git's verify_path with core.protectNTFS and core.protectHFS: `.git` in any case; as
    NTFS reads a name, also its short name `git~1`, either with trailing dots or spaces or an
    alternate data stream (`:name`) after it (is_ntfs_dotgit); as HFS+ reads it, with the code
    points it ignores (is_hfs_dotgit). Refused on every system, as git refuses `.GIT`: a bundle
    made here may be applied on any of them."""
    name = part.lower()
    if not name.isascii():
        name = name.translate(_HFS_IGNORED)
    return name.partition(":")[0].rstrip(". ") in (".git", "git~1")


_walked: set[str] | None = None  # see one_walk


class one_walk:
    """Within this block, a leading directory checked once stays checked (a write of 40 files
    under one package walks them once): only for a block in which nothing but patchguard's own
    writes can change the tree. A class: the fast path leaves contextlib out."""

    def __enter__(self) -> None:
        global _walked
        self._outer = _walked
        _walked = set() if self._outer is None else self._outer

    def __exit__(self, *_: object) -> None:
        global _walked
        _walked = self._outer


def checked_path(workdir: str, path: str, git_dirs: Iterable[str]) -> str:
    """Walked with lstat, as git does before it writes a file: no component may be a link (the
    last neither: writing would replace the link, or go through it). A component that does not
    exist ends the walk: nothing below it can be a link."""
    problem = name_problem(path)
    if problem is not None:
        raise UnsafePath(f"{path!r} is not a path patchguard reads or writes: it {problem}")
    full = os.path.join(workdir, path)
    for git_dir in git_dirs:
        if full == git_dir or full.startswith(git_dir.rstrip(os.sep) + os.sep):
            raise UnsafePath(
                f"{path} lies in the git directory {git_dir}; patchguard never writes into a "
                "repository's own files"
            )
    parts = path.split("/")
    location = workdir
    for depth, part in enumerate(parts):
        location = os.path.join(location, part)
        if _walked is not None and location in _walked:
            continue  # a directory this batch found plain already
        try:
            mode = os.lstat(location).st_mode
        except (FileNotFoundError, NotADirectoryError):
            break
        shown = "/".join(parts[: depth + 1])
        if stat.S_ISLNK(mode):
            target = os.readlink(location)
            if depth == len(parts) - 1:
                raise UnsafePath(
                    f"{path} is a symbolic link (to {target}); patchguard never writes through "
                    "a link, as git would not",
                    link_target=target,
                )
            raise UnsafePath(
                f"{path} is beyond a symbolic link ({shown} -> {target}); patchguard never "
                "reads or writes through a link, as git would not"
            )
        if depth < len(parts) - 1:
            if os.path.lexists(os.path.join(location, ".git")):
                raise UnsafePath(
                    f"{path} is in submodule {shown}, another repository; patchguard never "
                    "writes into another repository's files",
                    repository=shown,
                )
            if _walked is not None:
                _walked.add(location)
    return full
