"""patchguard never writes into a git directory or through a symlink.

A hostile bundle names `tools/config` where the repository has `tools -> .git` committed: the
name passes every check of names alone and lies inside the worktree. These tests build the
attack as it was reported (a bundle whose patch adds `fsmonitor` to `[core]`, then an ordinary
checkout) and hold the rule to git's own: git refuses to add or check out a path beyond a
symbolic link.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample, git, patchguard

from guard.git.gitdir import locate
from guard.git.repo import Repo
from guard.git.worktree_paths import UnsafePath, name_problem

KIMI = sample_repo.KIMI
GIT_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"


def hostile_bundle(tmp_path: Path, path: str, marker: Path) -> Path:
    """A bundle made the honest way (record, export) in a repository where `path` is a plain
    file, whose patch adds a command to run; only its path is aimed at another checkout."""
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    git(attacker, "init", "-q")
    target = attacker / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(GIT_CONFIG)
    git(attacker, "add", "-A")
    git(attacker, "commit", "-qm", "a config file")
    target.write_text(GIT_CONFIG.replace("[core]\n", f"[core]\n\tfsmonitor = touch {marker}\n"))
    recorded = patchguard("-C", attacker, "record", "cfg", path)
    assert recorded.exit_code == 0, recorded.output + recorded.stderr
    bundle = tmp_path / "evil.json"
    assert patchguard("-C", attacker, "export", "-o", bundle).exit_code == 0
    return bundle


def commit_symlink(sample: Sample, name: str, target: str) -> None:
    (sample.root / name).symlink_to(target)
    sample.git("add", name)
    sample.git("commit", "-qm", f"add the link {name} -> {target}")


def git_dir_files(sample: Sample) -> dict[str, bytes]:
    git_dir = sample.root / ".git"
    return {
        p.relative_to(git_dir).as_posix(): p.read_bytes()
        for p in [git_dir / "config", *(git_dir / "hooks").glob("*")]
        if p.is_file()
    }


@pytest.mark.parametrize("path", ["tools/config", "tools/hooks/post-merge"])
def test_a_bundle_aimed_through_a_committed_link_into_git_is_refused(
    sample: Sample, tmp_path: Path, path: str
) -> None:
    marker = tmp_path / "a-command-ran"
    bundle = hostile_bundle(tmp_path, path, marker)
    commit_symlink(sample, "tools", ".git")
    before = git_dir_files(sample)
    result = sample.pg("import", bundle)
    assert result.exit_code == 2, result.output + result.stderr
    assert "beyond a symbolic link (tools -> .git)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert sample.pg("list", "--json").output.count('"name"') == 0  # nothing imported
    sample.git("checkout", "-q", "HEAD~1")
    sample.git("status")
    assert git_dir_files(sample) == before
    assert not marker.exists()


def test_a_manifest_that_already_holds_such_a_path_never_writes_it(
    sample: Sample, tmp_path: Path
) -> None:
    """Imported while `tools` did not exist; then upstream commits `tools -> .git`."""
    marker = tmp_path / "a-command-ran"
    bundle = hostile_bundle(tmp_path, "tools/config", marker)
    assert sample.pg("import", bundle).exit_code == 0
    assert sample.pg("install").exit_code == 0
    commit_symlink(sample, "tools", ".git")
    before = git_dir_files(sample)
    checkout = sample.git("checkout", "-q", "HEAD~1", check=False)
    back = sample.git("checkout", "-q", "-", check=False)
    assert "re-applied cfg" not in checkout.stderr + back.stderr
    applied = sample.pg("apply")
    assert applied.exit_code == 1
    assert "unsafe-path" in applied.output + applied.stderr
    assert "beyond a symbolic link (tools -> .git)" in applied.output + applied.stderr
    status = sample.pg("check")
    assert status.exit_code == 1
    assert "Traceback" not in status.output + status.stderr
    sample.git("status")
    assert git_dir_files(sample) == before
    assert not marker.exists()


def test_a_link_back_inside_the_worktree_is_refused_too(sample: Sample, tmp_path: Path) -> None:
    """`link -> python/sglang` resolves inside the worktree; git still refuses it, so do we."""
    sample.record_eagle3()
    bundle = tmp_path / "b.json"
    assert sample.pg("export", "-o", bundle).exit_code == 0
    sample.pg("drop", "eagle3")
    commit_symlink(sample, "link", "python/sglang")
    aimed = KIMI.replace("python/sglang/", "link/")
    bundle.write_text(bundle.read_text().replace(f'"path": "{KIMI}"', f'"path": "{aimed}"'))
    result = sample.pg("import", bundle)
    assert result.exit_code == 2
    assert "beyond a symbolic link (link -> python/sglang)" in result.stderr


def test_a_nested_repository_is_refused(sample: Sample, tmp_path: Path) -> None:
    sample.record_eagle3()
    bundle = tmp_path / "b.json"
    assert sample.pg("export", "-o", bundle).exit_code == 0
    sample.pg("drop", "eagle3")
    inner = sample.root / "vendor" / "inner"
    inner.mkdir(parents=True)
    git(inner, "init", "-q")
    bundle.write_text(
        bundle.read_text().replace(f'"path": "{KIMI}"', '"path": "vendor/inner/kimi_k25.py"')
    )
    result = sample.pg("import", bundle)
    assert result.exit_code == 2
    assert "is in submodule vendor/inner, another repository" in result.stderr
    assert not (inner / "kimi_k25.py").exists()


def test_a_git_dir_kept_in_the_worktree_under_another_name_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    subprocess.run(
        ["git", "init", "-q", f"--separate-git-dir={root / 'gitdata'}", str(root)], check=True
    )
    repo = Repo.discover(root)
    with pytest.raises(UnsafePath, match="lies in the git directory"):
        repo.worktree_path("gitdata/config")
    assert repo.worktree_path("src/ok.py") == root / "src" / "ok.py"


def test_the_leading_link_rule_is_git_s_own(tmp_path: Path) -> None:
    """For each path, patchguard refuses exactly where `git add` says "beyond a symbolic link"."""
    root = tmp_path / "r"
    (root / "real" / "deep").mkdir(parents=True)
    git(root, "init", "-q")
    (root / "real" / "a.py").write_text("a = 1\n")
    (root / "real" / "deep" / "b.py").write_text("b = 1\n")
    (root / "link").symlink_to("real")
    (root / "real" / "up").symlink_to("..")
    (root / "tools").symlink_to(".git")
    (root / "dangling").symlink_to("nowhere")
    candidates = [
        "real/a.py",
        "real/deep/b.py",
        "link/a.py",
        "link/deep/b.py",
        "real/up/real/a.py",
        "tools/config",
        "dangling/x.py",
        "real/new.py",
    ]
    repo = Repo.discover(root)
    for path in candidates:
        said = git(root, "add", "--", path, check=False)
        git_refuses = "beyond a symbolic link" in said.stderr
        try:
            repo.worktree_path(path)
            ours = False
        except UnsafePath as refusal:
            ours = "beyond a symbolic link" in str(refusal)
        assert ours == git_refuses, (path, said.stderr)


# --- item 4: a guarded file that is (or becomes) a symbolic link ---------------------------


def upstream_links_the_file(sample: Sample) -> str:
    """Upstream moves the model to kimi_k25_impl.py and leaves a link at the old name."""
    kimi = sample.kimi
    impl = kimi.with_name("kimi_k25_impl.py")
    impl.write_text(kimi.read_text())
    kimi.unlink()
    kimi.symlink_to(impl.name)
    sample.git("add", "-A")
    sample.git("commit", "-qm", "upstream: kimi_k25.py becomes a link to kimi_k25_impl.py")
    return sample.git("rev-parse", "HEAD").stdout.strip()


def test_a_move_onto_a_commit_where_the_file_is_a_link_keeps_the_link(sample: Sample) -> None:
    sample.git("checkout", "-q", "-b", "work")
    sample.git("checkout", "-q", "-b", "linked")
    upstream_links_the_file(sample)
    impl = sample.kimi.with_name("kimi_k25_impl.py")
    impl_text = impl.read_text()
    sample.git("checkout", "-q", "work")
    sample.record_eagle3()
    patched = sample.kimi.read_bytes()
    moved = sample.pg("git", "checkout", "-q", "linked")
    assert moved.exit_code == 1, moved.output + moved.stderr
    assert "is a symbolic link (to kimi_k25_impl.py)" in moved.output + moved.stderr
    assert sample.kimi.is_symlink()
    assert impl.read_text() == impl_text
    unapplied = sample.pg("unapply")
    assert unapplied.exit_code == 0 and sample.kimi.is_symlink()
    back = sample.pg("git", "checkout", "-q", "work")
    assert back.exit_code == 0, back.output + back.stderr
    assert not sample.kimi.is_symlink()
    assert sample.kimi.read_bytes() == patched
    assert sample.pg("check").exit_code == 0


def test_recording_through_a_link_names_the_file_it_points_to(sample: Sample) -> None:
    upstream_links_the_file(sample)
    impl = sample.kimi.with_name("kimi_k25_impl.py")
    sample_repo.add_eagle3_methods(sample.root)  # writes through the link, as an editor does
    assert not sample.kimi.read_text().startswith("link")
    result = sample.pg("record", "eagle3", KIMI)
    assert result.exit_code == 2
    assert "is a symbolic link (to kimi_k25_impl.py)" in result.stderr
    target = os.path.relpath(impl, sample.root)
    assert f"patchguard record NAME {target}" in result.stderr
    assert sample.pg("list", "--json").output.count('"name"') == 0
    recorded = sample.pg("record", "eagle3", target)
    assert recorded.exit_code == 0, recorded.output + recorded.stderr
    manifest = json.loads(locate(sample.root).manifest_path.read_text())
    (change,) = manifest["patches"][0]["files"]
    assert change["path"] == target
    removed = [
        line
        for line in change["diff"].splitlines()
        if line.startswith("-") and not line.startswith("---")
    ]
    assert removed == []  # the methods added to the target, not a whole file replaced


def test_writes_refuse_a_repository_path_of_the_worktree_s_own_git_dir(sample: Sample) -> None:
    repo = Repo.discover(sample.root)
    layout = locate(sample.root)
    assert layout.git_dir == sample.root / ".git"
    with pytest.raises(UnsafePath):
        repo.write_raw(".git/config", b"[core]\n")
    with pytest.raises(UnsafePath):
        repo.write_raw("../escape.py", b"x = 1\n")


def test_a_guarded_file_that_upstream_turns_into_a_directory_never_traps_a_move(
    sample: Sample,
) -> None:
    sample.git("checkout", "-q", "-b", "work")
    sample.git("checkout", "-q", "-b", "dir")
    sample.kimi.unlink()
    (sample.kimi / "__init__.py").parent.mkdir()
    (sample.kimi / "__init__.py").write_text("")
    sample.git("add", "-A")
    sample.git("commit", "-qm", "upstream: the model becomes a package")
    sample.git("checkout", "-q", "work")
    sample.record_eagle3()
    patched = sample.kimi.read_bytes()
    moved = sample.pg("git", "checkout", "-q", "dir")
    assert moved.exit_code == 1, moved.output + moved.stderr
    assert "is a directory in the worktree, not a file" in moved.stderr
    assert sample.pg("status").exit_code == 1
    back = sample.pg("git", "checkout", "-q", "work")
    assert back.exit_code == 0, back.output + back.stderr
    assert sample.kimi.read_bytes() == patched


FIFO_SAYS = "deepseek_v2.py is not a regular file (a FIFO or a device)"


@pytest.mark.parametrize("verified", [False, True], ids=["full-path", "fast-path"])
def test_a_fifo_at_a_patched_path_never_hangs_a_command(
    sample: Sample, clean_env: dict[str, str], verified: bool
) -> None:
    """A FIFO where a patch's file was would never answer a read: every command that reads the
    patches' files (apply of another patch too, the fast paths of check and the hooks) says
    what is there instead, in one line."""
    sample.record_eagle3()
    other = sample.root / "python/sglang/srt/models/deepseek_v2.py"
    other.write_text(other.read_text() + "\n\ndef helper():\n    return 1\n")
    assert sample.pg("record", "helper", str(other), "-m", "a helper").exit_code == 0
    if verified:
        assert sample.pg("install").exit_code == 0
        assert sample.pg("check", "--quiet").exit_code == 0  # the fast paths know this tree
        other.unlink()
        os.mkfifo(other)
        commands = [["patchguard", "check", "--quiet"], ["git", "checkout", "-q", "-b", "moved"]]
    else:
        sample.git("stash")
        other.unlink()
        os.mkfifo(other)
        commands = [["patchguard", *args] for args in (("apply", "eagle3"), ("check", "--json"))]
    for command in [*commands, ["patchguard", "status"], ["patchguard", "apply"]]:
        ran = subprocess.run(
            command,
            cwd=sample.root,
            env=clean_env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        assert "Traceback" not in ran.stderr, ran.stderr
        assert ran.returncode in (0, 1), (command, ran.stdout + ran.stderr)
        if command[-2:] != ["apply", "eagle3"]:
            assert FIFO_SAYS in ran.stdout + ran.stderr, (command, ran.stdout + ran.stderr)
    assert b"def set_embed_and_head" in sample.kimi.read_bytes()  # eagle3 is in
    assert other.is_fifo()  # never written over


def test_list_without_anything_recorded_is_not_an_error(sample: Sample) -> None:
    listed = sample.pg("list")
    assert listed.exit_code == 0
    assert "nothing recorded" in listed.output


# --- each rule of git's verify_path, held to git ---------------------------------

# Names git will not put in an index: core.protectNTFS is git's default everywhere,
# core.protectHFS macOS's (the HFS+ names: `.git` with a code point HFS+ ignores).
GIT_REFUSES = [
    ".git/config",
    ".GIT/config",
    "vendor/.Git/config",
    ".git./config",
    ".git /config",
    ".git. /config",
    ".git:stream/config",
    "git~1/config",
    "GIT~1/hooks/post-checkout",
    "git~1./config",
    "git~1 /config",
    "git~1:stream/config",
    ".g\u200cit/config",
    "\ufeff.GIT/config",
    ".git\\config",
    "git~1\\config",
    "python//x.py",
    "python/./x.py",
    "python/../x.py",
    "../x.py",
    "/x.py",
    "python/",
    ".",
    "..",
]
GIT_TAKES = [
    ".gitignore",
    "vendor/.gitmodules",
    ".gitx/y.py",
    ".git.x/y.py",
    "git~2/y.py",
    "git/y.py",
    "a.git/y.py",
    "..x/y.py",
    "x./y.py",
    "x:y.py",
    ".g\u200cix/y.py",
]


def test_the_name_rules_are_git_s_verify_path(tmp_path: Path) -> None:
    """patchguard refuses a name exactly where `git update-index` says "invalid path"; the one
    difference, a backslash, is patchguard refusing what git refuses only on Windows."""
    git(tmp_path, "init", "-q")
    blob = git(tmp_path, "hash-object", "-w", "--stdin", input="x = 1\n").stdout.strip()
    for path in [*GIT_REFUSES, *GIT_TAKES, "python\\x.py"]:
        said = git(
            tmp_path,
            *("-c", "core.protectNTFS=true", "-c", "core.protectHFS=true", "update-index"),
            *("--add", "--cacheinfo", f"100644,{blob},{path}"),
            check=False,
        )
        git_refuses = said.returncode != 0
        assert not git_refuses or "invalid path" in said.stderr.lower(), (path, said.stderr)
        assert git_refuses == (path in GIT_REFUSES), (path, said.stderr)
        assert (name_problem(path) is not None) == (git_refuses or "\\" in path), path


@pytest.mark.parametrize(
    ("field", "paths", "reason"),
    [
        ("files.0.path", GIT_REFUSES, ""),
        ("files.0.path", ["/x.py", "/etc/passwd"], "not absolute"),
        ("files.0.path", ["", "python/x\0.py", "python\\x.py"], "non-empty POSIX path without NUL"),
        ("requires.0", ["../x.py", ".git/x.py", "git~1:s/x.py"], ""),
    ],
    ids=["git-refuses", "absolute", "empty-nul-backslash", "required-symbol"],
)
def test_a_bundle_naming_a_path_git_refuses_imports_nothing(
    sample: Sample, tmp_path: Path, field: str, paths: list[str], reason: str
) -> None:
    """The file a patch changes, or the file of a symbol it requires."""
    sample.record_eagle3()
    bundle = tmp_path / "b.json"
    assert sample.pg("export", "-o", bundle).exit_code == 0
    assert sample.pg("drop", "eagle3").exit_code == 0
    honest = bundle.read_text()
    for path in paths:
        if field == "files.0.path":
            aimed = honest.replace(f'"path": "{KIMI}"', json.dumps({"path": path})[1:-1])
        else:  # the first `KIMI::` is the first required symbol
            aimed = honest.replace(f'"{KIMI}::', json.dumps(f"{path}::")[:-1], 1)
        assert aimed != honest
        bundle.write_text(aimed)
        result = sample.pg("import", bundle)
        assert result.exit_code == 2, (path, result.output, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, (path, result.stderr)
        assert f"field manifest.patches.0.{field}" in result.stderr, (path, result.stderr)
        assert reason in result.stderr, (path, result.stderr)
        assert sample.pg("list", "--json").output.count('"name"') == 0, path


def test_the_common_git_dir_inside_a_linked_worktree_is_refused(tmp_path: Path) -> None:
    """A linked worktree whose repository's common directory was moved into it: `gitdata/config`
    is no nested repository and not in the worktree's own git dir, only in the common one."""
    main, linked = tmp_path / "main", tmp_path / "linked"
    git(tmp_path, "init", "-q", str(main))
    git(main, "commit", "-q", "--allow-empty", "-m", "one")
    git(main, "worktree", "add", "-q", str(linked))
    (main / ".git").rename(linked / "gitdata")
    (main / ".git").write_text(f"gitdir: {linked / 'gitdata'}\n")
    (linked / ".git").write_text(f"gitdir: {linked / 'gitdata' / 'worktrees' / 'linked'}\n")
    said = git(linked, "rev-parse", "--git-common-dir").stdout.strip()
    assert Path(said) == linked / "gitdata"
    repo = Repo.discover(linked)
    with pytest.raises(UnsafePath, match="lies in the git directory"):
        repo.worktree_path("gitdata/config")
    assert repo.worktree_path("src/ok.py") == linked / "src" / "ok.py"
