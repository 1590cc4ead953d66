"""What a step of `patchguard bisect run` tells git bisect: its exit statuses and the result.

Apart from guard.moves, which runs the steps, so that guard.render can word a step's result
without importing the operations it reports on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BISECT_SKIP = 125
BISECT_ABORT = 128  # `git bisect run` aborts on any status above 127


@dataclass
class StepResult:
    status: int
    head: str
    skipped: str | None = None
    problems: list[str] = field(default_factory=list)


# What a step that aborts says after its reason: the bisect is intact, and how to go on.
GO_ON = (
    "Nothing is marked and the bisect stays where it is: fix the cause, then run patchguard "
    "bisect run again to go on (or mark this commit yourself: patchguard git bisect skip)"
)
