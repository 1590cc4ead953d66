"""`patchguard git` (the lift itself is guard.cli.options', shared with the bisect commands)."""

from __future__ import annotations

import click

from guard.cli.options import PASS_THROUGH, epilog, git_lifted


@click.command(
    name="git",
    context_settings=PASS_THROUGH,
    epilog=epilog(
        "patchguard git pull",
        "patchguard git rebase origin/main",
        "patchguard git checkout v0.5.9",
        "patchguard git stash pop",
        "patchguard git bisect start v0.5.10 v0.5.9",
        "patchguard git bisect good",
        exit_codes="Exit codes: git's own when git fails; otherwise 0, or 1 when a guard fails "
        "afterwards; 2 usage or configuration error.",
    ),
)
@click.argument("args", nargs=-1, required=True, type=click.UNPROCESSED, metavar="GIT_ARGS...")
@click.pass_context
def git_(ctx: click.Context, args: tuple[str, ...]) -> int:
    """Run any git command with the patches lifted out of the tree, then put them back.

    Every applied patch is taken out (as `unapply`, undoable), git runs with your terminal
    and with patchguard's hooks quiet, then every patch is re-applied by 3-way merge and
    checked. So git never refuses to move over a patched file, and a stash pop never
    doubles a method. Every word after `git` goes to git (`patchguard git checkout --help`
    is git's help). The patches lifted are those of the worktree git works in: `patchguard
    git -C DIR ...` lifts DIR's (git's --git-dir, --work-tree and --bare are refused). A
    worktree git creates (`patchguard git worktree add PATH`) gets the patches from its
    post-checkout hook, as with plain git.

    Exit status: git's own when git fails (the tree is put back as it was); otherwise 0,
    or 1 when a guard fails afterwards. When git stops halfway (a conflicted merge, rebase,
    cherry-pick or stash pop), the patches stay out until it is finished.
    """
    return git_lifted(ctx.obj, args)
