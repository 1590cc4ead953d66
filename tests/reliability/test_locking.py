"""One writer at a time per worktree (and per manifest); a dead holder never blocks; waiting is
bounded and explained. Worktrees against each other: tests/test_worktrees.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample, method_count

from guard.git.gitdir import locate
from guard.git.gitpaths import HISTORY_REF

HOLD = """
import sys, time
from pathlib import Path
from guard.git.lock import exclusive
with exclusive(Path(sys.argv[1]), "test holder"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_concurrent_applies_and_record_keep_manifest_and_files_valid(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    sample.git("stash")
    other = sample.root / "python/sglang/srt/distributed/parallel_state.py"
    other.write_text(other.read_text() + "EP_GROUP = None\n")
    commands = [
        ["apply"],
        ["apply"],
        ["record", "ep", str(other)],
    ]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "guard", "-C", str(sample.root), *command],
            env=clean_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for command in commands
    ]
    codes = [p.wait(timeout=120) for p in processes]
    assert codes == [0, 0, 0], [p.stderr.read() for p in processes]
    manifest = json.loads(locate(sample.root).manifest_path.read_text())
    assert [p["name"] for p in manifest["patches"]] == ["eagle3", "ep"]
    text = sample.kimi.read_text()
    assert all(method_count(text, m) == 1 for m in sample_repo.METHODS)
    assert sample.pg("check").exit_code == 0


def test_lock_of_a_killed_process_is_stale(
    sample: Sample, clean_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock dies with its holder: apply takes it at once (a lock still held would make
    it give up after the short timeout, with exit 2), whatever note the holder left."""
    sample.record_eagle3()
    lock = locate(sample.root).worktree_lock_path  # the lock apply takes
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], env=clean_env, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert "test holder" in lock.read_text()  # its note is left, its lock is not
    monkeypatch.setenv("PATCHGUARD_LOCK_TIMEOUT", "0.3")
    assert sample.pg("apply").exit_code == 0


def test_lock_held_too_long_gives_a_clear_message(sample: Sample, clean_env, monkeypatch) -> None:
    sample.record_eagle3()
    lock = locate(sample.root).worktree_lock_path  # the lock apply takes
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], env=clean_env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        monkeypatch.setenv("PATCHGUARD_LOCK_TIMEOUT", "0.3")
        result = sample.pg("apply")
        assert result.exit_code == 2
        assert "held for more than 0.3s" in result.stderr
        assert "test holder" in result.stderr
    finally:
        holder.kill()
        holder.wait()


def test_undo_of_a_drop_waits_for_the_store_lock(sample: Sample, clean_env, monkeypatch) -> None:
    """Undoing a drop rewrites the shared manifest: it takes the store's lock as drop did."""
    sample.record_eagle3()
    assert sample.pg("drop", "eagle3").exit_code == 0
    lock = locate(sample.root).store_lock_path
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock)], env=clean_env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        monkeypatch.setenv("PATCHGUARD_LOCK_TIMEOUT", "0.3")
        result = sample.pg("undo")
        assert result.exit_code == 2
        assert "held for more than 0.3s" in result.stderr
        assert "nothing recorded" in sample.pg("list").stdout  # still dropped: nothing half-undone
    finally:
        holder.kill()
        holder.wait()
    assert sample.pg("undo").exit_code == 0
    assert "patch eagle3" in sample.pg("list").stdout


def test_undo_of_an_unapply_never_waits_for_the_store_lock(
    sample: Sample, clean_env, monkeypatch
) -> None:
    """Only the manifest needs the store: a move's put-back (an undo) never waits for a record."""
    sample.record_eagle3()
    applied = sample.kimi.read_bytes()
    assert sample.pg("unapply").exit_code == 0
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(locate(sample.root).store_lock_path)],
        env=clean_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        monkeypatch.setenv("PATCHGUARD_LOCK_TIMEOUT", "0.3")
        result = sample.pg("undo")
        assert result.exit_code == 0, result.stderr
        assert sample.kimi.read_bytes() == applied
    finally:
        holder.kill()
        holder.wait()


FORGETFUL_WRITER = """
import sys
from pathlib import Path
from guard.errors import handled
from guard.git.repo import Repo
from guard.store import history
from guard.store.derived import load_manifest
from guard.store.manifest import Manifest

repo = Repo.discover(Path.cwd())

def write() -> int:
    with repo.lock("apply"):  # its worktree's lock, not the store's
        load_manifest(repo)
        history.save(repo, Manifest(), "dropped everything")
    return 0

sys.exit(handled(write, lambda: sys.argv[1]))
"""


def test_a_writer_without_the_store_lock_is_refused_as_a_bug(
    sample: Sample, tmp_path: Path
) -> None:
    """The one write of the patches (guard.store.history.save) holds whoever calls it to the
    store's lock, whatever the caller forgot: exit 3, one line, the patches as they were."""
    sample.record_eagle3()
    layout = locate(sample.root)
    before = (sample.git("rev-parse", HISTORY_REF).stdout, layout.manifest_path.read_bytes())
    result = subprocess.run(
        [sys.executable, "-c", FORGETFUL_WRITER, str(tmp_path)],
        cwd=sample.root,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 3, result.stderr
    assert result.stderr.count("\n") == 1
    assert "without holding" in result.stderr and "store's lock" in result.stderr
    assert (
        sample.git("rev-parse", HISTORY_REF).stdout,
        layout.manifest_path.read_bytes(),
    ) == before
    assert sample.pg("drop", "eagle3").exit_code == 0  # the CLI's writer takes it
