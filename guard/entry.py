"""The `patchguard` entry point, kept light: hooks and an unchanged `check` never import click,
pydantic or pygit2, and the plain forms of the commands people type most skip click (PLAIN)."""

from __future__ import annotations

import os
import sys

from guard.errors import ConfigError

VERIFIED_MESSAGE = "patchguard: all guards hold (content unchanged since it was last verified)"

# The commands whose plain forms run without click (issue 30), each by the module that parses
# them: its run_plain(directory, command, words) returns the exit code, or None to leave the
# form (--help, a mistake, another option) to click. One line per command.
PLAIN = {
    "status": "guard.cli.plain",
    "list": "guard.cli.plain",
    "show": "guard.cli.plain",
    "log": "guard.cli.plain",
    "stamp": "guard.cli.plain",
    "apply": "guard.cli.plain",
    "git": "guard.cli.lifted",
}


def main() -> None:
    from guard.errors import handled

    argv = sys.argv[1:]
    sys.exit(handled(lambda: _dispatch(argv), lambda: _crash_dir(argv)))


def _dispatch(argv: list[str]) -> int:
    directory = _start_directory(argv)
    if argv[:1] == ["hook"]:
        from guard.cli.hookrun import main as run_hook

        return run_hook(argv[1:])
    flags = _plain_check(argv)
    if flags is not None:
        return _check(directory, *flags)
    command, words = _command(argv)
    if command in PLAIN:
        from importlib import import_module

        code: int | None = import_module(PLAIN[command]).run_plain(directory, command, words)
        if code is not None:
            return code
    from guard.cli.app import main as run_cli

    return run_cli()


def _crash_dir(argv: list[str]) -> str:
    """A crash log goes into the git dir of the checkout the command ran in."""
    from guard.git.gitpaths import find_repository

    return find_repository(_start_directory(argv))[1]


def _start_directory(argv: list[str]) -> str:
    """Where the command runs (`-C DIR`, repeatable like git's, before or after the command
    name; the words after `git`, `run`, `bisect` or `hook` are not ours, but git's own -C
    says where `patchguard git` works)."""
    from guard.git.gitpaths import git_start_directory

    try:
        directory = os.getcwd()
    except FileNotFoundError:
        raise ConfigError(
            "the current directory no longer exists (deleted, or replaced by a checkout); "
            "cd into your checkout and run patchguard again"
        ) from None
    tokens = iter(argv)
    for token in tokens:
        if token == "-C":
            directory = os.path.join(directory, next(tokens, ""))
        elif token == "git":
            try:
                return git_start_directory(list(tokens), directory)
            except ConfigError:  # `patchguard git` itself refuses it, in one line
                return directory
        elif token in ("--", "run", "bisect", "hook"):  # the rest is someone else's
            break
    return directory


def _check(directory: str, quiet: bool, as_json: bool) -> int:
    """A plain check: the verified cache first, then the full check, neither through click."""
    from guard.store.fastpath import is_verified

    if not as_json and is_verified(directory):
        if not quiet:
            print(VERIFIED_MESSAGE)
        return 0
    from pathlib import Path

    from guard.cli.preflight import report_check

    return report_check(Path(directory), quiet=quiet, as_json=as_json)


def _command(argv: list[str]) -> tuple[str | None, list[str]]:
    """The command's name and the words after it, past the group's `-C DIR`s (None when one
    lacks its DIR or names a file: click says so)."""
    for at in range(0, len(argv), 2):
        if argv[at] != "-C":
            return argv[at], argv[at + 1 :]
        if at + 1 == len(argv) or _names_a_file(argv[at + 1]):
            break
    return None, []


def _names_a_file(directory: str) -> bool:
    return os.path.exists(directory) and not os.path.isdir(directory)


def _plain_check(argv: list[str]) -> tuple[bool, bool] | None:
    """(quiet, json) for `[-C DIR] check [-q] [--json] [-C DIR]`; None for anything else."""
    quiet, as_json, seen_check = False, False, False
    tokens = iter(argv)
    for token in tokens:
        if token == "-C":
            next(tokens, "")  # the directory: see _start_directory
        elif token in ("-q", "--quiet") and seen_check:
            quiet = True
        elif token == "--json" and seen_check:
            as_json = True
        elif token == "check" and not seen_check:
            seen_check = True
        else:
            return None
    return (quiet, as_json) if seen_check else None
