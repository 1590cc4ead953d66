"""The nearly free path: right answers from a content-keyed cache, and no heavy imports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sample_repo
from conftest import ROOT, Sample, git, patchguard

from guard.git.gitdir import locate
from guard.git.own_code import model_files, model_namespace
from guard.store.fastpath import CACHE_DIR_NAME, VERIFIED_FILE
from guard.tree.assess import assess_file
from guard.tree.verdicts import CheckReport, PatchVerdict
from guard.tree.worktree import Worktree

PROBE = """
import sys
from pathlib import Path
from guard.entry import main
sys.argv = ["patchguard", "-C", sys.argv[1], "check", "-q"]
try:
    main()
except SystemExit as leaving:
    heavy = sorted(m for m in ("pygit2", "pydantic", "click", "guard.tree.assess") if m in sys.modules)
    print(leaving.code, ",".join(heavy))
"""


def fast_check(sample: Sample) -> tuple[str, str]:
    """(exit code, heavy modules imported) of `patchguard check -q` in a fresh interpreter;
    guard.tree.assess among them says the full path ran."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(sample.root)], capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0], out[1] if len(out) > 1 else ""


def test_unchanged_check_imports_nothing_heavy(sample: Sample) -> None:
    sample.record_eagle3()
    assert sample.pg("check").exit_code == 0  # verifies, and fills the cache
    assert fast_check(sample) == ("0", "")


def test_hand_edit_right_after_a_check_is_caught(sample: Sample) -> None:
    sample.record_eagle3()
    assert sample.pg("check").exit_code == 0
    text = sample.kimi.read_text()
    sample.kimi.write_text(text.replace("def get_embed_and_head", "def get_embed_and_heads"))
    code, heavy = fast_check(sample)
    assert code == "1"
    assert "guard.tree.assess" in heavy  # the full path decided


DAMAGES = {
    "garbage": lambda text: b"\x00garbage\n\xff\n",
    "cut in a line": lambda text: text[:-30],
    "cut between lines": lambda text: text[: text.rindex(b"\nend\n") + 1],
    "a line of no section": lambda text: text.replace(b"\nkeys ", b"\nkey ", 1),
    "another format": lambda text: text.replace(b" 2\n", b" 3\n", 1),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_cache_is_a_miss(sample: Sample, damage: str) -> None:
    """Whatever is wrong with the cache, the full path decides: green stays green, and a
    change it no longer knows about is red."""
    sample.record_eagle3()
    assert sample.pg("check").exit_code == 0
    verified = locate(sample.root).git_dir / CACHE_DIR_NAME / VERIFIED_FILE
    kept = verified.read_bytes()
    verified.write_bytes(DAMAGES[damage](kept))
    code, heavy = fast_check(sample)
    assert (code, "guard.tree.assess" in heavy) == ("0", True)  # decided in full
    assert verified.read_bytes() == kept  # ... and written whole again
    verified.write_bytes(DAMAGES[damage](kept))
    sample.git("stash")
    assert fast_check(sample)[0] == "1"


def test_cache_is_per_worktree(sample: Sample, tmp_path) -> None:
    sample.record_eagle3()
    assert sample.pg("check").exit_code == 0
    other = tmp_path / "wt"
    sample.git("worktree", "add", "-q", "--detach", str(other), "main")
    assert not (locate(other).git_dir / CACHE_DIR_NAME).exists()
    result = subprocess.run(
        [sys.executable, "-m", "guard", "-C", str(other), "check", "-q"], capture_output=True
    )
    assert result.returncode == 1
    assert sample_repo.KIMI.encode() in result.stderr


def test_hook_in_a_repository_with_nothing_recorded_exits_in_sh(sample: Sample) -> None:
    assert sample.pg("install", "--hook", "post-checkout").exit_code == 0
    hook = sample.root / ".git" / "hooks" / "post-checkout"
    hook.write_text(hook.read_text().replace("install_python='", "install_python='/gone"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(sample.root)}
    switch = git(sample.root, "checkout", "-q", "old", env=env, check=False)
    assert switch.returncode == 0, switch.stderr
    assert switch.stderr == ""


def test_a_copied_checkout_never_trusts_the_originals_cache(
    sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Issue 11: the cache names no absolute path; a `cp -a` copy hashes its own files."""
    import json
    import shutil

    sample.record_eagle3()
    assert sample.pg("install").exit_code == 0
    assert sample.pg("check", "-q").exit_code == 0  # verified: the key is cached
    renamed = tmp_path / "renamed"
    shutil.copytree(sample.root, renamed, symlinks=True)
    kimi = renamed / sample_repo.KIMI
    kimi.write_text(kimi.read_text().replace("def get_embed_and_head", "def get_embed_and_tail"))
    assert patchguard("-C", renamed, "check").exit_code == 1
    moved = subprocess.run(
        ["git", "checkout", "-q", "-b", "elsewhere"], cwd=renamed, capture_output=True, text=True
    )
    assert "guard FAILED after post-checkout" in moved.stderr

    guarded = tmp_path / "guarded"
    shutil.copytree(sample.root, guarded, symlinks=True)
    manifest = guarded / ".git" / "patchguard" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["guards"].append(f"{sample_repo.KIMI}::{sample_repo.CLASS}.not_there")
    manifest.write_text(json.dumps(data, indent=2) + "\n")  # the copy's own manifest changed
    entry = subprocess.run(  # the entry point's own fast path, as users run it
        ["patchguard", "-C", str(guarded), "check"], capture_output=True, text=True, env=clean_env
    )
    assert entry.returncode == 1, entry.stdout
    assert "not_there" in entry.stderr


def test_a_commit_that_touches_no_guarded_file_keeps_the_key(sample: Sample) -> None:
    """Issue 22, item 2: the key is what the verdict reads, not the commit id."""
    sample.record_eagle3()
    assert sample.pg("check").exit_code == 0
    (sample.root / "README.md").write_text("# sglang (sample), edited\n")
    sample.git("commit", "-q", "-m", "docs", "README.md")
    assert fast_check(sample) == ("0", "")  # a new HEAD, the same guarded files: no full path


def test_a_commit_of_a_guarded_file_voids_the_key(sample: Sample) -> None:
    """HEAD's entry for a guarded file is in the key: the same worktree bytes over another HEAD
    file are another question (here the patch is now committed in HEAD)."""
    sample.record_eagle3()
    assert sample.pg("check").exit_code == 0
    sample.git("commit", "-q", "-am", "the patch, committed")
    assert "guard.tree.assess" in fast_check(sample)[1]  # the full path decided
    sample.git("reset", "-q", "--soft", "HEAD~1")
    assert fast_check(sample) == ("0", "")  # HEAD's file as verified: the key holds again


@pytest.fixture
def hooked(sample: Sample) -> Sample:
    """The patch recorded, the post-checkout hook installed, the content verified."""
    sample.record_eagle3()
    assert sample.pg("install", "--hook", "post-checkout").exit_code == 0
    assert sample.pg("check", "-q").exit_code == 0
    return sample


def _everything(root: Path) -> dict[str, tuple[int, int]]:
    """Every file of the worktree and of its git dir but the index and git's logs, by
    (inode, modification time): what a hook that rewrites nothing leaves as it was."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_file() and relative != ".git/index" and "/logs/" not in f"/{relative}":
            found[relative] = (path.stat().st_ino, path.stat().st_mtime_ns)
    return found


def test_a_checkout_with_nothing_to_do_rewrites_nothing(
    hooked: Sample, clean_env: dict[str, str]
) -> None:
    """The hook's key holds for any commit whose guarded files are the ones verified: the
    hook finds it and writes no file, not even its cache."""
    (hooked.root / "README.md").write_text("# sglang (hooked), edited\n")
    hooked.git("commit", "-q", "-m", "docs", "README.md")  # HEAD moves to a commit never checked
    hooked.git("branch", "topic")
    before = _everything(hooked.root)
    switch = git(hooked.root, "checkout", "-q", "topic", env=clean_env, check=False)
    assert switch.returncode == 0, switch.stderr
    assert switch.stderr == ""
    after = _everything(hooked.root)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    assert changed == {".git/HEAD"}  # git's own move, nothing of patchguard's


def test_a_damaged_cache_never_reaches_the_hooks_output(
    hooked: Sample, clean_env: dict[str, str]
) -> None:
    """A torn cache is a miss, and the hook decides in full, quietly."""
    verified = locate(hooked.root).git_dir / CACHE_DIR_NAME / VERIFIED_FILE
    verified.write_bytes(verified.read_bytes()[:-30])  # cut inside a quoted key
    switch = git(hooked.root, "checkout", "-q", "-b", "topic", env=clean_env, check=False)
    assert switch.returncode == 0, switch.stderr
    assert switch.stderr == ""
    assert fast_check(hooked) == ("0", "")  # the hook's full check wrote a whole file again


def test_a_package_that_appears_beside_a_guarded_module_voids_the_key(
    hooked: Sample, clean_env: dict[str, str]
) -> None:
    """`import kimi_k25` loads a package kimi_k25/ before kimi_k25.py: a path the check looked
    up and found empty is part of what the key holds."""
    shadow = hooked.kimi.with_suffix("") / "__init__.py"
    shadow.parent.mkdir()
    shadow.write_text("")
    code, imported = fast_check(hooked)
    assert code == "1" and "guard.tree.assess" in imported  # the full path decided: red
    switch = git(hooked.root, "checkout", "-q", "-b", "topic", env=clean_env, check=False)
    assert "shadows it" in switch.stderr
    shadow.unlink()
    shadow.parent.rmdir()
    assert hooked.pg("check", "-q").exit_code == 0
    assert fast_check(hooked) == ("0", "")


def test_a_guarded_file_made_a_link_is_never_green_from_the_cache(hooked: Sample) -> None:
    """The same bytes through a link are not the file (patchguard never writes through one)."""
    elsewhere = hooked.root.parent / "kimi_elsewhere.py"
    elsewhere.write_bytes(hooked.kimi.read_bytes())
    hooked.kimi.unlink()
    hooked.kimi.symlink_to(elsewhere)
    code, imported = fast_check(hooked)
    assert code == "1" and "guard.tree.assess" in imported
    switch = hooked.git("checkout", "-q", "-b", "topic", check=False)
    assert "unsafe-path" in switch.stderr or "symbolic link" in switch.stderr


def test_a_conflict_resolved_by_hand_without_git_add_is_no_verified_state(hooked: Sample) -> None:
    """No key holds the index: the fast path asks git whether the guarded files are merged.

    The index as a conflicted `stash pop` leaves it (stage entries 1-3, no stage 0), with the
    verified bytes typed back into the file by hand and no `git add`.
    """
    base = hooked.git("rev-parse", f"HEAD:{sample_repo.KIMI}").stdout.strip()
    stages = "".join(f"100644 {base} {n}\t{sample_repo.KIMI}\n" for n in (1, 2, 3))
    entries = f"0 {'0' * 40}\t{sample_repo.KIMI}\n{stages}"
    subprocess.run(
        ["git", "update-index", "--index-info"],
        cwd=hooked.root,
        input=entries,
        text=True,
        check=True,
    )
    assert hooked.git("ls-files", "-u").stdout
    code, imported = fast_check(hooked)
    assert code == "1" and "guard.tree.assess" in imported
    hook = subprocess.run(  # as git runs it after a checkout
        [str(hooked.root / ".git" / "hooks" / "post-checkout"), "HEAD", "HEAD", "1"],
        cwd=hooked.root,
        capture_output=True,
        text=True,
    )
    assert hook.returncode == 1 and "guard FAILED after post-checkout" in hook.stderr


def test_a_key_verified_by_another_python_or_patchguard_is_not_trusted(hooked: Sample) -> None:
    verified = locate(hooked.root).git_dir / CACHE_DIR_NAME / VERIFIED_FILE
    text = verified.read_text()
    assert model_namespace() in text and model_files() in text
    # another patchguard writes its own namespace, and the identity of its own model files
    verified.write_text(text.replace(model_namespace(), "0" * 16).replace(model_files(), "1" * 16))
    assert "guard.tree.assess" in fast_check(hooked)[1]  # decided in full


NAMESPACE = """
import guard.git.own_code as own_code
print(own_code.__file__, own_code.model_namespace())
"""


def test_every_module_of_guard_keys_everything_kept(tmp_path: Path) -> None:
    """A patchguard that decides otherwise anywhere trusts none of the keys, parses or merges
    kept before: a change to any module of guard/ changes the namespace (here the modules
    of the verdicts, the worktree's reading and the assessment, and others no list named)."""
    deciding = {o.__module__ for o in (PatchVerdict, CheckReport, Worktree, assess_file)}
    deciding |= {"guard.git.markers", "guard.git.eol", "guard.cli.render", "guard.git.repo"}
    copy = tmp_path / "guard"
    shutil.copytree(ROOT / "guard", copy, ignore=shutil.ignore_patterns("__pycache__"))

    def namespace() -> str:
        run = subprocess.run(
            [sys.executable, "-c", NAMESPACE], cwd=tmp_path, capture_output=True, text=True
        )
        where, found = run.stdout.split()
        assert Path(where).is_relative_to(copy), run.stdout  # the scratch copy, not the real one
        return found

    seen = {namespace()}
    for module in sorted(deciding):
        path = copy.joinpath(*module.split(".")[1:]).with_suffix(".py")
        path.write_text(path.read_text() + "\n# decides otherwise\n")
        seen.add(namespace())
    assert len(seen) == len(deciding) + 1, sorted(deciding)


def test_the_model_namespace_is_kept_by_its_files_and_decided_by_their_content(
    sample: Sample, tmp_path: Path
) -> None:
    """check --quiet takes the namespace the cache keeps while the model's files are those it
    was computed from; an edit of one is a miss, and a file touched but not changed is the
    same namespace again (content decides, the files' identity only saves the hashing)."""
    sample.record_eagle3()
    copy = tmp_path / "install"
    shutil.copytree(ROOT / "guard", copy / "guard", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "patchguard_entry.py", copy)

    def check() -> str:
        entry = [sys.executable, "-I", str(copy / "patchguard_entry.py")]
        run = subprocess.run(
            [*entry, "-C", str(sample.root), "check"], capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
        return (
            "since it was last verified" if "since it was last verified" in run.stdout else "full"
        )

    verified = locate(sample.root).git_dir / CACHE_DIR_NAME / VERIFIED_FILE
    assert [check(), check()] == ["full", "since it was last verified"]
    kept = verified.read_text()
    model = copy / "guard" / "truth" / "symbols.py"
    model.write_text(model.read_text() + "\n# decides otherwise\n")
    assert [check(), check()] == ["full", "since it was last verified"]
    assert verified.read_text() != kept  # another namespace, another identity
    os.utime(model, ns=(1, 1))  # the same bytes, another modification time
    assert check() == "since it was last verified"


def test_an_index_that_git_is_sent_to_is_the_one_asked(
    sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """GIT_INDEX_FILE: git (and the full path) use another index; the fast path does not
    answer from .git/index, nor from the checksum of it that the cache knows."""
    sample.record_eagle3()
    assert sample.pg("check", "-q").exit_code == 0
    other = tmp_path / "other-index"
    other.write_bytes((sample.root / ".git" / "index").read_bytes())
    env = {**clean_env, "GIT_INDEX_FILE": str(other)}
    blob = sample.git("rev-parse", f"HEAD:{sample_repo.KIMI}").stdout.strip()
    stages = "".join(f"100644 {blob} {n}\t{sample_repo.KIMI}\n" for n in (1, 2, 3))
    subprocess.run(
        ["git", "update-index", "--index-info"],
        cwd=sample.root,
        env=env,
        input=f"0 {'0' * 40}\t{sample_repo.KIMI}\n{stages}",
        text=True,
        check=True,
    )
    fast = subprocess.run(
        [sys.executable, "-c", PROBE, str(sample.root)], env=env, capture_output=True, text=True
    )
    assert fast.stdout.split()[0] == "1"
