"""Each patch state is reached on a real repository, and apply/unapply keep every other byte."""

from __future__ import annotations

import json

import sample_repo
from conftest import Sample, method_count

from guard.tree.verdicts import State

METHODS = sample_repo.METHODS


def state_of(sample: Sample) -> str:
    result = sample.pg("check", "--json")
    return json.loads(result.output)["patches"][0]["state"]


def test_applied_right_after_record(sample: Sample) -> None:
    sample.record_eagle3()
    assert state_of(sample) == State.APPLIED
    assert sample.pg("check").exit_code == 0


def test_stashed_patch_is_unapplied_and_check_names_method_and_file(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    result = sample.pg("check")
    assert result.exit_code == 1
    assert state_of(sample) == State.UNAPPLIED
    assert f"{sample_repo.KIMI}: patch eagle3 is not applied (applies cleanly)" in result.stderr
    assert "missing: KimiK25ForConditionalGeneration.get_embed_and_head" in result.stderr
    assert "patchguard apply eagle3" in result.stderr


def test_apply_restores_and_second_apply_changes_no_byte(sample: Sample) -> None:
    sample.record_eagle3()
    patched = sample.kimi.read_bytes()
    sample.git("stash")
    assert sample.pg("apply").exit_code == 0
    assert sample.kimi.read_bytes() == patched
    mtime = sample.kimi.stat().st_mtime_ns
    second = sample.pg("apply")
    assert second.exit_code == 0
    assert "nothing to do" in second.output
    assert sample.kimi.stat().st_mtime_ns == mtime
    assert sample.pg("check").exit_code == 0


def test_drifted_after_checkout_of_older_commit_then_applied_inside_class(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    sample.git("checkout", "-q", "old")
    assert state_of(sample) == State.DRIFTED
    assert sample.pg("apply").exit_code == 0
    text = sample.kimi.read_text()
    assert all(method_count(text, m) == 1 for m in METHODS)
    assert text.index("def set_embed_and_head") < text.index("EntryClass")
    assert "DEFAULT_VISION_TOKENS" not in text  # the old commit's content is kept
    assert sample.pg("check").exit_code == 0


def test_missing_file_fails_check_loudly(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    sample.git("checkout", "-q", "no-kimi")
    assert state_of(sample) == State.MISSING_FILE
    result = sample.pg("check")
    assert result.exit_code == 1
    assert "kimi_k25.py" in result.stderr
    applied = sample.pg("apply")
    assert applied.exit_code == 1
    assert not sample.kimi.exists()


def test_upstream_with_different_text_is_recognised_and_never_duplicated(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    sample.git("checkout", "-q", "upstream-has-methods")
    before = sample.kimi.read_bytes()
    assert state_of(sample) == State.UPSTREAM
    assert sample.pg("apply").exit_code == 0
    assert sample.kimi.read_bytes() == before
    assert all(method_count(before.decode(), m) == 1 for m in METHODS)
    assert sample.pg("check").exit_code == 0


def test_conflict_leaves_file_untouched_and_merge_writes_markers(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    text = sample.kimi.read_text()
    conflicting = text.replace(  # the user's own method, exactly where the patch inserts
        "\n\nEntryClass", "\n    def mine(self):\n        return 1\n\n\nEntryClass"
    )
    sample.kimi.write_text(conflicting)
    assert state_of(sample) == State.CONFLICT
    result = sample.pg("apply")
    assert result.exit_code == 1
    assert "conflict" in result.output
    assert sample.kimi.read_text() == conflicting
    merged = sample.pg("apply", "--merge")
    assert merged.exit_code == 1
    assert "<<<<<<< working tree" in sample.kimi.read_text()
    assert ">>>>>>> patch eagle3" in sample.kimi.read_text()


def test_clean_text_merge_that_duplicates_a_method_is_refused(sample: Sample) -> None:
    """Upstream added one of the methods elsewhere in the class: a text merge would define it twice."""
    sample.record_eagle3()
    sample.git("stash")
    text = sample.kimi.read_text()
    upstream_one = text.replace(
        "    def forward(",
        "    def get_embed_and_head(self) -> tuple:\n"
        "        return self.language_model.get_embed_and_head()\n\n"
        "    def forward(",
    )
    sample.kimi.write_text(upstream_one)
    sample.git("commit", "-qam", "upstream adds one method")
    status = json.loads(sample.pg("check", "--json").output)
    assert status["patches"][0]["state"] == State.CONFLICT
    assert "defined 2 times" in status["patches"][0]["files"][0]["detail"]
    assert sample.pg("apply").exit_code == 1
    assert sample.kimi.read_text() == upstream_one


def test_users_other_edits_survive_apply_and_unapply(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    original = sample.kimi.read_text()
    edited = original.replace('"""Kimi-K2.5 multimodal model."""', '"""Kimi-K2.5, my notes."""')
    sample.kimi.write_text(edited)
    assert sample.pg("apply").exit_code == 0
    applied = sample.kimi.read_text()
    assert "my notes" in applied
    assert all(method_count(applied, m) == 1 for m in METHODS)
    assert sample.pg("unapply").exit_code == 0
    assert sample.kimi.read_text() == edited
    again = sample.pg("unapply")
    assert again.exit_code == 0
    assert "nothing to take out" in again.output


def test_end_of_file_append_is_never_duplicated(sample: Sample) -> None:
    """patch-package #238: an end-of-file hunk applied twice."""
    path = sample.root / "python/sglang/srt/distributed/parallel_state.py"
    path.write_text(path.read_text() + "EP_GROUP = None\n")
    assert sample.pg("record", "eof", str(path)).exit_code == 0
    for _ in range(3):
        assert sample.pg("apply").exit_code == 0
    assert path.read_text().count("EP_GROUP = None") == 1
    appended = path.read_text() + "MY_LOCAL = 1\n"  # the user appends right after it
    path.write_text(appended)
    sample.pg("apply")
    assert path.read_text() == appended


def test_user_method_next_to_applied_methods_keeps_patch_applied(sample: Sample) -> None:
    sample.record_eagle3()
    text = sample.kimi.read_text()
    extended = text.replace(
        "\n\nEntryClass", "\n    def mine(self):\n        return 1\n\n\nEntryClass"
    )
    sample.kimi.write_text(extended)
    assert state_of(sample) == State.APPLIED
    assert sample.pg("apply").exit_code == 0
    assert sample.kimi.read_text() == extended


def test_dry_run_writes_nothing(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    before = sample.kimi.read_bytes()
    result = sample.pg("apply", "--dry-run")
    assert result.exit_code == 0
    assert "would apply" in result.output
    assert sample.kimi.read_bytes() == before


def test_new_file_patch_is_created_and_removed(sample: Sample) -> None:
    added = sample.root / "python/sglang/srt/models/eagle3_helpers.py"
    added.write_text("def helper():\n    return 1\n")
    result = sample.pg("record", "helpers", str(added))
    assert result.exit_code == 0
    assert "eagle3_helpers.py::helper" in result.output
    assert sample.pg("unapply").exit_code == 0
    assert not added.exists()
    assert state_of(sample) == State.UNAPPLIED
    assert sample.pg("apply").exit_code == 0
    assert added.read_text() == "def helper():\n    return 1\n"
