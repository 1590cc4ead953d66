"""After undo, fetch and import, one line says what the worktree holds now and the
command that brings the file in line, with "earlier" and "later" read from the history; and a
state stands in a sentence as words. Driven through the installed CLI on the sample repo."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import sample_repo
from conftest import Sample, git
from helpers import run_patchguard

KIMI = sample_repo.KIMI
ORIGINAL = "        return self.language_model.get_embed_and_head()\n"
TUNED = (
    "        embed, head = self.language_model.get_embed_and_head()\n        return embed, head\n"
)


def pg(
    root: Path, env: dict[str, str], *args: str, check: int | None = 0
) -> subprocess.CompletedProcess[str]:
    return run_patchguard(root, env, args, check)


def record(root: Path, env: dict[str, str]) -> None:
    sample_repo.add_eagle3_methods(root)
    pg(root, env, "record", "eagle3", KIMI, "-m", "EAGLE-3 delegation")


def tune(root: Path, env: dict[str, str]) -> None:
    """The user's second thought on one method, re-recorded."""
    kimi = root / KIMI
    kimi.write_text(kimi.read_text().replace(ORIGINAL, TUNED, 1))
    pg(root, env, "record", "eagle3", KIMI)


def test_undo_of_a_re_record_says_the_worktree_holds_the_later_version_and_apply_fixes_it(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    record(sample.root, clean_env)
    recorded = sample.kimi.read_text()
    tune(sample.root, clean_env)
    undone = pg(sample.root, clean_env, "undo")
    assert undone.stdout.startswith(f"undid re-recorded eagle3 ({KIMI}) at ")
    assert (
        "patchguard: the worktree still holds the re-recorded version of patch eagle3 (later "
        "than the one now recorded): patchguard apply eagle3 puts the recorded one in"
    ) in undone.stderr
    status = pg(sample.root, clean_env, "status", check=1)
    assert "the worktree holds a later version of this patch" in status.stdout
    assert "earlier" not in status.stdout
    pg(sample.root, clean_env, "apply", "eagle3")  # as the line says
    assert sample.kimi.read_text() == recorded
    pg(sample.root, clean_env, "check")


def test_undo_of_an_apply_says_the_patch_is_out_again(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    record(sample.root, clean_env)
    sample.git("stash", "-q")
    pg(sample.root, clean_env, "apply")
    undone = pg(sample.root, clean_env, "undo")
    assert undone.stdout.startswith("undid the apply of eagle3 at ")
    assert (
        "the worktree does not hold patch eagle3 yet: patchguard apply eagle3 puts it in"
        in undone.stderr
    )


def clone(sample: Sample, tmp_path: Path, name: str) -> Path:
    git(tmp_path, "clone", "-q", str(sample.root), str(tmp_path / name))
    return tmp_path / name


def test_fetch_says_what_the_worktree_holds_and_the_next_step(
    sample: Sample, clean_env: dict[str, str], tmp_path: Path
) -> None:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    record(sample.root, clean_env)
    pg(sample.root, clean_env, "push", str(remote))
    node1 = clone(sample, tmp_path, "node1")
    first = pg(node1, clean_env, "fetch", str(remote))
    assert first.stdout.splitlines() == ["new patch eagle3"]
    assert (
        "patchguard: the worktree does not hold patch eagle3 yet: patchguard apply eagle3 puts "
        "it in" in first.stderr
    )
    pg(node1, clean_env, "apply")
    tune(sample.root, clean_env)
    pg(sample.root, clean_env, "push", str(remote))
    update = pg(node1, clean_env, "fetch", str(remote))
    assert update.stdout.splitlines() == ["updated patch eagle3"]
    assert (
        "patchguard: the worktree still holds the fetched version of patch eagle3 (earlier than "
        "the one now recorded): patchguard apply eagle3 puts the recorded one in"
    ) in update.stderr
    pg(node1, clean_env, "apply", "eagle3")
    assert (node1 / KIMI).read_text() == sample.kimi.read_text()
    pg(node1, clean_env, "check")


def test_import_says_the_worktree_holds_the_earlier_version(
    sample: Sample, clean_env: dict[str, str], tmp_path: Path
) -> None:
    record(sample.root, clean_env)
    first = tmp_path / "first.bundle.json"
    pg(sample.root, clean_env, "export", "-o", str(first))
    node1 = clone(sample, tmp_path, "node1")
    imported = pg(node1, clean_env, "import", str(first))
    assert "the worktree does not hold patch eagle3 yet: patchguard apply eagle3" in imported.stderr
    pg(node1, clean_env, "apply")
    tune(sample.root, clean_env)
    second = tmp_path / "second.bundle.json"
    pg(sample.root, clean_env, "export", "-o", str(second))
    replaced = pg(node1, clean_env, "import", str(second))
    assert replaced.stdout.startswith("replaced patch eagle3")
    assert (
        "the worktree still holds the imported version of patch eagle3 (earlier than the one "
        "now recorded): patchguard apply eagle3 puts the recorded one in"
    ) in replaced.stderr
    same = pg(node1, clean_env, "import", str(second))  # nothing changed: nothing to say
    assert "the worktree" not in same.stderr


def test_a_state_stands_in_a_sentence_as_words(sample: Sample, clean_env: dict[str, str]) -> None:
    record(sample.root, clean_env)
    pg(sample.root, clean_env, "install")
    sample.git("stash", "-q")
    moved = subprocess.run(
        ["git", "checkout", "-q", "no-kimi"],
        cwd=sample.root,
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert moved.returncode == 1
    assert (
        f"{KIMI}: patch eagle3 cannot be applied: the file does not exist in the worktree; "
        "missing: "
    ) in moved.stderr
    assert "is missing-file" not in moved.stderr


def test_log_and_undo_list_number_alike_from_0_and_undo_n_takes_back_0_to_n(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    record(sample.root, clean_env)
    tune(sample.root, clean_env)
    pg(sample.root, clean_env, "require", f"{KIMI}::KimiK25ForConditionalGeneration.load_weights")
    log = json.loads(pg(sample.root, clean_env, "log", "--json").stdout)
    assert [c["number"] for c in log["changes"]] == [0, 1, 2]
    assert log["changes"][1]["subject"] == f"re-recorded eagle3 ({KIMI})"
    listed = json.loads(pg(sample.root, clean_env, "undo", "--list", "--json").stdout)
    assert [(e["number"], e["kind"]) for e in listed["entries"]] == [
        (0, "patches"),
        (1, "patches"),
        (2, "patches"),
    ]
    assert [e["what"].split(" at ")[0] for e in listed["entries"]] == [
        c["subject"] for c in log["changes"]
    ]
    mine = json.loads(pg(sample.root, clean_env, "log", "eagle3", "--json").stdout)
    shown = pg(sample.root, clean_env, "show", "eagle3@{0}").stdout  # log NAME's 0: the tuned
    assert mine["changes"][0]["subject"] == f"re-recorded eagle3 ({KIMI})"
    assert "embed, head = self.language_model" in shown
    too_far = pg(sample.root, clean_env, "undo", "3", check=2)
    assert "numbered 0 to 2; nothing was undone" in too_far.stderr
    undone = pg(sample.root, clean_env, "undo", "1")  # the require and the re-record
    assert [line.split(" at ")[0] for line in undone.stdout.splitlines()] == [
        f"undid {log['changes'][0]['subject']}",
        f"undid re-recorded eagle3 ({KIMI})",
    ]
    assert "later than the one now recorded" in undone.stderr
    left = pg(sample.root, clean_env, "undo", "--list").stdout
    assert left.startswith(f"0. recorded eagle3 ({KIMI}) at ")
