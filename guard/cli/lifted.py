"""What `patchguard git` and the bisect shorthands share, so that neither command module loads
the other."""

from __future__ import annotations

import sys
from pathlib import Path

from guard.cli import render
from guard.errors import EXIT_GUARD_FAILED, EXIT_OK
from guard.git.repo import Repo

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from guard.ops import moves


def git_lifted(cwd: Path, args: Sequence[str]) -> int:
    """Run `git ARGS` with the patches lifted and say what happened."""
    from guard.git.gitpaths import git_start_directory
    from guard.ops import moves

    repo = Repo.discover(Path(git_start_directory(args, str(cwd))))  # git's own -C DIR
    status, lift = moves.run_git_lifted(repo, args, cwd)
    if status == 128 + 13:  # SIGPIPE: `patchguard git log | head`, the reader had enough
        status = EXIT_OK
    return report_lift(lift, "git " + " ".join(args), status)


def report_lift(lift: moves.Lift, what: str, status: int) -> int:
    """The exit status: git's own `status` when git failed, else 0, or 1 when a guard is red."""
    for line in render.lift_lines(lift):
        print(f"patchguard: {line}", file=sys.stderr)
    if lift.report is not None and not lift.report.ok:
        print(render.banner(f"guard FAILED after {what}", lift.report.problems()), file=sys.stderr)
    return status or (EXIT_OK if lift.ok else EXIT_GUARD_FAILED)
