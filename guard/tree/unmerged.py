"""Getting out of a conflict plain git made in a patched file: stash pop, autostash, checkout -m.

Both sides of git's merge changed the lines around the patch, typically because upstream
absorbed it at the same spot in other text: the patch makes the conflict. So it is taken out of
each side that holds it, the stage blobs are merged again, and the usual assessment puts the
patch back (keeping HEAD's definitions where HEAD has them). What still conflicts is not the
patch's, and stays marked.
"""

from __future__ import annotations

from collections.abc import Sequence

from guard.git.markers import marker_lines
from guard.git.process import run_git
from guard.git.repo import Repo
from guard.store.manifest import FileChange, Patch
from guard.tree.assess import _contains_change, assess_patch, merge_labels, required_in, texts
from guard.tree.verdicts import UNMERGED, FileVerdict, PatchVerdict, State, in_words
from guard.tree.worktree import Worktree

# Remaining markers carry these labels: stage 2 is HEAD's file in every case we finish.
LABELS = ("common ancestor", "HEAD", "your changes")


class Finished:
    """One unmerged file of a patch, with git's conflict over the patch taken away."""

    def __init__(
        self, path: str, before: bytes, stages: dict[int, str], content: bytes, left: list[int]
    ) -> None:
        self.path, self.stages = path, stages
        self.before = before  # the file as git left it
        self.content = content  # what to write
        self.left = left  # marker lines of conflicts that are not the patch's (none: all resolved)


def finish_patch(
    repo: Repo, tree: Worktree, patch: Patch, verdict: PatchVerdict
) -> tuple[PatchVerdict, list[Finished], list[str]]:
    """Finish git's merge in every unmerged file of `patch`. The tree sees the finished text,
    so the verdict returned is the usual one: what `apply` writes on top."""
    done: list[Finished] = []
    reasons: list[str] = []
    changes = {}
    for change, file_verdict in zip(patch.files, verdict.files, strict=True):
        if file_verdict.conflict != UNMERGED:
            continue
        found = _finish(repo, tree, patch, change, file_verdict)
        if isinstance(found, str):
            reasons.append(f"{file_verdict.path}: {found}")
            continue
        done.append(found)
        changes[found.path] = change
        tree.pretend(found.path, found.content, found.stages if found.left else {})
    after = assess_patch(repo, tree, patch)
    for finished, file_verdict in zip(done, _verdicts_of(after, done), strict=True):
        if file_verdict.state is State.CONFLICT and not finished.left:
            # HEAD lacks what the patch adds, and its own new lines sit where the patch's go (a
            # method upstream added at the end of the class): both, HEAD's first, checked below
            base, patched = texts(repo, changes[finished.path])
            both = repo.merge3(base, finished.content, patched, merge_labels(patch), union=True)
            finished.content = both.content
            tree.pretend(finished.path, both.content, {})
            after = assess_patch(repo, tree, patch)
    doubted = [
        (f, _doubt(tree, patch, f, v)) for f, v in zip(done, _verdicts_of(after, done), strict=True)
    ]
    for finished, problem in doubted:
        if problem:
            reasons.append(f"{finished.path}: {problem}; left as git left it")
            tree.pretend(finished.path, finished.before, finished.stages)
    kept = [finished for finished, problem in doubted if not problem]
    if len(kept) < len(done):
        after = assess_patch(repo, tree, patch)
    return after, kept, reasons


def _verdicts_of(verdict: PatchVerdict, done: Sequence[Finished]) -> list[FileVerdict]:
    by_path = {f.path: f for f in verdict.files}
    return [by_path[f.path] for f in done]


def _finish(
    repo: Repo, tree: Worktree, patch: Patch, change: FileChange, verdict: FileVerdict
) -> Finished | str:
    """The file with the patch's part of git's conflict resolved, or why it cannot be."""
    path = verdict.path
    stages = tree.unmerged(path)
    if 2 not in stages or 3 not in stages:
        return "one side of git's merge deletes the file; that conflict is not the patch's"
    before = tree.read(path)
    assert before is not None  # an unmerged file with both sides is in the worktree
    base, patched = texts(repo, change)
    ancestor = repo.blob(stages[1]) if 1 in stages else b""
    ours, theirs = (
        without_patch(repo, patch, base, patched, repo.blob(stages[side])) for side in (2, 3)
    )
    merged = repo.merge3(ancestor, ours, theirs, LABELS)
    content = merged.content
    if not merged.clean and tree.symbol_problems(ours, path, change.added_symbols):
        # Conflicts that are not the patch's stay; the patch goes in beside them, or not at all.
        beside = repo.merge3(base, content, patched, merge_labels(patch))
        if not beside.clean:
            return "the patch does not merge beside the conflicts that are not its own"
        content = beside.content
    return Finished(path, before, stages, content, marker_lines(content))


def without_patch(repo: Repo, patch: Patch, base: bytes, patched: bytes, side: bytes) -> bytes:
    """One side of git's merge without the patch, where it holds the patch and lets it go."""
    labels = merge_labels(patch)
    if base == patched or not _contains_change(repo, base, side, patched, labels):
        return side
    out = repo.merge3(patched, side, base, labels)
    return out.content if out.clean else side


_NOT_WRITABLE = (State.CONFLICT, State.CONFLICTED, State.MISSING_FILE, State.OUTSIDE_SPARSE)


def _doubt(tree: Worktree, patch: Patch, finished: Finished, verdict: FileVerdict) -> str | None:
    """Why the finished file must not be written: a doubled or lost symbol, or a marker in
    what it claims to have resolved."""
    if finished.left:
        return None  # markers stay, and are said to stay; nothing is claimed about them
    final = verdict.merged if verdict.merged is not None else finished.content
    if marker_lines(final):
        return "a conflict marker would remain"
    if verdict.state in _NOT_WRITABLE:
        return f"with git's conflict taken out, the patch {in_words(verdict)}"
    problems = tree.symbol_problems(final, verdict.path, required_in(patch, verdict.path))
    if problems:
        return "; ".join(f"{name}: {why}" for name, why in problems.items())
    return None


def clear_stage_entries(repo: Repo, paths: Sequence[str]) -> None:
    """The index as a clean `git stash pop` leaves it: HEAD's blob, the change unstaged."""
    if paths:
        run_git(["reset", "-q", "--", *(f":(literal){p}" for p in paths)], repo.workdir)


def stash_note(
    repo: Repo, tree: Worktree, patches: Sequence[Patch], done: Sequence[Finished]
) -> str:
    """Whether the stash git kept after the conflict can go now: only when stash@{0} is the
    side git merged in (stage 3 of each file finished) and every change it holds, the patch's
    own part excepted (patchguard keeps it), is in the worktree now."""
    paths = repo.stash_paths()
    if not done or not paths:
        return ""
    if any(repo.object_id(f"stash@{{0}}:{f.path}", "blob") != f.stages[3] for f in done):
        return ""
    changes = {c.path: (p, c) for p in patches for c in p.files}
    kept = []
    for path in paths:
        stashed = repo.file_at("stash@{0}", path)
        before = repo.file_at("stash@{0}^1", path)
        current = tree.read(path)
        if stashed is None or before is None or current is None:
            if stashed != current:
                kept.append(path)
            continue
        if path in changes:
            patch, change = changes[path]
            stashed = without_patch(repo, patch, *texts(repo, change), stashed)
        if not _contains_change(repo, before, current, stashed, LABELS):
            kept.append(path)
    if kept:
        return f"keep stash@{{0}}: it still holds changes the worktree lacks ({', '.join(kept)})"
    return "stash@{0} holds nothing the worktree lacks now: drop it with git stash drop"
