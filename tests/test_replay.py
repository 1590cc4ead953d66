"""Issue 22: a re-apply seen before is replayed (guard.tree.replay), and only when that is the truth.

Told apart by the git processes a hook starts (GIT_TRACE): the full re-apply reads objects
through git (and the index, when the index file cannot say nothing is unmerged), a replay
starts none of its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample
from helpers import stash_then_checkout

from guard.git.gitdir import locate
from guard.store.fastpath import CACHE_DIR_NAME
from guard.tree.replay import REPLAYS_DIR

GIT = shutil.which("git") or "git"


@pytest.fixture
def hunting(sample: Sample) -> Sample:
    """The patch recorded and verified, hooks installed, and a branch with the same files."""
    sample.record_eagle3()
    assert sample.pg("install").exit_code == 0
    assert sample.pg("check", "-q").exit_code == 0
    sample.git("branch", "same", "HEAD")
    return sample


def stash_and_move(sample: Sample, tmp_path: Path, target: str) -> tuple[str, int]:
    stderr, processes = stash_then_checkout(sample.root, target, tmp_path / "git.trace")
    sample.git("stash", "drop", "-q")
    return stderr, processes


def test_the_second_reapply_is_replayed_and_writes_the_same_bytes(
    hunting: Sample, tmp_path: Path
) -> None:
    first, full = stash_and_move(hunting, tmp_path, "same")
    patched = hunting.kimi.read_bytes()
    second, replayed = stash_and_move(hunting, tmp_path, "main")
    assert "re-applied eagle3" in first and "re-applied eagle3" in second
    assert replayed == 0 < full  # the index file says nothing is unmerged: no git at all
    assert hunting.kimi.read_bytes() == patched
    assert hunting.pg("check", "--json").exit_code == 0  # the full path agrees
    assert hunting.pg("undo").exit_code == 0  # journaled as any apply: undo takes it back
    assert "def get_embed_and_head" not in hunting.kimi.read_text()


def test_no_replay_once_the_patches_changed(hunting: Sample, tmp_path: Path) -> None:
    stash_and_move(hunting, tmp_path, "same")
    spec = f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward"
    assert hunting.pg("require", spec).exit_code == 0  # a new manifest: every key is another
    stderr, processes = stash_and_move(hunting, tmp_path, "main")
    assert "re-applied eagle3" in stderr
    assert processes > 0  # assessed in full: objects read through git
    assert hunting.pg("check", "--json").exit_code == 0


def test_a_damaged_replay_is_a_full_reapply(hunting: Sample, tmp_path: Path) -> None:
    stash_and_move(hunting, tmp_path, "same")
    patched = hunting.kimi.read_bytes()
    replays = locate(hunting.root).git_dir / CACHE_DIR_NAME / REPLAYS_DIR
    for entry in replays.iterdir():  # the kept bytes and the record of what to write
        entry.write_bytes(entry.read_bytes()[:-5])
    stderr, processes = stash_and_move(hunting, tmp_path, "main")
    assert "re-applied eagle3" in stderr and "Traceback" not in stderr
    assert processes > 0
    assert hunting.kimi.read_bytes() == patched


def test_a_file_with_crlf_is_never_replayed(hunting: Sample, tmp_path: Path) -> None:
    """Its bytes on disk depend on git's line-ending settings, which no key holds."""
    hunting.git("config", "core.autocrlf", "true")
    hunting.git("stash", "-q")
    hunting.kimi.unlink()
    hunting.git("checkout", "--", sample_repo.KIMI)  # written again, with CRLF
    hunting.git("stash", "pop", "-q")
    assert b"\r\n" in hunting.kimi.read_bytes()
    assert hunting.pg("check", "-q").exit_code == 0
    for target in ("same", "main"):
        stderr, processes = stash_and_move(hunting, tmp_path, target)
        assert "re-applied eagle3" in stderr
        assert processes > 1  # each time in full
    assert b"\r\n" in hunting.kimi.read_bytes()
    assert hunting.pg("check", "--json").exit_code == 0


def test_a_crlf_file_git_leaves_alone_is_replayed_until_git_would_convert_it(
    sample: Sample, tmp_path: Path
) -> None:
    """A project may commit CRLF files (one of sglang's model files is): with no line-ending
    setting git writes their bytes as they are, so no setting is missing from the key; one that
    git would convert is assessed in full again."""
    text = sample.kimi.read_text()
    sample.kimi.write_bytes(text.replace("\n", "\r\n").encode())
    sample.git("commit", "-q", "-am", "the model file, committed with CRLF")
    patched = text.replace("\n\nEntryClass", sample_repo.EAGLE3_METHODS + "\n\nEntryClass", 1)
    sample.kimi.write_bytes(patched.replace("\n", "\r\n").encode())
    assert sample.pg("record", "eagle3", sample_repo.KIMI, "-m", "crlf").exit_code == 0
    assert sample.pg("install").exit_code == 0
    assert sample.pg("check", "-q").exit_code == 0
    sample.git("branch", "same", "HEAD")
    first, full = stash_and_move(sample, tmp_path, "same")
    second, replayed = stash_and_move(sample, tmp_path, "main")
    assert "re-applied eagle3" in first and "re-applied eagle3" in second
    assert replayed == 2 < full  # only git's line-ending settings asked: check-attr, config
    assert sample.kimi.read_bytes() == patched.replace("\n", "\r\n").encode()
    assert sample.pg("check", "--json").exit_code == 0
    sample.git("config", "core.autocrlf", "true")  # git now converts this file's line endings
    third, again = stash_and_move(sample, tmp_path, "same")
    assert "re-applied eagle3" in third
    assert again >= full  # in full (after asking whether it could replay)
    assert sample.pg("check", "--json").exit_code == 0
