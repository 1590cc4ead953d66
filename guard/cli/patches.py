"""The commands that make and read the recording; none touches the worktree's files."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from guard.cli.options import advise_hooks, directory_option, epilog, json_option
from guard.git.repo import Repo


@click.command(
    epilog=epilog(
        "patchguard record eagle3 python/sglang/srt/models/kimi_k25.py -m 'EAGLE-3 delegation'",
        "patchguard record eagle3 python/sglang/srt/models/kimi_k25.py "
        "--require python/sglang/srt/models/kimi_k25.py::KimiK25ForConditionalGeneration.forward",
    )
)
@click.argument("name")
@click.argument("paths", nargs=-1)
@click.option(
    "--require",
    "requires",
    multiple=True,
    metavar="SPEC",
    help="Also require this symbol (file.py::Class.method). Repeatable.",
)
@click.option("-m", "--message", default=None, help="What the patch is for (kept on a re-record).")
@click.option(
    "--rebase",
    is_flag=True,
    help="Re-record NAME here although HEAD is not its base (or a bisect, merge, rebase or "
    "cherry-pick is in progress): the patch's base moves to this commit.",
)
@click.option(
    "-p",
    "--patch",
    "choose_hunks",
    is_flag=True,
    help="Choose the hunks to record, as git add -p does (git's own prompts); the rest stays "
    "in the file as your own edit.",
)
@click.option(
    "--as-typed",
    is_flag=True,
    help="Record a function at module level whose first parameter is self (or cls) in a file "
    "that defines a class as it stands; without it record refuses it (exit 1, nothing "
    "recorded) as a method typed outside its class.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse (exit 1, nothing recorded) a method name one letter off the one it "
    "delegates to, too (a warning otherwise).",
)
@directory_option
def record(
    cwd: Path,
    name: str,
    paths: tuple[str, ...],
    requires: tuple[str, ...],
    message: str | None,
    rebase: bool,
    as_typed: bool,
    strict: bool,
    choose_hunks: bool,
) -> None:
    """Record uncommitted changes (against HEAD) as patch NAME.

    Without PATHS, every tracked file with changes is taken (files already in another
    patch are skipped). Symbols whose def/class line the patch adds are required
    automatically. Recording NAME again replaces it and keeps its description unless -m
    is given; away from the patch's base commit, or mid-bisect, merge, rebase or
    cherry-pick, that needs --rebase (exit 2 otherwise, nothing changed).
    """
    repo = Repo.discover(cwd)
    from guard.tree import recording

    outcome = recording.record(
        repo,
        name,
        paths,
        requires=requires,
        description=message,
        rebase=rebase,
        strict=strict,
        as_typed=as_typed,
        choose_hunks=choose_hunks,
        cwd=cwd,
    )
    verb = "replaced" if outcome.replaced else "recorded"
    patch = outcome.patch
    click.echo(f"{verb} patch {patch.name}: {len(patch.files)} file(s)")
    for change in patch.files:
        click.echo(f"  {change.path}")
    for spec in patch.requires:
        click.echo(f"  requires {spec}")
    for path in outcome.skipped:
        click.echo(f"  skipped {path}: it belongs to another patch (name it to include it)")
    for slip in outcome.slips:
        click.echo(f"patchguard: warning: {slip} (recorded as typed)", err=True)
    if outcome.grown:
        click.echo(
            f"patchguard: the re-record adds {len(outcome.grown)} line(s) that patch {patch.name} "
            "did not have before; if one is not part of it (a debug line), take it out and "
            "record again (patchguard undo brings the previous version back):",
            err=True,
        )
        for line in outcome.grown:
            click.echo(f"  + {line}", err=True)
    advise_hooks(repo, "it", install_now=False)


@click.command(
    epilog=epilog(
        "patchguard require "
        "python/sglang/srt/models/kimi_k25.py::KimiK25ForConditionalGeneration.load_weights"
    )
)
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
@directory_option
def require(cwd: Path, specs: tuple[str, ...]) -> None:
    """Guard committed symbols that must never disappear.

    SPEC is written like a pytest node id: path/to/file.py::Class.method. It must exist now.
    """
    from guard.tree import recording

    added = recording.require(Repo.discover(cwd), specs, cwd=cwd)
    for spec in added:
        click.echo(f"guarding {spec}")
    if not added:
        click.echo("already guarded; nothing changed")


@click.command(name="list", epilog=epilog("patchguard list", "patchguard list --json"))
@json_option
@directory_option
def list_(cwd: Path, as_json: bool) -> None:
    """List recorded patches and guards (without computing states)."""
    from guard.cli.render import json_report
    from guard.store.derived import load_manifest
    from guard.store.manifest import as_dict

    manifest = load_manifest(Repo.discover(cwd), missing_ok=True)
    if as_json:
        click.echo(json_report("patchguard.list/1", **as_dict(manifest)))
        return
    lines = []
    if not manifest.patches and not manifest.guards:
        lines.append("nothing recorded: no patches and no guards (patchguard record NAME)")
    for patch in manifest.patches:
        summary = f" - {patch.description}" if patch.description else ""
        lines.append(f"patch {patch.name}{summary} (base {patch.base_commit[:10]})")
        lines += [f"  {change.path}" for change in patch.files]
    lines += [f"guard {spec}" for spec in manifest.guards]
    click.echo("\n".join(lines))


@click.command(
    epilog=epilog("patchguard show", "patchguard show eagle3", "patchguard show eagle3@{1}")
)
@click.argument("names", nargs=-1)
@directory_option
def show(cwd: Path, names: tuple[str, ...]) -> None:
    """Show recorded patches: description, base commit, files, required symbols and diff.

    NAME@{N} shows an earlier version: N as `patchguard log NAME` numbers them.
    Coloured and paged (like git show) on a terminal; plain text otherwise.
    """
    from guard.cli.render import show_lines
    from guard.store import history
    from guard.store.derived import load_manifest
    from guard.store.manifest import select_patches

    repo = Repo.discover(cwd)
    if any("@{" in name for name in names):
        patches = [
            history.patch_version(repo, name)
            if "@{" in name
            else select_patches(load_manifest(repo), [name])[0]
            for name in names
        ]
    else:
        patches = select_patches(load_manifest(repo), names)
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    lines = show_lines(patches, color=color)
    if not (lines and sys.stdout.isatty()):  # nothing to page, or no terminal to page on
        click.echo("\n".join(lines) or "no patches recorded")
        return
    os.environ.setdefault("LESS", "FRX")  # as git does: quit if one screen, keep colours
    click.echo_via_pager("\n".join(lines) + "\n", color=color)


@click.command(epilog=epilog("patchguard resolve eagle3"))
@click.argument("name")
@click.option(
    "--drop",
    "forget",
    type=int,
    metavar="N",
    default=None,
    help="Forget resolution N of the patch (as `patchguard show NAME` numbers them).",
)
@click.option(
    "--keep-extra",
    is_flag=True,
    help="Keep lines the resolution adds that are neither the patch's nor upstream's, without "
    "asking (a debug line left in the file would ride along in every move).",
)
@directory_option
def resolve(cwd: Path, name: str, forget: int | None, keep_extra: bool) -> None:
    """Keep the patch as you shaped it by hand at this commit, for this version of upstream.

    Where patch NAME does not merge (upstream changed the lines it touches), edit the file
    into the right shape here and run this. The recording stays as it was (base, diff,
    description, required symbols); the file as it is now is kept beside it as a resolution
    for this version of upstream's file. From then on every move (hooks, `patchguard git`,
    bisect steps, apply) merges from the version whose base is nearest to the file at hand,
    so the commits around this one are carried too, and the recorded base gets the recorded
    file back byte for byte. `patchguard undo` takes a resolution back.

    Lines the resolution adds that are neither the patch's nor upstream's are listed, and kept
    only when you confirm (on a terminal) or pass --keep-extra; otherwise nothing is kept
    (exit 1). Where the patch merges here as it is, nothing conflicts and nothing is kept.
    """
    from guard.tree import recording

    repo = Repo.discover(cwd)
    try:
        outcome = recording.resolve(repo, name, forget=forget, keep_extra=keep_extra)
    except recording.ExtraLines as extra:
        click.echo(
            f"patchguard: the resolution of {name} adds {len(extra.lines)} line(s) that are "
            "neither the patch's nor upstream's:",
            err=True,
        )
        for line in extra.lines:
            click.echo(f"  + {line}", err=True)
        if not sys.stdin.isatty() or not click.confirm("Keep them in the resolution?", err=True):
            raise
        outcome = recording.resolve(repo, name, keep_extra=extra.lines)
    if forget is not None:
        click.echo(f"forgot resolution {forget} of patch {name}")
    elif outcome.resolved:
        for path in outcome.resolved:
            click.echo(f"resolved patch {name}: {path} kept as it is for this version of upstream")
        if outcome.extra:
            click.echo(
                f"  with {len(outcome.extra)} line(s) neither the patch's nor upstream's, as "
                "you asked (patchguard undo takes the resolution back)"
            )
    else:
        click.echo(
            f"nothing to resolve: nothing conflicts, patch {name} merges with this version of "
            f"the file as it is; nothing was kept (patchguard status {name})"
        )


@click.command(
    epilog=epilog(
        "patchguard drop eagle3",
        "patchguard drop "
        "python/sglang/srt/models/kimi_k25.py::KimiK25ForConditionalGeneration.load_weights",
    )
)
@click.argument("target", metavar="NAME|SPEC")
@directory_option
def drop(cwd: Path, target: str) -> None:
    """Forget a patch or a guard. The working tree is not touched.

    `patchguard undo` brings a dropped patch back.
    """
    from guard.tree import recording

    dropped = recording.drop(Repo.discover(cwd), target, cwd=cwd)
    click.echo(f"dropped {dropped}")
