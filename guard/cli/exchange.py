"""export, import, push and fetch (guard.store.sharing). import and fetch change the
recording, not the files, so each says what the worktree holds."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from guard.cli.options import (
    advise_hooks,
    directory_option,
    epilog,
    install_option,
    json_option,
    say_worktree,
)
from guard.git.repo import Repo
from guard.ops import install


@click.command(
    name="export",
    epilog=epilog(
        "patchguard export -o eagle3.bundle.json",
        "patchguard export eagle3 > eagle3-only.bundle.json",
        "patchguard export | patchguard -C ~/sglang-gpu2 import -",
    ),
)
@click.argument("names", nargs=-1)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Write the bundle to FILE (relative to -C DIR, as git's paths are), not stdout.",
)
@directory_option
def export_(cwd: Path, names: tuple[str, ...], output: Path | None) -> None:
    """Write patches NAME... (default: all patches and guards), with their content, to a bundle.

    The bundle is one self-contained, schema-validated JSON file, on stdout unless -o FILE.
    """
    from guard.store import sharing

    text = sharing.export_bundle(Repo.discover(cwd), names)
    if output is None:
        click.echo(text, nl=False)
    else:
        sharing.write_bundle(cwd / output, text)


@click.command(
    name="import",
    epilog=epilog(
        "patchguard import eagle3.bundle.json && patchguard apply",
        "patchguard import --install eagle3.bundle.json",
    ),
)
@click.argument("file")
@install_option
@directory_option
def import_(cwd: Path, file: str, install_now: bool) -> None:
    """Add the patches and guards of a bundle.

    FILE comes from `patchguard export` (- for stdin); a relative FILE is read from -C DIR,
    as git reads its paths.

    The bundle is validated first; a path that would land outside the repository, or an
    unknown schema version, is refused and nothing is written. `patchguard undo` takes an
    import back.
    """
    from guard.store import sharing

    repo = Repo.discover(cwd)
    raw = sys.stdin.buffer.read() if file == "-" else sharing.read_bundle(cwd / file)
    lines, changed = sharing.import_bundle(repo, file, raw)
    click.echo("\n".join(lines) or "the bundle holds nothing")
    say_worktree(repo, changed)
    advise_hooks(repo, "them", install_now=install_now)


@click.command(epilog=epilog("patchguard push origin", "patchguard push --take-back origin"))
@click.argument("remote")
@click.option(
    "--take-back",
    is_flag=True,
    help="Push even where this clone undid a change fetched from REMOTE: that change is then "
    "taken back for everyone (the history records the choice).",
)
@directory_option
def push(cwd: Path, remote: str, take_back: bool) -> None:
    """Push the patches (their history, refs/patchguard/history) to REMOTE.

    REMOTE is what `git push` takes: a remote's name, a path, an ssh or https URL. Refused
    when REMOTE has changes to the patches this clone has not fetched, and (exit 1) when the
    push would take back a change of REMOTE's that this clone undid, unless --take-back.
    """
    from guard.store import sharing

    click.echo(sharing.push(Repo.discover(cwd), remote, take_back=take_back))


@click.command(
    epilog=epilog(
        "patchguard -C ~/sglang-gpu2 fetch origin && patchguard -C ~/sglang-gpu2 apply",
        "patchguard -C ~/sglang-gpu2 fetch --install origin",
        "patchguard fetch origin --theirs",
    )
)
@click.argument("remote")
@click.option(
    "--theirs",
    is_flag=True,
    help="Where a patch changed on both sides, take REMOTE's (yours stays in patchguard log).",
)
@click.option("--ours", is_flag=True, help="Where a patch changed on both sides, keep yours.")
@install_option
@json_option
@directory_option
def fetch(
    cwd: Path, remote: str, theirs: bool, ours: bool, install_now: bool, as_json: bool
) -> None:
    """Bring in the patches pushed to REMOTE: new and updated ones, patch by patch.

    A patch changed both here and on REMOTE since the last version both had is refused by
    name (exit 1) and nothing changes, unless --theirs or --ours says which to keep. The
    working tree is not touched: a line for each patch fetched says what the worktree holds
    and the command that brings it in line (`patchguard apply NAME`). `patchguard undo`
    takes a fetch back.
    """
    from guard.store import sharing

    if theirs and ours:
        raise click.UsageError("--theirs and --ours ask for opposite things; give one of them")
    repo = Repo.discover(cwd)
    keep = sharing.THEIRS if theirs else sharing.OURS if ours else None
    fetched = sharing.fetch(repo, remote, keep)
    if as_json:
        from guard.cli.render import json_report
        from guard.tree import assess

        report = json_report(
            "patchguard.fetch/1",
            remote=remote,
            up_to_date=fetched.up_to_date,
            changes=[{"kind": c.kind, "name": c.name} for c in fetched.changes],
            worktree=assess.worktree_lines(repo, fetched.patches),
            installed_hooks=(
                install.install(repo.layout, install.HOOK_TYPES, False)
                if install_now and not install.hooks_installed(repo.layout)
                else []
            ),
        )
        click.echo(report)
        advise_hooks(repo, "them", install_now=False)  # on stderr, when still not installed
        return
    click.echo("\n".join(fetched.lines()))
    say_worktree(repo, fetched.patches)
    advise_hooks(repo, "them", install_now=install_now)
