"""What the commands share: the options `-C DIR`, `--json` and `--install`, the settings of the
commands that hand their words on (git's, or the user's command), and the help's epilog of
examples and exit codes.

In one module of their own, below every command module, so that a command loads these and its
own module only (guard.cli.app loads the command modules one at a time, as they are run).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

EXIT_CODES_EPILOG = (
    "Exit codes: 0 all good, 1 a guard failed, 2 usage or configuration error, "
    "3 internal error (a bug; the message names its log), 130 interrupted."
)


def epilog(*examples: str, exit_codes: str = EXIT_CODES_EPILOG) -> str:
    lines = ["\b", "Examples:", *(f"  {e}" for e in examples), "", exit_codes]
    return "\n".join(lines)


# Everything from the first word of a command on belongs to that command (git's, or the user's).
PASS_THROUGH = {"ignore_unknown_options": True, "allow_interspersed_args": False}

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the machine-readable report (docs/json.md)."
)


def directory_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """`-C DIR` on a command, relative to the group's `-C`, as git resolves repeated -C."""

    def wrapper(ctx: click.Context, /, directory: Path | None, **kwargs: Any) -> Any:
        base: Path = ctx.obj or Path.cwd()
        cwd = base / directory if directory else base
        return ctx.invoke(func, cwd=cwd, **kwargs)

    functools.update_wrapper(wrapper, func)  # the command's name, help and options
    return click.option(
        "-C",
        "directory",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Run as if started in DIR.",
    )(click.pass_context(wrapper))


install_option = click.option(
    "--install",
    "install_now",
    is_flag=True,
    help="Also install the hooks (patchguard install) when they are not installed.",
)
