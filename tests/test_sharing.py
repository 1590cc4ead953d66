"""Patches shared through any git remote (push, fetch), as users run them:
two and three clones and a bare remote, updates on one side, divergence on both."""

from __future__ import annotations

from pathlib import Path

import pytest
import sample_repo
from conftest import Sample, git, patchguard
from helpers import pushes_an_update
from sample_repo import KIMI

from guard.git.gitpaths import HISTORY_REF


@pytest.fixture
def nodes(sample: Sample, tmp_path: Path) -> tuple[Sample, Sample, Path]:
    """Node 0 with eagle3 recorded and pushed to a bare remote; node 1 a fresh clone."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    sample.record_eagle3()
    pushed = sample.pg("push", remote)
    assert pushed.exit_code == 0, pushed.stderr
    git(tmp_path, "clone", "-q", str(sample.root), str(tmp_path / "node1"))
    return sample, Sample(tmp_path / "node1", sample.commits), remote


def test_push_writes_the_ref_and_a_clone_fetches_applies_and_checks(
    nodes: tuple[Sample, Sample, Path],
) -> None:
    node0, node1, remote = nodes
    tip = node0.git("rev-parse", HISTORY_REF).stdout
    assert git(remote, "rev-parse", HISTORY_REF).stdout == tip
    fetched = node1.pg("fetch", remote)
    assert fetched.exit_code == 0, fetched.stderr
    assert "new patch eagle3" in fetched.output
    assert "hooks are not installed" in fetched.stderr
    assert "run: patchguard install" in fetched.stderr
    assert node1.pg("check").exit_code == 1  # fetched, not applied yet
    assert node1.pg("apply").exit_code == 0
    assert node1.kimi.read_bytes() == node0.kimi.read_bytes()
    assert node1.pg("check").exit_code == 0
    assert node1.pg("fetch", remote).stdout.strip() == f"already up to date with {remote}"


def test_fetch_install_installs_the_hooks_and_a_checkout_keeps_the_patch(
    nodes: tuple[Sample, Sample, Path],
) -> None:
    _, node1, remote = nodes
    fetched = node1.pg("fetch", "--install", remote)
    assert fetched.exit_code == 0
    assert "hooks are not installed" not in fetched.stderr
    assert node1.pg("doctor").exit_code == 0
    assert node1.pg("apply").exit_code == 0
    node1.git("stash", "-q")
    node1.git("checkout", "-q", "old")  # the hook puts the patch back
    assert node1.pg("check").exit_code == 0


def test_an_update_pushed_from_the_second_clone_comes_back_to_the_first(
    nodes: tuple[Sample, Sample, Path],
) -> None:
    node0, node1, remote = nodes
    assert node1.pg("fetch", remote).exit_code == 0
    assert node1.pg("apply").exit_code == 0
    node1.kimi.write_text(node1.kimi.read_text() + "\n# tuned on node 1\n")
    assert node1.pg("record", "eagle3", KIMI, "-m", "tuned").exit_code == 0
    assert node1.pg("push", remote).exit_code == 0
    fetched = node0.pg("fetch", remote)
    assert fetched.exit_code == 0, fetched.stderr
    assert "updated patch eagle3" in fetched.output
    assert node0.pg("show", "eagle3").output == node1.pg("show", "eagle3").output
    assert f"fetched from {remote}: updated patch eagle3" in node0.pg("log").output
    assert node0.pg("push", remote).exit_code == 0  # the merge is a fast-forward there


def test_changes_on_both_sides_are_refused_by_name_and_nothing_is_lost(
    nodes: tuple[Sample, Sample, Path], tmp_path: Path
) -> None:
    node0, node1, remote = nodes
    assert node1.pg("fetch", remote).exit_code == 0
    assert node1.pg("apply").exit_code == 0
    node1.kimi.write_text(node1.kimi.read_text() + "\n# node 1\n")
    assert node1.pg("record", "eagle3", KIMI, "-m", "node 1").exit_code == 0
    assert node1.pg("push", remote).exit_code == 0
    node0.kimi.write_text(node0.kimi.read_text() + "\n# node 0\n")
    assert node0.pg("record", "eagle3", KIMI, "-m", "node 0").exit_code == 0
    refused_push = node0.pg("push", remote)
    assert refused_push.exit_code == 2
    assert f"Run patchguard fetch {remote}, then push again" in refused_push.stderr
    before = node0.pg("show", "eagle3").output
    tip = node0.git("rev-parse", HISTORY_REF).stdout
    refused = node0.pg("fetch", remote)
    assert refused.exit_code == 1
    assert "not fetched: patch eagle3 changed both here and on" in refused.stderr
    assert f"patchguard fetch {remote} --theirs" in refused.stderr
    assert node0.pg("show", "eagle3").output == before
    assert node0.git("rev-parse", HISTORY_REF).stdout == tip
    # the choices spelled out work, pasted as they are
    kept = node0.pg("fetch", remote, "--ours")
    assert kept.exit_code == 0 and "kept ours of eagle3" in kept.output
    assert node0.pg("show", "eagle3").output == before
    assert node0.pg("push", remote).exit_code == 0
    assert node1.pg("fetch", remote).exit_code == 0  # node 1 takes node 0's: one-sided now
    assert "node 0" in node1.pg("show", "eagle3").output
    assert "node 1" in node1.pg("show", "eagle3@{1}").output  # its own stays in the history


def test_fetch_theirs_and_undo_of_a_fetch(nodes: tuple[Sample, Sample, Path]) -> None:
    node0, node1, remote = nodes
    pushes_an_update(node1, remote, lambda text: text + "\n# node 1\n", "node 1")
    node0.kimi.write_text(node0.kimi.read_text() + "\n# node 0\n")
    assert node0.pg("record", "eagle3", KIMI, "-m", "node 0").exit_code == 0
    mine = node0.pg("show", "eagle3").output
    taken = node0.pg("fetch", remote, "--theirs")
    assert "took theirs of eagle3" in taken.output
    assert "node 1" in node0.pg("show", "eagle3").output
    undone = node0.pg("undo")
    assert undone.output.startswith(f"undid fetched from {remote}: took theirs of eagle3")
    assert node0.pg("show", "eagle3").output == mine


def test_three_clones_a_new_patch_and_a_drop_travel(
    nodes: tuple[Sample, Sample, Path], tmp_path: Path
) -> None:
    node0, node1, remote = nodes
    git(tmp_path, "clone", "-q", str(node0.root), str(tmp_path / "node2"))
    node2 = Sample(tmp_path / "node2", node0.commits)
    for node in (node1, node2):
        assert node.pg("fetch", remote).exit_code == 0
    spec = f"{KIMI}::{sample_repo.CLASS}.forward"
    assert node2.pg("require", spec).exit_code == 0
    assert node2.pg("drop", "eagle3").exit_code == 0
    assert node2.pg("push", remote).exit_code == 0
    fetched = node1.pg("fetch", remote)
    assert "dropped eagle3" in fetched.output and f"new guard {spec}" in fetched.output
    assert "eagle3" not in node1.pg("list").output
    assert f"guard {spec}" in node1.pg("list").output


def test_fetch_from_a_remote_without_patches_says_so(sample: Sample, tmp_path: Path) -> None:
    remote = tmp_path / "empty.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    result = patchguard("-C", sample.root, "fetch", remote)
    assert result.exit_code == 2
    assert f"has no patches yet ({HISTORY_REF} is not there)" in result.stderr
    assert "nothing to push" in sample.pg("push", remote).stderr


def test_import_says_when_hooks_are_missing(sample: Sample, tmp_path: Path) -> None:
    sample.record_eagle3()
    bundle = tmp_path / "b.json"
    assert sample.pg("export", "-o", bundle).exit_code == 0
    git(tmp_path, "clone", "-q", str(sample.root), str(tmp_path / "other"))
    other = Sample(tmp_path / "other", sample.commits)
    said = other.pg("import", bundle)
    assert said.exit_code == 0 and "run: patchguard install" in said.stderr
    installed = other.pg("import", "--install", bundle)
    assert installed.exit_code == 0 and "hooks are not installed" not in installed.stderr


def test_an_update_fetched_reaches_the_file_that_holds_the_earlier_version(
    nodes: tuple[Sample, Sample, Path],
) -> None:
    """The update changes a method the node already has: its definitions are all in place, but
    the file is the earlier version. apply (and the hook) upgrade it; check is red until then."""
    node0, node1, remote = nodes
    assert node1.pg("fetch", remote).exit_code == 0
    assert node1.pg("apply").exit_code == 0
    old = "    def get_embed_and_head(self):\n"
    v2 = old + '        """v2: shared with the draft model."""\n'
    node0.kimi.write_text(node0.kimi.read_text().replace(old, v2))
    assert node0.pg("record", "eagle3", KIMI, "-m", "v2").exit_code == 0
    assert node0.pg("push", remote).exit_code == 0
    assert "updated patch eagle3" in node1.pg("fetch", remote).output
    status = node1.pg("status")
    assert status.exit_code == 1, status.output
    assert "earlier version of this patch" in status.output
    assert node1.pg("check").exit_code == 1
    applied = node1.pg("apply")
    assert applied.exit_code == 0, applied.output + applied.stderr
    assert '"""v2: shared with the draft model."""' in node1.kimi.read_text()
    assert node1.kimi.read_bytes() == node0.kimi.read_bytes()
    assert node1.pg("check").exit_code == 0


def test_push_names_a_fetched_change_it_would_take_back(
    nodes: tuple[Sample, Sample, Path],
) -> None:
    """An undo of a fetch, pushed, would take node 1's update away from
    everyone: refused by name, and pushed only when asked, the choice kept in the history."""
    node0, node1, remote = nodes
    pushes_an_update(node1, remote, lambda text: text + "\n# tuned on node 1\n")
    remote_tip = git(remote, "rev-parse", HISTORY_REF).stdout
    assert node0.pg("fetch", remote).exit_code == 0
    assert node0.pg("undo").exit_code == 0  # node 0 takes the fetch back, locally
    refused = node0.pg("push", remote)
    assert refused.exit_code == 1
    assert f"pushing would take back {remote}'s eagle3" in refused.stderr
    assert f"patchguard push --take-back {remote}" in refused.stderr
    assert git(remote, "rev-parse", HISTORY_REF).stdout == remote_tip
    assert node0.pg("push", "--take-back", remote).exit_code == 0
    assert f"chose to take back {remote}'s eagle3 (pushed from here)" in node0.pg("log").output
    assert node0.pg("push", "--take-back", remote).exit_code == 0  # a retry adds no second
    assert node0.pg("log").output.count("chose to take back") == 1
    assert (
        git(remote, "rev-parse", HISTORY_REF).stdout == node0.git("rev-parse", HISTORY_REF).stdout
    )
    assert node0.pg("push", remote).exit_code == 0  # nothing left to take back
    assert "tuned" not in node0.pg("show", "eagle3").output


def test_an_update_that_adds_a_method_beside_the_patch_applies_over_the_earlier_version(
    nodes: tuple[Sample, Sample, Path],
) -> None:
    """Node 1 types a fourth method right after the three (as a person would) and records;
    node 0 still holds the three. A merge from the patch's base cannot place the new method
    beside lines both sides added, but one from the earlier version node 0 holds can."""
    node0, node1, remote = nodes
    assert node1.pg("fetch", remote).exit_code == 0
    assert node1.pg("apply").exit_code == 0
    extra = "\n    def extra_capture(self):\n        return self.language_model\n"
    node1.kimi.write_text(
        node1.kimi.read_text().replace("\n\nEntryClass", extra + "\n\nEntryClass")
    )
    assert node1.pg("record", "eagle3", KIMI).exit_code == 0
    assert node1.pg("push", remote).exit_code == 0
    assert "updated patch eagle3" in node0.pg("fetch", remote).output
    node0.kimi.write_text("# my note\n" + node0.kimi.read_text())  # an edit of node 0's own
    applied = node0.pg("apply")
    assert applied.exit_code == 0, applied.output + applied.stderr
    assert node0.kimi.read_text() == "# my note\n" + node1.kimi.read_text()
    assert node0.pg("check").exit_code == 0


def test_fetch_theirs_brings_back_what_an_undo_here_took_from_the_remote(
    nodes: tuple[Sample, Sample, Path],
) -> None:
    """The push refusal's other way out: keep the remote's version after all."""
    node0, node1, remote = nodes
    pushes_an_update(node1, remote, lambda text: text + "\n# tuned on node 1\n")
    assert node0.pg("fetch", remote).exit_code == 0
    assert node0.pg("undo").exit_code == 0
    assert node0.pg("push", remote).exit_code == 1
    assert node0.pg("fetch", remote).stdout.startswith("already up to date")
    taken = node0.pg("fetch", remote, "--theirs")
    assert "took theirs of eagle3" in taken.stdout, taken.output
    assert "tuned" in node0.pg("show", "eagle3").output
    assert node0.pg("push", remote).exit_code == 0
    assert node0.pg("fetch", remote, "--theirs").stdout.startswith("already up to date")
