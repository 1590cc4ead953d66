"""patchguard: keep local patches in a git checkout, and fail loudly when they are gone.

The public API is `require()` and `GuardError`, for the top of a Python benchmark script::

    from guard import require
    require("/path/to/sglang", import_name="sglang")  # raises GuardError listing every problem

This module stays light: the hooks import it on every checkout.
"""

from __future__ import annotations

import os

from guard.errors import GuardError

TYPE_CHECKING = False  # not typing's: this module is on a light path (tests/test_light_paths.py)
if TYPE_CHECKING:
    from guard.tree.verdicts import CheckReport

__all__ = ["GuardError", "require"]


def require(
    repo: str | os.PathLike[str] = ".",
    *,
    apply: bool = False,
    import_name: str | None = None,
    runtime: bool = False,
) -> CheckReport:
    """Return the check report when every guard holds; raise GuardError listing all that does not.

    `apply` re-applies patches first. `import_name` also verifies that this interpreter imports
    that module from the checkout, not from another copy (package code is not executed).
    `runtime` asks this interpreter, in a fresh process, whether each required symbol is
    there (it imports the guarded modules there): Python decides, not reading.
    """
    from guard.cli.preflight import require_report

    return require_report(repo, apply=apply, import_name=import_name, runtime=runtime)
