"""`python -m guard` is the `patchguard` command."""

from guard.cli import main

main()
