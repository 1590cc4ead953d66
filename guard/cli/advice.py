"""What a command says after it changed the patches but not the files: that hooks are missing
(patches without them vanish on the next checkout), and what the worktree holds now, with the
command that brings it in line.

record, import, fetch and undo say it alike, from their own modules: one home for the words.
"""

from __future__ import annotations

import click

from guard.git.repo import Repo


def advise_hooks(repo: Repo, what: str, *, install_now: bool) -> None:
    """Patches without hooks vanish on the next checkout: install them, or say how."""
    from guard.ops import install  # not for list, show and log, which import this module

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
    from guard.tree import next_step

    for line in next_step.worktree_lines(repo, names):
        click.echo(f"patchguard: {line}", err=True)
