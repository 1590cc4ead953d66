"""The `patchguard` group. It knows its commands by name and module only (COMMANDS) and imports
a command's module when that command runs: a command run many times a day pays for its own
module, not for the whole CLI (`--help`, which lists them all, imports them all).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from guard.cli.options import epilog
from guard.errors import EXIT_OK, handled
from guard.git.gitpaths import crash_dir

# The functions of each command module of guard.cli; a command's name is its function's
# without the trailing _ that keeps it off a Python name. ("hook" is hidden: the hooks run it.)
_MODULES = {
    "patches": ("record", "require", "list_", "show", "resolve", "drop"),
    "checking": ("check", "run", "stamp"),
    "worktree": ("status", "apply", "unapply", "git_"),
    "changes": ("undo", "log"),
    "hunting": ("compare", "bisect"),
    "exchange": ("export_", "import_", "push", "fetch"),
    "hooks": ("install_", "uninstall", "doctor", "hook"),
}
COMMANDS = {f.rstrip("_"): f"{module}.{f}" for module, names in _MODULES.items() for f in names}


class _Group(click.Group):
    """click's LazyGroup pattern. `main()` (what click's test runner calls) runs as the
    installed command does: under guard.errors.handled."""

    def main(self, args: Sequence[str] | None = None, *_: Any, **__: Any) -> NoReturn:
        argv = list(sys.argv[1:] if args is None else args)
        sys.exit(handled(lambda: run(argv), lambda: crash_dir(argv)))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, name = where.split(".")
        command: click.Command = getattr(importlib.import_module(f"guard.cli.{module}"), name)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """A git command typed where a patchguard one goes gets the command that works."""
        if args and args[0] in _GIT_MOVES and self.get_command(ctx, args[0]) is None:
            import shlex

            ctx.fail(
                f"'{args[0]}' is a git command: run it with the patches carried as "
                f"`patchguard git {shlex.join(args)}`"
            )
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as error:  # click suggests from loaded ones only
            raise click.exceptions.NoSuchCommand(
                error.command_name, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None


_GIT_MOVES = frozenset(
    {"checkout", "switch", "pull", "stash", "rebase", "merge", "cherry-pick", "reset", "restore"}
)


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=epilog(
        "patchguard record eagle3 python/sglang/srt/models/kimi_k25.py",
        "patchguard check --quiet || exit 1",
    ),
)
@click.option(
    "-C",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Run as if started in DIR (like git -C).",
)
@click.version_option(package_name="git-patchguard", prog_name="patchguard")
@click.pass_context
def cli(ctx: click.Context, directory: Path | None) -> None:
    """Keep local patches in a git checkout, and fail loudly when they are gone."""
    ctx.obj = Path.cwd() / directory if directory else Path.cwd()


def run(args: list[str]) -> int:
    """The command's exit code. Every exception, click's own included, is left to
    guard.errors.handled: click's main() would turn a closed stdout into exit 1, a failed guard
    (`patchguard list | head -c0` under pipefail)."""
    with cli.make_context("patchguard", list(args)) as ctx:  # click consumes the list it parses
        result = cli.invoke(ctx)
    return result if isinstance(result, int) else EXIT_OK
