"""The `patchguard` entry point: git hooks go straight to the hook runtime, skipping click."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["hook"]:
        from guard.hookrun import main as run_hook

        sys.exit(run_hook(sys.argv[2:]))
    from guard.cli import main as run_cli

    run_cli()
