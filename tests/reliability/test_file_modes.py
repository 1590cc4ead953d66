"""File modes travel: a patch that adds an executable file keeps it
executable through apply, unapply, undo, every `patchguard git` move and a bundle; a file the
patch only changes keeps its own mode."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import sample_repo
from conftest import Sample, git
from helpers import run_patchguard

from guard.git.gitdir import locate

LAUNCHER = "tools/launch_eagle3.sh"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def record_with_launcher(sample: Sample) -> Path:
    """eagle3 on the model file, plus a new executable script: one two-file patch."""
    sample_repo.add_eagle3_methods(sample.root)
    launcher = sample.root / LAUNCHER
    launcher.parent.mkdir(parents=True)
    launcher.write_text("#!/bin/sh\nexec python -m sglang.launch_server --speculative eagle3\n")
    launcher.chmod(0o755)
    result = sample.pg("record", "eagle3", sample_repo.KIMI, LAUNCHER)
    assert result.exit_code == 0, result.output + result.stderr
    return launcher


def mode_git_checks_out(sample: Sample, tmp_path: Path, path: str) -> int:
    """The permission bits `git checkout` gives this file when it is committed as it is now."""
    scratch = tmp_path / "scratch"
    git(tmp_path, "init", "-q", str(scratch))
    (scratch / "f").write_bytes((sample.root / path).read_bytes())
    (scratch / "f").chmod(mode_of(sample.root / path))
    git(scratch, "add", "f")
    git(scratch, "commit", "-qm", "f")
    (scratch / "f").unlink()
    git(scratch, "checkout", "--", "f")
    return mode_of(scratch / "f")


def test_the_manifest_records_git_s_mode(sample: Sample) -> None:
    record_with_launcher(sample)
    files = json.loads(sample.pg("list", "--json").output)["patches"][0]["files"]
    assert {f["path"]: f["mode"] for f in files} == {
        sample_repo.KIMI: "100644",
        LAUNCHER: "100755",
    }


def test_a_new_executable_file_stays_executable_through_unapply_apply_and_undo(
    sample: Sample, tmp_path: Path
) -> None:
    launcher = record_with_launcher(sample)
    git_mode = mode_git_checks_out(sample, tmp_path, LAUNCHER)
    assert git_mode & stat.S_IXUSR
    assert sample.pg("unapply").exit_code == 0
    assert not launcher.exists()
    assert sample.pg("apply").exit_code == 0
    assert mode_of(launcher) == git_mode  # as git would check it out
    assert sample.pg("unapply").exit_code == 0
    assert sample.pg("undo").exit_code == 0  # the undo of the unapply brings it back
    assert mode_of(launcher) == git_mode
    assert sample.pg("undo").exit_code == 0  # the undo of the apply takes it away
    assert not launcher.exists()
    assert sample.pg("undo").exit_code == 0  # and of the first unapply: back as recorded
    assert mode_of(launcher) == git_mode


def test_every_move_keeps_the_executable_bit(sample: Sample, clean_env: dict[str, str]) -> None:
    launcher = record_with_launcher(sample)
    before = mode_of(launcher)
    run_patchguard(sample.root, clean_env, ("install",), 0)
    for args in (("checkout", "-q", "old"), ("checkout", "-q", "-"), ("status", "--short")):
        run_patchguard(sample.root, clean_env, ("git", *args), 0)
        assert mode_of(launcher) == before, args
    # and the 3-way apply (not the byte-for-byte put back): the file moved on at `old`
    run_patchguard(sample.root, clean_env, ("git", "checkout", "-q", "old"), 0)
    run_patchguard(sample.root, clean_env, ("unapply",), 0)
    run_patchguard(sample.root, clean_env, ("apply",), 0)
    assert mode_of(launcher) == before


def test_a_changed_file_keeps_its_own_mode(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    sample.kimi.chmod(0o700)  # the user's mode, not the recorded 100644
    for command in ("apply", "unapply", "apply", "undo", "undo"):
        assert sample.pg(command).exit_code == 0, command
        assert mode_of(sample.kimi) == 0o700, command


def test_a_bundle_carries_the_mode(sample: Sample, tmp_path: Path) -> None:
    record_with_launcher(sample)
    bundle = tmp_path / "eagle3.bundle.json"
    assert sample.pg("export", "-o", bundle).exit_code == 0
    other = Sample(tmp_path / "other", sample_repo.build(tmp_path / "other"))
    assert other.pg("import", bundle).exit_code == 0
    assert other.pg("apply").exit_code == 0
    assert mode_of(other.root / LAUNCHER) & stat.S_IXUSR


def test_a_manifest_written_before_modes_still_loads(sample: Sample) -> None:
    launcher = record_with_launcher(sample)
    path = locate(sample.root).manifest_path
    data = json.loads(path.read_text())
    for patch in data["patches"]:
        for change in patch["files"]:
            del change["mode"]
    path.write_text(json.dumps(data, indent=2))
    assert sample.pg("unapply").exit_code == 0
    assert sample.pg("apply").exit_code == 0
    umask = os.umask(0)
    os.umask(umask)
    assert mode_of(launcher) == 0o666 & ~umask  # what such a manifest knew: a regular file
