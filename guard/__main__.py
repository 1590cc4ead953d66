"""`python -m guard` is the `patchguard` command."""

from guard.entry import main

main()
