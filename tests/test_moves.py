"""Moves between commits where upstream edits the patched file, then absorbs the patch.

The history (scripts/sample_repo.py, build_hunt): c0 without the methods; c1 an unrelated change;
c2 upstream edits the patched file elsewhere; c3 upstream adds the same methods (typed,
documented, elsewhere in the class); c4 a later commit with a real regression. The user works
on branch `work` at c0 with the three EAGLE-3 methods recorded and the hooks installed. Every
command runs as users run it: the installed `patchguard` and the real git CLI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sample_repo
from conftest import Histories, git
from helpers import (
    PATIENCE,
    Checkout,
    children_of,
    killed_at_the_end,
    methods_once_in_class,
    move_probe,
    run_patchguard,
    wait_until,
)

from guard.git.gitdir import locate
from guard.git.repo import Repo

KIMI = sample_repo.KIMI
AUX_LINE = "        self.capture_aux_hidden_states = True\n"
EMBED = "        self.language_model.set_embed_and_head(embed, head)\n"  # a line of the patch


def record_patch(hunt: Checkout, *, aux_line: bool = False) -> None:
    sample_repo.add_eagle3_methods(hunt.root)
    if aux_line:
        text = hunt.kimi.read_text()
        hunt.kimi.write_text(
            text.replace(
                "        self.config = config\n", "        self.config = config\n" + AUX_LINE
            )
        )
    hunt.pg("record", "eagle3", KIMI, check=0)
    hunt.pg("install", check=0)


@pytest.fixture
def hunt(tmp_path: Path, clean_env: dict[str, str], histories: Histories) -> Checkout:
    root = tmp_path / "sglang"
    commits = histories.copy(sample_repo.build_hunt, root)
    result = Checkout(root, clean_env, commits)
    result.git("checkout", "-q", "-b", "work", "c0")
    record_patch(result)
    return result


# --- patchguard git -------------------------------------------------------------------------------


def test_checkout_to_every_commit_and_back(hunt: Checkout) -> None:
    for name in ("c0", "c1", "c2", "c3", "c4", "c2", "c0", "work"):
        result = hunt.pg("git", "checkout", "-q", name)
        assert result.returncode == 0, result.stderr
        assert hunt.head() == hunt.commits.get(name, hunt.commits["c0"])
        assert methods_once_in_class(hunt.kimi), name
        hunt.pg("check", check=0)
        if name in ("c3", "c4"):
            assert hunt.kimi.read_text() == hunt.head_file()  # upstream's copy, untouched
    assert hunt.git("symbolic-ref", "--short", "HEAD").stdout.strip() == "work"


def test_plain_git_checkout_refuses_where_the_wrapper_moves(hunt: Checkout) -> None:
    """The problem the wrapper solves: git will not move over the patched file."""
    plain = hunt.git("checkout", "-q", "c2", check=False)
    assert plain.returncode != 0
    assert "would be overwritten" in plain.stderr
    hunt.pg("git", "checkout", "-q", "c2", check=0)


def test_the_wrapper_moves_where_only_the_history_ref_holds_the_patches(hunt: Checkout) -> None:
    """manifest.json is derived from the history ref (a first save killed before writing it):
    the patches are still recorded, and lifted as ever, not left for git to refuse over."""
    locate(hunt.root).manifest_path.unlink()
    result = hunt.pg("git", "checkout", "-q", "c2")
    assert result.returncode == 0, result.stderr
    assert hunt.head() == hunt.commits["c2"]
    assert methods_once_in_class(hunt.kimi)


def test_failed_git_puts_the_tree_back_byte_for_byte(hunt: Checkout) -> None:
    other = hunt.root / "README.md"
    other.write_text(other.read_text() + "my notes\n")
    before = {p: p.read_bytes() for p in (hunt.kimi, other)}
    result = hunt.pg("git", "checkout", "no-such-commit")
    assert result.returncode == 1  # git's own status
    assert "did not match" in result.stderr
    assert {p: p.read_bytes() for p in before} == before
    assert hunt.head() == hunt.commits["c0"]


def test_patch_that_cannot_be_lifted_stops_before_git(hunt: Checkout) -> None:
    text = hunt.kimi.read_text()
    edited = text.replace(EMBED, EMBED + "        self.shared = True\n")  # the patch's code
    undo = locate(hunt.root).git_dir / "patchguard-undo"
    for _ in range(6):  # more entries than are kept: a new entry would prune the oldest
        hunt.pg("unapply", check=0)
        hunt.pg("apply", check=0)
    entries = sorted(undo.iterdir())
    hunt.kimi.write_text(edited)
    result = hunt.pg("git", "checkout", "-q", "c2")
    assert result.returncode == 1
    assert "cannot lift the patches, so git was not run" in result.stderr
    assert KIMI in result.stderr
    assert hunt.head() == hunt.commits["c0"]
    assert hunt.kimi.read_text() == edited
    assert sorted(undo.iterdir()) == entries  # not one undo entry written, nor one pruned


def test_a_lift_that_cannot_take_every_patch_out_takes_none_out(hunt: Checkout) -> None:
    """One patch comes out cleanly, the other does not: the one that could is not taken
    out either, so nothing is left lifted when patchguard refuses to run git."""
    other = hunt.root / sample_repo.REGRESSION_FILE
    other.write_text(other.read_text() + "\n\ndef debug_hook():\n    return 1\n")
    hunt.pg("record", "debug", sample_repo.REGRESSION_FILE, check=0)
    patched = other.read_text()
    undo = locate(hunt.root).git_dir / "patchguard-undo"
    hunt.pg("unapply", check=0)
    hunt.pg("apply", check=0)
    entries = sorted(undo.iterdir())
    hunt.kimi.write_text(
        hunt.kimi.read_text().replace(EMBED, EMBED + "        self.shared = True\n")
    )
    result = hunt.pg("git", "checkout", "-q", "c2")
    assert result.returncode == 1
    assert "cannot lift the patches, so git was not run" in result.stderr
    assert other.read_text() == patched
    assert sorted(undo.iterdir()) == entries


def test_stash_pop_after_stash_and_checkout_old(hunt: Checkout) -> None:
    hunt.pg("git", "checkout", "-q", "c2", check=0)
    hunt.git("stash")
    hunt.git("checkout", "-q", "c0")  # the hook re-applies on the old commit
    assert methods_once_in_class(hunt.kimi)
    result = hunt.pg("git", "stash", "pop")
    assert result.returncode == 0, result.stderr
    assert hunt.stash_count() == 0
    assert methods_once_in_class(hunt.kimi)
    hunt.pg("check", check=0)


def test_stash_pop_onto_a_commit_that_absorbed_the_patch(hunt: Checkout) -> None:
    hunt.git("stash")
    hunt.git("checkout", "-q", "c3")
    result = hunt.pg("git", "stash", "pop")
    assert result.returncode == 0, result.stderr
    assert hunt.stash_count() == 0
    assert methods_once_in_class(hunt.kimi)
    hunt.pg("check", check=0)


@pytest.fixture
def clone(hunt: Checkout, tmp_path: Path) -> Checkout:
    """The user's clone of upstream (which is at c4), on main reset to c2, patched, hooks in."""
    work = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(hunt.root), str(work))
    user = Checkout(work, hunt.env, hunt.commits)
    user.git("checkout", "-q", "main")
    user.git("reset", "-q", "--hard", "c0")
    record_patch(user)
    user.pg("git", "reset", "-q", "--hard", "c2", check=0)
    assert methods_once_in_class(user.kimi)
    return user


def test_pull_to_c4_leaves_upstreams_file(clone: Checkout) -> None:
    result = clone.pg("git", "pull", "-q")
    assert result.returncode == 0, result.stderr
    assert clone.head() == clone.commits["c4"]
    assert clone.kimi.read_text() == clone.head_file()
    clone.pg("check", check=0)


def test_pull_rebase_autostash_doubles_and_apply_repairs(clone: Checkout) -> None:
    clone.git("commit", "-q", "--allow-empty", "-m", "local commit")
    pull = clone.git("pull", "-q", "--rebase", "--autostash", check=False)
    assert pull.returncode == 0, pull.stderr
    assert clone.kimi.read_text().count("def get_embed_and_head(") == 2  # git's clean merge
    check = clone.pg("check")
    assert check.returncode == 1
    assert "doubled" in check.stderr
    assert "defined twice" in check.stderr
    assert "missing" not in check.stderr
    assert "patchguard apply eagle3" in check.stderr
    clone.pg("apply", check=0)
    assert methods_once_in_class(clone.kimi)
    assert clone.kimi.read_text() == clone.head_file()
    clone.pg("check", check=0)


def test_doubled_repair_keeps_the_users_other_edits(hunt: Checkout) -> None:
    hunt.git("stash")
    hunt.git("checkout", "-q", "c3")
    hunt.git("stash", "pop")
    text = hunt.kimi.read_text()
    hunt.kimi.write_text(text.replace("Kimi-K2.5 multimodal model.", "Kimi-K2.5 (my note)."))
    status = hunt.pg("status")
    assert "doubled" in status.stdout
    dry = hunt.pg("apply", "--dry-run")
    assert "would take the patch's copy out" in dry.stdout
    hunt.pg("apply", "eagle3", check=0)
    repaired = hunt.kimi.read_text()
    assert methods_once_in_class(hunt.kimi)
    assert "(my note)" in repaired
    assert "-> tuple" in repaired  # HEAD's definitions stay
    assert repaired == hunt.head_file().replace(
        "Kimi-K2.5 multimodal model.", "Kimi-K2.5 (my note)."
    )


@pytest.mark.parametrize(
    "conclude",
    [("commit", "-q", "--no-edit"), ("-c", "core.editor=true", "merge", "--continue")],
    ids=["commit", "merge-continue"],
)
def test_conflicted_merge_keeps_patches_out_until_concluded(
    hunt: Checkout, conclude: tuple[str, ...]
) -> None:
    hunt.git("branch", "side", "c1")
    hunt.pg("git", "checkout", "-q", "side", check=0)
    (hunt.root / "README.md").write_text("# side\n")
    hunt.git("commit", "-q", "-m", "side readme", "README.md")
    hunt.pg("git", "checkout", "-q", "work", check=0)
    (hunt.root / "README.md").write_text("# work\n")
    hunt.git("commit", "-q", "-m", "work readme", "README.md")
    assert methods_once_in_class(hunt.kimi)

    merge = hunt.pg("git", "merge", "side")
    assert merge.returncode == 1  # git's status for a conflict
    assert "patches eagle3 are out of the tree" in merge.stderr
    assert hunt.kimi.read_text() == hunt.head_file()
    (hunt.root / "README.md").write_text("# resolved\n")
    hunt.git("add", "README.md")
    commit = hunt.git(*conclude, check=False)
    assert commit.returncode == 0, commit.stderr
    assert "re-applied eagle3" in commit.stderr
    assert methods_once_in_class(hunt.kimi)
    hunt.pg("check", check=0)
    # and the next plain commit pays nothing: the marker is gone
    assert "re-applied" not in hunt.git("commit", "-q", "--allow-empty", "-m", "x").stderr


def test_conflicted_rebase_keeps_patches_out_until_continue(hunt: Checkout) -> None:
    (hunt.root / "README.md").write_text("# work\n")
    hunt.git("commit", "-q", "-m", "work readme", "README.md")
    rebase = hunt.pg("git", "rebase", "c1")
    assert rebase.returncode != 0
    assert "middle of a rebase" in rebase.stderr
    (hunt.root / "README.md").write_text("# resolved\n")
    hunt.git("add", "README.md")
    done = git(
        hunt.root, "-c", "core.editor=true", "rebase", "--continue", check=False, env=hunt.env
    )
    assert done.returncode == 0, done.stderr
    assert "re-applied eagle3" in done.stderr
    assert methods_once_in_class(hunt.kimi)
    hunt.pg("check", check=0)


def test_a_stopped_git_am_is_named_as_git_names_it(hunt: Checkout) -> None:
    """rebase-apply/applying marks `git am` (wt-status.c): the way on is `git am --continue`,
    which `git rebase --continue` refuses to be."""
    readme = hunt.root / "README.md"
    readme.write_text("# work\n")
    hunt.git("commit", "-q", "-m", "work readme", "README.md")
    patch = hunt.root.parent / "readme.patch"
    patch.write_text(hunt.git("format-patch", "-1", "--stdout").stdout)
    readme.write_text("# other\n")
    hunt.git("commit", "-q", "--amend", "-m", "other readme", "README.md")
    am = hunt.pg("git", "am", str(patch))
    assert am.returncode != 0
    assert "middle of an am;" in am.stderr and "git am --continue" in am.stderr
    assert "rebase" not in am.stderr and "come back" not in am.stderr
    assert Repo.discover(hunt.root).operation_in_progress() == "am"
    readme.write_text("# work\n")
    hunt.git("add", "README.md")
    assert hunt.git("am", "--continue").returncode == 0  # git runs no hook of ours here
    hunt.pg("check", check=1)  # so the patches are still out, as the line said
    hunt.pg("apply", check=0)
    assert methods_once_in_class(hunt.kimi)


def test_conflicted_stash_pop_says_how_to_get_the_patch_back(hunt: Checkout) -> None:
    readme = hunt.root / "README.md"
    readme.write_text("# mine\n")
    hunt.pg("git", "stash", "push", "--", "README.md", check=0)
    readme.write_text("# theirs\n")
    hunt.git("commit", "-q", "-m", "readme", "README.md")
    pop = hunt.pg("git", "stash", "pop")
    assert pop.returncode == 1
    assert "the stash pop stopped on a conflict; patches eagle3 are out" in pop.stderr
    assert "patchguard apply finishes git's merge" in pop.stderr
    readme.write_text("# resolved\n")
    hunt.git("add", "README.md")
    hunt.git("stash", "drop")
    hunt.pg("apply", check=0)
    assert methods_once_in_class(hunt.kimi)
    hunt.pg("check", check=0)


# --- hooks: real merges, stash notices ---------------------------------------------------------


def test_merge_commit_reapplies_in_post_merge(hunt: Checkout) -> None:
    (hunt.root / "NOTES.md").write_text("local notes\n")
    hunt.git("add", "NOTES.md")
    hunt.git("commit", "-q", "-m", "notes", "NOTES.md")
    hunt.git("stash")  # the patch is out of the tree, as after any stash
    merge = hunt.git("merge", "--no-ff", "-m", "merge c2", "c2", check=False)
    assert merge.returncode == 0, merge.stderr
    assert len(hunt.git("log", "-1", "--format=%P").stdout.split()) == 2
    assert "in progress" not in merge.stderr
    assert "re-applied eagle3" in merge.stderr
    assert methods_once_in_class(hunt.kimi)
    hunt.pg("check", check=0)


def test_pull_no_rebase_with_merge_commit_reapplies(clone: Checkout) -> None:
    (clone.root / "README.md").write_text("# local\n")
    clone.git("commit", "-q", "-m", "local readme", "README.md")
    clone.git("stash")
    pull = clone.git("pull", "--no-rebase", "--no-edit", check=False)
    assert pull.returncode == 0, pull.stderr
    assert len(clone.git("log", "-1", "--format=%P").stdout.split()) == 2  # a real merge commit
    assert "re-applied" not in pull.stderr  # c4 absorbed the patch: nothing to write
    assert "in progress" not in pull.stderr
    assert clone.kimi.read_text() == clone.head_file()
    clone.pg("check", check=0)


def test_stash_notice_only_when_a_push_takes_the_patch(hunt: Checkout) -> None:
    readme = hunt.root / "README.md"
    readme.write_text("# notes\n")
    assert "patchguard" not in hunt.git("stash", "push", "--", "README.md").stderr
    assert "patchguard" not in hunt.git("stash", "pop").stderr
    took = hunt.git("stash")
    assert "took patch eagle3 into refs/stash" in took.stderr
    assert "patchguard git stash pop" in took.stderr
    readme.write_text("# again\n")
    hunt.git("stash", "push", "--", "README.md")
    assert "patchguard" not in hunt.git("stash", "drop").stderr
    assert "patchguard" not in hunt.git("stash", "pop").stderr
    assert methods_once_in_class(hunt.kimi)
    hunt.git("stash", "push", "--", "README.md")
    assert "patchguard" not in hunt.git("stash", "clear").stderr
    assert hunt.stash_count() == 0


# --- upstream means the whole patch --------------------------------------------------------------


def test_patch_with_more_than_definitions_is_not_upstream_until_all_is(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    root = tmp_path / "sglang"
    hunt = Checkout(root, clean_env, sample_repo.build_hunt(root))
    hunt.git("checkout", "-q", "-b", "work", "c0")
    record_patch(hunt, aux_line=True)
    hunt.pg("unapply", check=0)
    moved = hunt.git("checkout", "-q", "c3")
    assert "re-applied eagle3" in moved.stderr  # the hook merged the rest in
    assert AUX_LINE in hunt.kimi.read_text()
    assert methods_once_in_class(hunt.kimi)
    hunt.pg("unapply", check=0)
    assert hunt.kimi.read_text() == hunt.head_file()
    check = hunt.pg("check")
    assert check.returncode == 1  # the methods are upstream, the aux line is not
    assert json.loads(hunt.pg("status", "--json").stdout)["patches"][0]["state"] == "drifted"
    hunt.pg("apply", check=0)
    text = hunt.kimi.read_text()
    assert AUX_LINE in text
    assert methods_once_in_class(hunt.kimi)
    assert "-> tuple" in text  # upstream's definitions kept
    hunt.pg("check", check=0)
    hunt.pg("unapply", check=0)
    assert hunt.kimi.read_text() == hunt.head_file()


def test_rest_of_patch_that_cannot_merge_is_a_conflict(hunt: Checkout) -> None:
    hunt.pg("drop", "eagle3", check=0)
    hunt.git("checkout", "-q", "--", KIMI)
    record_patch(hunt, aux_line=True)
    hunt.pg("git", "checkout", "-q", "-b", "clash", "c3", check=0)
    hunt.kimi.write_text(
        hunt.head_file().replace(
            "        self.config = config\n",
            "        self.config = config\n        self.capture_aux_hidden_states = False\n",
        )
    )
    hunt.git("commit", "-q", "-am", "upstream sets it differently")
    status = json.loads(hunt.pg("status", "--json").stdout)["patches"][0]
    assert status["state"] == "does-not-merge"
    assert hunt.pg("check").returncode == 1
    assert hunt.pg("apply").returncode == 1
    assert hunt.kimi.read_text() == hunt.head_file()  # nothing written


# --- bisect --------------------------------------------------------------------------------------


def write_bench(tmp_path: Path) -> Path:
    bench = tmp_path / "bench.py"
    bench.write_text(sample_repo.HUNT_BENCH_TEXT)
    return bench


def test_bisect_run_finds_the_real_regression(hunt: Checkout, tmp_path: Path) -> None:
    bench = write_bench(tmp_path)
    plain = subprocess.run(
        ["python", str(bench)], cwd=hunt.root, env=hunt.env, capture_output=True, text=True
    )
    assert plain.returncode == 0, plain.stdout + plain.stderr  # at c0 with the patch: good
    start = hunt.pg("git", "bisect", "start", "c4", "c0")
    assert start.returncode == 0, start.stderr
    assert methods_once_in_class(hunt.kimi)
    log = tmp_path / "hunt.jsonl"
    run = hunt.pg("bisect", "run", "--log", str(log), "python", str(bench))
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{hunt.commits['c4']} is the first bad commit" in run.stdout
    steps = [json.loads(line) for line in log.read_text().splitlines()]
    assert {s["head"] for s in steps} <= {hunt.commits[c] for c in ("c1", "c2", "c3")}
    assert all(s["exit"] == 0 and s["ok"] for s in steps)
    assert steps and all(s["patches"]["eagle3"] in ("applied", "upstream") for s in steps)
    reset = hunt.pg("git", "bisect", "reset")
    assert reset.returncode == 0, reset.stderr
    assert hunt.git("symbolic-ref", "--short", "HEAD").stdout.strip() == "work"
    assert methods_once_in_class(hunt.kimi)
    hunt.pg("check", check=0)


def test_bisect_run_needs_a_bisect(hunt: Checkout) -> None:
    result = hunt.pg("bisect", "run", "true")
    assert result.returncode == 1
    assert "patchguard git bisect start" in result.stderr


def step(hunt: Checkout, *command: str) -> subprocess.CompletedProcess[str]:
    """One bisect step, as `git bisect run` starts it under `patchguard bisect run`."""
    lock = locate(hunt.root).worktree_lock_path
    env = {**hunt.env, "PATCHGUARD_LOCK_HELD": str(lock)}
    return subprocess.run(
        ["patchguard", "bisect", "step", "--", *command],
        cwd=hunt.root,
        env=env,
        capture_output=True,
        text=True,
    )


def test_step_skips_a_commit_where_the_patch_cannot_hold(hunt: Checkout) -> None:
    hunt.pg("unapply", check=0)
    hunt.git("checkout", "-q", "--detach", "c0")
    hunt.git("rm", "-qf", KIMI)
    hunt.git("commit", "-q", "-m", "kimi removed")
    result = step(hunt, "false")
    assert result.returncode == 125
    assert "skipping" in result.stderr
    assert KIMI in result.stderr


def test_step_runs_the_command_with_the_patch_and_lifts_it(hunt: Checkout, tmp_path: Path) -> None:
    hunt.pg("unapply", check=0)
    probe = tmp_path / "probe.sh"
    probe.write_text(f"grep -c 'def get_embed_and_head' {KIMI} > {tmp_path / 'seen'}; exit 3\n")
    result = step(hunt, "sh", str(probe))
    assert result.returncode == 3  # the command's status, for git bisect to read
    assert (tmp_path / "seen").read_text().strip() == "1"
    assert hunt.git("status", "--porcelain").stdout == ""  # lifted again


def test_step_aborts_the_bisect_when_patchguard_fails(hunt: Checkout) -> None:
    manifest = hunt.root / ".git" / "patchguard" / "manifest.json"
    manifest.write_text("{")
    result = step(hunt, "true")
    assert result.returncode == 128
    assert "aborting the bisect" in result.stderr


# --- the terminal, stdin, signals ----------------------------------------------------------------


def test_stdin_reaches_git_and_hooks_stay_quiet(hunt: Checkout) -> None:
    blob = subprocess.run(
        ["patchguard", "git", "hash-object", "--stdin"],
        cwd=hunt.root,
        env=hunt.env,
        input="hello\n",
        capture_output=True,
        text=True,
    )
    assert blob.returncode == 0, blob.stderr
    assert blob.stdout.strip() == "ce013625030ba8dba906f756967f9e9ca394464a"
    assert blob.stderr == ""  # lifted and put back byte for byte: nothing to say
    moved = hunt.pg("git", "checkout", "-q", "c2", check=0)
    assert moved.stderr.count("re-applied eagle3") == 1  # ours; the hook stood aside


def test_interrupt_reaches_git_and_the_patch_comes_back(hunt: Checkout) -> None:
    before = hunt.kimi.read_bytes()
    child = subprocess.Popen(
        ["patchguard", "git", "hash-object", "--stdin"],
        cwd=hunt.root,
        env=hunt.env,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    with killed_at_the_end(child):
        # Not the words anywhere: patchguard's own command line holds them, and so does each
        # child it forks until that child execs (the lift's git calls).
        running = "\ngit hash-object --stdin"
        wait_until(lambda: running in "\n" + children_of(child.pid), "git never ran")
        assert hunt.kimi.read_text() == hunt.head_file()  # the patch is lifted while git runs
        os.killpg(child.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
        _, stderr = child.communicate(timeout=PATIENCE)
    assert child.returncode == 130
    assert "Traceback" not in stderr
    assert hunt.kimi.read_bytes() == before
    hunt.pg("check", check=0)


def test_interrupt_during_a_bisect_step_leaves_the_patch_applied(
    hunt: Checkout, tmp_path: Path
) -> None:
    hunt.pg("git", "bisect", "start", "c4", "c0", check=0)
    started = tmp_path / "started"
    child = subprocess.Popen(
        ["patchguard", "bisect", "run", "sh", "-c", f"touch {started}; sleep 60"],
        cwd=hunt.root,
        env=hunt.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    with killed_at_the_end(child):
        wait_until(started.exists, "the step never ran the command")
        os.killpg(child.pid, signal.SIGINT)
        _, stderr = child.communicate(timeout=PATIENCE)
    assert child.returncode == 130, stderr  # interrupted, as the contract says
    assert "Traceback" not in stderr
    assert "the command was interrupted (SIGINT: Ctrl-C)" in stderr
    assert "(bad)" not in stderr
    assert "run patchguard bisect run again to go on" in stderr
    assert methods_once_in_class(hunt.kimi)
    hunt.pg("check", check=0)
    hunt.pg("git", "bisect", "reset", check=0)
    assert methods_once_in_class(hunt.kimi)


def test_manual_bisect_steps_carry_the_patch(hunt: Checkout) -> None:
    hunt.pg("git", "bisect", "start", "c4", "c0", check=0)
    seen = []
    while True:
        assert methods_once_in_class(hunt.kimi)
        hunt.pg("check", check=0)
        seen.append(hunt.head())
        verdict = "bad" if hunt.head() == hunt.commits["c4"] else "good"
        step = hunt.pg("git", "bisect", verdict)
        assert step.returncode == 0, step.stderr
        if "is the first bad commit" in step.stdout:
            break
        assert len(seen) < 5
    assert f"{hunt.commits['c4']} is the first bad commit" in step.stdout
    hunt.pg("git", "bisect", "reset", check=0)
    assert hunt.git("symbolic-ref", "--short", "HEAD").stdout.strip() == "work"
    assert methods_once_in_class(hunt.kimi)


def test_without_a_manifest_it_is_plain_git_and_writes_nothing(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    root = tmp_path / "plain"
    sample_repo.build_hunt(root)
    result = subprocess.run(
        ["patchguard", "git", "checkout", "-q", "c2"],
        cwd=root,
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert (
        git(root, "rev-parse", "HEAD").stdout.strip() == git(root, "rev-parse", "c2").stdout.strip()
    )
    assert not (root / ".git" / "patchguard").exists()


def test_stash_through_the_wrapper_holds_only_the_users_own_edits(hunt: Checkout) -> None:
    mine = hunt.root / "python/sglang/srt/models/deepseek_v2.py"
    edited = mine.read_text() + "# my experiment\n"
    mine.write_text(edited)
    hunt.pg("git", "stash", "-q", check=0)
    assert hunt.git("stash", "show", "--name-only").stdout.split() == [
        "python/sglang/srt/models/deepseek_v2.py"
    ]
    assert methods_once_in_class(hunt.kimi)  # the patch stayed in the tree
    hunt.pg("git", "checkout", "-q", "c2", check=0)
    hunt.pg("git", "stash", "pop", "-q", check=0)
    assert mine.read_text() == edited
    assert methods_once_in_class(hunt.kimi)
    hunt.pg("check", check=0)


# --- what a move costs -----------------------------------------------------------------------

MOVE_PROBE = move_probe("pygit2", "ctypes.util")


def test_a_move_seen_before_loads_no_libgit2(hunt: Checkout, tmp_path: Path) -> None:
    """Each move of a hunt pays for the lift, not for pygit2: git's index says nothing is
    unmerged, and a merge made before comes from the cache. Nor does git list the index or
    HEAD's tree for it."""
    trace = tmp_path / "trace"
    for round_ in ("first", "seen before"):
        for name in ("c2", "work"):
            trace.unlink(missing_ok=True)
            moved = subprocess.run(
                [sys.executable, "-c", MOVE_PROBE, "git", "checkout", "-q", name],
                cwd=hunt.root,
                env={**hunt.env, "GIT_TRACE": str(trace)},
                capture_output=True,
                text=True,
            )
            assert "status: 0" in moved.stderr, moved.stderr
            assert f"re-applied eagle3 ({KIMI})" in moved.stderr
            assert methods_once_in_class(hunt.kimi)
            if round_ == "seen before":
                assert "heavy: \n" in moved.stderr, moved.stderr
                said = trace.read_text()
                assert "git checkout -q" in said
                assert "ls-files" not in said and "ls-tree" not in said, said
    hunt.pg("check", check=0)


def test_git_help_and_options_before_the_command_still_go_through_click(hunt: Checkout) -> None:
    """`git --help` is patchguard's help, and git's own options before the command (-C DIR)
    reach git as they are."""
    helped = hunt.pg("git", "--help", check=0)
    assert helped.stdout.startswith("Usage: patchguard git [OPTIONS] GIT_ARGS...")
    bare = hunt.pg("git")
    assert bare.returncode == 2 and "Missing argument 'GIT_ARGS...'" in bare.stderr
    nested = hunt.root / "python"
    moved = run_patchguard(nested, hunt.env, ("git", "-C", "..", "checkout", "-q", "c2"), 0)
    assert f"re-applied eagle3 ({KIMI})" in moved.stderr
    assert hunt.head() == hunt.commits["c2"] and methods_once_in_class(hunt.kimi)
