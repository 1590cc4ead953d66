"""Stash pops that never conflict with the patch: `patchguard git stash pop|apply`.

A stash made with a patch in the tree holds the patch's change beside the user's own edits.
Popped onto a release that absorbed the patch in other text at the same spot, git's merge of
the two copies conflicts (or, elsewhere in the class, doubles them). patchguard keeps the patch
itself, so the stash need not bring it: git applies a copy of the stash commit (same parents,
message and untracked files) whose files hold everything but the patch's part, the real stash
entry is dropped only when that succeeded (as `pop` does), and the patch goes back by the
usual 3-way apply when the lift ends.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from guard.git.repo import Repo
from guard.store.derived import load_manifest
from guard.tree.assess import _contains_change, merge_labels
from guard.tree.unmerged import without_patch

_STASH_REF = re.compile(r"(stash@\{\d+\}|\d+)")
_QUIET = ("-q", "--quiet")


@dataclass(frozen=True)
class StashPlan:
    """What runs instead of the user's `git stash pop|apply`."""

    apply: list[str] | None  # `stash apply` of the copy without the patches; None: it is empty
    drop: list[str] | None  # for pop: the real entry, once the apply succeeded
    patches: list[str]  # the patches the stash held


def plan(repo: Repo, args: Sequence[str]) -> StashPlan | None:
    """The plan for `git stash pop|apply [-q] [STASH]`, or None: plain git does it.

    None as well for `--index` (the staged part would need the same care), for anything that
    is not a stash entry, and for a stash that holds no patch's change.
    """
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
    for patch in load_manifest(repo).patches:
        for change in patch.files:
            stashed = repo.file_at(stash, change.path)
            before = repo.file_at(f"{stash}^1", change.path)
            base = repo.blob(change.base_blob) if change.base_blob else b""
            patched = repo.blob(change.patched_blob)
            labels = merge_labels(patch)
            if stashed is None or stashed == before or base == patched:
                continue
            if before is not None and _contains_change(repo, base, before, patched, labels):
                continue  # the stash's own commit had it: it is upstream's, not the stash's
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
