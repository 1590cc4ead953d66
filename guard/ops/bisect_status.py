"""What a step of `patchguard bisect run` tells git bisect: its exit statuses and the result.

Apart from guard.ops.moves, which runs the steps, so that guard.cli.render can word a step's result
without importing the operations it reports on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BISECT_SKIP = 125
BISECT_ABORT = 128  # `git bisect run` aborts on any status above 127
INTERRUPTED = 130  # a step's command ended by Ctrl-C (or a shell's report of that)
# `patchguard bisect run`'s exit when git stopped the run at a commit without a verdict (a
# step's command died from a signal or exited above 127, or patchguard's part failed): git's
# own status then is 256 minus the step's, which no script can read.
EXIT_BISECT_STOPPED = 4


@dataclass(slots=True)
class StepResult:
    """One step's status for git and what it says."""

    status: int
    head: str
    skipped: str | None = None
    problems: list[str] = field(default_factory=list)
    signal: int | None = None  # the signal that ended the command, when one did

    @property
    def stops_git(self) -> bool:
        """git bisect run aborts on a status above 127: this step marks nothing."""
        return self.status > 127


# What a step that aborts says after its reason: the bisect is intact, and how to go on.
GO_ON = (
    "Nothing is marked and the bisect stays where it is: fix the cause, then run patchguard "
    "bisect run again to go on (or mark this commit yourself: patchguard git bisect skip)"
)
# ... and after a command that was interrupted or died: nothing to fix in patchguard.
STOPPED_GO_ON = (
    "git bisect run stops on a status above 127, so nothing is marked and the bisect stays "
    "at this commit: run patchguard bisect run again to go on (patchguard git bisect skip "
    "first to pass over this commit), or end it: patchguard bisect reset"
)
