"""What the two paths that run all the time import: `check --quiet` with a verified key (the
hooks and every gated benchmark call it) and a hook with nothing to do (every checkout).

The modules on those paths keep habits the rest of guard/ need not: `TYPE_CHECKING = False`
rather than typing's, collections.abc and pathlib imported only in the function that needs
them. These tests are their reason: each path runs as users run it, in a fresh interpreter
under `-X importtime`, and what must stay out of it is named here, not in a comment.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, Sample

# One line per module a process imported: "import time: SELF | CUMULATIVE | NAME".
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$", re.M)
# Never on either path: the typing machinery, the CLI framework, the manifest's schema,
# libgit2, the JSON reader, the parser of the model.
HEAVY = frozenset({"typing", "click", "pydantic", "pygit2", "cffi", "json", "ast"})
# Nor on check --quiet's, which only hashes a few files against a kept key.
CHECK_HEAVY = HEAVY | {"re", "pathlib", "collections", "contextlib", "hashlib", "subprocess"}


def imported(stderr: str) -> set[str]:
    return set(IMPORTED.findall(stderr))


def test_check_quiet_with_a_verified_key_imports_nothing_heavy(sample: Sample) -> None:
    sample.record_eagle3()
    assert sample.pg("check").exit_code == 0  # verifies, and keeps the key
    quiet = subprocess.run(  # as the hooks run it: the launcher by its path, isolated
        [sys.executable, "-X", "importtime", "-I", ROOT / "patchguard_entry.py", "check", "-q"],
        cwd=sample.root,
        capture_output=True,
        text=True,
    )
    assert quiet.returncode == 0, quiet.stderr
    modules = imported(quiet.stderr)
    assert "os" in modules  # -X importtime reported this process's imports
    assert sorted(modules & CHECK_HEAVY) == []


def test_a_hook_with_nothing_to_do_imports_nothing_heavy(sample: Sample, tmp_path: Path) -> None:
    """The Python a hook starts on a checkout with nothing to do finds the verified key (the
    one implementation of it) and imports no more than check --quiet does; one with work to do
    shows the interpreter is the one watched."""
    sample.record_eagle3()
    assert sample.pg("install").exit_code == 0
    shim = tmp_path / "python-shim"  # the interpreter baked into the hooks, under -X importtime
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -X importtime "$@"\n')
    shim.chmod(0o755)
    for hook in (sample.root / ".git" / "hooks").iterdir():
        hook.write_text(
            re.sub(r"\ninstall_python='[^']*'", f"\ninstall_python='{shim}'", hook.read_text())
        )
    assert sample.pg("check").exit_code == 0

    def checkout(*args: str) -> set[str]:
        moved = sample.git("checkout", "-q", *args)
        return imported(moved.stderr)

    nothing_to_do = checkout("-b", "topic") | checkout("-")
    assert "guard.store.fastpath" in nothing_to_do  # decided in Python
    assert sorted(nothing_to_do & CHECK_HEAVY) == []
    sample.git("stash")  # the patch is out: the next checkout re-applies it, in Python
    assert any(name.startswith("guard.") for name in checkout("topic"))
