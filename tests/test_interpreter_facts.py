"""Conditions reading decides (`sys.version_info`, `sys.platform`, the
implementation) are decided for the interpreter the command runs, asked once and kept by the
interpreter's path and file identity."""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import git
from helpers import run_patchguard

from guard.truth import interpreters

OURS = sys.version_info[:2]


@functools.cache
def _another_python() -> tuple[str, tuple[int, int]] | None:
    """An installed Python 3 of another minor version than this one, if the machine has one."""
    names = [shutil.which(f"python3.{minor}") for minor in range(8, 20)]
    names += sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3"))
    for name in filter(None, names):
        asked = subprocess.run(
            [name, "-I", "-S", "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        if asked.returncode == 0:
            major, minor = map(int, asked.stdout.split())
            if (major, minor) != OURS and (major, minor) >= (3, 8):
                return name, (major, minor)
    return None


def guarded_package(root: Path, env: dict[str, str], condition: str) -> None:
    """A guard on pkg.mod's A.added, then a commit that defines it only under `condition`
    (a guard, not a patch: recording checks by patchguard's own reading)."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/mod.py").write_text("class A:\n    def added(self):\n        pass\n")
    git(root, "init", "-q", env=env)
    git(root, "add", "-A", env=env)
    git(root, "commit", "-qm", "base", env=env)
    run_patchguard(root, env, ("require", "pkg/mod.py::A.added"), 0)
    (root / "pkg/mod.py").write_text(
        "import sys\n\n\nclass A:\n    def base(self):\n        pass\n\n"
        f"    if {condition}:\n        def added(self):\n            pass\n"
    )
    git(root, "commit", "-qam", "added only where the condition holds", env=env)


@pytest.mark.parametrize("who_has_it", ["the-other", "only-ours"])
def test_the_commands_interpreter_decides_the_version(
    tmp_path: Path, clean_env: dict[str, str], who_has_it: str
) -> None:
    found = _another_python()
    if found is None:
        pytest.skip("no Python 3 of another minor version on this machine")
    other, version = found
    low, high = sorted([OURS, version])
    below = f"sys.version_info < {high}"  # true for the lower one only
    other_has_it = version == low
    if who_has_it == "only-ours":
        other_has_it = not other_has_it
        below = f"not ({below})"
    root = tmp_path / "repo"
    guarded_package(root, clean_env, below)
    marker = tmp_path / "ran"
    command = (other, "-c", f"import pkg.mod; pkg.mod.A.added; open({str(marker)!r}, 'w')")
    exit_code = 0 if other_has_it else 1
    ours = run_patchguard(root, clean_env, ("check",), 1 - exit_code)  # ours decides first
    assert "all guards hold" in ours.stdout or "A.added" in ours.stderr
    said = run_patchguard(root, clean_env, ("run", "--", *command), exit_code)
    assert marker.exists() == other_has_it, said.stderr  # the command ran: Python found it
    if not other_has_it:
        assert f"conditions decided for Python {version[0]}.{version[1]}." in said.stderr
        assert "command NOT run" in said.stderr
    run_patchguard(root, clean_env, ("check", "--python", other), exit_code)
    on_path = {**clean_env, "PATH": f"{os.path.dirname(other)}{os.pathsep}{clean_env['PATH']}"}
    run_patchguard(root, on_path, ("check", "--python", os.path.basename(other)), exit_code)
    run_patchguard(root, clean_env, ("check", "--runtime", "--python", other), exit_code)
    # What the other interpreter decided is never remembered as this one's green, nor red.
    run_patchguard(root, clean_env, ("check",), 1 - exit_code)


def test_another_interpreter_is_asked_once_by_its_file(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """A wrapper that logs its arguments and greets on stdout (as site code or a module
    environment may), then runs this very Python: asked for its facts once, the greeting
    passed over; asked again when its file changes (an upgrade, a reinstall)."""
    root = tmp_path / "repo"
    ours = sys.implementation.name
    guarded_package(
        root, clean_env, f"sys.implementation.name == {ours!r} and sys.platform == {sys.platform!r}"
    )
    log = tmp_path / "asked.log"
    wrapper = tmp_path / "bin" / "python3"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\necho hello\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)

    def asks() -> int:
        return sum("-I -c" in line for line in log.read_text().splitlines())

    for _ in range(2):
        run_patchguard(root, clean_env, ("run", "--", str(wrapper), "-c", "pass"), 0)
    assert asks() == 1
    run_patchguard(root, clean_env, ("check", "--python", str(wrapper)), 0)
    assert asks() == 1  # check --python reads the same kept answer
    status = wrapper.stat()
    os.utime(wrapper, ns=(status.st_atime_ns, status.st_mtime_ns + 10**9))
    run_patchguard(root, clean_env, ("run", "--", str(wrapper), "-c", "pass"), 0)
    assert asks() == 2
    # The facts that process printed are this interpreter's own, as patchguard reads them.
    assert interpreters.facts_of(str(wrapper), root / ".git") is None
    assert interpreters.own_facts()["sys.version_info"] == tuple(sys.version_info)


def test_patchguards_own_interpreter_answers_without_a_process(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    root = tmp_path / "repo"
    guarded_package(root, clean_env, f"sys.version_info >= {OURS}")
    run_patchguard(root, clean_env, ("run", "--", sys.executable, "-c", "pass"), 0)
    assert not (root / ".git" / interpreters.FACTS_CACHE_DIR).exists()
    bad = tmp_path / "python3"
    bad.write_text("#!/bin/sh\necho not a python >&2\nexit 3\n")
    bad.chmod(0o755)
    said = run_patchguard(root, clean_env, ("check", "--python", str(bad)), 2).stderr
    assert said == (
        f"patchguard: cannot ask the interpreter {bad} what it is (exit 3): not a python. "
        "Pass a Python 3 with --python PATH.\n"
    )
