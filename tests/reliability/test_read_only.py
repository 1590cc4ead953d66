"""Read-only means read-only: check, status, stamp and run write nothing to
the object store or the worktree, and work for a user who cannot write the repository. So do
the readers of the history: log, show NAME@{N}, undo --list."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample, patchguard
from helpers import as_another_user, home_others_can_read

from guard.git.repo import MERGE_CACHE_DIR


def objects(root: Path) -> set[str]:
    return {str(p) for p in (root / ".git" / "objects").rglob("*") if p.is_file()}


def drifted(sample: Sample) -> None:
    """A patch on a moved file: assessing it takes real 3-way merges, not identities."""
    sample.record_eagle3()
    sample.git("stash")
    sample.git("checkout", "-q", "old")
    assert sample.pg("apply").exit_code == 0
    shutil.rmtree(sample.root / ".git" / MERGE_CACHE_DIR, ignore_errors=True)


@pytest.mark.parametrize("crlf", [False, True])
def test_read_only_commands_write_no_object(sample: Sample, tmp_path: Path, crlf: bool) -> None:
    drifted(sample)
    if crlf:  # a CRLF checkout: git's conversion is asked for, and still nothing is written
        sample.git("config", "core.autocrlf", "true")
        sample.kimi.write_bytes(sample.kimi.read_bytes().replace(b"\n", b"\r\n"))
    before_objects = objects(sample.root)
    before_tree = sample.kimi.read_bytes()
    readers = [("check",), ("status",), ("stamp",), ("check", "--json")]
    readers += [("log",), ("log", "eagle3"), ("show", "eagle3@{0}"), ("undo", "--list")]
    for args in readers:
        result = patchguard("-C", sample.root, *args)
        assert result.exit_code == 0, (args, result.output, result.stderr)
    marker = tmp_path / "ran"
    ran = subprocess.run(
        ["patchguard", "-C", str(sample.root), "run", "touch", str(marker)],
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )
    assert ran.returncode == 0
    assert marker.exists()  # the command ran, and the checks before it wrote nothing
    assert objects(sample.root) == before_objects
    assert sample.kimi.read_bytes() == before_tree


def test_check_works_for_a_user_who_cannot_write_the_repository(clean_env: dict[str, str]) -> None:
    prefix = as_another_user()
    with home_others_can_read() as home:
        root = home / "sglang"
        sample = Sample(root, sample_repo.build(root))
        drifted(sample)
        before = objects(root)
        env = {
            **clean_env,
            "HOME": str(home),
            "GIT_CONFIG_GLOBAL": "/dev/null",
            # git itself refuses a repository owned by someone else unless told it is safe
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*",
        }
        for args in (("check",), ("status",), ("check", "--json")):
            result = subprocess.run(
                [*prefix, str(Path(sys.executable).parent / "patchguard"), "-C", str(root), *args],
                env=env,
                capture_output=True,
                text=True,
            )
            assert result.returncode == 0, (args, result.stdout, result.stderr)
            assert "Traceback" not in result.stderr
        assert objects(root) == before


def test_writers_without_a_manifest_create_nothing(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    sample_repo.build(root)
    for args in (("apply",), ("unapply",), ("drop", "x"), ("undo",)):
        result = patchguard("-C", root, *args)
        assert result.exit_code == 2, args
    assert not (root / ".git" / "patchguard").exists()
