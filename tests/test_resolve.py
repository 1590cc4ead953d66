"""A patch that does not merge is resolved once, then carried.

The history has the real shape: the user types the three methods right after the last method
of the class (no comment, one blank line before EntryClass); upstream then adds a method of its
own at exactly that spot, so git cannot merge the patch at any commit after it; then upstream
edits the file elsewhere, a regression lands in another file, and the release absorbs the
methods (typed, documented, at the same spot).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest
import sample_repo
from conftest import method_count
from helpers import Checkout

from guard.git.gitdir import locate

KIMI = sample_repo.KIMI
UPSTREAM_METHOD = """
    def get_input_embeddings(self):
        return self.language_model.get_input_embeddings()
"""


def methods_once(hunt: Checkout) -> bool:
    text = hunt.kimi.read_text()
    return all(method_count(text, m) == 1 for m in sample_repo.METHODS)


def build(root: Path) -> None:
    """r0 .. r4 on main (each tagged): see the module's docstring."""
    root.mkdir()
    sample_repo.git(root, "init", "-q", "-b", "main")
    for path, text in sample_repo.OTHER_FILES.items():
        sample_repo.write(root, path, text)
    sample_repo.write(root, sample_repo.HUNT_BENCH, sample_repo.HUNT_BENCH_TEXT)
    sample_repo.write(root, KIMI, sample_repo.KIMI_V1)
    versions = [sample_repo.commit(root, "r0: Kimi-K2.5")]
    with_method = sample_repo.KIMI_V1.replace("\n\nEntryClass", UPSTREAM_METHOD + "\n\nEntryClass")
    sample_repo.write(root, KIMI, with_method)
    versions.append(sample_repo.commit(root, "r1: kimi: input embeddings, at the end of the class"))
    moved = with_method.replace("from torch import nn\n", "from torch import nn\n\nVISION = 1\n")
    sample_repo.write(root, KIMI, moved)
    versions.append(sample_repo.commit(root, "r2: kimi: a vision constant"))
    sample_repo.write(root, sample_repo.REGRESSION_FILE, "TP_GROUP = None\nSLOW_ALLREDUCE = True\n")
    versions.append(sample_repo.commit(root, "r3: distributed: a slower all-reduce"))
    absorbed = moved.replace("\n\nEntryClass", sample_repo.UPSTREAM_METHODS + "\n\nEntryClass")
    sample_repo.write(root, KIMI, absorbed)
    versions.append(sample_repo.commit(root, "r4: release: EAGLE-3 upstream"))
    for number, commit in enumerate(versions):
        sample_repo.git(root, "tag", f"r{number}", commit)


@pytest.fixture
def hunt(tmp_path: Path, clean_env: dict[str, str]) -> Checkout:
    """The user's branch `work` at r0, the methods typed in and recorded, hooks installed."""
    build(tmp_path / "sglang")
    hunt = Checkout(tmp_path / "sglang", clean_env)
    hunt.git("checkout", "-q", "-b", "work", "r0")
    sample_repo.add_eagle3_methods(hunt.root)
    hunt.pg("record", "eagle3", KIMI, "-m", "EAGLE-3 delegation", check=0)
    hunt.pg("install", check=0)
    return hunt


def resolve_at_r1(hunt: Checkout) -> bytes:
    """The first conflicting commit: the move says so; the user types the methods there."""
    patched = hunt.kimi.read_bytes()
    moved = hunt.pg("git", "checkout", "-q", "r1", check=1)
    assert "conflict" in moved.stderr
    assert "patchguard record" not in moved.stderr  # never advice that re-bases the patch
    assert hunt.kimi.read_text() == hunt.at("r1")
    sample_repo.add_eagle3_methods(hunt.root)
    resolved = hunt.pg("resolve", "eagle3", check=0)
    assert f"resolved patch eagle3: {KIMI}" in resolved.stdout
    hunt.pg("check", check=0)
    return patched


def test_a_resolution_carries_the_patch_across_the_range_and_back(hunt: Checkout) -> None:
    patched = resolve_at_r1(hunt)
    hunt.pg("git", "checkout", "-q", "r2", check=0)
    assert methods_once(hunt)
    assert "VISION = 1" in hunt.kimi.read_text()
    assert "def get_input_embeddings" in hunt.kimi.read_text()
    hunt.pg("check", check=0)
    hunt.pg("git", "checkout", "-q", "r3", check=0)
    assert methods_once(hunt)
    hunt.pg("git", "checkout", "-q", "work", check=0)
    assert hunt.kimi.read_bytes() == patched
    shown = hunt.pg("show", "eagle3", check=0).stdout
    assert "EAGLE-3 delegation" in shown
    assert "+    def set_embed_and_head(self, embed, head):" in shown
    assert f"resolution 1: {KIMI} at {hunt.rev('r1')[:10]}" in shown


def test_plain_git_moves_through_the_hooks_use_the_resolution(hunt: Checkout) -> None:
    resolve_at_r1(hunt)
    hunt.git("stash", "-q")
    hunt.git("checkout", "-q", "r2")  # the post-checkout hook re-applies
    assert methods_once(hunt)
    hunt.pg("check", check=0)


def test_bisect_across_the_range_measures_every_commit(hunt: Checkout) -> None:
    resolve_at_r1(hunt)
    hunt.pg("git", "checkout", "-q", "work", check=0)
    hunt.pg("git", "bisect", "start", "r4", "r0", check=0)
    found = hunt.pg("bisect", "run", "python3", sample_repo.HUNT_BENCH, check=0)
    output = found.stdout + found.stderr
    assert f"{hunt.rev('r3')} is the first bad commit" in output
    assert "skip" not in output.lower()
    hunt.pg("bisect", "reset", check=0)
    assert hunt.git("rev-parse", "--abbrev-ref", "HEAD").stdout.strip() == "work"
    assert methods_once(hunt)


def test_without_a_resolution_the_bisect_skips_and_says_how_to_resolve(hunt: Checkout) -> None:
    started = hunt.pg("bisect", "start", "r4", "r0", check=1)  # lands on r2: red, and says so
    assert "patchguard resolve eagle3" in started.stderr
    found = hunt.pg("bisect", "run", "python3", sample_repo.HUNT_BENCH, check=None)
    output = found.stdout + found.stderr
    assert "bisect skipped" in output
    assert "r2: kimi: a vision constant" in output
    assert "patchguard resolve eagle3; then run patchguard bisect run again" in output
    hunt.pg("bisect", "reset", check=0)


def test_resolve_is_undone_and_a_resolution_can_be_dropped(hunt: Checkout) -> None:
    resolve_at_r1(hunt)
    manifest = locate(hunt.root).manifest_path

    def resolutions() -> int:
        data = json.loads(manifest.read_text())
        return sum(len(f["resolutions"]) for p in data["patches"] for f in p["files"])

    assert resolutions() == 1
    undone = hunt.pg("undo", check=0)
    assert "undid resolved eagle3" in undone.stdout + undone.stderr
    assert resolutions() == 0
    hunt.pg("resolve", "eagle3", check=0)
    assert resolutions() == 1
    hunt.pg("resolve", "eagle3", "--drop", "1", check=0)
    assert resolutions() == 0
    missing = hunt.pg("resolve", "eagle3", "--drop", "1", check=2)
    assert "has no resolution 1" in missing.stderr


def test_resolve_refuses_a_file_that_does_not_carry_the_patch_yet(hunt: Checkout) -> None:
    hunt.pg("git", "checkout", "-q", "r1", check=1)
    refused = hunt.pg("resolve", "eagle3", check=2)
    assert "does not carry the patch yet" in refused.stderr
    assert "patchguard apply --merge eagle3" in refused.stderr


def test_resolve_refuses_a_file_that_lost_a_required_method(hunt: Checkout) -> None:
    hunt.pg("git", "checkout", "-q", "r1", check=1)
    sample_repo.add_eagle3_methods(hunt.root)
    text = hunt.kimi.read_text()
    hunt.kimi.write_text(text.replace("def get_embed_and_head(self):", "def get_embed(self):"))
    refused = hunt.pg("resolve", "eagle3", check=1)
    assert "get_embed_and_head" in refused.stderr


def test_resolutions_travel_in_bundles(hunt: Checkout, tmp_path: Path) -> None:
    resolve_at_r1(hunt)
    bundle = tmp_path / "eagle3.json"
    hunt.pg("export", "-o", str(bundle), check=0)
    node2 = Checkout(tmp_path / "node2", hunt.env)
    subprocess.run(["git", "clone", "-q", str(hunt.root), str(node2.root)], check=True)
    node2.git("checkout", "-q", "r2")
    node2.pg("import", str(bundle), check=0)
    node2.pg("apply", check=0)
    assert methods_once(node2)
    node2.pg("check", check=0)


# --- a resolution names what it adds beyond the patch and upstream ---------------------

DEBUG_LINE = '        print("DEBUG forward")\n'
FORWARD = "    def forward(self, input_ids, positions, forward_batch):\n"


def test_a_debug_line_left_in_a_resolution_is_named_and_kept_only_when_asked(
    hunt: Checkout,
) -> None:
    hunt.pg("git", "checkout", "-q", "r1", check=1)
    sample_repo.add_eagle3_methods(hunt.root)
    hunt.kimi.write_text(hunt.kimi.read_text().replace(FORWARD, FORWARD + DEBUG_LINE, 1))
    history = hunt.pg("log", "--json", check=0).stdout
    refused = hunt.pg("resolve", "eagle3", check=1)  # stdin is no terminal: nothing to ask
    assert f'+ {KIMI}:15: print("DEBUG forward")' in refused.stderr
    assert "adds 1 line(s) that are neither the patch's nor upstream's" in refused.stderr
    assert "patchguard resolve eagle3 --keep-extra" in refused.stderr
    assert "get_embed_and_head" not in refused.stderr  # the patch's own lines are not listed
    assert hunt.pg("log", "--json", check=0).stdout == history  # nothing kept
    assert "resolution 1" not in hunt.pg("show", "eagle3", check=0).stdout
    kept = hunt.pg("resolve", "eagle3", "--keep-extra", check=0)
    assert f"resolved patch eagle3: {KIMI} kept as it is" in kept.stdout
    assert "with 1 line(s) neither the patch's nor upstream's" in kept.stdout
    hunt.pg("git", "checkout", "-q", "r2", check=0)
    assert DEBUG_LINE in hunt.kimi.read_text()  # carried, as the user confirmed


def test_on_a_terminal_resolve_asks_before_keeping_an_extra_line(hunt: Checkout) -> None:
    hunt.pg("git", "checkout", "-q", "r1", check=1)
    sample_repo.add_eagle3_methods(hunt.root)
    hunt.kimi.write_text(hunt.kimi.read_text().replace(FORWARD, FORWARD + DEBUG_LINE, 1))
    for answer, code in (("n", 1), ("y", 0)):
        primary, secondary = pty.openpty()
        os.write(primary, f"{answer}\n".encode())
        asked = subprocess.run(
            ["patchguard", "resolve", "eagle3"],
            cwd=hunt.root,
            env=hunt.env,
            stdin=secondary,
            capture_output=True,
            text=True,
        )
        os.close(primary)
        os.close(secondary)
        assert asked.returncode == code, asked.stderr
        assert "Keep them in the resolution?" in asked.stderr
    assert "resolved patch eagle3" in asked.stdout
    assert "resolution 1" in hunt.pg("show", "eagle3", check=0).stdout


def test_resolve_where_nothing_conflicts_says_so_and_keeps_nothing(hunt: Checkout) -> None:
    """At a commit where the patch merges, an edit of the user's own next to it is theirs: a
    resolution would make it the patch's and carry it everywhere."""
    hunt.kimi.write_text(hunt.kimi.read_text().replace(FORWARD, FORWARD + DEBUG_LINE, 1))
    history = hunt.pg("log", "--json", check=0).stdout
    said = hunt.pg("resolve", "eagle3", check=0)
    assert said.stdout.startswith("nothing to resolve: nothing conflicts, patch eagle3 merges")
    assert "nothing was kept" in said.stdout
    assert hunt.pg("log", "--json", check=0).stdout == history
    assert "resolution 1" not in hunt.pg("show", "eagle3", check=0).stdout
