"""Read-only stores: a user who may read a repository but not write its
object store, or not write its git dir at all, gets one line and exit 2 from every writing
command, nothing is journaled for a change that did not happen, and the read-only commands
still work as that user."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample, git
from helpers import NOBODY, as_another_user, home_others_can_read

from guard.git.gitdir import locate

OTHER_FILE = "python/sglang/srt/models/deepseek_v2.py"
FORWARD = f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward"
READ_ONLY_COMMANDS = (
    ("check",),
    ("status",),
    ("list",),
    ("show",),
    ("export",),
    ("stamp",),
    ("undo", "--list"),
)


@dataclass
class Store:
    sample: Sample
    prefix: list[str]
    env: dict[str, str]
    bundle: Path

    def as_user(self, *args: str) -> subprocess.CompletedProcess[str]:
        patchguard = str(Path(sys.executable).parent / "patchguard")
        result = subprocess.run(
            [*self.prefix, patchguard, "-C", str(self.sample.root), *args],
            env=self.env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        assert "Traceback" not in result.stderr, result.stderr
        return result

    def snapshot(self) -> tuple[bytes, str, str, bytes, bytes]:
        """Everything a writer could change: manifest, pin, undo list, worktree files."""
        root = self.sample.root
        return (
            locate(root).manifest_path.read_bytes(),
            git(root, "rev-parse", "refs/patchguard/history", env=self.env).stdout,
            self.as_user("undo", "--list").stdout,
            self.sample.kimi.read_bytes(),
            (root / OTHER_FILE).read_bytes(),
        )


@pytest.fixture(params=["objects", "git-dir"])
def store(request: pytest.FixtureRequest, clean_env: dict[str, str]) -> Iterator[Store]:
    yield from _store(request.param, clean_env)


def _store(kept: str, clean_env: dict[str, str], *, hooks: bool = False) -> Iterator[Store]:
    """eagle3 recorded, applied, with undo entries; then `nobody` owns the worktree, and root
    keeps `.git/objects` (or the whole `.git`)."""
    prefix = as_another_user()
    with home_others_can_read() as home:
        sample = Sample(home / "sglang", sample_repo.build(home / "sglang"))
        sample.record_eagle3()
        if hooks:
            assert sample.pg("install").exit_code == 0
        assert sample.pg("unapply").exit_code == 0
        assert sample.pg("apply").exit_code == 0
        other = Sample(home / "other", sample_repo.build(home / "other"))
        with (other.root / OTHER_FILE).open("a") as handle:
            handle.write("# another patch\n")
        assert other.pg("record", "other", OTHER_FILE).exit_code == 0
        bundle = home / "other.bundle.json"
        assert other.pg("export", "-o", bundle).exit_code == 0
        with (sample.root / OTHER_FILE).open("a") as handle:
            handle.write("# the user's uncommitted edit\n")
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(sample.root)], check=True)
        owned = sample.root / ".git" / ("objects" if kept == "objects" else "")
        subprocess.run(["chown", "-R", "root:root", str(owned)], check=True)
        # git (and libgit2) open a repository someone else owns only when told it is safe
        config = home / ".gitconfig"
        config.write_text("[safe]\n\tdirectory = *\n")
        env = {**clean_env, "HOME": str(home), "GIT_CONFIG_GLOBAL": str(config)}
        yield Store(sample, prefix, env, bundle)


WRITERS = {
    "record": ("record", "p2", OTHER_FILE),
    "require": ("require", FORWARD),
    "drop": ("drop", "eagle3"),
    "import": ("import",),  # the bundle's path is added
    "unapply": ("unapply",),
    "apply": ("apply",),
    "undo": ("undo",),
    "install": ("install",),
    "git": ("git", "status", "--short"),
}
NEED_NEW_OBJECTS = {"record", "require", "drop", "import"}


def test_every_writer_is_one_line_exit_2_and_changes_nothing(store: Store) -> None:
    git_dir_read_only = store.sample.root.joinpath(".git").owner() == "root"
    for name, args in WRITERS.items():
        if name == "import":
            args = (*args, str(store.bundle))
        before = store.snapshot()
        result = store.as_user(*args)
        if git_dir_read_only or name in NEED_NEW_OBJECTS:
            assert result.returncode == 2, (name, result.stdout, result.stderr)
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("patchguard: "), (name, lines)
            assert "nothing was" in lines[0], lines[0]
            assert store.snapshot() == before, name  # nothing journaled, nothing written
        else:  # a writer that needs no new object works, as that user
            assert result.returncode == 0, (name, result.stdout, result.stderr)


def test_a_drop_that_cannot_be_stored_is_not_journaled(store: Store) -> None:
    listed = store.as_user("undo", "--list").stdout
    assert store.as_user("drop", "eagle3").returncode == 2
    assert store.as_user("undo", "--list").stdout == listed
    assert "patch eagle3" in store.as_user("list").stdout
    if store.sample.root.joinpath(".git").owner() != "root":
        undone = store.as_user("undo")  # the last real operation, not a drop that never was
        assert undone.returncode == 0, undone.stderr
        assert undone.stdout.startswith("undid the apply of eagle3")


def test_uninstall_without_a_writable_git_dir_is_one_line(clean_env: dict[str, str]) -> None:
    for store in _store("git-dir", clean_env, hooks=True):
        hooks = sorted((store.sample.root / ".git" / "hooks").iterdir())
        result = store.as_user("uninstall")
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "nothing was changed" in lines[0], lines
        assert sorted((store.sample.root / ".git" / "hooks").iterdir()) == hooks


def test_read_only_commands_work_as_that_user(store: Store) -> None:
    for args in READ_ONLY_COMMANDS:
        result = store.as_user(*args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)


def test_a_check_that_merges_writes_nothing_into_a_read_only_store(
    clean_env: dict[str, str],
) -> None:
    """At an older commit the patch must be merged to be judged (drifted): `git merge-file`
    merges in a temporary directory, so that user's check decides, and the object store
    root keeps is as it was."""
    for store in _store("objects", clean_env):
        root = store.sample.root
        git(root, "stash", "-q", env=store.env)  # as root: the patch off, its objects root's
        git(root, "checkout", "-q", "old", env=store.env)
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(root)], check=True)
        subprocess.run(["chown", "-R", "root:root", str(root / ".git" / "objects")], check=True)
        objects = sorted(str(p) for p in (root / ".git" / "objects").rglob("*"))
        result = store.as_user("check", "--json")
        assert json.loads(result.stdout)["patches"][0]["state"] == "drifted", result.stderr
        assert sorted(str(p) for p in (root / ".git" / "objects").rglob("*")) == objects
