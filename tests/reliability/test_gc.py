"""Patch content is pinned by a ref: gc and clone cannot make a recorded patch unappliable."""

from __future__ import annotations

from pathlib import Path

from conftest import Sample, git

from guard.git.gitpaths import HISTORY_REF


def test_patches_survive_aggressive_gc_and_a_clone(sample: Sample, tmp_path: Path) -> None:
    sample.record_eagle3()
    patched = sample.kimi.read_bytes()
    sample.git("stash")
    sample.git("stash", "drop")  # the stash no longer holds the patched blob
    sample.git("reflog", "expire", "--expire=now", "--all")
    sample.git("gc", "-q", "--prune=now", "--aggressive")
    git(tmp_path, "clone", "-q", str(sample.root), str(tmp_path / "copy"))
    assert sample.git("rev-parse", "--verify", HISTORY_REF).returncode == 0
    assert sample.git("fsck", "--no-dangling").returncode == 0
    assert sample.pg("apply").exit_code == 0
    assert sample.kimi.read_bytes() == patched
    assert sample.pg("check").exit_code == 0
