"""The same code on every node. `run --same-as STAMP` and `check --same-as
STAMP` refuse (exit 1, the command not run) when this node's code differs from the node that
wrote STAMP: HEAD, the patches and their states, the guarded files' ids."""

from __future__ import annotations

from pathlib import Path

from conftest import Sample, git
from helpers import run_patchguard


def two_nodes(sample: Sample, tmp_path: Path) -> tuple[Sample, Path]:
    """Node 1 a clone of node 0 with eagle3 brought over (push/fetch) and applied; node 0's
    stamp on the "shared filesystem"."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    sample.record_eagle3()
    assert sample.pg("push", remote).exit_code == 0
    git(tmp_path, "clone", "-q", str(sample.root), str(tmp_path / "node1"))
    node1 = Sample(tmp_path / "node1", sample.commits)
    assert node1.pg("fetch", remote).exit_code == 0
    assert node1.pg("apply").exit_code == 0
    shared = tmp_path / "shared" / "node0.stamp"
    shared.parent.mkdir()
    shared.write_text(sample.pg("stamp").stdout)
    return node1, shared


def test_run_same_as_a_node_with_the_same_code_runs_the_command(
    sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node1, stamp = two_nodes(sample, tmp_path)
    marker = tmp_path / "launched"
    run_patchguard(node1.root, clean_env, ("run", "--same-as", str(stamp), "touch", str(marker)), 0)
    assert marker.exists()
    assert node1.pg("check", "--same-as", stamp).exit_code == 0


def test_with_a_patch_unapplied_the_command_does_not_run(
    sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node1, stamp = two_nodes(sample, tmp_path)
    assert node1.pg("unapply").exit_code == 0
    marker = tmp_path / "launched"
    result = run_patchguard(
        node1.root, clean_env, ("run", "--same-as", str(stamp), "touch", str(marker)), 1
    )
    assert not marker.exists()
    assert "guard FAILED, command NOT run" in result.stderr


def test_a_node_on_another_head_is_told_what_differs(
    sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    node1, stamp = two_nodes(sample, tmp_path)
    node1.git("stash", "-q")
    node1.git("checkout", "-q", "old")
    assert node1.pg("apply").exit_code == 0  # the patch holds here, but the code is not node 0's
    assert node1.pg("check").exit_code == 0
    refused = node1.pg("check", "--same-as", stamp)
    assert refused.exit_code == 1
    assert f"code differs from {stamp}" in refused.stderr
    assert "HEAD moved back" in refused.stderr
    marker = tmp_path / "launched"
    said = run_patchguard(
        node1.root, clean_env, ("run", "--same-as", str(stamp), "touch", str(marker)), 1
    ).stderr
    assert not marker.exists()
    assert f"code differs from {stamp}: HEAD moved back" in said
    assert "guarded file python/sglang/srt/models/kimi_k25.py" in said


def test_a_patch_in_another_state_is_named(sample: Sample, tmp_path: Path) -> None:
    node1, stamp = two_nodes(sample, tmp_path)
    node1.kimi.write_text(node1.kimi.read_text() + "\n# an edit of my own\n")
    refused = node1.pg("check", "--same-as", stamp)
    assert refused.exit_code == 1
    assert "guarded file python/sglang/srt/models/kimi_k25.py" in refused.stderr


PARALLEL_STATE = "python/sglang/srt/distributed/parallel_state.py"


def test_an_edit_outside_the_guarded_files_is_named(
    sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """The second node's own edit of another module is code that runs."""
    node1, stamp = two_nodes(sample, tmp_path)
    path = node1.root / PARALLEL_STATE
    path.write_text(path.read_text() + "x = 1\n")  # echo "x = 1" >> parallel_state.py
    marker = tmp_path / "launched"
    said = run_patchguard(
        node1.root, clean_env, ("run", "--same-as", str(stamp), "--", "touch", str(marker)), 1
    ).stderr
    assert not marker.exists()
    assert f"code differs from {stamp}: file {PARALLEL_STATE}: as HEAD has it -> " in said
    path.write_text(path.read_text().replace("x = 1\n", ""))  # back to HEAD's bytes: same code
    run_patchguard(node1.root, clean_env, ("run", "--same-as", str(stamp), "touch", str(marker)), 0)
    assert marker.exists()


def test_an_untracked_module_in_a_guarded_package_is_named(sample: Sample, tmp_path: Path) -> None:
    node1, stamp = two_nodes(sample, tmp_path)
    stray = "python/sglang/srt/layers/stray.py"
    (node1.root / stray).parent.mkdir(parents=True, exist_ok=True)
    (node1.root / stray).write_text("import os\n")
    (node1.root / "python/sglang/notes.txt").write_text("not code\n")
    (node1.root / "scratch.py").write_text("print('outside every package')\n")
    refused = node1.pg("check", "--same-as", stamp)
    assert refused.exit_code == 1
    assert f"file {stray}: as HEAD has it -> " in refused.stderr
    assert "file python/sglang/notes.txt: " in refused.stderr  # code may read any file there
    assert "scratch.py" not in refused.stderr


def test_the_same_edit_on_both_nodes_is_the_same_code(sample: Sample, tmp_path: Path) -> None:
    node1, _ = two_nodes(sample, tmp_path)
    for root in (sample.root, node1.root):
        (root / PARALLEL_STATE).write_text("TP_GROUP = None\nx = 1\n")
        (root / "python/sglang/srt/models/kimi_k25.py").touch()
    stamp = tmp_path / "shared" / "again.stamp"
    stamp.write_text(sample.pg("stamp").stdout)
    assert PARALLEL_STATE in stamp.read_text()
    assert node1.pg("check", "--same-as", stamp).exit_code == 0
    (node1.root / PARALLEL_STATE).unlink()
    refused = node1.pg("check", "--same-as", stamp)
    assert f"file {PARALLEL_STATE}: " in refused.stderr
    assert "-> deleted" in refused.stderr


def test_a_link_retargeted_on_one_node_is_a_difference_not_a_crash(
    sample: Sample, tmp_path: Path
) -> None:
    sample.root.joinpath("python/sglang/srt/current.py").symlink_to("distributed/parallel_state.py")
    sample.git("add", "-A")
    sample.git("commit", "-qm", "a link to the module")
    node1, stamp = two_nodes(sample, tmp_path)
    link = node1.root / "python/sglang/srt/current.py"
    link.unlink()
    link.symlink_to("/etc/hostname")  # a link is never read through, only named
    (node1.root / "python/sglang/srt/models/alias.py").symlink_to("/etc/hostname")
    refused = node1.pg("check", "--same-as", stamp)
    assert refused.exit_code == 1
    assert "file python/sglang/srt/current.py: as HEAD has it -> " in refused.stderr
    assert "file python/sglang/srt/models/alias.py: as HEAD has it -> " in refused.stderr
    link.unlink()
    link.symlink_to("distributed/parallel_state.py")
    (node1.root / "python/sglang/srt/models/alias.py").unlink()
    assert node1.pg("check", "--same-as", stamp).exit_code == 0
