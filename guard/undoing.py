"""`patchguard undo`: one command for both kinds of change, newest first.

A worktree write (apply, unapply, a move's lift) is kept in the worktree's journal
(guard.journal); a change to the patches is a commit on the history ref (guard.history). Undo
takes back whichever came last, and `undo --list` shows both in time order.
"""

from __future__ import annotations

from guard import history, journal
from guard.errors import ConfigError

TYPE_CHECKING = False  # typing costs the hooks ~3 ms
if TYPE_CHECKING:
    from guard.repo import Repo


def undo(repo: Repo) -> str:
    """Undo the newest of the worktree's last apply/unapply and the patches' last change."""
    latest = journal.latest_entry(repo)
    entries = journal.entries(repo)
    changes = history.undoable(repo)
    if latest is None and not changes:
        raise ConfigError(
            "nothing to undo: no apply or unapply is recorded for this worktree, and the "
            "patches have no change to take back (see: patchguard log)"
        )
    newest_entry = entries[0] if entries and entries[0].path == latest else None
    if latest is not None and (
        not changes or newest_entry is None or newest_entry.created >= changes[0].created
    ):
        return journal.undo(repo).describe()  # the newest entry, or a killed one put back
    history.undo_change(repo, changes[0])
    return changes[0].describe()


def undo_list(repo: Repo) -> list[str]:
    """Everything `undo` can take back, newest first: worktree writes and patch changes merged."""
    found = [(e.created, e.describe()) for e in journal.entries(repo)]
    found += [(c.created, c.describe()) for c in history.undoable(repo)]
    found.sort(key=lambda item: item[0], reverse=True)
    return [f"{number}. {text}" for number, (_, text) in enumerate(found, 1)]
