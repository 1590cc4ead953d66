"""install, uninstall and doctor: the git hooks that re-apply the patches (guard.ops.install)."""

from __future__ import annotations

from pathlib import Path

import click

from guard.cli.hookrun import run_hook
from guard.cli.options import PASS_THROUGH, directory_option, epilog, json_option
from guard.errors import EXIT_GUARD_FAILED, EXIT_OK
from guard.git.gitdir import locate
from guard.ops import install

_HOOK_CHOICE = click.Choice(install.HOOK_TYPES)


@click.command(
    name="install",
    epilog=epilog(
        "patchguard install",
        "patchguard install -C ~/sglang --hook post-checkout",
    ),
)
@click.option(
    "--hook",
    "hook_types",
    multiple=True,
    type=_HOOK_CHOICE,
    help="Install only this hook (repeatable). Default: all four.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Create the hooks directory if core.hooksPath names a missing one.",
)
@directory_option
def install_(cwd: Path, hook_types: tuple[str, ...], force: bool) -> None:
    """Install the git hooks that re-apply patches.

    post-checkout, post-merge and post-rewrite re-apply after checkout, merge, pull and
    rebase; reference-transaction reports `git stash`.

    A hook already in place is kept as NAME.patchguard-legacy and runs first, with the
    same arguments and stdin. Safe to run again.
    """
    lines = install.install(locate(cwd), hook_types or install.HOOK_TYPES, force)
    click.echo("\n".join(lines))


@click.command(epilog=epilog("patchguard uninstall"))
@click.option("--hook", "hook_types", multiple=True, type=_HOOK_CHOICE, help="Only this hook.")
@directory_option
def uninstall(cwd: Path, hook_types: tuple[str, ...]) -> None:
    """Remove the hooks and restore the ones that were there before."""
    lines = install.uninstall(locate(cwd), hook_types or install.HOOK_TYPES)
    click.echo("\n".join(lines))


@click.command(epilog=epilog("patchguard doctor", "patchguard doctor --json"))
@json_option
@directory_option
def doctor(cwd: Path, as_json: bool) -> int:
    """Check that the hooks are installed and that git will run them.

    Says where git looks for hooks (core.hooksPath included), which interpreter each hook
    calls, and catches non-executable hooks and missing interpreters.
    """
    lines, problems = install.doctor(locate(cwd))
    if as_json:
        from guard.cli.render import json_report

        fields = {"ok": not problems, "lines": lines, "problems": problems}
        click.echo(json_report("patchguard.doctor/1", **fields))
    else:
        click.echo("\n".join(lines))
        for problem in problems:
            click.echo(f"problem: {problem}", err=True)
        if not problems:
            click.echo("patchguard: hooks are in place and git will run them")
    return EXIT_GUARD_FAILED if problems else EXIT_OK


@click.command(name="hook", hidden=True, context_settings=PASS_THROUGH)
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED, metavar="NAME [ARGS]...")
def hook(argv: tuple[str, ...]) -> int:
    """What the installed git hooks run (guard.entry takes their own forms without click)."""
    return run_hook(argv)
