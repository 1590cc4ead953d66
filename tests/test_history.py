"""Every change to the patches is a commit on refs/patchguard/history; log, show
NAME@{N} and undo of any change read that history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample, git
from helpers import run_patchguard
from sample_repo import KIMI

from guard.errors import ConfigError
from guard.git.gitdir import locate
from guard.git.gitpaths import HISTORY_REF
from guard.git.repo import Repo
from guard.store import history as patch_history
from guard.store.derived import load_manifest


def history(sample: Sample) -> list[str]:
    """The subjects along the ref's first parents, newest first."""
    out = sample.git("log", "--first-parent", "--format=%s", HISTORY_REF).stdout
    return out.splitlines()


def manifest_text(sample: Sample) -> str:
    return locate(sample.root).manifest_path.read_text()


def test_each_change_is_a_commit_holding_the_manifest_and_its_blobs(sample: Sample) -> None:
    sample.record_eagle3()
    spec = f"{KIMI}::{sample_repo.CLASS}.forward"
    assert sample.pg("require", spec).exit_code == 0
    assert sample.pg("drop", "eagle3").exit_code == 0
    assert history(sample) == [
        "dropped eagle3",
        f"guarding {spec}",
        f"recorded eagle3 ({KIMI})",
    ]
    body = sample.git("log", "-1", "--format=%B", HISTORY_REF).stdout
    head = sample.git("rev-parse", "HEAD").stdout.strip()
    assert f"Patchguard-Head: {head}" in body
    assert "Patchguard-Time: 20" in body
    # the tree holds the manifest the hooks read, and the blobs of the state it records
    assert sample.git("show", f"{HISTORY_REF}:manifest.json").stdout == manifest_text(sample)
    recorded = json.loads(sample.git("show", f"{HISTORY_REF}~2:manifest.json").stdout)
    patched = recorded["patches"][0]["files"][0]["patched_blob"]
    listed = sample.git("ls-tree", f"{HISTORY_REF}~2:blobs").stdout
    assert patched in listed


def test_a_change_that_changes_nothing_adds_no_commit(sample: Sample) -> None:
    sample.record_eagle3()
    spec = f"{KIMI}::{sample_repo.CLASS}.forward"
    assert sample.pg("require", spec).exit_code == 0
    assert sample.pg("require", spec).output.strip() == "already guarded; nothing changed"
    assert len(history(sample)) == 2


def test_a_manifest_without_history_is_taken_over_with_nothing_lost(sample: Sample) -> None:
    """A repository whose history ref was deleted, its manifest.json left."""
    sample.record_eagle3()
    before = manifest_text(sample)
    sample.git("update-ref", "-d", HISTORY_REF)
    assert sample.pg("require", f"{KIMI}::{sample_repo.CLASS}.forward").exit_code == 0
    subjects = history(sample)
    assert subjects[1:] == ["took over the manifest as found"]
    assert sample.git("show", f"{HISTORY_REF}~1:manifest.json").stdout == before
    # the manifest as found is not undoable (there is nothing before it); the require is
    assert sample.pg("undo").exit_code == 0
    assert manifest_text(sample) == before
    assert sample.pg("undo").exit_code == 2


def test_a_manifest_edited_outside_patchguard_is_kept_as_a_change(sample: Sample) -> None:
    sample.record_eagle3()
    path = locate(sample.root).manifest_path
    data = json.loads(path.read_text())
    data["patches"][0]["description"] = "edited by hand"
    path.write_text(json.dumps(data, indent=2) + "\n")
    assert sample.pg("require", f"{KIMI}::{sample_repo.CLASS}.forward").exit_code == 0
    assert history(sample)[1] == "took over manifest.json as changed outside patchguard"
    assert "edited by hand" in sample.git("show", f"{HISTORY_REF}:manifest.json").stdout


def test_without_manifest_json_the_ref_is_read(sample: Sample) -> None:
    sample.record_eagle3()
    locate(sample.root).manifest_path.unlink()
    assert "patch eagle3 - EAGLE-3 delegation" in sample.pg("list").output


def test_two_writers_racing_on_the_ref_lose_nothing(sample: Sample) -> None:
    """The slower writer loaded the manifest before the other's change: refused, in one line."""
    sample.record_eagle3()
    slow = Repo.discover(sample.root)
    loaded = load_manifest(slow)
    spec = f"{KIMI}::{sample_repo.CLASS}.forward"
    assert sample.pg("require", spec).exit_code == 0  # the other writer wins
    winner = sample.git("rev-parse", HISTORY_REF).stdout
    with slow.lock("drop", store=True), pytest.raises(ConfigError, match=r"changed\. Run it again"):
        patch_history.save(slow, loaded, "dropped everything")
    assert sample.git("rev-parse", HISTORY_REF).stdout == winner
    assert spec in manifest_text(sample)
    # the derived file is the ref's, and a fresh run of the loser goes through
    again = Repo.discover(sample.root)
    with again.lock("record", store=True):
        patch_history.save(again, load_manifest(again), "nothing new")  # same state: no commit
    assert sample.git("rev-parse", HISTORY_REF).stdout == winner


def test_the_ref_is_moved_compare_and_swap(sample: Sample) -> None:
    """The ref moved after this writer read it: update-ref with the old value refuses."""
    from guard.store import history as history_module

    sample.record_eagle3()
    repo = Repo.discover(sample.root)
    load_manifest(repo)
    read = history_module.current(repo)
    other = sample.git("commit-tree", "-m", "another writer", f"{HISTORY_REF}^{{tree}}").stdout
    sample.git("update-ref", HISTORY_REF, other.strip())
    with pytest.raises(ConfigError, match="at the same moment"):
        history_module._move_ref(repo, other.strip(), read, "late")
    assert sample.git("rev-parse", HISTORY_REF).stdout.strip() == other.strip()


def test_undo_of_a_re_record_that_swallowed_a_line_shows_it_as_before(sample: Sample) -> None:
    """The issue's acceptance: `show eagle3` prints exactly what it printed before."""
    sample.record_eagle3()
    before = sample.pg("show", "eagle3").output
    text = sample.kimi.read_text()
    sample.kimi.write_text(text.replace("    def forward(", "    # logger.debug\n    def forward("))
    assert sample.pg("record", "eagle3", KIMI).exit_code == 0  # no -m
    swallowed = sample.pg("show", "eagle3").output
    assert "logger.debug" in swallowed
    assert "EAGLE-3 delegation" in swallowed  # a re-record keeps the description
    log = sample.pg("log").output
    assert "0. " in log and f"re-recorded eagle3 ({KIMI})" in log
    assert f"recorded eagle3 ({KIMI})" in log
    undone = sample.pg("undo")
    assert undone.output.startswith(f"undid re-recorded eagle3 ({KIMI}) at ")
    assert sample.pg("show", "eagle3").output == before
    # nothing is lost: the swallowed version is still in the history
    assert sample.pg("show", "eagle3@{1}").output == swallowed
    assert sample.pg("show", "eagle3@{2}").output == before
    named = sample.pg("log", "eagle3").output.splitlines()
    assert named[0].startswith("eagle3@{0} ") and "undid: re-recorded eagle3" in named[0]
    assert named[1] == "    eagle3: EAGLE-3 delegation"
    assert named[3] == "    eagle3: EAGLE-3 delegation"  # kept by the re-record without -m


def test_show_of_a_version_that_is_not_there_says_which_are(sample: Sample) -> None:
    sample.record_eagle3()
    assert sample.pg("drop", "eagle3").exit_code == 0
    dropped = sample.pg("show", "eagle3@{0}")
    assert dropped.exit_code == 2
    assert "the version before it is eagle3@{1}" in dropped.stderr
    assert "EAGLE-3 delegation" in sample.pg("show", "eagle3@{1}").output
    beyond = sample.pg("show", "eagle3@{7}")
    assert beyond.exit_code == 2
    assert "numbered 0 to 1; see: patchguard log eagle3" in beyond.stderr
    assert sample.pg("log", "nope").exit_code == 2


def test_undo_list_merges_worktree_writes_and_patch_changes_in_time_order(
    sample: Sample,
) -> None:
    sample.record_eagle3()
    sample.git("stash")
    assert sample.pg("apply").exit_code == 0
    assert sample.pg("resolve", "eagle3").output.startswith("nothing to resolve")
    assert sample.pg("drop", "eagle3").exit_code == 0
    listed = sample.pg("undo", "--list").output.splitlines()
    assert [line.split(" at ")[0] for line in listed] == [
        "0. dropped eagle3",
        "1. the apply of eagle3",
        f"2. recorded eagle3 ({KIMI})",
    ]
    assert sample.pg("undo").output.startswith("undid dropped eagle3")
    assert sample.pg("undo").output.startswith("undid the apply of eagle3")
    assert sample.pg("undo").output.startswith("undid recorded eagle3")
    assert "no patches" in sample.pg("list").output or sample.pg("list").output == ""


def test_undo_of_an_import_that_replaced_a_patch(sample: Sample, tmp_path: Path) -> None:
    sample.record_eagle3()
    bundle = tmp_path / "eagle3.bundle.json"
    assert sample.pg("export", "-o", bundle).exit_code == 0
    before = sample.pg("show", "eagle3").output
    text = sample.kimi.read_text()
    sample.kimi.write_text(text + "\n# another line\n")
    assert sample.pg("record", "eagle3", KIMI, "-m", "newer").exit_code == 0
    newer = sample.pg("show", "eagle3").output
    imported = sample.pg("import", bundle)
    assert "replaced patch eagle3" in imported.output
    assert sample.pg("show", "eagle3").output == before
    assert f"imported from {bundle}: replaced patch eagle3" in sample.pg("log").output
    assert sample.pg("undo").output.startswith("undid imported from")
    assert sample.pg("show", "eagle3").output == newer


def test_importing_the_same_bundle_again_changes_nothing(sample: Sample, tmp_path: Path) -> None:
    """A bundle whose patch is the one already held: said so, and no history entry that
    `undo` would then have to take back."""
    sample.record_eagle3()
    bundle = tmp_path / "eagle3.bundle.json"
    assert sample.pg("export", "-o", bundle).exit_code == 0
    log = sample.pg("log").output
    imported = sample.pg("import", bundle)
    assert imported.exit_code == 0
    assert "kept patch eagle3 (the bundle's is the same)" in imported.output
    assert sample.pg("log").output == log


# --- a history the schema refuses, or a ref that is not a commit -------


def _push_bad_tip(sample: Sample, content: str) -> str:
    """A state whose manifest is `content`, on top of the ref, as a push from another
    version (or a hand update-ref) would leave it."""
    blob = git(sample.root, "hash-object", "-w", "--stdin", input=content).stdout.strip()
    tree = git(sample.root, "mktree", input=f"100644 blob {blob}\tmanifest.json\n").stdout.strip()
    tip = sample.git("rev-parse", HISTORY_REF).stdout.strip()
    bad = sample.git("commit-tree", tree, "-p", tip, "-m", "pushed from elsewhere").stdout.strip()
    sample.git("update-ref", HISTORY_REF, bad, tip)
    return tip


@pytest.mark.parametrize("content", ["not json", "[]", '{"patches": "x"}'])
def test_an_invalid_history_tip_is_one_line_and_undo_takes_it_back(
    sample: Sample, clean_env: dict[str, str], content: str
) -> None:
    sample.record_eagle3()
    valid = _push_bad_tip(sample, content)
    derived = (sample.root / ".git/patchguard/manifest.json").read_bytes()
    logged = run_patchguard(sample.root, clean_env, ("log",), 0).stdout
    assert "not a valid manifest; `patchguard undo` takes it back" in logged
    for args in (("record", "eagle3", sample_repo.KIMI), ("check",), ("status",), ("list",)):
        refused = run_patchguard(sample.root, clean_env, args, 2)
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1, refused.stderr
        assert valid[:10] in lines[0] and "patchguard undo" in lines[0], lines[0]
    assert (sample.root / ".git/patchguard/manifest.json").read_bytes() == derived  # never copied
    run_patchguard(sample.root, clean_env, ("undo",), 0)
    assert (sample.root / ".git/patchguard/manifest.json").read_bytes() == derived
    run_patchguard(sample.root, clean_env, ("check",), 0)
    logged = run_patchguard(sample.root, clean_env, ("log",), 0).stdout
    assert "not a valid manifest" in logged and "undid: pushed from elsewhere" in logged


@pytest.mark.parametrize("entry", ["a directory", "missing"])
def test_a_state_without_a_manifest_file_is_named_by_log_and_undo_takes_it_back(
    sample: Sample, clean_env: dict[str, str], entry: str
) -> None:
    """Read as "no patches", such a state would tell log that every patch was dropped there,
    and leave undo, the way out the refusal names, unable to take it back."""
    sample.record_eagle3()
    derived = (sample.root / ".git/patchguard/manifest.json").read_bytes()
    blob = git(sample.root, "hash-object", "-w", "--stdin", input="x\n").stdout.strip()
    listing = f"100644 blob {blob}\tREADME\n"
    if entry == "a directory":
        inner = git(sample.root, "mktree", input=listing).stdout.strip()
        listing += f"040000 tree {inner}\tmanifest.json\n"
    tree = git(sample.root, "mktree", input=listing).stdout.strip()
    tip = sample.git("rev-parse", HISTORY_REF).stdout.strip()
    bad = sample.git("commit-tree", tree, "-p", tip, "-m", "by hand").stdout.strip()
    sample.git("update-ref", HISTORY_REF, bad, tip)
    logged = run_patchguard(sample.root, clean_env, ("log",), 0).stdout
    assert "(dropped)" not in logged, logged
    assert "holds no manifest.json file" in logged and "nothing was read from it" in logged
    refused = run_patchguard(sample.root, clean_env, ("status",), 2)
    assert refused.stderr.count("nothing was read from it") == 1, refused.stderr
    run_patchguard(sample.root, clean_env, ("undo",), 0)
    assert (sample.root / ".git/patchguard/manifest.json").read_bytes() == derived
    run_patchguard(sample.root, clean_env, ("check",), 0)


def test_a_history_ref_that_is_not_a_commit_is_named(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    commit = sample.git("rev-parse", HISTORY_REF).stdout.strip()
    blob = git(sample.root, "hash-object", "-w", "--stdin", input="hello\n").stdout.strip()
    sample.git("update-ref", HISTORY_REF, blob)
    for args in (("log",), ("undo", "--list"), ("record", "eagle3", sample_repo.KIMI), ("check",)):
        refused = run_patchguard(sample.root, clean_env, args, 2)
        assert refused.stderr.count("\n") == 1, refused.stderr
        assert f"points at a blob ({blob[:10]})" in refused.stderr, refused.stderr
    way_back = refused.stderr.split("To go on, put it back where it was: ")[1].strip()
    assert way_back == f"git update-ref {HISTORY_REF} {commit}"
    sample.git(*way_back.split()[1:])
    run_patchguard(sample.root, clean_env, ("check",), 0)
