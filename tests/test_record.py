"""record, require, list and drop on a real repository."""

from __future__ import annotations

import json

import sample_repo
from conftest import Sample

KIMI = sample_repo.KIMI
CLASS = sample_repo.CLASS


def test_inferred_symbols_are_exactly_the_added_defs(sample: Sample) -> None:
    result = sample.record_eagle3()
    required = sorted(line.split()[-1] for line in result.output.splitlines() if "requires" in line)
    assert required == sorted(f"{KIMI}::{CLASS}.{m}" for m in sample_repo.METHODS)


def test_record_without_paths_takes_changed_tracked_files(sample: Sample) -> None:
    sample_repo.add_eagle3_methods(sample.root)
    (sample.root / "untracked.py").write_text("x = 1\n")
    result = sample.pg("record", "all")
    assert result.exit_code == 0
    assert KIMI in result.output
    assert "untracked.py" not in result.output


def test_record_without_paths_in_a_sparse_index_checkout(sample: Sample) -> None:
    """git status reads a sparse index (libgit2 refuses its `sdir` extension)."""
    sample.git("sparse-checkout", "set", "--cone", "--sparse-index", KIMI.rsplit("/", 1)[0])
    sample_repo.add_eagle3_methods(sample.root)
    result = sample.pg("record", "all")
    assert result.exit_code == 0, result.stderr
    assert KIMI in result.output


def test_recording_again_replaces_and_says_so(sample: Sample) -> None:
    sample.record_eagle3()
    result = sample.pg("record", "eagle3", KIMI, "-m", "second take")
    assert result.exit_code == 0
    assert result.output.startswith("replaced patch eagle3")
    assert sample.pg("list").output.count("patch eagle3") == 1


def test_record_refuses_a_file_that_does_not_parse(sample: Sample) -> None:
    text = sample.kimi.read_text()
    broken_line = text.count("\n") + 2
    sample.kimi.write_text(text + "\n    def broken(:\n")
    result = sample.pg("record", "bad", KIMI)
    assert result.exit_code == 1
    assert f"{KIMI}:{broken_line}: syntax error" in result.stderr
    assert "bad" not in sample.pg("list").output


def test_record_refuses_a_required_symbol_that_is_not_there(sample: Sample) -> None:
    sample_repo.add_eagle3_methods(sample.root)
    result = sample.pg("record", "eagle3", KIMI, "--require", f"{KIMI}::{CLASS}.nope")
    assert result.exit_code == 2  # a SPEC that names nothing in the file is mistyped
    assert f"{CLASS}.nope" in result.stderr


def test_method_appended_after_entryclass_is_refused_as_not_in_class(sample: Sample) -> None:
    text = sample.kimi.read_text() + sample_repo.EAGLE3_METHODS.replace("\n    ", "\n")
    sample.kimi.write_text(text)
    result = sample.pg("record", "wrong", KIMI, "--require", f"{KIMI}::{CLASS}.get_embed_and_head")
    assert result.exit_code == 1
    assert f"probably meant inside class {CLASS}" in result.stderr  # the slip, refused first
    assert "module level" in result.stderr
    assert "wrong" not in sample.pg("list").output


def test_malformed_spec_is_a_usage_error(sample: Sample) -> None:
    sample_repo.add_eagle3_methods(sample.root)
    result = sample.pg("record", "eagle3", KIMI, "--require", "kimi_k25.py")
    assert result.exit_code == 2
    assert "no '::'" in result.stderr


def test_require_guards_a_committed_symbol(sample: Sample) -> None:
    spec = f"{KIMI}::{CLASS}.forward"
    assert sample.pg("require", spec).exit_code == 0
    assert sample.pg("check").exit_code == 0
    sample.git("checkout", "-q", "no-kimi")
    result = sample.pg("check", "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["symbols"] == [
        {
            "spec": spec,
            "present": False,
            "detail": f"{KIMI} does not exist",
            "patch": None,
            "state": "absent",
            "runtime": None,
        }
    ]
    assert sample.pg("drop", spec).exit_code == 0
    assert sample.pg("check").exit_code == 2  # nothing guarded any more: never a vacuous pass


def test_require_refuses_a_symbol_that_does_not_exist(sample: Sample) -> None:
    result = sample.pg("require", f"{KIMI}::{CLASS}.missing")
    assert result.exit_code == 2  # a SPEC naming nothing in the file is a usage error
    assert "cannot guard" in result.stderr


def test_mistyped_spec_gets_the_closest_names(sample: Sample) -> None:
    result = sample.pg("require", f"{KIMI}::{CLASS}.load_weight")
    assert result.exit_code == 2
    assert f"did you mean {CLASS}.load_weights?" in result.stderr
    sample.pg("require", f"{KIMI}::{CLASS}.forward")
    dropped = sample.pg("drop", f"{KIMI}::{CLASS}.forwrd")
    assert dropped.exit_code == 2
    assert f"did you mean {KIMI}::{CLASS}.forward?" in dropped.stderr


def test_a_method_defined_twice_is_a_failed_guard_not_a_typo(sample: Sample) -> None:
    sample_repo.add_eagle3_methods(sample.root)
    text = sample.kimi.read_text()
    sample.kimi.write_text(
        text.replace("\n\nEntryClass", sample_repo.EAGLE3_METHODS + "\n\nEntryClass")
    )
    result = sample.pg("record", "eagle3", KIMI)
    assert result.exit_code == 1  # the name is right; the code is not as required
    assert "defined 2 times" in result.stderr
    assert "did you mean" not in result.stderr


def test_drop_forgets_patch_without_touching_worktree(sample: Sample) -> None:
    sample.record_eagle3()
    before = sample.kimi.read_bytes()
    assert sample.pg("drop", "eagle3").exit_code == 0
    assert sample.kimi.read_bytes() == before
    unknown = sample.pg("drop", "eagle3")
    assert unknown.exit_code == 2
    assert "no patch named eagle3" in unknown.stderr


def test_check_quiet_prints_nothing_on_success(sample: Sample) -> None:
    sample.record_eagle3()
    result = sample.pg("check", "--quiet")
    assert result.exit_code == 0
    assert result.output == ""


def test_nothing_to_record_is_a_usage_error(sample: Sample) -> None:
    result = sample.pg("record", "empty")
    assert result.exit_code == 2
    assert "no tracked file has uncommitted changes" in result.stderr


def test_a_second_patch_on_the_same_file_stacks(sample: Sample) -> None:
    """The second patch records only its own change, on top of the first."""
    sample.record_eagle3()
    text = sample.kimi.read_text()
    sample.kimi.write_text(
        text.replace(
            "\n\nEntryClass",
            "\n    def draft_vocab(self):\n        return 32000\n\n\nEntryClass",
            1,
        )
    )
    second = sample.pg("record", "draft", KIMI)
    assert second.exit_code == 0, second.stderr
    assert f"requires {KIMI}::{CLASS}.draft_vocab" in second.output
    assert "get_embed_and_head" not in second.output  # the first patch's change is not in it
    shown = sample.pg("show", "draft").output
    assert "+    def draft_vocab(self):" in shown
    assert "+    def get_embed_and_head(self):" not in shown

    assert sample.pg("unapply", "draft").exit_code == 0
    after = sample.kimi.read_text()
    assert "def draft_vocab" not in after
    assert after.count("def get_embed_and_head(") == 1  # the first patch stays
    assert sample.pg("unapply").exit_code == 0
    assert sample.kimi.read_text() == sample.git("show", f"HEAD:{KIMI}").stdout
    assert sample.pg("apply").exit_code == 0  # both, in order
    both = sample.kimi.read_text()
    assert "def draft_vocab" in both and both.count("def get_embed_and_head(") == 1
    assert sample.pg("check").exit_code == 0
    assert sample.pg("record", "draft", KIMI).exit_code == 0  # recording it again is the same
