"""Stash pops that never conflict with the patch: `patchguard git stash pop|apply`.

A stash made with a patch in the tree holds the patch's change beside the user's own edits.
Popped onto a release that absorbed the patch in other text, git's merge of the two copies
conflicts (or doubles them). patchguard keeps the patch itself, so git applies a copy of the
stash commit (same parents, message and untracked files) without the patch's part.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from guard.git.repo import Repo
from guard.store.derived import load_manifest
from guard.store.manifest import FileChange, Patch
from guard.tree.assess import _contains_change, merge_labels, texts
from guard.tree.unmerged import without_patch

_STASH_REF = re.compile(r"(stash@\{\d+\}|\d+)")
_QUIET = ("-q", "--quiet")


class StashPlan(NamedTuple):
    """What runs instead of the user's `git stash pop|apply`."""

    apply: list[str] | None  # `stash apply` of the copy without the patches; None: it is empty
    drop: list[str] | None  # for pop: the real entry, once the apply succeeded
    patches: list[str]  # the patches the stash held


def plan(repo: Repo, args: Sequence[str]) -> StashPlan | None:
    """The plan for `git stash pop|apply [-q] [STASH]`, or None: plain git does it (as for
    `--index`, whose staged part would need the same care, or a stash of no patch's change)."""
    if len(args) < 2 or args[0] != "stash" or args[1] not in ("pop", "apply"):
        return None
    options = [a for a in args[2:] if a.startswith("-")]
    refs = [a for a in args[2:] if not a.startswith("-")]
    if any(o not in _QUIET for o in options) or len(refs) > 1:
        return None
    ref = refs[0] if refs else "stash@{0}"
    if not _STASH_REF.fullmatch(ref):
        return None
    ref = ref if ref.startswith("stash@") else f"stash@{{{ref}}}"
    stash = repo.commit_id(ref)
    if stash is None:
        return None  # git says what is wrong
    files, held = {}, []
    for patch, change, stashed, base, patched in _patch_files_in(repo, stash):
        rest = without_patch(repo, patch, base, patched, stashed)
        if rest != stashed:
            files[change.path] = rest
            held.append(patch.name)
    if not files:
        return None
    copy = repo.commit_with_files(stash, files)
    base_tree = repo.tree_id(f"{stash}^1")
    untracked = repo.commit_id(f"{stash}^3") is not None
    empty = not untracked and repo.tree_id(copy) == base_tree == repo.tree_id(f"{stash}^2")
    apply = None if empty else ["stash", "apply", *options, copy]
    drop = ["stash", "drop", *options, ref] if args[1] == "pop" else None
    return StashPlan(apply, drop, list(dict.fromkeys(held)))


def _patch_files_in(
    repo: Repo, stash: str
) -> Iterator[tuple[Patch, FileChange, bytes, bytes, bytes]]:
    """Each recorded patch's file the stash changed, with its stashed, base and patched bytes;
    not where the stash's first parent held the change already (upstream's, not the stash's)."""
    for patch in load_manifest(repo).patches:
        for change in patch.files:
            stashed = repo.file_at(stash, change.path)
            before = repo.file_at(f"{stash}^1", change.path)
            base, patched = texts(repo, change)
            if stashed is None or stashed == before or base == patched:
                continue
            labels = merge_labels(patch)
            if before is not None and _contains_change(repo, base, before, patched, labels):
                continue
            yield patch, change, stashed, base, patched


def holding(repo: Repo, log: str) -> list[tuple[str, list[str]]]:
    """The stash entries (`stash@{N}`, newest first) that hold a recorded patch's change, with
    the patches: after `git stash && git pull`, the hook re-applied the patch, so `git stash
    pop` refuses and the entry stays. `log`: the stash's reflog (.git/logs/refs/stash)."""
    found = []
    for number, line in enumerate(reversed(log.splitlines())):
        stash = line.split(" ", 2)[1] if line.count(" ") >= 2 else ""
        if repo.commit_id(stash) is None:
            continue
        held = [
            patch.name
            for patch, change, stashed, base, patched in _patch_files_in(repo, stash)
            if _contains_change(repo, base, stashed, patched, merge_labels(patch))
        ]
        if held:
            found.append((f"stash@{{{number}}}", list(dict.fromkeys(held))))
    return found
