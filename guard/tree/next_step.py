"""After a command changed the patches under a worktree (undo, fetch, import): one line per
patch saying what the worktree holds now, and the command that brings the file in line.

They change the recording, never the files, so the worktree may hold another version than the
one now recorded: which one, earlier or later, is read from the history, never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from guard.store.derived import load_manifest
from guard.store.history import order
from guard.tree import assess
from guard.tree.verdicts import FileVerdict, PatchVerdict, State, fix_for, in_words
from guard.tree.worktree import Worktree

if TYPE_CHECKING:
    from guard.git.repo import Repo


def worktree_lines(repo: Repo, names: Sequence[str]) -> list[str]:
    """One line for each patch in `names` (each once, in order): what the worktree holds."""
    manifest = load_manifest(repo, missing_ok=True)
    tree = Worktree(repo)
    lines = []
    for name in dict.fromkeys(names):
        if manifest.patch(name) is None:
            lines.append(
                f"patch {name} is no longer recorded; the worktree's files are as they were "
                "(git diff shows what of it they still hold)"
            )
            continue
        (verdict,) = assess.status(repo, [name], tree)
        lines.append(_line(repo, verdict))
    return lines


def _line(repo: Repo, verdict: PatchVerdict) -> str:
    name = verdict.name
    if verdict.ok:
        return f"the worktree holds patch {name} as it is recorded now; nothing to do"
    worst = next(f for f in verdict.files if f.state is verdict.state)
    held = next((f for f in verdict.files if f.held is not None), None)
    if held is not None and worst.state is State.DRIFTED:
        return (
            f"the worktree still holds {_held(repo, name, held)}: patchguard apply {name} puts "
            "the recorded one in"
        )
    if held is not None:
        return (
            f"the worktree still holds {_held(repo, name, held)}, and the recorded one does not "
            f"merge with your edits there: {fix_for(name, worst)}"
        )
    if worst.state is State.UNAPPLIED:
        return f"the worktree does not hold patch {name} yet: patchguard apply {name} puts it in"
    if worst.state is State.DRIFTED:
        return (
            f"the worktree does not hold patch {name} yet (the file moved on since its base): "
            f"patchguard apply {name} merges it in"
        )
    return f"{worst.path}: patch {name} {in_words(worst)} -> {fix_for(name, worst)}"


def _held(repo: Repo, name: str, verdict: FileVerdict) -> str:
    """ "the re-recorded version of patch eagle3 (later than the one now recorded)"."""
    assert verdict.held is not None and verdict.version is not None
    found = order(repo, verdict.held.patched_blob, verdict.version.patched_blob)
    if found is None:
        return f"another version of patch {name} than the one now recorded"
    made = f"the {found.made_by}" if found.made_by else "a"
    return f"{made} version of patch {name} ({found.held} than the one now recorded)"
