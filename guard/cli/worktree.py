"""The patches in the worktree: status, apply and unapply."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from guard.cli import render
from guard.cli.options import directory_option, epilog, json_option
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
        stash_log = _stash_log(repo)
        if stash_log:
            from guard.tree import stashes

            lines += render.stash_lines(stashes.holding(repo, stash_log))
        click.echo("\n".join(lines) or "no patches recorded")
    for line in render.warning_lines(report):
        click.echo(line, err=True)
    return EXIT_OK if report.ok else EXIT_GUARD_FAILED


def _stash_log(repo: Repo) -> str:
    """The stash's reflog (stash@{0} last), "" without a stash."""
    try:
        log = (repo.layout.common_dir / "logs" / "refs" / "stash").read_bytes()
    except OSError:
        return ""
    return log.decode(errors="replace")


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
