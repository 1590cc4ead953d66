"""Linked worktrees (`git worktree add`): each has its own patches applied and its own lock.

The history is the regression hunt's (scripts/sample_repo.py, build_hunt; c3 has the methods
upstream), plus `no-kimi`, where the patched file is gone. Worktree A is the main checkout on
`work` at c0 with the EAGLE-3 patch recorded and the hooks installed; B is a linked worktree at
c0 that its post-checkout hook patched. Everything runs as users run it: the installed
`patchguard` and the real git CLI.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sample_repo
from conftest import git, method_count
from helpers import run_patchguard

from guard.git.gitdir import locate

KIMI = sample_repo.KIMI
METHODS = sample_repo.METHODS


@dataclass
class Trees:
    a: Path
    b: Path
    env: dict[str, str]

    def pg(
        self, where: Path, *args: str, check: int | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_patchguard(where, self.env, args, check)

    def git(self, where: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return git(where, *args, check=check, env=self.env)


def methods_once(tree: Path) -> bool:
    text = (tree / KIMI).read_text()
    return all(method_count(text, m) == 1 for m in METHODS)


def methods_absent(tree: Path) -> bool:
    text = (tree / KIMI).read_text()
    return all(method_count(text, m) == 0 for m in METHODS)


@pytest.fixture
def trees(tmp_path: Path, clean_env: dict[str, str]) -> Trees:
    a = tmp_path / "sglang"
    sample_repo.build_hunt(a)
    result = Trees(a, tmp_path / "sglang-b", clean_env)
    result.git(a, "checkout", "-q", "-b", "no-kimi", "c0")
    result.git(a, "rm", "-q", KIMI)
    result.git(a, "commit", "-q", "-m", "kimi removed")
    result.git(a, "checkout", "-q", "-b", "work", "c0")
    sample_repo.add_eagle3_methods(a)
    result.pg(a, "record", "eagle3", KIMI, check=0)
    result.pg(a, "install", check=0)
    added = result.git(a, "worktree", "add", "-q", "--detach", str(result.b), "c0")
    assert "re-applied eagle3" in added.stderr
    assert methods_once(result.b)
    return result


# --- patchguard git -C DIR ------------------------------------------------------------------------


def stash_b_then_move_it_to_c3(trees: Trees) -> None:
    """B's stash holds the methods; at c3 upstream has them too: a plain pop doubles them."""
    trees.git(trees.b, "stash", "-q")
    trees.git(trees.b, "checkout", "-q", "c3")
    assert methods_once(trees.b)  # upstream's own copy


@pytest.mark.parametrize(
    "where", [["git", "-C", "../sglang-b"], ["-C", "../sglang-b", "git"]], ids=["git-C", "pg-C"]
)
def test_stash_pop_in_another_worktree_lifts_that_worktrees_patch(
    trees: Trees, where: list[str]
) -> None:
    stash_b_then_move_it_to_c3(trees)
    a_before = (trees.a / KIMI).read_bytes()
    pop = trees.pg(trees.a, *where, "stash", "pop", "-q")
    assert pop.returncode == 0, pop.stderr
    assert methods_once(trees.b)  # the stash's copy and upstream's never double
    assert trees.git(trees.b, "stash", "list").stdout == ""
    trees.pg(trees.b, "check", check=0)
    assert (trees.a / KIMI).read_bytes() == a_before  # A's patch was never lifted
    assert trees.git(trees.a, "status", "--porcelain").stdout.split() == ["M", KIMI]


def test_git_C_is_relative_to_the_one_before_as_in_git(trees: Trees) -> None:
    stash_b_then_move_it_to_c3(trees)
    nested = trees.a / "python"  # -C python -C ../../sglang-b is B, as git resolves it
    pop = trees.pg(trees.a, "git", "-C", "python", "-C", "../../sglang-b", "stash", "pop", "-q")
    assert pop.returncode == 0, pop.stderr
    assert nested.is_dir() and methods_once(trees.b)
    trees.pg(trees.b, "check", check=0)


@pytest.mark.parametrize(
    "option",
    [["--git-dir=../sglang-b/.git"], ["--work-tree", "../sglang-b"], ["--bare"]],
    ids=["git-dir", "work-tree", "bare"],
)
def test_git_options_naming_another_tree_are_refused_in_one_line(
    trees: Trees, option: list[str]
) -> None:
    before = {tree: (tree / KIMI).read_bytes() for tree in (trees.a, trees.b)}
    result = trees.pg(trees.a, "git", "-c", "core.pager=cat", *option, "status", check=2)
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"does not take git's {option[0].split('=')[0]}" in result.stderr
    assert "-C DIR" in result.stderr
    assert {tree: (tree / KIMI).read_bytes() for tree in before} == before


def test_git_config_options_before_the_command_are_passed_to_git(trees: Trees) -> None:
    moved = trees.pg(trees.a, "git", "-c", "advice.detachedHead=false", "checkout", "-q", "c2")
    assert moved.returncode == 0, moved.stderr
    assert (
        trees.git(trees.a, "rev-parse", "HEAD").stdout
        == trees.git(trees.a, "rev-parse", "c2").stdout
    )
    assert methods_once(trees.a)
    trees.pg(trees.a, "check", check=0)


# --- patchguard git worktree add --------------------------------------------------------------


def test_worktree_add_through_the_wrapper_applies_the_patch_there(
    trees: Trees, tmp_path: Path
) -> None:
    c = tmp_path / "sglang-c"
    added = trees.pg(trees.a, "git", "worktree", "add", "-q", "--detach", str(c), "c2")
    assert added.returncode == 0, added.stderr
    assert "re-applied eagle3" in added.stderr
    assert methods_once(c)
    trees.pg(c, "check", check=0)
    assert methods_once(trees.a)  # and the patch is back in A, where it was lifted
    trees.pg(trees.a, "check", check=0)


def test_worktree_add_where_the_patch_cannot_hold_fails_loudly(
    trees: Trees, tmp_path: Path
) -> None:
    c = tmp_path / "sglang-c"
    added = trees.pg(trees.a, "git", "worktree", "add", "-q", "--detach", str(c), "no-kimi")
    assert added.returncode == 1, added.stderr
    assert "guard FAILED after post-checkout" in added.stderr
    assert "cannot be applied: the file does not exist in the worktree" in added.stderr
    assert (c / "README.md").exists() and not (c / KIMI).exists()
    assert methods_once(trees.a)


# --- one lock per worktree ------------------------------------------------------------------------


@dataclass
class Blocker:
    """A command of A's that blocks until released; `started` appears once it runs."""

    started: Path
    release: Path

    def shell(self) -> str:
        return f"touch {self.started}; while [ ! -e {self.release} ]; do sleep 0.05; done"

    def wait_started(self, process: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + 60
        while not self.started.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "A's command never started"
            time.sleep(0.05)


@pytest.fixture
def blocker(tmp_path: Path) -> Iterator[Blocker]:
    found = Blocker(tmp_path / "started", tmp_path / "release")
    yield found
    found.release.touch()  # whatever happened, let A's command end


def checkout_in_b_promptly(trees: Trees) -> None:
    """A plain checkout in B while A holds its lock: B's hook re-applies at once."""
    trees.git(trees.b, "stash", "-q")
    assert methods_absent(trees.b)
    env = {**trees.env, "PATCHGUARD_LOCK_TIMEOUT": "1"}
    moved = git(trees.b, "checkout", "-q", "c2", env=env, check=False)
    assert moved.returncode == 0, moved.stderr
    assert "held for more than" not in moved.stderr
    assert "re-applied eagle3" in moved.stderr
    assert methods_once(trees.b)
    trees.pg(trees.b, "check", check=0)


def test_a_long_git_command_in_one_worktree_never_stops_anothers_hook(
    trees: Trees, blocker: Blocker
) -> None:
    held = subprocess.Popen(  # `patchguard git` in A: the patch lifted, A's lock held
        ["patchguard", "git", "-c", f"alias.hold=!{blocker.shell()}", "hold"],
        cwd=trees.a,
        env=trees.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    blocker.wait_started(held)
    assert methods_absent(trees.a)  # lifted while git runs
    assert "git -c" in locate(trees.a).worktree_lock_path.read_text()  # the holder's note
    checkout_in_b_promptly(trees)
    assert held.poll() is None  # A still holds its lock
    blocker.release.touch()
    _, stderr = held.communicate(timeout=60)
    assert held.returncode == 0, stderr
    assert methods_once(trees.a)
    trees.pg(trees.a, "check", check=0)


def test_a_long_bisect_in_one_worktree_never_stops_anothers_hook(
    trees: Trees, blocker: Blocker, tmp_path: Path
) -> None:
    trees.pg(trees.a, "git", "bisect", "start", "c4", "c0", check=0)
    hunt = subprocess.Popen(
        ["patchguard", "bisect", "run", "sh", "-c", blocker.shell()],
        cwd=trees.a,
        env=trees.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    blocker.wait_started(hunt)
    assert methods_once(trees.a)  # a step: the patch applied in A while the command runs
    checkout_in_b_promptly(trees)
    assert hunt.poll() is None  # the step in A is still running
    blocker.release.touch()
    stdout, stderr = hunt.communicate(timeout=120)
    assert hunt.returncode == 0, stdout + stderr
    assert "is the first bad commit" in stdout
    trees.pg(trees.a, "git", "bisect", "reset", check=0)
    assert methods_once(trees.a)
    trees.pg(trees.a, "check", check=0)


HOLD = """
import sys, time
from pathlib import Path
from guard.git.lock import exclusive
with exclusive(Path(sys.argv[1]), "test holder"):
    print("held", flush=True)
    time.sleep(60)
"""


def hold(lock: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_the_hold_a_move_passes_on_is_its_own_worktrees_lock_only(trees: Trees) -> None:
    """A step of A's bisect (or any command under A's hold) takes B's lock as anyone would."""
    trees.git(trees.b, "stash", "-q")
    holder = hold(locate(trees.b).worktree_lock_path)
    try:
        under_a = {
            **trees.env,
            "PATCHGUARD_LOCK_HELD": str(locate(trees.a).worktree_lock_path),
            "PATCHGUARD_LOCK_TIMEOUT": "0.3",
        }
        waited = run_patchguard(trees.b, under_a, ("apply",), 2)
        assert "held for more than 0.3s" in waited.stderr
        assert methods_absent(trees.b)
        under_b = {**under_a, "PATCHGUARD_LOCK_HELD": str(locate(trees.b).worktree_lock_path)}
        run_patchguard(trees.b, under_b, ("apply",), 0)  # B's holder is its parent: re-entered
        assert methods_once(trees.b)
    finally:
        holder.kill()
        holder.wait()


def test_the_store_lock_stops_only_what_rewrites_the_manifest(trees: Trees) -> None:
    """Held by another process: a record waits for it; B's hook and apply do not."""
    holder = hold(locate(trees.a).store_lock_path)
    try:
        checkout_in_b_promptly(trees)
        env = {**trees.env, "PATCHGUARD_LOCK_TIMEOUT": "0.3"}
        record = run_patchguard(trees.a, env, ("record", "eagle3", KIMI), 2)
        assert "held for more than 0.3s" in record.stderr
        assert "test holder" in record.stderr
    finally:
        holder.kill()
        holder.wait()
