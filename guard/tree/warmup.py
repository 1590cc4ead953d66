"""A first visit on both cores: while apply assesses the patches first to last, a forked child
assesses them last to first, and each parse and merge it makes lands in the content caches
(guard.truth.parsed, Repo.merge3), where the parent's own assessment of that patch finds it.

Parsing the merged files is most of a re-apply no cache has seen (a regression hunt's new
commit: ~10 ms per real model file). The child runs the very assessment the parent runs
(guard.tree.assess.assess_patch: read-only), on a patch's files as they are and, in its own
copy of the view, as apply would write them (the check after the write asks those), so there
is one piece of code for its decisions. It writes nothing but content-keyed cache entries
(each atomic and checksummed: guard.git.content_cache), and the parent decides every verdict
itself, from the same content, as the next command would from those entries. A child that
fails, is killed or never gets a core changes nothing but the time.

The child is forked once the parent's first patch parsed a file no cache kept (a re-apply
whose parses are all kept forks nothing). The two meet in the middle: the parent writes a byte
down a pipe as it starts each patch, and
the child stops before a patch the parent has reached, or when the pipe closes (the parent's
pass ended, or the parent died). At the end of its pass the parent stops the child and reaps
it, so no process outlives the command. Ctrl-C is the parent's: the child ignores it and is
stopped by the parent on the way out.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress

from guard.git import faults, lock
from guard.git.repo import Repo
from guard.store.manifest import Patch
from guard.tree.assess import assess_patch
from guard.tree.verdicts import State
from guard.tree.worktree import Worktree
from guard.truth import parsed

# Kill points of the child (guard.git.faults): before its first assessment, after it.
BEGUN, ASSESSED = "warmup-begun", "warmup-assessed"
_MIN_PATCHES = 2  # one patch has no other to assess meanwhile
_WRITTEN = frozenset({State.UNAPPLIED, State.DRIFTED, State.DOUBLED})  # what a hook writes


@contextmanager
def warmed(
    repo: Repo, tree: Worktree, every: Sequence[Patch], patches: Sequence[Patch]
) -> Iterator[Callable[[int], None]]:
    """Around the parent's pass over `patches` (in that order): yields `reached(index)`, to
    call as it starts each one. `every`: all patches in manifest order (their `below`).

    The child starts at the first patch after one whose assessment parsed a file no cache
    held (guard.truth.parsed.computed): a re-apply whose parses are all kept forks nothing,
    and the child inherits what the parent loaded for that patch (libgit2, git's unmerged
    entries)."""
    child: list[tuple[int, int]] = []  # (pid, the pipe's write end), once started
    computed = parsed.computed[0]

    def reached(index: int) -> None:
        if child:
            with suppress(OSError):  # the child has gone: nothing to tell
                os.write(child[0][1], b".")
        elif parsed.computed[0] > computed and len(patches) - index >= _MIN_PATCHES:
            child.extend(_start(repo, tree, every, patches, index))

    try:
        yield reached
    finally:
        if child:
            _stop(*child[0])


def _start(
    repo: Repo, tree: Worktree, every: Sequence[Patch], patches: Sequence[Patch], index: int
) -> list[tuple[int, int]]:
    """[(pid, the pipe's write end)] of a child for the patches after `index` (the parent's
    next), or none where a fork is not safe: no fork on this platform, another thread running
    (a fork copies only the calling thread, and whatever lock another one held stays held)."""
    threading = sys.modules.get("threading")
    if not hasattr(os, "fork") or (threading is not None and threading.active_count() > 1):
        return []
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # no memory or process left for it: the parent does it all
        os.close(read_end)
        os.close(write_end)
        return []
    if pid == 0:  # the child: never returns into the caller
        try:
            os.close(write_end)
            _child(repo, tree, every, patches, index, read_end)
        finally:
            os._exit(0)
    os.close(read_end)
    os.set_blocking(write_end, False)  # a byte per patch; never wait on the child for it
    return [(pid, write_end)]


class _Stopped(BaseException):
    """Raised in the child by the parent's SIGTERM: an atomic write under way removes its
    temporary file on the way out (guard.git.atomic)."""


def _stopped(_number: int, _frame: object) -> None:
    raise _Stopped


def _child(
    repo: Repo,
    tree: Worktree,
    every: Sequence[Patch],
    patches: Sequence[Patch],
    begun: int,
    pipe: int,
) -> None:
    """Assess the patches from the last one back until the parent has reached the next one.
    `begun`: the patch the parent starts as the child forks."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent's: it stops the child
    signal.signal(signal.SIGTERM, _stopped)
    null = os.open(os.devnull, os.O_RDWR)  # nothing to say, and no hold on the hook's output
    for standard in (0, 1, 2):
        os.dup2(null, standard)
    os.close(null)
    repo.after_fork()  # its own git reader: the parent's pipes are the parent's
    lock.forget_after_fork()  # a child that outlives a killed parent holds none of its locks
    os.set_blocking(pipe, False)
    faults.point(BEGUN)
    for index in reversed(range(begun + 1, len(patches))):
        try:
            told: bytes | None = os.read(pipe, 4096)
        except BlockingIOError:
            told = None  # nothing new
        if told == b"":
            return  # the parent's pass ended, or the parent is gone
        begun += len(told or b"")
        if begun >= index:
            return  # the parent is at this patch or past it: the rest is its own
        patch = patches[index]
        below = every[: every.index(patch)]
        verdict = assess_patch(repo, tree, patch, below)
        if verdict.state in _WRITTEN:  # and what the check after the write asks of it
            for file in verdict.files:
                if file.merged is not None:
                    tree.stage(file.path, file.merged)  # in the child's own copy only
            assess_patch(repo, tree, patch, below)
        faults.point(ASSESSED)


def _stop(pid: int, pipe: int) -> None:
    """End the child (SIGCONT too: a stopped child would never see SIGTERM) and reap it."""
    import signal

    os.close(pipe)
    for number in (signal.SIGTERM, signal.SIGCONT):
        try:
            os.kill(pid, number)
        except ProcessLookupError:
            break
    with suppress(ChildProcessError):  # reaped already, where SIGCHLD is ignored
        os.waitpid(pid, 0)
