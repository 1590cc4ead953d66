"""The `patchguard` entry point, kept light: hooks and an unchanged `check` never import click,
pydantic or pygit2."""

from __future__ import annotations

import os
import sys

VERIFIED_MESSAGE = "patchguard: all guards hold (content unchanged since it was last verified)"


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["hook"]:
        from guard.hookrun import main as run_hook

        sys.exit(run_hook(argv[1:]))
    request = _plain_check(argv)
    if request is not None:
        from guard.fastpath import is_verified

        directory, quiet = request
        if is_verified(directory):
            if not quiet:
                print(VERIFIED_MESSAGE)
            sys.exit(0)
    from guard.cli import main as run_cli

    run_cli()


def _plain_check(argv: list[str]) -> tuple[str, bool] | None:
    """(directory, quiet) for `[-C DIR] check [-q] [-C DIR]`; None for anything else."""
    directory, quiet, seen_check = os.getcwd(), False, False
    tokens = iter(argv)
    for token in tokens:
        if token == "-C":
            directory = os.path.join(directory, next(tokens, ""))
        elif token in ("-q", "--quiet") and seen_check:
            quiet = True
        elif token == "check" and not seen_check:
            seen_check = True
        else:
            return None
    return (directory, quiet) if seen_check else None
