"""guard.git.index_file reads git's index file itself: held to git's own answers on real indexes.

Whatever the state, an answer is git's answer or None (ask git); in the states a commit or a
checkout leaves, it must answer, or the fast path would start git after all.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample

from guard.git.gitdir import locate
from guard.git.index_file import IndexFile
from guard.store.fastpath import CurrentKey

NEW = "python/sglang/srt/models/new_model.py"
# Names that hold the index's extension signatures, a directory beside a file of the same
# stem, an executable, a link, and a file HEAD does not have.
ODD = ["TREE", "docs/TREE.md", "UNTRlink.py", "python/sglang/srt/models/kimi_k25.py.d/x.py"]
TOOL = "tools/run.sh"
LINK = "python/sglang/srt/models/kimi_link.py"


def ls_tree(sample: Sample, paths: list[str]) -> str:
    found = sample.git("--literal-pathspecs", "ls-tree", "--full-tree", "HEAD", "--", *paths)
    return found.stdout


def index_says(sample: Sample, paths: list[str]) -> str | None:
    layout = locate(sample.root)
    index = IndexFile.read(str(layout.git_dir))
    head = sample.git("rev-parse", "HEAD").stdout.strip()
    found = None if index is None else index.tree_entries(str(layout.common_dir), head, paths)
    if found is None:
        return None
    return "".join(f"{mode:06o} {kind} {oid}\t{path}\n" for mode, kind, oid, path in found)


def with_odd_files(sample: Sample) -> list[str]:
    for path in [*ODD, TOOL]:
        (sample.root / path).parent.mkdir(parents=True, exist_ok=True)
        (sample.root / path).write_text("X = 1\n")
    (sample.root / TOOL).chmod(0o755)
    os.symlink("kimi_k25.py", sample.root / LINK)
    sample.git("add", "-A")
    sample.git("commit", "-q", "-m", "odd names")
    return [sample_repo.KIMI, *ODD, TOOL, LINK, NEW, "TRE"]


def _staged(sample: Sample) -> None:
    sample.kimi.write_text(sample.kimi.read_text() + "\nSTAGED = 1\n")
    sample.git("add", sample_repo.KIMI)


def _soft_reset(sample: Sample) -> None:
    sample.git("reset", "-q", "--soft", "HEAD~1")


def _intent_to_add_then_commit(sample: Sample) -> None:
    (sample.root / NEW).write_text("X = 1\n")
    sample.git("add", "-N", NEW)
    (sample.root / "NOTES.md").write_text("notes\n")
    sample.git("add", "NOTES.md")
    sample.git("commit", "-q", "-m", "notes")


def _unmerged(sample: Sample) -> None:
    blob = sample.git("rev-parse", f"HEAD:{sample_repo.KIMI}").stdout.strip()
    stages = "".join(f"100644 {blob} {n}\t{sample_repo.KIMI}\n" for n in (1, 2, 3))
    subprocess.run(
        ["git", "update-index", "--index-info"],
        cwd=sample.root,
        input=f"0 {'0' * 40}\t{sample_repo.KIMI}\n{stages}",
        text=True,
        check=True,
    )


def _replaced(sample: Sample) -> None:
    """`git replace`: git shows another commit's tree for HEAD."""
    parent = sample.git("rev-parse", "HEAD~1").stdout.strip()
    sample.git("replace", sample.git("rev-parse", "HEAD").stdout.strip(), parent)


# state -> (what makes it, does the reader have to answer)
STATES = {
    "after a commit": (lambda sample: None, True),
    "after a checkout": (lambda sample: sample.git("checkout", "-q", "HEAD~1"), True),
    "untracked cache": (
        lambda sample: (
            sample.git("update-index", "--untracked-cache"),
            sample.git("status", "--porcelain"),
        ),
        True,
    ),
    "a staged change": (_staged, False),
    "reset --soft": (_soft_reset, False),
    "intent-to-add, then a commit": (_intent_to_add_then_commit, False),
    "unmerged": (_unmerged, False),
    "index version 4": (lambda sample: sample.git("update-index", "--index-version", "4"), False),
    "split index": (lambda sample: sample.git("update-index", "--split-index"), False),
    "assume-unchanged": (
        lambda sample: sample.git("update-index", "--assume-unchanged", sample_repo.KIMI),
        False,
    ),
    "packed commit": (lambda sample: sample.git("gc", "-q"), False),
    "replaced commit": (_replaced, False),
    "sparse index": (
        lambda sample: sample.git("sparse-checkout", "set", "--cone", "--sparse-index", "python"),
        False,
    ),
}


@pytest.mark.parametrize("state", STATES)
def test_heads_entries_are_git_ls_tree_or_nothing(sample: Sample, state: str) -> None:
    paths = with_odd_files(sample)
    make, must_answer = STATES[state]
    make(sample)
    said = index_says(sample, paths)
    if must_answer:
        assert said is not None
    if said is not None:
        assert said == ls_tree(sample, paths)
    if state == "a staged change":
        assert said is None  # the index is not HEAD's tree there: its entries are not HEAD's
    with_a_directory = [*paths, "python/sglang/srt"]  # ls-tree lists a tree there
    said = index_says(sample, with_a_directory)
    assert said is None or said == ls_tree(sample, with_a_directory)


def test_a_path_ls_tree_would_quote_is_left_to_git(sample: Sample) -> None:
    odd = "python/sglang/srt/models/kimí.py"
    (sample.root / odd).write_text("X = 1\n")
    sample.git("add", odd)
    sample.git("commit", "-q", "-m", "accent")
    assert index_says(sample, [sample_repo.KIMI]) == ls_tree(sample, [sample_repo.KIMI])
    assert index_says(sample, [odd]) is None


def test_check_right_after_an_unrelated_commit_starts_no_git(
    sample: Sample, tmp_path: Path
) -> None:
    """`check -q` after a commit that touches no guarded file: the key holds, and the index
    (not `git ls-tree`) says HEAD's entries."""
    sample.record_eagle3()
    assert sample.pg("check").exit_code == 0
    (sample.root / "NOTES.md").write_text("notes\n")
    sample.git("add", "NOTES.md")
    sample.git("commit", "-q", "-m", "notes")
    trace = tmp_path / "trace"
    env = {**os.environ, "GIT_TRACE": str(trace)}
    fast = subprocess.run(
        [sys.executable, "-c", "from guard.entry import main; main()", "check", "-q"],
        cwd=sample.root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert fast.returncode == 0, fast.stderr
    assert not trace.exists(), trace.read_text()  # no git process at all


@pytest.mark.parametrize(
    "state", ["merged", "unmerged", "intent-to-add", "index-version-4", "not-in-index"]
)
def test_the_index_reader_agrees_with_git_on_unmerged_entries(sample: Sample, state: str) -> None:
    """Held to `git ls-files --unmerged` on real indexes, and silent when it cannot say."""
    path = sample_repo.KIMI
    if state == "unmerged":
        _unmerged(sample)
    elif state == "intent-to-add":  # an entry with extended flags: a version 3 index
        path = NEW
        (sample.root / path).write_text("X = 1\n")
        sample.git("add", "-N", path)
    elif state == "index-version-4":  # names compressed: the reader stands aside
        sample.git("update-index", "--index-version", "4")
    elif state == "not-in-index":
        path = "python/sglang/srt/models/untracked.py"
        (sample.root / path).write_text("X = 1\n")
    layout = locate(sample.root)
    git_says = bool(sample.git("ls-files", "--unmerged", "--", path).stdout)
    index = IndexFile.read(str(layout.git_dir))
    key = CurrentKey("", [path], [], str(layout.workdir), str(layout.git_dir), index, [])
    assert key.unmerged() is git_says
    read = None if index is None else index.unmerged([path])
    if state in ("index-version-4", "not-in-index"):
        assert read is None
    else:
        assert read is git_says


def test_a_name_made_to_look_like_an_entry_of_the_guarded_file_is_not_trusted(
    sample: Sample,
) -> None:
    """A committed name can end with the guarded path and carry, just before it, two bytes
    that read as flags of the right length, at a place where an entry could start: the reader
    then finds two candidates and leaves the answer to git."""
    name = sample_repo.KIMI.encode()
    crafted = b"aaaaaa" + bytes([0x80, len(name)]) + name  # 6 + 2 bytes: an entry's alignment
    path = sample.root / os.fsdecode(crafted)
    path.parent.mkdir(parents=True)
    path.write_text("X = 1\n")
    sample.git("add", "-A")
    sample.git("commit", "-q", "-m", "crafted")
    layout = locate(sample.root)
    index = IndexFile.read(str(layout.git_dir))
    assert index is not None
    assert index_says(sample, [sample_repo.KIMI]) is None
    assert index.unmerged([sample_repo.KIMI]) is None
    # Without the crafted name, the same reader answers.
    sample.git("rm", "-q", "--cached", os.fsdecode(crafted))
    sample.git("commit", "-q", "-m", "gone")
    assert index_says(sample, [sample_repo.KIMI]) == ls_tree(sample, [sample_repo.KIMI])


def test_an_index_read_whole_is_known_again_by_its_checksum(sample: Sample) -> None:
    """`check` keeps the checksum of the index in which git left no guarded file unmerged;
    the same index is not read again, and any other index (one `git add` later) is."""
    from guard.git.index_file import checksum
    from guard.store.fastpath import CACHE_DIR_NAME, VERIFIED_FILE, current_key

    sample.record_eagle3()
    assert sample.pg("check", "-q").exit_code == 0
    layout = locate(sample.root)
    verified = (layout.git_dir / CACHE_DIR_NAME / VERIFIED_FILE).read_text()
    before = checksum(str(layout.git_dir))
    assert before is not None and f"\nmerged {before}\n" in verified
    found = current_key(str(sample.root))
    assert found is not None and found.verified and found.unmerged() is False
    _unmerged(sample)  # the same bytes in the file, stage entries in the index
    assert checksum(str(layout.git_dir)) != before
    found = current_key(str(sample.root))
    assert found is not None and found.unmerged() is True


def test_replacements_elsewhere_are_left_to_git(
    sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIT_REPLACE_REF_BASE names other replace refs: git shows the replacement's tree."""
    (sample.root / "NOTES.md").write_text("notes\n")
    sample.git("add", "NOTES.md")
    sample.git("commit", "-q", "-m", "notes")  # HEAD: a loose commit, the index its tree
    assert index_says(sample, [sample_repo.KIMI]) == ls_tree(sample, [sample_repo.KIMI])
    monkeypatch.setenv("GIT_REPLACE_REF_BASE", "refs/alt/")
    sample.git("replace", "HEAD", "upstream-has-methods")
    assert index_says(sample, [sample_repo.KIMI]) is None
    assert ls_tree(sample, [sample_repo.KIMI]) != ""


def _conflict(sample: Sample, how: str) -> None:
    """NOTES.md changed on two branches; `how` brings them together and stops on the conflict."""
    notes = sample.root / "NOTES.md"
    notes.write_text("a\n")
    sample.git("add", "NOTES.md")
    sample.git("commit", "-q", "-m", "notes")
    sample.git("branch", "other")
    notes.write_text("ours\n")
    sample.git("commit", "-q", "-am", "ours")
    sample.git("checkout", "-q", "other")
    notes.write_text("theirs\n")
    sample.git("commit", "-q", "-am", "theirs")
    if how == "stash pop":
        notes.write_text("stashed\n")
        sample.git("stash", "-q")
    if how == "checkout -m":
        notes.write_text("edited\n")
    sample.git("checkout", "-q", *(["-m"] if how == "checkout -m" else []), "-")
    if how == "merge":
        sample.git("merge", "-q", "other", check=False)
    elif how == "cherry-pick":
        sample.git("cherry-pick", "other", check=False)
    elif how == "stash pop":
        sample.git("stash", "pop", "-q", check=False)
    elif how == "stages written":
        _unmerged(sample)


@pytest.mark.parametrize(
    "how", ["merge", "cherry-pick", "stash pop", "checkout -m", "stages written", "resolved"]
)
def test_the_whole_index_is_merged_only_when_git_says_so(sample: Sample, how: str) -> None:
    """Repo.unmerged (what `patchguard git` asks after git ran) is `git ls-files --unmerged`,
    whether the index file answers for itself or git does; in the index a checkout or a
    commit leaves, the file answers (no git process)."""
    from guard.git.repo import Repo

    if how == "resolved":
        _conflict(sample, "merge")
        sample.git("add", "NOTES.md")
    else:
        _conflict(sample, how)
    repo = Repo.discover(sample.root)
    listed = sample.git("ls-files", "--unmerged", "-z").stdout.split("\0")
    git_says = sorted({entry.partition("\t")[2] for entry in listed if entry})
    assert sorted(repo.unmerged()) == git_says
    assert bool(git_says) is (how != "resolved")
    if git_says:
        index = repo.index_file
        assert index is None or index.cache_tree_root() is None
    sample.git("reset", "-q", "--hard")
    sample.git("checkout", "-q", "other")
    index = repo.index_file  # read again: git replaced the file
    assert index is not None and index.cache_tree_root() is not None
    assert repo.unmerged() == {}
