"""Atomic writes, undo, and SIGKILL in the middle of an apply that writes several files."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sample_repo
from conftest import GIT_IDENTITY, Histories, Sample


def many_file_patch(sample: Sample, count: int = 4, size: int = 400_000) -> list[Path]:
    """One patch over `count` large files, recorded, then stashed away."""
    paths = []
    for number in range(count):
        path = sample.root / f"python/sglang/srt/big_{number}.py"
        path.write_text("".join(f"VALUE_{i} = {i}\n" for i in range(size // 16)))
        paths.append(path)
    sample.git("add", "-A")
    sample.git("commit", "-qm", "big files")
    for path in paths:
        path.write_text(path.read_text() + "\n\ndef patched():\n    return 1\n")
    assert sample.pg("record", "big", *map(str, paths)).exit_code == 0
    sample.git("stash")
    return paths


def test_apply_keeps_file_mode(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    sample.kimi.chmod(0o755)
    assert sample.pg("apply").exit_code == 0
    assert stat.S_IMODE(sample.kimi.stat().st_mode) == 0o755


def test_undo_restores_exactly_and_refuses_to_lose_edits(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    original = sample.kimi.read_bytes()
    assert sample.pg("apply").exit_code == 0
    applied = sample.kimi.read_bytes()
    result = sample.pg("undo")
    assert result.exit_code == 0, result.stderr
    assert sample.kimi.read_bytes() == original
    assert sample.pg("apply").exit_code == 0
    sample.kimi.write_bytes(applied + b"# my later edit\n")
    refused = sample.pg("undo")
    assert refused.exit_code == 1
    assert "would lose those edits" in refused.stderr
    assert sample.kimi.read_bytes() == applied + b"# my later edit\n"


def test_undo_of_an_entry_whose_kept_bytes_are_gone_says_so_in_one_line(sample: Sample) -> None:
    """The journal names the pack that holds the old bytes; a pack deleted by hand (or by a
    tool cleaning .git) leaves undo nothing to put back: it says so and writes nothing (it was
    an internal error, FileNotFoundError)."""
    sample.record_eagle3()
    sample.git("stash")
    assert sample.pg("apply").exit_code == 0
    applied = sample.kimi.read_bytes()
    (pack,) = (sample.root / ".git" / "patchguard-undo").glob("*/before.pack")
    pack.unlink()
    result = sample.pg("undo")
    assert result.exit_code == 1, result.output
    assert f"the undo entry {pack.parent.name} is gone or damaged" in result.stderr
    assert sample.kimi.read_bytes() == applied


def test_temp_file_of_a_killed_writer_is_swept_by_the_next_write(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    stale = sample.kimi.parent / f".{sample.kimi.name}.k1ll3d.patchguard-tmp"
    stale.write_bytes(b"half a file")
    assert sample.pg("apply").exit_code == 0
    assert not stale.exists()


def test_a_temp_file_left_between_two_holds_of_the_lock_is_swept_too(sample: Sample) -> None:
    """A directory is listed once per hold of the writers' lock (guard.git.atomic): a writer
    killed after this process's last hold leaves a file that its next hold still sweeps."""
    sample.record_eagle3()
    sample.git("stash")
    assert sample.pg("apply").exit_code == 0  # this process has listed the directory
    stale = sample.kimi.parent / f".{sample.kimi.name}.k1ll3d.patchguard-tmp"
    stale.write_bytes(b"half a file")
    assert sample.pg("undo").exit_code == 0  # the next hold, in the same process
    assert not stale.exists()


def test_a_temp_file_left_by_a_process_that_inherits_the_hold_is_swept_too(
    sample: Sample,
) -> None:
    """`patchguard git` holds the lock across git, whose children (a hook, a bisect step, an
    alias) inherit the hold and write: one killed mid-write leaves a temp file while this
    process still holds the lock, and the put-back that writes the file again sweeps it."""
    sample.record_eagle3()
    stale = sample.kimi.parent / f".{sample.kimi.name}.1234-5-0.patchguard-tmp"
    leave = f"alias.leave=!printf 'half a file' > '{stale}'"
    result = sample.pg("git", "-c", leave, "leave")  # lifts (listing it), git, puts back
    assert result.exit_code == 0, result.output
    assert "def set_eagle3_layers_to_capture" in sample.kimi.read_text()
    assert not stale.exists()


def test_undo_with_nothing_recorded_is_a_clear_error(sample: Sample) -> None:
    sample.record_eagle3()
    assert sample.pg("undo").output.startswith("undid recorded eagle3 ")
    result = sample.pg("undo")
    assert result.exit_code == 2
    assert "nothing to undo" in result.stderr


@pytest.fixture(scope="module")
def big_patch(tmp_path_factory: pytest.TempPathFactory, histories: Histories) -> Sample:
    """many_file_patch's repository, made once: each SIGKILL test gets a copy of it (recording
    four 400 kB files is a good part of such a test, and the same every time)."""
    root = tmp_path_factory.mktemp("big-patch") / "sglang"
    with pytest.MonkeyPatch.context() as env:  # what _git_identity gives a test
        for key, value in GIT_IDENTITY.items():
            env.setenv(key, value)
        sample = Sample(root, histories.copy(sample_repo.build, root))
        many_file_patch(sample)
    return sample


@pytest.mark.parametrize("delay", [0.0, 0.3, 0.45, 0.6, 0.9])
def test_sigkill_during_apply_leaves_whole_files_and_recovers(
    big_patch: Sample, tmp_path: Path, clean_env: dict[str, str], delay: float
) -> None:
    root = tmp_path / "sglang"
    shutil.copytree(big_patch.root, root, symlinks=True)
    sample = Sample(root, big_patch.commits)
    paths = sorted(root.glob("python/sglang/srt/big_*.py"))
    assert len(paths) == 4
    originals = {p: p.read_bytes() for p in paths}
    process = subprocess.Popen(
        [sys.executable, "-m", "guard", "-C", str(sample.root), "apply"],
        env=clean_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(delay)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    for path in paths:
        content = path.read_bytes()
        assert content == originals[path] or content.endswith(b"def patched():\n    return 1\n")
    assert sample.pg("apply").exit_code == 0
    assert all(p.read_bytes().endswith(b"def patched():\n    return 1\n") for p in paths)
    assert sample.pg("unapply").exit_code == 0 and sample.pg("apply").exit_code == 0
    leftovers = [p for p in paths[0].parent.iterdir() if p.name.endswith(".patchguard-tmp")]
    assert leftovers == []  # a killed writer's temp files are swept by the next write
    assert sample.pg("undo").exit_code == 0
    if delay == 0.0:
        return
    assert sample.pg("check").exit_code in (0, 1)


def test_drop_can_be_undone(sample: Sample) -> None:
    """`drop` can be undone, through the history of the patches."""
    sample.record_eagle3()
    dropped = sample.pg("drop", "eagle3")
    assert dropped.exit_code == 0
    assert "eagle3" not in sample.pg("list").output
    listed = sample.pg("undo", "--list").output
    assert listed.startswith("0. dropped eagle3 at ")
    undone = sample.pg("undo")
    assert undone.output.startswith("undid dropped eagle3 at ")
    assert "patch eagle3" in sample.pg("list").output
    sample.git("gc", "-q", "--prune=now")  # its blobs are pinned again
    sample.git("stash")
    assert sample.pg("apply").exit_code == 0
    assert sample.pg("check").exit_code == 0


def test_undo_steps_back_through_later_changes_first(sample: Sample) -> None:
    """A change made after a drop is undone first: undo never loses the later one unasked."""
    spec = f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward"
    sample.record_eagle3()
    assert sample.pg("drop", "eagle3").exit_code == 0
    assert sample.pg("require", spec).exit_code == 0
    assert sample.pg("undo").output.startswith(f"undid guarding {spec} at ")
    assert f"guard {spec}" not in sample.pg("list").output
    assert sample.pg("undo").output.startswith("undid dropped eagle3 at ")
    assert "patch eagle3" in sample.pg("list").output
    log = sample.pg("log").output
    assert log.index("undid: dropped eagle3") < log.index("undid: guarding")
