"""`patchguard undo`: one command for both kinds of change, newest first.

A worktree write is kept in the worktree's journal (guard.store.journal), a change to the
patches in the history (guard.store.history); undo takes back whichever came last, and
`undo --list` numbers both from 0 as `patchguard log` does: 0 is what `undo` takes back next.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from guard.errors import ConfigError
from guard.store import history, journal
from guard.store.manifest import Manifest, changed_patches

if TYPE_CHECKING:
    from typing import Any

    from guard.git.repo import Repo

WORKTREE = "worktree"  # an apply, unapply or lift: the files go back
PATCHES = "patches"  # a change to the patches: the manifest goes back


class Undone(NamedTuple):
    """What one undo took back, and the patches whose recording or files it changed."""

    what: str
    patches: list[str]


def undo(repo: Repo) -> Undone:
    """Undo the newest of the worktree's last apply/unapply and the patches' last change."""
    latest = journal.latest_entry(repo)
    changes = history.undoable(repo)
    if latest is None and not changes:
        raise ConfigError(
            "nothing to undo: no apply or unapply is recorded for this worktree, and the "
            "patches have no change to take back (see: patchguard log)"
        )
    newest = next((e for e in journal.entries(repo) if e.path == latest), None)  # None: damaged
    if latest is not None and (
        not changes or newest is None or newest.created >= changes[0].created
    ):
        entry = journal.undo(repo)  # the newest entry, or a killed one put back
        return Undone(entry.describe(), list(entry.patches))
    change = changes[0]
    try:
        made = history.manifest_at(repo, change.commit)
    except ConfigError:  # a state that is not valid (pushed from elsewhere): it held nothing
        made = Manifest()
    restored = history.undo_change(repo, change)
    return Undone(change.describe(), changed_patches(restored, made))


def undo_through(repo: Repo, number: int) -> list[Undone]:
    """`undo N`: entries 0 to N of `undo --list`, one `undo` each, each checked against the
    list as it stood, so a change made meanwhile by another command is never the one taken back.
    """
    listed = undo_entries(repo)
    if not 0 <= number < len(listed):
        raise ConfigError(
            f"undo {number}: `patchguard undo --list` has {len(listed)} entr"
            f"{'y' if len(listed) == 1 else 'ies'}"
            + (f", numbered 0 to {len(listed) - 1}" if listed else "")
            + "; nothing was undone"
        )
    done: list[Undone] = []
    for expected in listed[: number + 1]:
        now = undo_entries(repo)
        if not now or now[0]["what"] != expected["what"]:
            raise ConfigError(
                f"the list changed while undoing (another command ran); undid {len(done)} of "
                f"{number + 1}. See: patchguard undo --list"
            )
        done.append(undo(repo))
    return done


def undo_entries(repo: Repo) -> list[dict[str, Any]]:
    """Everything `undo` can take back, newest first, worktree writes and patch changes merged."""
    found = [(e.created, WORKTREE, e.describe()) for e in journal.entries(repo)]
    found += [(c.created, PATCHES, c.describe()) for c in history.undoable(repo)]
    found.sort(key=lambda item: item[0], reverse=True)
    return [
        {
            "number": number,
            "kind": kind,
            "time": datetime.fromtimestamp(created).astimezone().isoformat(),
            "what": what,
        }
        for number, (created, kind, what) in enumerate(found)
    ]
