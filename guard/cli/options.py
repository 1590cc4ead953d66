"""What the command modules share (the lift around git serves `patchguard git` and bisect), in
a module of its own so that a command loads this and its own module only."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from guard.errors import EXIT_GUARD_FAILED, EXIT_OK

if TYPE_CHECKING:
    from guard.git.repo import Repo
    from guard.ops import moves

EXIT_CODES_EPILOG = (
    "Exit codes: 0 all good, 1 a guard failed, 2 usage or configuration error, "
    "3 internal error (a bug; the message names its log), 130 interrupted."
)


def epilog(*examples: str, exit_codes: str = EXIT_CODES_EPILOG) -> str:
    lines = ["\b", "Examples:", *(f"  {e}" for e in examples), "", exit_codes]
    return "\n".join(lines)


# Everything from the first word of a command on belongs to that command (git's, or the user's).
PASS_THROUGH = {"ignore_unknown_options": True, "allow_interspersed_args": False}

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the machine-readable report (docs/json.md)."
)


def _directory(ctx: click.Context, _: click.Parameter, directory: Path | None) -> Path:
    """`-C DIR` on a command, relative to the group's `-C`, as git resolves repeated -C."""
    base: Path = ctx.obj or Path.cwd()
    return base / directory if directory else base


directory_option = click.option(
    "-C",
    "cwd",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    callback=_directory,
    help="Run as if started in DIR.",
)


install_option = click.option(
    "--install",
    "install_now",
    is_flag=True,
    help="Also install the hooks (patchguard install) when they are not installed.",
)


def advise_hooks(repo: Repo, what: str, *, install_now: bool) -> None:
    """Patches without hooks vanish on the next checkout: install them, or say how."""
    from guard.ops import install  # not for list, show and log

    if install.hooks_installed(repo.layout):
        return
    if install_now:
        click.echo("\n".join(install.install(repo.layout, install.HOOK_TYPES, False)))
        return
    click.echo(
        f"patchguard: hooks are not installed, so a checkout will not re-apply {what}; "
        "run: patchguard install",
        err=True,
    )


def say_worktree(repo: Repo, names: list[str]) -> None:
    """After the patches changed under the worktree: what it holds, and the next command."""
    if not names:
        return
    from guard.tree import assess

    for line in assess.worktree_lines(repo, names):
        click.echo(f"patchguard: {line}", err=True)


def git_lifted(cwd: Path, args: Sequence[str]) -> int:
    from guard.git.gitpaths import git_start_directory
    from guard.git.repo import Repo
    from guard.ops import moves

    repo = Repo.discover(Path(git_start_directory(args, str(cwd))))  # git's own -C DIR
    status, lift = moves.run_git_lifted(repo, args, cwd)
    if status == 128 + 13:  # SIGPIPE: `patchguard git log | head`, the reader had enough
        status = EXIT_OK
    return report_lift(lift, "git " + " ".join(args), status)


def report_lift(lift: moves.Lift, what: str, status: int) -> int:
    """The exit status: git's own `status` when git failed, else 0, or 1 when a guard is red."""
    from guard.cli import render

    for line in render.lift_lines(lift):
        print(f"patchguard: {line}", file=sys.stderr)
    if lift.report is not None and not lift.report.ok:
        print(render.banner(f"guard FAILED after {what}", lift.report.problems()), file=sys.stderr)
    return status or (EXIT_OK if lift.ok else EXIT_GUARD_FAILED)
