"""When git cannot merge the patch, patchguard still tells the truth and gets the user out.

The history has the real shape (scripts/sample_repo.py, build_absorbing): the user types the
three EAGLE-3 methods by hand right after `load_weights` at r0 (v0.5.9); the release r2
(v0.5.10) absorbs the same methods, typed and documented, at the very same spot. So git's own
stash pop, autostash and `checkout -m` conflict there. Every command runs as users run it: the
installed `patchguard` and the real git CLI.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sample_repo
from conftest import Histories, git
from helpers import Checkout, methods_once_in_class

from guard.git.markers import marker_lines

KIMI = sample_repo.KIMI
METHODS = sample_repo.METHODS
DOCSTRING = '"""Kimi-K2.5 multimodal model."""'
MY_DOCSTRING = '"""Kimi-K2.5 multimodal model (my build)."""'


def patch_by_hand(user: Checkout) -> None:
    """The hand-typed methods recorded at r0, then an unrelated edit in the same file."""
    sample_repo.type_eagle3_by_hand(user.root)
    user.pg("record", "eagle3", KIMI, "-m", "EAGLE-3 delegation", check=0)
    user.pg("install", check=0)
    user.kimi.write_text(user.kimi.read_text().replace(DOCSTRING, MY_DOCSTRING))


@pytest.fixture
def user(tmp_path: Path, clean_env: dict[str, str], histories: Histories) -> Checkout:
    root = tmp_path / "sglang"
    histories.copy(sample_repo.build_absorbing, root)
    checkout = Checkout(root, clean_env)
    checkout.git("checkout", "-q", "-b", "work", "r0")
    patch_by_hand(checkout)
    return checkout


@pytest.fixture
def cloned(tmp_path: Path, clean_env: dict[str, str], histories: Histories) -> Checkout:
    """As `user`, in a clone of the absorbing history at r0 on main: `git pull` brings r2."""
    upstream = tmp_path / "upstream"
    histories.copy(sample_repo.build_absorbing, upstream)
    git(tmp_path, "clone", "-q", str(upstream), str(tmp_path / "clone"))
    checkout = Checkout(tmp_path / "clone", clean_env)
    checkout.git("reset", "-q", "--hard", "r0")
    patch_by_hand(checkout)
    return checkout


def plain_stash_pop_conflict(user: Checkout) -> None:
    """What the issue reports: git alone, onto the release that absorbed the methods."""
    user.git("stash", "-q")
    user.git("checkout", "-q", "v0.5.10")
    pop = user.git("stash", "pop", check=False)
    assert pop.returncode == 1
    assert "CONFLICT (content)" in pop.stdout + pop.stderr
    assert user.unmerged()


def assert_got_out(user: Checkout) -> None:
    """No marker, no unmerged entry, the methods once (HEAD's), the user's edit kept, green."""
    text = user.kimi.read_text()
    assert not marker_lines(text.encode())
    assert user.unmerged() == ""
    assert methods_once_in_class(user.kimi)
    assert text == user.at("HEAD").replace(DOCSTRING, MY_DOCSTRING)
    assert user.git("diff", "--cached", "--name-only").stdout == ""  # unstaged, as a clean pop
    user.pg("check", check=0)
    user.pg("status", check=0)


# --- the marker rule, pinned to git ---------------------------------------------------------


@pytest.mark.parametrize("style", ["merge", "diff3", "zdiff3"])
def test_markers_are_the_lines_git_writes_and_flags(tmp_path: Path, style: str) -> None:
    """git writes the conflict (merge.conflictStyle), and `git diff --check` names its marker
    lines: the detector finds exactly those, in every style."""
    root = tmp_path / "repo"
    sample_repo.build_absorbing(root)
    git(root, "checkout", "-q", "-b", "work", "r0")
    sample_repo.type_eagle3_by_hand(root)
    git(root, "commit", "-qam", "by hand")
    merge = git(root, "-c", f"merge.conflictStyle={style}", "merge", "-q", "r2", check=False)
    assert merge.returncode == 1
    content = (root / KIMI).read_bytes()
    git(root, "add", KIMI)  # markers and all: what `git add` accepts without a word
    flagged = git(root, "diff", "--cached", "--check", "HEAD", check=False).stdout
    expected = [int(n) for n in re.findall(rf"^{re.escape(KIMI)}:(\d+): leftover", flagged, re.M)]
    assert expected and len(expected) == (4 if style != "merge" else 3)
    assert marker_lines(content) == expected
    assert marker_lines(content.replace(b"\n", b"\r\n")) == expected


def test_an_underline_of_equals_signs_alone_is_no_conflict() -> None:
    docstring = b'def f():\n    """Title\n    =======\n    """\n\n=======\n'
    assert marker_lines(docstring) == []
    assert marker_lines(b"x = 1\n<<<<<<< HEAD\n") == [2]
    assert marker_lines(b"<<<<<<<<< not a marker\n>>>>>>>x\n") == []


# --- a conflict is never green, never "upstream" ------------------------------------------------


def test_plain_stash_pop_conflict_is_conflicted_and_apply_gets_out(user: Checkout) -> None:
    plain_stash_pop_conflict(user)
    status = user.pg("status")
    assert status.returncode == 1
    assert "eagle3: conflicted" in status.stdout
    assert "upstream" not in status.stdout
    assert "unmerged" in status.stdout
    check = user.pg("check")
    assert check.returncode == 1
    assert "conflicted" in check.stderr
    assert "patchguard apply eagle3" in check.stderr
    assert "patchguard record" not in check.stderr
    user.pg("run", "--", "true", check=1)
    stamp = json.loads(user.pg("stamp", check=0).stdout)
    assert stamp["ok"] is False
    assert stamp["patches"] == {"eagle3": "conflicted"}
    dry = user.pg("apply", "--dry-run", check=0)
    assert "would finish git's conflicted merge" in dry.stdout
    assert user.unmerged()  # a dry run writes nothing, index included

    apply = user.pg("apply", check=0)  # the advice, pasted
    assert "finished git's conflicted merge" in apply.stdout
    assert "HEAD's copy kept" in apply.stdout
    assert "drop it with git stash drop" in apply.stdout
    assert_got_out(user)
    user.git("stash", "drop")  # as advised: nothing was lost
    assert_got_out(user)


def test_autostash_conflict_after_pull_rebase(cloned: Checkout) -> None:
    user = cloned
    pull = user.git("pull", "-q", "--rebase", "--autostash", check=False)
    assert "conflict" in (pull.stdout + pull.stderr).lower()
    assert user.git("rev-parse", "HEAD").stdout == user.git("rev-parse", "r2").stdout
    status = user.pg("status")
    assert status.returncode == 1
    assert "conflicted" in status.stdout
    assert "upstream" not in status.stdout
    apply = user.pg("apply", check=0)
    assert "drop it with git stash drop" in apply.stdout
    assert_got_out(user)


def test_checkout_m_conflict_fails_the_hook_and_apply_gets_out(user: Checkout) -> None:
    moved = user.git("checkout", "-q", "-m", "v0.5.10", check=False)
    assert moved.returncode == 1  # post-checkout: the guard failed
    assert "conflicted" in moved.stderr
    assert "patchguard apply eagle3" in moved.stderr
    assert user.unmerged()
    apply = user.pg("apply", check=0)
    assert "stash" not in apply.stdout  # no stash was involved
    assert_got_out(user)


def test_the_patchs_side_is_taken_where_head_lacks_the_methods(user: Checkout) -> None:
    """Upstream adds another method at the same spot: the patch's copy comes back beside it."""
    user.git("stash", "-q")
    text = user.kimi.read_text()
    upstream_method = "    def get_input_embeddings(self):\n        return None\n"
    anchor = "        self.language_model.load_weights(weights)\n"
    user.kimi.write_text(text.replace(anchor, anchor + "\n" + upstream_method))
    user.git("commit", "-qam", "upstream: a method at the end of the class")
    assert user.git("stash", "pop", check=False).returncode == 1
    user.pg("status", check=1)
    apply = user.pg("apply", check=0)
    assert "the patch's own text put back" in apply.stdout
    result = user.kimi.read_text()
    assert not marker_lines(result.encode())
    assert methods_once_in_class(user.kimi)
    assert result.count("def get_input_embeddings(") == 1
    assert MY_DOCSTRING in result
    assert user.unmerged() == ""
    user.pg("check", check=0)


def test_a_conflict_that_is_not_the_patchs_stays_marked(user: Checkout) -> None:
    user.kimi.write_text(user.kimi.read_text().replace("def forward(", "def forward(  "))
    user.git("stash", "-q")
    user.git("checkout", "-q", "-b", "release", "v0.5.10")
    text = user.kimi.read_text().replace("def forward(", "def forward( ")
    user.kimi.write_text(text)
    user.git("commit", "-qam", "upstream edits the forward line too")
    assert user.git("stash", "pop", check=False).returncode == 1
    apply = user.pg("apply")
    assert apply.returncode == 1
    assert "conflicts that are not the patch's stay marked" in apply.stdout
    result = user.kimi.read_text()
    markers = marker_lines(result.encode())
    assert len(markers) == 3  # one conflict: the forward line
    assert "def forward(  " in result and "def forward( self" in result
    for name in METHODS:
        assert result.count(f"def {name}(") == 1  # the patch's part: HEAD's copy, once
    assert user.unmerged()  # git's entries stay until the user has resolved the rest
    assert MY_DOCSTRING in result
    user.pg("status", check=1)


def test_markers_git_add_accepted_are_still_a_conflict(user: Checkout) -> None:
    plain_stash_pop_conflict(user)
    user.git("add", KIMI)
    assert user.unmerged() == ""
    status = user.pg("status")
    assert status.returncode == 1
    assert "conflict markers at lines" in status.stdout
    apply = user.pg("apply")
    assert apply.returncode == 1
    assert "edit the conflict markers out by hand" in apply.stdout
    assert "upstream" not in apply.stdout


def test_a_file_that_does_not_parse_is_conflicted(user: Checkout) -> None:
    user.kimi.write_text(user.kimi.read_text().replace("def forward(self,", "def forward(self,,"))
    status = user.pg("status")
    assert status.returncode == 1
    assert "conflicted (does not parse" in status.stdout
    check = user.pg("check")
    assert "fix the syntax error by hand" in check.stderr


def test_a_conflict_in_a_patch_without_symbols_is_never_remembered(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """A patch upstream absorbed as text, in a file git left conflicted elsewhere: before,
    `upstream` and green (no symbol to fail), so the verified cache kept it."""
    user = Checkout(tmp_path / "repo", clean_env)
    sample_repo.build_absorbing(user.root)
    user.git("checkout", "-q", "-b", "work", "r0")
    readme = user.root / "README.md"
    readme.write_text(user.git("show", "r1:README.md").stdout)  # the line r1 adds, typed
    user.pg("record", "notes", "README.md", check=0)
    readme.write_text(readme.read_text().replace("(sample)", "(mine)"))
    user.git("stash", "-q")
    user.git("checkout", "-q", "-b", "release", "r1")
    readme.write_text(readme.read_text().replace("(sample)", "(theirs)"))
    user.git("commit", "-qam", "upstream retitles")
    assert user.git("stash", "pop", check=False).returncode == 1
    for _ in range(2):  # a first green check would have filled the verified cache
        check = user.pg("check")
        assert check.returncode == 1
        assert (
            "README.md: patch notes cannot be checked: the file itself is conflicted"
            in check.stderr
        )


# --- advice never re-bases a patch ----------------------------------------------------------


def upstream_method_at_the_end(user: Checkout) -> str:
    """Branch upstream-adds: after r0, upstream adds its own method where the patch's go.

    Made with plumbing (a private index), so the user's tree and hooks are not involved."""
    anchor = "        self.language_model.load_weights(weights)\n"
    text = user.at("r0").replace(
        anchor, anchor + "\n    def get_input_embeddings(self):\n        return None\n"
    )
    env = {**user.env, "GIT_INDEX_FILE": str(user.root / ".git" / "scratch-index")}
    plumb = [("read-tree", "r0"), ("hash-object", "-w", "--stdin")]
    git(user.root, *plumb[0], env=env)
    blob = git(user.root, *plumb[1], input=text, env=env).stdout.strip()
    git(user.root, "update-index", "--cacheinfo", f"100644,{blob},{KIMI}", env=env)
    tree = git(user.root, "write-tree", env=env).stdout.strip()
    message = "upstream: a method at the end of the class"
    commit = git(user.root, "commit-tree", tree, "-p", "r0", "-m", message, env=env).stdout.strip()
    user.git("branch", "upstream-adds", commit)
    user.kimi.write_text(user.kimi.read_text().replace(MY_DOCSTRING, DOCSTRING))  # only the patch
    return commit


def test_a_patch_that_does_not_merge_is_never_advised_to_be_recorded(user: Checkout) -> None:
    upstream_method_at_the_end(user)
    moved = user.pg("git", "checkout", "-q", "upstream-adds")
    assert moved.returncode == 1
    assert "patch eagle3 does not merge with this version of the file (" in moved.stderr
    assert "the patch does not merge with this version of the file" in moved.stderr
    assert "patchguard resolve eagle3" in moved.stderr
    assert "patchguard record" not in moved.stderr
    status = user.pg("status")
    assert status.returncode == 1  # as check: a conflict is a failed guard
    assert "eagle3: does-not-merge" in status.stdout
    back = user.pg("git", "checkout", "-q", "-")  # the advice, pasted
    assert back.returncode == 0, back.stderr
    assert user.git("symbolic-ref", "--short", "HEAD").stdout.strip() == "work"
    assert methods_once_in_class(user.kimi)
    user.pg("check", check=0)


def recorded(user: Checkout) -> dict[str, object]:
    manifest = json.loads(user.pg("list", "--json", check=0).stdout)
    patch: dict[str, object] = manifest["patches"][0]
    return patch


def test_record_away_from_the_base_asks_for_rebase(user: Checkout) -> None:
    before = recorded(user)
    upstream_method_at_the_end(user)
    user.pg("git", "checkout", "-q", "upstream-adds", check=1)
    sample_repo.type_eagle3_by_hand(user.root)  # the user's edit there, by hand
    refused = user.pg("record", "eagle3", KIMI)
    assert refused.returncode == 2
    assert "would re-base it onto" in refused.stderr
    assert "--rebase" in refused.stderr
    assert "Nothing was changed" in refused.stderr
    assert recorded(user) == before
    rebased = user.pg("record", "eagle3", KIMI, "--rebase", check=0)
    assert "replaced patch eagle3" in rebased.stdout
    after = recorded(user)
    assert after["base_commit"] == user.git("rev-parse", "HEAD").stdout.strip()
    assert after["description"] == "EAGLE-3 delegation"  # kept without -m
    user.pg("record", "eagle3", KIMI, "-m", "EAGLE-3, re-based", check=0)  # at its base now
    assert recorded(user)["description"] == "EAGLE-3, re-based"


def test_record_mid_bisect_asks_for_rebase_even_at_the_base(user: Checkout) -> None:
    before = recorded(user)
    user.git("bisect", "start", "r2", "r0")
    user.git("checkout", "-q", "work")  # back at the patch's base, bisect still in progress
    refused = user.pg("record", "eagle3", KIMI)
    assert refused.returncode == 2
    assert "(a bisect is in progress)" in refused.stderr
    assert recorded(user) == before
    user.git("bisect", "reset")
    user.pg("record", "eagle3", KIMI, check=0)  # at its base, nothing in progress: fine
    assert recorded(user)["description"] == "EAGLE-3 delegation"


# --- stash pops never conflict with the patch -----------------------------------------------


@pytest.mark.parametrize("only_the_patch", [False, True], ids=["with-my-edit", "only-the-patch"])
def test_wrapped_stash_pop_onto_the_absorbing_release(user: Checkout, only_the_patch: bool) -> None:
    if only_the_patch:
        user.kimi.write_text(user.kimi.read_text().replace(MY_DOCSTRING, DOCSTRING))
    user.git("stash", "-q")
    user.git("checkout", "-q", "v0.5.10")
    pop = user.pg("git", "stash", "pop")
    assert pop.returncode == 0, pop.stderr
    assert "CONFLICT" not in pop.stdout + pop.stderr
    assert "the stash held patch eagle3: git applied the rest" in pop.stderr
    assert user.stash_count() == 0
    assert user.unmerged() == ""
    text = user.kimi.read_text()
    assert not marker_lines(text.encode())
    assert methods_once_in_class(user.kimi)
    head = user.at("HEAD")
    assert text == (head if only_the_patch else head.replace(DOCSTRING, MY_DOCSTRING))
    user.pg("check", check=0)


def test_wrapped_stash_apply_keeps_the_entry_and_pop_back_home_restores_the_patch(
    user: Checkout,
) -> None:
    patched = user.kimi.read_text()
    user.git("stash", "-q")
    user.git("checkout", "-q", "v0.5.10")
    user.pg("git", "stash", "apply", "-q", check=0)
    assert user.stash_count() == 1
    assert user.kimi.read_text() == user.at("HEAD").replace(DOCSTRING, MY_DOCSTRING)
    user.git("checkout", "-q", KIMI)  # drop the applied copy: the stash still has it all
    user.pg("git", "checkout", "-q", "work", check=0)
    pop = user.pg("git", "stash", "pop", "stash@{0}")
    assert pop.returncode == 0, pop.stderr
    assert user.stash_count() == 0
    assert user.kimi.read_text() == patched  # at the patch's base: exactly the tree stashed
    user.pg("check", check=0)


def test_wrapped_pull_rebase_autostash_never_conflicts_with_the_patch(cloned: Checkout) -> None:
    """The patch is lifted before git runs, so the autostash holds only the
    user's other edit; the patch comes back by the 3-way apply (HEAD's copy where it has one)."""
    user = cloned
    pull = user.pg("git", "pull", "-q", "--rebase", "--autostash", check=0)
    assert "conflict" not in (pull.stdout + pull.stderr).lower()
    assert user.git("rev-parse", "HEAD").stdout == user.git("rev-parse", "r2").stdout
    assert_got_out(user)
    assert user.stash_count() == 0


@pytest.mark.parametrize(
    "git_command", [["checkout", "-q", "-m", "v0.5.10"], ["merge", "--autostash", "-q", "v0.5.10"]]
)
def test_wrapped_checkout_m_and_merge_autostash_never_conflict_with_the_patch(
    user: Checkout, git_command: list[str]
) -> None:
    moved = user.pg("git", *git_command, check=0)
    assert "conflict" not in (moved.stdout + moved.stderr).lower()
    assert user.git("rev-parse", "HEAD").stdout == user.git("rev-parse", "v0.5.10").stdout
    assert_got_out(user)
    assert user.stash_count() == 0
