"""undo and log: both number the changes alike, 0 the newest (what `undo` takes back)."""

from __future__ import annotations

from pathlib import Path

import click

from guard.cli.options import directory_option, epilog, json_option, say_worktree
from guard.git.repo import Repo


@click.command(
    epilog=epilog("patchguard undo", "patchguard undo --list", "patchguard undo --list --json")
)
@click.argument("number", type=click.IntRange(min=0), required=False, metavar="[N]")
@click.option("--list", "as_list", is_flag=True, help="List what can be undone, newest first.")
@json_option
@directory_option
def undo(cwd: Path, number: int | None, as_list: bool, as_json: bool) -> None:
    """Undo the last change: an apply or unapply, or any change to the patches.

    An apply or unapply (patchguard git lifts count as unapply) puts the files back exactly
    as they were before it; the last 10 are kept. A change to the patches (record, re-record,
    require, drop, import, resolve, fetch) is taken back by a new change that restores the
    patches as they were, so `patchguard log` keeps both. Says which one it undid, and what
    the worktree holds now with the command that brings it in line; run it again to step
    further back. `undo N` takes back entries 0 to N of `undo --list` (numbered from 0 as
    `patchguard log` numbers its changes: 0 is the newest, what `undo` takes back).

    Refuses (exit 1) if a file was edited since, rather than lose that edit.
    """
    from guard.cli import render
    from guard.store import history

    repo = Repo.discover(cwd)
    if as_list or as_json:
        if not as_list or number is not None:
            raise click.UsageError("--json goes with --list, which takes no N")
        entries = history.undo_entries(repo)
        if as_json:
            click.echo(render.json_report("patchguard.undo-list/1", entries=entries))
        else:
            lines = [f"{entry['number']}. {entry['what']}" for entry in entries]
            click.echo("\n".join(lines) or "nothing to undo")
        return
    done = [history.undo(repo)] if number is None else history.undo_through(repo, number)
    for undone in done:
        click.echo(f"undid {undone.what}")
    say_worktree(repo, [name for undone in done for name in undone.patches])


@click.command(
    epilog=epilog(
        "patchguard log",
        "patchguard log eagle3",
        "patchguard show eagle3@{1}",
        "patchguard log --json",
    )
)
@click.argument("name", required=False)
@json_option
@directory_option
def log(cwd: Path, name: str | None, as_json: bool) -> None:
    """Show the history of the patches (or of patch NAME), newest first.

    Each change says what changed (recorded, re-recorded with which files, resolved,
    dropped, imported, fetched from where, undone), when, at which HEAD, and the
    description. Changes are numbered from 0, the newest: `patchguard show NAME@{N}` shows
    the version N of `log NAME`, and `undo --list` numbers the same way.
    """
    from guard.cli import render
    from guard.store import history

    changes = history.log_changes(Repo.discover(cwd), name)
    if as_json:
        click.echo(render.json_report("patchguard.log/1", patch=name, changes=changes))
        return
    click.echo("\n".join(render.log_lines(changes, name)) or "no history yet")
