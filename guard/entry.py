"""The `patchguard` entry point: click parses every command (guard.cli.app), but `check [-q]`
(which CI and every benchmark script run) and the re-applying hooks first ask
guard.store.fastpath.is_verified: content verified before passes without importing click, which
would be most of such a run's time. The hooks' own forms go to guard.cli.hookrun.run_hook, as
the hidden click command does, so that a re-apply never pays for click either.
"""

from __future__ import annotations

import os
import sys

from guard.errors import ConfigError, handled
from guard.git.gitpaths import crash_dir

VERIFIED_MESSAGE = "patchguard: all guards hold (content unchanged since it was last verified)"
_QUIET = ("-q", "--quiet")
_REAPPLYING_HOOKS = (["post-checkout"], ["post-merge"], ["post-rewrite"])


def main() -> None:
    """Run the command with the cyclic collector set for a short process: its some 45,000
    objects live until it exits (mostly imported modules), and the default threshold walked
    them some 30 times, to free nothing. Every 50,000 still collects a long hunt's cycles; at
    exit they are frozen out (files close by `with`; the cat-file reader's finalizer runs)."""
    import gc

    gc.set_threshold(50_000)
    argv = sys.argv[1:]
    try:
        sys.exit(handled(lambda: _dispatch(argv), lambda: crash_dir(argv)))
    finally:  # a command may end by sys.exit itself
        gc.freeze()


def _dispatch(argv: list[str]) -> int:
    cwd = _cwd()
    if argv[:1] == ["hook"] and argv[1:2] in _REAPPLYING_HOOKS:
        from guard.store.fastpath import is_verified

        if is_verified(cwd):  # the patches are in and hold: nothing to re-apply
            if argv[1] == "post-rewrite":
                sys.stdin.read()  # git's list of rewritten commits, read as the hook reads it
            return 0
    # The installed hook scripts run `hook NAME ARGS...` (guard/_data/hooks); an option in
    # NAME's place (--pre-commit, --help) is click's to parse.
    if argv[:1] == ["hook"] and argv[1:2] and not argv[1].startswith("-"):
        from guard.cli.hookrun import run_hook

        return run_hook(argv[1:])
    check = _check_form(argv, cwd)
    if check is not None:
        from guard.store.fastpath import is_verified

        directory, quiet = check
        if is_verified(directory):
            if not quiet:
                print(VERIFIED_MESSAGE)
            return 0
    from guard.cli.app import run

    return run(argv)


def _cwd() -> str:
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise ConfigError(
            "the current directory no longer exists (deleted, or replaced by a checkout); "
            "cd into your checkout and run patchguard again"
        ) from None


def _check_form(argv: list[str], cwd: str) -> tuple[str, bool] | None:
    """(the directory, --quiet) of `[-C DIR] check [-q|--quiet] [-C DIR]`, the options after
    `check` in any order, each -C at most once (as click takes them); None for anything else.
    A DIR that is no directory is no verified content: click then says what is wrong."""
    before, words = (argv[1:2], argv[2:]) if argv[:1] == ["-C"] else ([], argv)
    if words[:1] != ["check"]:
        return None
    after: list[str] = []
    quiet = False
    tokens = iter(words[1:])
    for token in tokens:
        if token == "-C" and not after:
            after.append(next(tokens, ""))
        elif token in _QUIET:
            quiet = True
        else:
            return None
    directories = [*before, *after]
    if not all(directories):
        return None
    return os.path.join(cwd, *directories), quiet
