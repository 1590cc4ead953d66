"""The hooks' nothing-to-do paths start no process beyond the git calls they are allowed.

Counted, not timed: git runs each hook with PATH = git's exec-path + ours; ours holds nothing
here, so any other program (cat, mktemp, grep, ...) would not even be found. GIT_TRACE logs
every git process; the interpreter and the SHA-1 tool baked into the hooks are shims that log
each start.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Sample

from guard.git.gitdir import locate

GIT = shutil.which("git") or "git"


@pytest.fixture
def traced(sample: Sample, tmp_path: Path):  # type: ignore[no-untyped-def]
    sample.record_eagle3()
    assert sample.pg("install").exit_code == 0
    logs = {name: tmp_path / f"{name}.log" for name in ("install_python", "sha1sum")}
    hooks = sample.root / ".git" / "hooks"
    for name, log in logs.items():
        real = sys.executable if name == "install_python" else shutil.which("sha1sum")
        shim = tmp_path / f"{name}-shim"
        shim.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
        shim.chmod(0o755)
        for hook in hooks.iterdir():
            text = hook.read_text()
            hook.write_text(re.sub(rf"\n{name}='[^']*'", f"\n{name}='{shim}'", text))
    empty_path = tmp_path / "no-programs"
    empty_path.mkdir()
    trace = tmp_path / "git.trace"

    def run(*args: str) -> tuple[int, int, int]:
        """Run one git command; return (git processes started beyond it, sha1sum starts,
        python starts)."""
        trace.write_text("")
        for log in logs.values():
            log.write_text("")
        env = {**os.environ, "PATH": str(empty_path), "GIT_TRACE": str(trace)}
        result = subprocess.run(  # git's own `maintenance run --auto` is not ours to count
            [GIT, "-c", "maintenance.auto=false", *args],
            cwd=sample.root,
            env=env,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr
        assert "not found" not in result.stderr, result.stderr
        gits = trace.read_text().count("trace: built-in: git ")
        starts, hashes = (len(log.read_text().splitlines()) for log in logs.values())
        return gits - 1, hashes, starts

    return sample, run


def test_a_commit_costs_no_process(traced) -> None:  # type: ignore[no-untyped-def]
    _, run = traced
    assert run("commit", "-q", "--allow-empty", "-m", "x") == (0, 0, 0)  # RT x2, post-commit


def test_a_ref_update_costs_no_process(traced) -> None:  # type: ignore[no-untyped-def]
    _, run = traced
    assert run("update-ref", "refs/heads/elsewhere", "HEAD") == (0, 0, 0)
    assert run("branch", "-q", "-D", "elsewhere") == (0, 0, 0)


def test_a_checkout_with_nothing_to_do_costs_one_sha1sum(traced) -> None:  # type: ignore[no-untyped-def]
    sample, run = traced
    sample.git("branch", "same", "HEAD")
    assert sample.pg("check", "-q").exit_code == 0  # verified: the key is in the cache
    assert run("checkout", "-q", "same") == (0, 1, 0)  # HEAD's entries are kept
    assert run("checkout", "-q", "main") == (0, 1, 0)


def test_a_commit_never_seen_costs_one_git_call_and_no_python(traced) -> None:  # type: ignore[no-untyped-def]
    """A commit that touches no guarded file keeps the key; ls-tree says so."""
    sample, run = traced
    assert sample.pg("check", "-q").exit_code == 0
    (sample.root / "README.md").write_text("# sglang (sample), edited\n")
    sample.git("commit", "-q", "-m", "docs", "README.md")
    sample.git("checkout", "-q", "-b", "elsewhere", "HEAD~1")
    assert run("checkout", "-q", "main") == (1, 1, 0)  # sha1sum and ls-tree, no Python


def test_a_stash_is_the_only_ref_update_that_reaches_python(traced) -> None:  # type: ignore[no-untyped-def]
    _, run = traced
    assert run("stash", "-q")[2] == 1  # the notice, from Python
    assert run("commit", "-q", "--allow-empty", "-m", "x") == (0, 0, 0)  # a stash is there


def test_a_stash_pushed_over_a_packed_stash_ref_is_still_seen(traced) -> None:  # type: ignore[no-untyped-def]
    """The hooks look for the stash ref's file before reading their input: a push writes it
    loose even when `git pack-refs --all` (or gc) packed the ref and removed the file."""
    sample, run = traced
    sample.git("stash", "-q")
    sample.git("pack-refs", "--all")
    assert not (sample.root / ".git" / "refs" / "stash").exists()
    (sample.root / "README.md").write_text("# sglang (sample), edited\n")
    assert run("stash", "-q")[2] == 1  # the second stash, over the packed one


def test_under_patchguard_git_the_hook_stands_aside_in_sh(traced, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """git's hooks in the worktree `patchguard git` holds: one git call to know it, no Python
    (the lock's name is the one the hook script spells)."""
    sample, run = traced
    sample.git("stash")  # the patch is out: without the hold, the hook would re-apply it
    sample.git("branch", "same", "HEAD")
    monkeypatch.setenv("PATCHGUARD_LOCK_HELD", str(locate(sample.root).worktree_lock_path))
    assert run("checkout", "-q", "same") == (1, 0, 0)
    assert "def get_embed_and_head" not in sample.kimi.read_text()
