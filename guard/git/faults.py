"""Kill points for the crash tests: a writer stopped dead at a named step boundary.

PATCHGUARD_KILL_AT=STEP: SIGKILL at that step, as a power cut would stop it (no handler, no
cleanup); STEP:stop, SIGSTOP, so a test can act while the writer waits there. Every step of the
store's transaction and of the worktree's journal is a point: the suite shows that each crash
leaves a state the next command completes or rolls back (tests/reliability/test_kill_points.py
lists them all). Unset, a point costs one lookup.
"""

from __future__ import annotations

import os

KILL_VARIABLE = "PATCHGUARD_KILL_AT"


def point(name: str) -> None:
    asked = os.environ.get(KILL_VARIABLE)
    if asked is not None and asked.partition(":")[0] == name:
        import signal

        os.kill(os.getpid(), signal.SIGSTOP if asked.endswith(":stop") else signal.SIGKILL)
