"""Where the `patchguard` command, the hooks and each bisect step start: never `import guard` first.

`guard` is a common name. A `guard` package on PYTHONPATH, in the user's site or in the
current directory is found before ours by a plain `import guard`, and would run instead of
patchguard (a hook that silently checks nothing). This module's name is patchguard's alone,
and it imports the `guard` package that sits beside it, whatever sys.path finds first. The
hooks run this file by its path under `python -I` (no PYTHONPATH, no user site, no current
directory), so nothing from the user's environment is imported before it.
"""

from __future__ import annotations

import os
import sys


def load_guard() -> None:
    """Import the `guard` beside this file; its submodules then come from its own __path__."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    try:
        import guard  # noqa: F401
    finally:
        del sys.path[0]
    # Under -I the user site is off: a `pip install --user` keeps our dependencies beside us.
    if here not in sys.path:
        sys.path.append(here)


def main() -> None:
    load_guard()
    from guard.entry import main as run

    run()


if __name__ == "__main__":
    main()
