"""The patches in the worktree: status, apply and unapply, and `patchguard git`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from guard.cli import render
from guard.cli.options import PASS_THROUGH, directory_option, epilog, git_lifted, json_option
from guard.errors import EXIT_GUARD_FAILED, EXIT_OK
from guard.git.repo import Repo

if TYPE_CHECKING:
    from guard.tree import patching


@click.command(epilog=epilog("patchguard status", "patchguard status eagle3"))
@click.argument("names", nargs=-1)
@json_option
@directory_option
def status(cwd: Path, names: tuple[str, ...], as_json: bool) -> int:
    """Show each patch's state, file by file.

    States: applied, edited (a definition the patch adds is there, but not its recorded
    code), unapplied, drifted, upstream, doubled, does-not-merge (the patch does not merge
    with this version of the file; `patchguard resolve` keeps it as you shape it), conflicted
    (the file itself is: unmerged, conflict markers, or it does not parse), missing-file,
    outside-sparse, unsafe-path (a link, or a path into a git directory). Exits 1 whenever
    `check` would.
    """
    from guard.store import journal
    from guard.tree import assess

    repo = Repo.discover(cwd)
    report = assess.status_report(repo, names)
    for entry in [e for e in journal.entries(repo) if e.interrupted]:  # killed half written
        click.echo(
            f"patchguard: {entry.describe()}: the next apply, unapply or undo puts its files "
            "back as they were (a file edited since stays as it is)",
            err=True,
        )
    if as_json:
        patches = [render.verdict_json(verdict) for verdict in report.patches]
        click.echo(render.json_report("patchguard.status/2", patches=patches))
    else:
        lines = render.status_lines(report.patches, report.symbols)
        try:  # the stash's reflog, stash@{0} last
            stash_log = (repo.layout.common_dir / "logs" / "refs" / "stash").read_bytes()
        except OSError:  # no stash
            stash_log = b""
        if stash_log:
            from guard.tree import stashes

            lines += render.stash_lines(stashes.holding(repo, stash_log.decode(errors="replace")))
        click.echo("\n".join(lines) or "no patches recorded")
    for line in render.warning_lines(report):
        click.echo(line, err=True)
    return EXIT_OK if report.ok else EXIT_GUARD_FAILED


@click.command(epilog=epilog("patchguard apply", "patchguard apply eagle3 --dry-run"))
@click.argument("names", nargs=-1)
@click.option("-n", "--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option(
    "--merge", is_flag=True, help="On conflict, write git-style conflict markers into the file."
)
@json_option
@directory_option
def apply(cwd: Path, names: tuple[str, ...], dry_run: bool, merge: bool, as_json: bool) -> int:
    """Re-apply patches (all, or NAMES) by 3-way merge.

    A patch whose file cannot be merged cleanly, or whose merge would leave a required
    symbol missing or defined twice, is left untouched (exit 1), unless --merge asks for
    conflict markers. Running it again changes nothing.

    After a `git stash pop`, autostash or `git checkout -m` that conflicted in a patched
    file, it finishes git's merge there: HEAD's copy where HEAD already defines what the
    patch adds, the patch's otherwise, every other edit kept, the change left unstaged.
    Conflicts that are not the patch's stay marked.
    """
    from guard.tree import patching

    outcomes = patching.apply(Repo.discover(cwd), names, dry_run=dry_run, merge=merge, by_hand=True)
    return _finish(outcomes, as_json)


@click.command(epilog=epilog("patchguard unapply --dry-run", "patchguard unapply eagle3"))
@click.argument("names", nargs=-1)
@click.option("-n", "--dry-run", is_flag=True, help="Show what would change; write nothing.")
@json_option
@directory_option
def unapply(cwd: Path, names: tuple[str, ...], dry_run: bool, as_json: bool) -> int:
    """Take patches out of the worktree, keeping other edits.

    Use it before `git stash pop` of a stash that holds the same change.
    """
    from guard.tree import patching

    outcomes = patching.unapply(Repo.discover(cwd), names, dry_run=dry_run)
    return _finish(outcomes, as_json)


def _finish(outcomes: list[patching.PatchOutcome], as_json: bool) -> int:
    if as_json:
        click.echo(render.outcomes_json(outcomes))
    else:
        click.echo("\n".join(render.outcome_lines(outcomes)) or "no patches recorded")
    return EXIT_OK if all(o.ok for o in outcomes) else EXIT_GUARD_FAILED


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
