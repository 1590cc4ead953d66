"""Which of two versions of a patch's file came first, read from the history (never guessed):
after an undo the worktree holds a *later* version than the one recorded, after a fetch an
*earlier* one, and the two read alike in a file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from guard.store import history

if TYPE_CHECKING:
    from guard.git.repo import Repo

EARLIER = "earlier"
LATER = "later"
_MADE_BY = ("re-recorded", "recorded", "fetched", "imported", "resolved")


class Order(NamedTuple):
    """How the version a worktree holds stands to the recorded one."""

    held: str  # EARLIER or LATER than the recorded version
    made_by: str  # the change that first held it: "re-recorded", "fetched", ... or ""

    def article(self) -> str:
        return "an earlier" if self.held == EARLIER else "a later"


def order(repo: Repo, held_blob: str, recorded_blob: str) -> Order | None:
    """Where `held_blob` (the worktree's version of a patch's file) stands to `recorded_blob`,
    by the state that first held each: None when the history holds either nowhere. Each state
    pins its manifest's blobs in its `blobs/` tree, so that is a tree lookup, no manifest read.
    """
    import pygit2

    first: dict[str, tuple[int, str]] = {}
    for age, change in enumerate(history.walk(repo)):  # newest first: the last hit is the oldest
        tree = repo.git[change.commit].peel(pygit2.Commit).tree
        if history.BLOBS_ENTRY not in tree:
            continue
        pinned = tree[history.BLOBS_ENTRY].peel(pygit2.Tree)
        for blob in (held_blob, recorded_blob):
            if blob in pinned:
                first[blob] = (age, change.subject)
    if held_blob not in first or recorded_blob not in first:
        return None
    (held_age, subject), (recorded_age, _) = first[held_blob], first[recorded_blob]
    made_by = next((verb for verb in _MADE_BY if subject.startswith(verb)), "")
    return Order(LATER if held_age < recorded_age else EARLIER, made_by)
