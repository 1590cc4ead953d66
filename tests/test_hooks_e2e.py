"""End to end: hooks written by `patchguard install`, driven by the real git CLI."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
import sample_repo
from conftest import ROOT, Sample, git, method_count, patchguard

from guard.ops.install import HOOK_TYPES, LEGACY_SUFFIX

KIMI = sample_repo.KIMI
METHODS = sample_repo.METHODS


def installed(sample: Sample, *extra: str) -> Sample:
    sample.record_eagle3()
    result = sample.pg("install", *extra)
    assert result.exit_code == 0, result.output + result.stderr
    return sample


def methods_in_class(path: Path) -> bool:
    text = path.read_text()
    return all(method_count(text, m) == 1 for m in METHODS) and text.index(
        "def set_embed_and_head"
    ) < text.index("EntryClass")


def state(root: Path) -> str:
    return json.loads(patchguard("-C", root, "check", "--json").output)["patches"][0]["state"]


def test_stash_and_checkout_old_brings_methods_back(sample: Sample) -> None:
    installed(sample)
    sample.git("stash")
    checkout = sample.git("checkout", "-q", "old", check=False)
    assert checkout.returncode == 0, checkout.stderr
    assert "re-applied eagle3" in checkout.stderr
    assert methods_in_class(sample.kimi)
    assert sample.pg("check").exit_code == 0


def test_checkout_where_file_is_missing_fails_git_checkout_with_banner(sample: Sample) -> None:
    installed(sample)
    sample.git("stash")
    checkout = sample.git("checkout", "-q", "no-kimi", check=False)
    assert checkout.returncode != 0
    assert "guard FAILED after post-checkout" in checkout.stderr
    assert KIMI in checkout.stderr
    assert sample.git("rev-parse", "HEAD").stdout.strip() == sample.commits["no-kimi"]


def test_checkout_where_upstream_has_methods_duplicates_nothing(sample: Sample) -> None:
    installed(sample)
    sample.git("stash")
    checkout = sample.git("checkout", "-q", "upstream-has-methods", check=False)
    assert checkout.returncode == 0, checkout.stderr
    text = sample.kimi.read_text()
    assert all(method_count(text, m) == 1 for m in METHODS)
    assert "-> tuple" in text  # upstream's version, untouched
    assert state(sample.root) == "upstream"


def test_file_checkout_is_respected_and_reported(sample: Sample) -> None:
    installed(sample)
    restore = sample.git("checkout", "--", KIMI, check=False)
    assert restore.returncode == 0
    assert "patch eagle3 is no longer in" in restore.stderr
    assert "patchguard apply eagle3" in restore.stderr
    assert method_count(sample.kimi.read_text(), METHODS[0]) == 0
    assert sample.pg("check").exit_code == 1


def test_skip_variable_turns_hooks_into_noops(sample: Sample) -> None:
    installed(sample)
    sample.git("stash")
    env = {**os.environ, "PATCHGUARD_SKIP": "1"}
    checkout = git(sample.root, "checkout", "-q", "old", env=env)
    assert "PATCHGUARD_SKIP=1, post-checkout hook did nothing" in checkout.stderr
    assert method_count(sample.kimi.read_text(), METHODS[0]) == 0
    assert sample.pg("check").exit_code == 1


def test_stash_is_reported_and_round_trip_restores_exact_tree(sample: Sample) -> None:
    installed(sample)
    other = sample.root / "python/sglang/srt/distributed/parallel_state.py"
    other.write_text(other.read_text() + "MY_DEBUG = True\n")
    before = {p: p.read_bytes() for p in (sample.kimi, other)}
    status_before = sample.git("status", "--porcelain").stdout

    stash = sample.git("stash")
    assert "git stash took patch eagle3 into refs/stash" in stash.stderr
    sample.git("checkout", "-q", "old")
    assert methods_in_class(sample.kimi)

    # The documented way back: take the re-applied patch out before each step that needs it.
    assert sample.pg("unapply").exit_code == 0
    sample.git("checkout", "-q", "main")
    assert methods_in_class(sample.kimi)  # the hook re-applied on the clean tree
    assert sample.pg("unapply").exit_code == 0
    sample.git("stash", "pop")

    assert {p: p.read_bytes() for p in before} == before
    assert sample.git("status", "--porcelain").stdout == status_before
    assert sample.pg("check").exit_code == 0


@pytest.fixture
def clone(sample: Sample, tmp_path: Path) -> tuple[Sample, Sample]:
    """An upstream (bare origin fed by `sample`) and the user's clone with the patch and hooks."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(sample.root), str(origin))
    sample.git("remote", "add", "origin", str(origin))
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(origin), str(work))
    user = Sample(work, sample.commits)
    installed(user)
    return sample, user


def upstream_moves(upstream: Sample) -> None:
    """Upstream edits kimi_k25.py away from the patch, plus another file."""
    text = upstream.kimi.read_text()
    upstream.kimi.write_text(text.replace("multimodal model.", "multimodal model (v2)."))
    readme = upstream.root / "README.md"
    readme.write_text(readme.read_text() + "more\n")
    upstream.git("commit", "-qam", "upstream moves")
    upstream.git("push", "-q", "origin", "main")


def local_commit_on_kimi(user: Sample) -> None:
    """A committed local change to the same file, so a rebase really picks through it."""
    user.git("stash")
    text = user.kimi.read_text()
    user.kimi.write_text(text.replace("self.config = config", "self.config = config  # local"))
    user.git("commit", "-qam", "local tweak")
    user.git("stash", "pop")


def assert_rebase_finished_with_patch(user: Sample) -> None:
    assert not (user.root / ".git" / "rebase-merge").exists()
    assert user.git("symbolic-ref", "HEAD").stdout.strip() == "refs/heads/main"
    text = user.kimi.read_text()
    assert "(v2)" in text
    assert "# local" in text
    assert methods_in_class(user.kimi)
    assert user.pg("check").exit_code == 0


def test_pull_merge_reapplies(clone: tuple[Sample, Sample]) -> None:
    upstream, user = clone
    upstream_moves(upstream)
    user.git("stash")
    pull = user.git("pull", "-q", "--no-rebase", check=False)
    assert pull.returncode == 0, pull.stderr
    assert "re-applied eagle3" in pull.stderr
    assert "(v2)" in user.kimi.read_text()
    assert methods_in_class(user.kimi)
    assert user.pg("check").exit_code == 0


def test_pull_rebase_reapplies_at_the_end_only(clone: tuple[Sample, Sample]) -> None:
    upstream, user = clone
    local_commit_on_kimi(user)
    upstream_moves(upstream)
    user.git("stash")
    pull = user.git("pull", "--rebase", check=False)
    assert pull.returncode == 0, pull.stderr
    assert "rebase in progress: patches are left out" in pull.stderr
    assert_rebase_finished_with_patch(user)


def test_rebase_onto_moved_upstream_reapplies(clone: tuple[Sample, Sample]) -> None:
    upstream, user = clone
    local_commit_on_kimi(user)
    upstream_moves(upstream)
    user.git("fetch", "-q")
    user.git("stash")
    rebase = user.git("rebase", "origin/main", check=False)
    assert rebase.returncode == 0, rebase.stderr
    assert_rebase_finished_with_patch(user)


def test_pull_rebase_autostash_leaves_the_patch_to_the_autostash(
    clone: tuple[Sample, Sample],
) -> None:
    upstream, user = clone
    local_commit_on_kimi(user)
    upstream_moves(upstream)
    pull = user.git("pull", "--rebase", "--autostash", check=False)
    assert pull.returncode == 0, pull.stderr
    assert "Applied autostash" in pull.stderr
    assert_rebase_finished_with_patch(user)


LOGGING_HOOK = """#!/bin/sh
echo "$(basename "$0") $*" >> "{log}"
cat >> "{log}"
exit {status}
"""


def test_foreign_hooks_keep_working_through_install_and_uninstall(
    sample: Sample, tmp_path: Path
) -> None:
    log = tmp_path / "hook.log"
    hooks = sample.root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)  # the tests' git has an empty template dir
    originals = {}
    for name in ("post-checkout", "post-rewrite"):
        path = hooks / name
        path.write_text(LOGGING_HOOK.format(log=log, status=0))
        path.chmod(0o750)
        originals[name] = (path.read_bytes(), stat.S_IMODE(path.stat().st_mode))

    sample.git("commit", "-q", "--amend", "-m", "amended before install")
    assert "post-rewrite amend" in log.read_text()

    installed(sample)
    assert (hooks / ("post-checkout" + LEGACY_SUFFIX)).exists()
    assert sample.pg("install").exit_code == 0  # idempotent
    log.write_text("")
    main_tip = sample.git("rev-parse", "HEAD").stdout.strip()
    sample.git("stash")
    sample.git("checkout", "-q", "old")
    sample.git("checkout", "-q", "-b", "mine")
    sample.git("commit", "-q", "--allow-empty", "-m", "x")
    sample.git("commit", "-q", "--allow-empty", "--amend", "-m", "amended with patchguard")
    logged = log.read_text()
    assert f"post-checkout{LEGACY_SUFFIX} {main_tip} {sample.commits['old']} 1" in logged
    assert f"post-rewrite{LEGACY_SUFFIX} amend" in logged
    old_new = sample.git("rev-parse", "HEAD").stdout.strip()
    assert old_new in logged  # post-rewrite's stdin reached the chained hook
    assert methods_in_class(sample.kimi)

    failing = hooks / ("post-checkout" + LEGACY_SUFFIX)
    failing.write_text(LOGGING_HOOK.format(log=log, status=3))
    checkout = sample.git("checkout", "-q", "-b", "other", check=False)
    assert checkout.returncode != 0
    assert "exited 3" in checkout.stderr
    failing.write_text(originals["post-checkout"][0].decode())

    assert sample.pg("uninstall").exit_code == 0
    for name, (content, mode) in originals.items():
        assert (hooks / name).read_bytes() == content
        assert stat.S_IMODE((hooks / name).stat().st_mode) == mode
    for name in HOOK_TYPES:
        assert not (hooks / (name + LEGACY_SUFFIX)).exists()
    assert not (hooks / "post-merge").exists()
    log.write_text("")
    sample.git("checkout", "-q", "-b", "after-uninstall")
    assert "post-checkout" in log.read_text()


@pytest.mark.parametrize("relative", [False, True])
def test_core_hooks_path_is_followed(sample: Sample, tmp_path: Path, relative: bool) -> None:
    hooks_dir = sample.root / ".githooks" if relative else tmp_path / "shared-hooks"
    hooks_dir.mkdir()
    sample.git("config", "core.hooksPath", ".githooks" if relative else str(hooks_dir))
    installed(sample)
    assert (hooks_dir / "post-checkout").exists()
    assert not (sample.root / ".git" / "hooks" / "post-checkout").exists()
    assert sample.pg("doctor").exit_code == 0
    sample.git("stash")
    sample.git("checkout", "-q", "old")
    assert methods_in_class(sample.kimi)


def test_missing_hooks_path_is_refused_then_created_with_force(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("config", "core.hooksPath", ".missing-hooks")
    result = sample.pg("install")
    assert result.exit_code == 2
    assert "runs no hooks at all" in result.stderr
    assert sample.pg("doctor").exit_code == 1
    assert sample.pg("install", "--force").exit_code == 0
    assert (sample.root / ".missing-hooks" / "post-checkout").exists()


def test_doctor_names_a_hook_an_earlier_install_lacks(sample: Sample) -> None:
    """Installed by a patchguard from before post-commit existed: doctor says to reinstall."""
    installed(sample)
    (sample.root / ".git" / "hooks" / "post-commit").unlink()
    record = sample.root / ".git" / "patchguard" / "hooks.json"
    old = json.loads(record.read_text())
    old["hooks"] = [h for h in old["hooks"] if h != "post-commit"]
    record.write_text(json.dumps(old))
    result = sample.pg("doctor")
    assert result.exit_code == 1
    assert "post-commit: not installed" in result.stderr
    assert sample.pg("install").exit_code == 0
    assert sample.pg("doctor").exit_code == 0


def test_doctor_names_hooks_an_earlier_version_wrote(sample: Sample) -> None:
    """After an upgrade the hooks are still the old version's, which decided in sh what this
    one leaves to Python (a key it would trust under the namespace it baked in)."""
    installed(sample)
    hook = sample.root / ".git" / "hooks" / "post-checkout"
    new = hook.read_text()
    old = new.replace("reinstall='", "model='0123456789abcdef'\nreinstall='", 1)
    hook.write_text(old)
    result = sample.pg("doctor")
    assert result.exit_code == 1
    assert "post-checkout: " in result.stderr and "another version of patchguard" in result.stderr
    assert "post-merge" not in result.stderr  # as this version writes them: nothing to say
    assert sample.pg("install").exit_code == 0
    assert hook.read_text() == new
    assert sample.pg("doctor").exit_code == 0


def test_doctor_leaves_alone_hooks_install_was_not_asked_for(sample: Sample) -> None:
    sample.record_eagle3()
    assert sample.pg("install", "--hook", "post-checkout").exit_code == 0
    assert sample.pg("doctor").exit_code == 0


def test_doctor_leaves_alone_a_hook_uninstall_took_out(sample: Sample) -> None:
    """`uninstall --hook` is asked for as `install --hook` is: doctor does not send the user to
    install it again."""
    installed(sample)
    assert sample.pg("uninstall", "--hook", "post-merge").exit_code == 0
    result = sample.pg("doctor")
    assert result.exit_code == 0, result.stderr
    assert "post-merge" not in result.stdout + result.stderr
    assert sample.pg("install").exit_code == 0  # a whole install puts it back, and expects it
    (sample.root / ".git" / "hooks" / "post-merge").unlink()
    assert "post-merge: not installed" in sample.pg("doctor").stderr


def test_doctor_catches_non_executable_hook_and_moved_hooks_path(sample: Sample) -> None:
    installed(sample)
    hook = sample.root / ".git" / "hooks" / "post-merge"
    hook.chmod(0o644)
    result = sample.pg("doctor")
    assert result.exit_code == 1
    assert "not executable" in result.stderr
    hook.chmod(0o755)
    sample.git("config", "core.hooksPath", "elsewhere")
    (sample.root / "elsewhere").mkdir()
    moved = sample.pg("doctor")
    assert moved.exit_code == 1
    assert "core.hooksPath changed" in moved.stderr


def test_linked_worktree_gets_patches_unless_switched_off(sample: Sample, tmp_path: Path) -> None:
    installed(sample)
    tree = tmp_path / "wt"
    add = sample.git("worktree", "add", "-q", str(tree), "old", check=False)
    assert add.returncode == 0, add.stderr
    assert methods_in_class(tree / KIMI)
    assert patchguard("-C", tree, "check").exit_code == 0

    sample.git("config", "patchguard.applyOnNewWorktree", "false")
    bare_tree = tmp_path / "wt2"
    add = sample.git("worktree", "add", "-q", str(bare_tree), "old", check=False)
    assert "applyOnNewWorktree is false" in add.stderr
    assert method_count((bare_tree / KIMI).read_text(), METHODS[0]) == 0


def test_a_new_worktree_switch_that_is_not_a_boolean_is_said_in_one_line(
    sample: Sample, tmp_path: Path
) -> None:
    """git itself refuses such a value ("bad boolean config value"); the hook says so, and
    applies nothing on a guess (it was an internal error)."""
    installed(sample)
    sample.git("config", "patchguard.applyOnNewWorktree", "garbage")
    tree = tmp_path / "wt"
    add = sample.git("worktree", "add", "-q", str(tree), "old", check=False)
    assert "applyOnNewWorktree is 'garbage', not true or false" in add.stderr, add.stderr
    assert "internal error" not in add.stderr
    assert method_count((tree / KIMI).read_text(), METHODS[0]) == 0


def test_hook_falls_back_to_path_then_fails_loudly(sample: Sample) -> None:
    installed(sample, "--hook", "post-checkout")
    hook = sample.root / ".git" / "hooks" / "post-checkout"
    hook.write_text(hook.read_text().replace("install_python='", "install_python='/gone"))
    sample.git("stash")
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    checkout = git(sample.root, "checkout", "-q", "old", env=env, check=False)
    assert checkout.returncode != 0
    assert "patchguard is not on PATH" in checkout.stderr
    # the hint names where this copy came from (the test venv's editable install of ROOT)
    assert f"reinstall with: pip install -e {ROOT} && patchguard install" in checkout.stderr


def test_pre_commit_framework_entry_reads_arguments_from_environment(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """What the pre-commit framework runs for the ids in .pre-commit-hooks.yaml."""
    declared = (ROOT / ".pre-commit-hooks.yaml").read_text()
    for stage in ("post-checkout", "post-merge", "post-rewrite"):
        assert f"entry: patchguard hook --pre-commit {stage}" in declared
        assert f"stages: [{stage}]" in declared
    sample.record_eagle3()
    sample.git("stash")
    sample.git("checkout", "-q", "old")
    env = {
        **clean_env,
        "PRE_COMMIT_FROM_REF": sample.commits["main"],
        "PRE_COMMIT_TO_REF": sample.commits["old"],
        "PRE_COMMIT_CHECKOUT_TYPE": "1",
    }
    result = subprocess.run(
        ["patchguard", "hook", "--pre-commit", "post-checkout"],
        cwd=sample.root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "re-applied eagle3" in result.stderr
    assert methods_in_class(sample.kimi)


def test_doctor_fails_when_the_baked_interpreter_cannot_import_patchguard(
    sample: Sample, tmp_path: Path
) -> None:
    """The hooks run patchguard, so the interpreter they call must import it."""
    import sys
    import venv

    installed(sample, "--hook", "post-checkout")
    assert sample.pg("doctor").exit_code == 0
    bare = tmp_path / "bare-venv"
    venv.create(bare, with_pip=False)
    hook = sample.root / ".git" / "hooks" / "post-checkout"
    text = hook.read_text().replace(
        f"install_python='{sys.executable}'", f"install_python='{bare}/bin/python'"
    )
    hook.write_text(text)
    result = sample.pg("doctor")
    assert result.exit_code == 1
    assert "cannot import patchguard" in result.stderr
    assert "ModuleNotFoundError" in result.stderr


def test_a_repositorys_own_guard_package_never_runs_in_the_hooks(sample: Sample) -> None:
    """The hooks run patchguard, never the repository's code (python -P)."""
    installed(sample)
    evil = sample.root / "guard"
    evil.mkdir()
    (evil / "__init__.py").write_text("raise SystemExit('the repository code ran')\n")
    (evil / "__main__.py").write_text("raise SystemExit('the repository code ran')\n")
    sample.git("stash")
    checkout = sample.git("checkout", "-q", "old", check=False)
    assert checkout.returncode == 0, checkout.stderr
    assert "the repository code ran" not in checkout.stderr
    assert "re-applied eagle3" in checkout.stderr


@pytest.mark.parametrize("tmpdir", ["/nonexistent/patchguard", "/dev/null"])
def test_ref_updates_never_fail_whatever_tmpdir_is(sample: Sample, tmpdir: str) -> None:
    """`reference-transaction` reads its input without temporary files."""
    installed(sample)
    env = {**os.environ, "TMPDIR": tmpdir}
    for args in (
        ("commit", "-q", "--allow-empty", "-m", "x"),
        ("branch", "elsewhere"),
        ("stash",),
        ("stash", "pop"),
    ):
        result = git(sample.root, *args, env=env, check=False)
        assert result.returncode == 0, (args, result.stderr)
    assert methods_in_class(sample.kimi)
