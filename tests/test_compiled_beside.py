"""Compiled code beside a guarded file, which Python runs instead of the file:
`check` names it, red, with the file to delete; each case held against Python's own import."""

from __future__ import annotations

import importlib.machinery
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import GIT_IDENTITY, git
from helpers import run_patchguard

OLD = "class C:\n    pass\n"
NEW = "class C:\n    def m(self):\n        return 1\n"
SPEC = "pkg/mod.py::C.m"


@pytest.fixture
def checkout(tmp_path: Path, clean_env: dict[str, str]) -> Path:
    """A package whose `mod.py` was compiled before the method was added; C.m guarded."""
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/mod.py").write_text(OLD)
    (root / ".gitignore").write_text("__pycache__/\n*.so\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "C", env={**os.environ, **GIT_IDENTITY})
    (root / "pkg/mod.py").write_text(NEW)
    run_patchguard(root, clean_env, ("require", SPEC), check=0)
    return root


def python_finds(root: Path) -> str:
    """What `import pkg.mod` gives C.m in a fresh interpreter (bytecode as users have it)."""
    code = "import pkg.mod\nprint(hasattr(pkg.mod.C, 'm'))"
    ran = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, '')\n{code}"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    return ran.stdout.strip() or ran.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("checked", [False, True])
def test_a_hash_based_pyc_of_other_code_is_red(
    checkout: Path, clean_env: dict[str, str], checked: bool
) -> None:
    mod = checkout / "pkg/mod.py"
    mod.write_text(OLD)
    mode = py_compile.PycInvalidationMode
    cached = py_compile.compile(
        str(mod), invalidation_mode=mode.CHECKED_HASH if checked else mode.UNCHECKED_HASH
    )
    mod.write_text(NEW)
    if not checked:
        assert python_finds(checkout) == "False"  # Python runs the old code
    result = run_patchguard(checkout, clean_env, ("check",), check=1)
    relative = Path(cached).relative_to(checkout).as_posix()
    assert (
        f"{relative} holds code compiled from another pkg/mod.py" in result.stdout + result.stderr
    )
    assert f"delete {relative}" in result.stdout + result.stderr
    os.unlink(cached)  # the way out
    run_patchguard(checkout, clean_env, ("check",), check=0)
    py_compile.compile(str(mod), invalidation_mode=mode.UNCHECKED_HASH)  # of this very file
    assert python_finds(checkout) == "True"
    run_patchguard(checkout, clean_env, ("check",), check=0)


def test_an_extension_module_beside_is_red(checkout: Path, clean_env: dict[str, str]) -> None:
    """A stand-in extension module (not a loadable one): Python's import system takes it before
    the `.py`, and fails on it, never reaching the file."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (checkout / f"pkg/mod{suffix}").write_bytes(b"not an ELF object")
    assert f"mod{suffix}" in python_finds(checkout)  # the import took the extension module
    result = run_patchguard(checkout, clean_env, ("check",), check=1)
    assert (
        f"the extension module pkg/mod{suffix} beside pkg/mod.py" in result.stdout + result.stderr
    )
    assert f"delete pkg/mod{suffix}" in result.stdout + result.stderr
    (checkout / f"pkg/mod{suffix}").unlink()
    run_patchguard(checkout, clean_env, ("check",), check=0)
