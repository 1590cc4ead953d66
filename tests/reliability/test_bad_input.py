"""Bad input: each case gets a clear error (2, or 1 for a failed guard), no traceback, nothing written.

The CLI runs in-process with catch_exceptions=False, so any traceback fails the test itself.
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

KIMI = sample_repo.KIMI


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the worktree and of patchguard's store, to prove nothing was written."""
    files = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        ours = not relative.startswith(".git/") or "/patchguard/" in relative
        if path.is_file() and ours and not relative.endswith("/lock"):
            files[relative] = path.read_bytes()
    return files


def assert_clear_failure(result, code: int, *needles: str) -> None:
    """Exit code as the contract says; the reason in the output (errors on stderr)."""
    assert result.exit_code == code, (result.output, result.stderr)
    assert "Traceback" not in result.output + result.stderr
    for needle in needles:
        assert needle in result.output + result.stderr


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda text: text[:40], "not valid JSON"),
        (lambda text: "{", "not valid JSON"),
        (
            lambda text: text.replace('"schema_version": 1', '"schema_version": 2'),
            "schema_version 2",
        ),
        (lambda text: text.replace(f'"path": "{KIMI}"', '"path": "../outside.py"'), "path"),
        (lambda text: text.replace(f'"path": "{KIMI}"', '"path": "/etc/passwd"'), "path"),
        (
            lambda text: text.replace(f'"path": "{KIMI}"', '"path": ".GIT/hooks/post-checkout"'),
            ".git",
        ),
        (
            lambda text: text.replace(f'"path": "{KIMI}"', '"path": "vendor/lib/.Git/config"'),
            ".git",
        ),
        (lambda text: text.replace(f'"path": "{KIMI}"', '"path": "a/.git. /config"'), ".git"),
    ],
    ids=[
        "truncated",
        "invalid-json",
        "unknown-version",
        "dotdot-path",
        "absolute-path",
        "dot-git-upper",
        "nested-dot-git",
        "dot-git-trailing-dot",
    ],
)
def test_broken_manifest_writes_nothing(sample: Sample, mutate, needle: str) -> None:
    sample.record_eagle3()
    sample.git("stash")
    manifest = locate(sample.root).manifest_path
    manifest.write_text(mutate(manifest.read_text()))
    before = snapshot(sample.root)
    for command in (["apply"], ["unapply"], ["check"], ["record", "x", KIMI]):
        assert_clear_failure(sample.pg(*command), 2, needle)
    assert snapshot(sample.root) == before


def test_manifest_path_through_symlink_out_of_the_repo(sample: Sample, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.py").write_text("x = 1\n")
    sample.record_eagle3()
    sample.git("stash")
    (sample.root / "escape").symlink_to(outside)
    manifest = locate(sample.root).manifest_path
    manifest.write_text(
        manifest.read_text().replace(f'"path": "{KIMI}"', '"path": "escape/evil.py"')
    )
    # A guard that cannot hold (exit 1), never written through.
    assert_clear_failure(sample.pg("apply"), 1, "unsafe-path", "beyond a symbolic link (escape")
    assert (outside / "evil.py").read_text() == "x = 1\n"


@pytest.mark.parametrize(
    "name", ["with space.py", "quote'\"s.py", "new\nline.py", "ünïcødé.py"], ids=repr
)
def test_awkward_path_names_round_trip(sample: Sample, name: str) -> None:
    path = sample.root / "python" / name
    path.write_text("class A:\n    pass\n")
    sample.git("add", "-A")
    sample.git("commit", "-qm", "awkward name")
    path.write_text("class A:\n    def added(self):\n        return 1\n")
    result = sample.pg("record", "awkward", str(path))
    assert result.exit_code == 0, result.stderr
    sample.git("stash")
    assert sample.pg("check").exit_code == 1
    assert sample.pg("apply").exit_code == 0
    assert "def added" in path.read_text()
    assert sample.pg("check").exit_code == 0


def test_binary_file_is_refused(sample: Sample) -> None:
    blob = sample.root / "weights.bin"
    blob.write_bytes(b"\x00\x01" * 100)
    sample.git("add", "-A")
    sample.git("commit", "-qm", "binary")
    blob.write_bytes(b"\x00\x02" * 100)
    before = snapshot(sample.root)
    assert_clear_failure(sample.pg("record", "bin", str(blob)), 2, "binary file")
    assert snapshot(sample.root) == before


def test_non_utf8_source_with_coding_cookie_keeps_its_bytes(sample: Sample) -> None:
    path = sample.root / "python/latin.py"
    base = "# -*- coding: latin-1 -*-\nNAME = 'café'\n\nclass A:\n    pass\n".encode("latin-1")
    path.write_bytes(base)
    sample.git("add", "-A")
    sample.git("commit", "-qm", "latin-1")
    patched = base + "    def résumé(self):\n        return 'é'\n".encode("latin-1")
    path.write_bytes(patched)
    assert sample.pg("record", "latin", str(path)).exit_code == 0
    sample.git("stash")
    assert sample.pg("apply").exit_code == 0
    assert path.read_bytes() == patched
    assert sample.pg("check").exit_code == 0


def test_non_utf8_source_without_cookie_is_a_clear_syntax_error(sample: Sample) -> None:
    path = sample.root / "python/broken_encoding.py"
    path.write_bytes(b"X = 1\n")
    sample.git("add", "-A")
    sample.git("commit", "-qm", "ascii")
    path.write_bytes(b"X = '\xe9'\n")
    assert_clear_failure(sample.pg("record", "enc", str(path)), 1, "broken_encoding.py:")


@pytest.mark.parametrize("autocrlf", [None, "true"])
def test_crlf_line_endings_are_kept(sample: Sample, autocrlf: str | None) -> None:
    """Committed with CRLF, or stored LF and checked out CRLF: the patch is its own lines."""
    if autocrlf:
        sample.git("config", "core.autocrlf", autocrlf)
    path = sample.root / "python/windows.py"
    path.write_bytes(b"class A:\r\n    def a(self):\r\n        return 1\r\n")
    sample.git("add", "-A")
    sample.git("commit", "-qm", "crlf")
    patched = path.read_bytes() + b"\r\n    def b(self):\r\n        return 2\r\n"
    path.write_bytes(patched)
    assert sample.pg("record", "crlf", str(path)).exit_code == 0
    shown = [line.rstrip("\r") for line in sample.pg("show", "crlf").output.splitlines()]
    changed = [line for line in shown if line[:1] in ("+", "-") and line[:3] not in ("+++", "---")]
    assert changed == ["+", "+    def b(self):", "+        return 2"]
    manifest = json.loads((locate(sample.root).common_dir / "patchguard/manifest.json").read_text())
    oid = manifest["patches"][0]["files"][0]["patched_blob"]
    stored = subprocess.run(["git", "cat-file", "blob", oid], cwd=sample.root, capture_output=True)
    assert stored.stdout == (patched if not autocrlf else patched.replace(b"\r\n", b"\n"))
    sample.git("stash")
    assert sample.pg("apply").exit_code == 0
    assert path.read_bytes() == patched


def test_ident_without_an_id_records(sample: Sample) -> None:
    (sample.root / ".git" / "info").mkdir(exist_ok=True)
    (sample.root / ".git" / "info" / "attributes").write_text("* ident\n")
    sample.record_eagle3()


@pytest.mark.parametrize(
    ("attribute", "config", "named"),
    [
        ("filter=strip", {"filter.strip.clean": "cat", "filter.strip.smudge": "cat"}, "filter"),
        ("working-tree-encoding=latin-1", {}, "working-tree-encoding"),
        ("ident", {}, "ident"),
    ],
)
def test_conversions_only_git_can_make_are_refused(
    sample: Sample, attribute: str, config: dict[str, str], named: str
) -> None:
    for key, value in config.items():
        sample.git("config", key, value)
    (sample.root / ".git" / "info").mkdir(exist_ok=True)
    (sample.root / ".git" / "info" / "attributes").write_text(f"*.py {attribute}\n")
    sample_repo.add_eagle3_methods(sample.root)
    if named == "ident":  # only a file that holds $Id is changed by it
        sample.kimi.write_text(sample.kimi.read_text() + "# $Id$\n")
    before = snapshot(sample.root)
    result = sample.pg("record", "eagle3", KIMI)
    assert_clear_failure(result, 2, named, "only git itself can make")
    assert len(result.stderr.strip().splitlines()) == 1
    assert snapshot(sample.root) == before


def test_ten_megabyte_file(sample: Sample) -> None:
    path = sample.root / "data/table.txt"
    path.parent.mkdir()
    line = b"0123456789" * 9 + b"\n"
    path.write_bytes(line * 100_000)  # 10 MB
    sample.git("add", "-A")
    sample.git("commit", "-qm", "big")
    patched = path.read_bytes() + b"appended by the patch\n"
    path.write_bytes(patched)
    assert sample.pg("record", "big", str(path)).exit_code == 0
    sample.git("stash")
    assert sample.pg("apply").exit_code == 0
    assert path.read_bytes() == patched


def test_file_deleted_upstream_is_missing_and_untouched(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    sample.git("rm", "-q", KIMI)
    sample.git("commit", "-qm", "upstream deletes it")
    before = snapshot(sample.root)
    assert_clear_failure(sample.pg("apply"), 1, "missing-file")
    assert snapshot(sample.root) == before


def test_file_renamed_upstream_is_followed_and_reported(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    renamed = "python/sglang/srt/models/kimi_k2_5.py"
    sample.git("mv", KIMI, renamed)
    sample.git("commit", "-qm", "upstream renames it")
    status = sample.pg("status")
    assert f"followed the rename {KIMI} -> {renamed}" in status.output
    assert sample.pg("apply").exit_code == 0
    assert "def set_embed_and_head" in (sample.root / renamed).read_text()
    assert not sample.kimi.exists()
    assert sample.pg("check").exit_code == 0


def test_spec_for_missing_file_and_malformed_spec(sample: Sample) -> None:
    assert_clear_failure(sample.pg("require", "python/nope.py::f"), 2, "does not exist")
    assert_clear_failure(sample.pg("require", "python/nope.py:f"), 2, "no '::'")


def test_repository_with_no_commits(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    assert_clear_failure(patchguard("-C", tmp_path, "record", "p", "a.py"), 2, "no commits yet")
    assert_clear_failure(patchguard("-C", tmp_path, "check"), 2, "no manifest")


def test_bare_repository(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "--bare", "bare.git")
    assert_clear_failure(patchguard("-C", tmp_path / "bare.git", "check"), 2, "bare repository")


def test_detached_head_works(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    sample.git("checkout", "-q", "--detach", "main")
    assert sample.pg("apply").exit_code == 0
    assert sample.pg("check").exit_code == 0


def test_mid_merge_does_nothing_then_acts_after(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    sample.git("checkout", "-q", "-b", "side", "old")
    sample.kimi.write_text(sample.kimi.read_text().replace("multimodal", "side"))
    sample.git("commit", "-qam", "side edit")
    sample.git("checkout", "-q", "main")
    sample.kimi.write_text(sample.kimi.read_text().replace("multimodal", "main"))
    sample.git("commit", "-qam", "main edit")
    merge = sample.git("merge", "side", check=False)
    assert merge.returncode != 0  # a real conflict: the merge stops
    before = snapshot(sample.root)
    assert_clear_failure(sample.pg("apply"), 2, "merge is in progress")
    assert snapshot(sample.root) == before
    sample.git("merge", "--abort")
    assert sample.pg("apply").exit_code == 0
    assert sample.pg("check").exit_code == 0


def test_no_traceback_from_a_real_process(sample: Sample, clean_env: dict[str, str]) -> None:
    sample.record_eagle3()
    manifest = locate(sample.root).manifest_path
    manifest.write_text("{")
    for args in (["check"], ["apply"], ["hook", "post-checkout", "0", "0", "1"], ["stamp"]):
        result = subprocess.run(
            ["python", "-m", "guard", *args],
            cwd=sample.root,
            env=clean_env,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 2, args
        assert "Traceback" not in result.stderr
        assert "not valid JSON" in result.stderr
    assert json.loads("{}") == {}
    assert os.path.exists(manifest)


def test_unapply_follows_a_rename_too(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    renamed = "python/sglang/srt/models/kimi_k2_5.py"
    sample.git("mv", KIMI, renamed)
    sample.git("commit", "-qm", "upstream renames it")
    before = (sample.root / renamed).read_bytes()
    assert sample.pg("apply").exit_code == 0
    result = sample.pg("unapply")
    assert result.exit_code == 0, result.output
    assert (sample.root / renamed).read_bytes() == before


def test_sha256_repository_is_refused_by_every_command(tmp_path: Path) -> None:
    """One clear line, exit 2, nothing written, install included."""
    root = tmp_path / "sha256"
    git(tmp_path, "init", "-q", "--object-format=sha256", str(root))
    (root / "a.py").write_text("def f():\n    pass\n")
    git(root, "add", "a.py")
    git(root, "commit", "-qm", "a")
    (root / "a.py").write_text("def f():\n    pass\n\n\ndef g():\n    pass\n")
    before = snapshot(root)
    for args in (("record", "p", "a.py"), ("install",), ("check",), ("status",), ("doctor",)):
        assert_clear_failure(patchguard("-C", root, *args), 2, "SHA-256")
    assert snapshot(root) == before
    assert not (root / ".git" / "hooks" / "post-checkout").exists()


def test_hooks_path_that_is_not_a_directory(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("config", "core.hooksPath", "/dev/null")
    for args in (("install",), ("install", "--force")):
        assert_clear_failure(sample.pg(*args), 2, "not a directory")


def test_record_refuses_a_path_inside_a_submodule(sample: Sample, tmp_path: Path) -> None:
    """As `git add` does, a submodule's file belongs to the submodule."""
    inner = tmp_path / "inner"
    git(tmp_path, "init", "-q", str(inner))
    (inner / "m.py").write_text("def f():\n    pass\n")
    git(inner, "add", "m.py")
    git(inner, "commit", "-qm", "inner")
    sample.git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "vendor/inner"
    )
    sample.git("commit", "-qm", "add a submodule")
    (sample.root / "vendor/inner/m.py").write_text("def f():\n    pass\n\n\ndef g():\n    pass\n")
    result = sample.pg("record", "p", "vendor/inner/m.py")
    assert_clear_failure(result, 2, "is in submodule vendor/inner")
    assert not locate(sample.root).manifest_path.exists()


def test_absolute_paths_through_a_symlinked_checkout_resolve(
    sample: Sample, tmp_path: Path
) -> None:
    link = tmp_path / "via-link"
    link.symlink_to(sample.root)
    sample_repo.add_eagle3_methods(sample.root)
    result = patchguard("-C", link, "record", "eagle3", str(link / KIMI))
    assert result.exit_code == 0, result.stderr
    assert f"  {KIMI}" in result.output


def test_sparse_checkout_is_reported_as_such(sample: Sample) -> None:
    """A guarded file outside the sparse cone; record and stamp ignore such files."""
    sample.record_eagle3()
    sample.git("stash")
    sample.git("sparse-checkout", "set", "python/sglang/srt/distributed")
    check = sample.pg("check")
    assert_clear_failure(
        check,
        1,
        "cannot be applied: the sparse checkout leaves this file out",
        "git sparse-checkout add python/sglang/srt/models",
    )
    assert "check out a commit" not in check.stderr
    other = sample.root / "python/sglang/srt/distributed/parallel_state.py"
    other.write_text(other.read_text() + "EXTRA = 1\n")
    assert json.loads(sample.pg("stamp").output)["dirty"] == [
        "python/sglang/srt/distributed/parallel_state.py"
    ]
    recorded = sample.pg("record", "extra")
    assert recorded.exit_code == 0, recorded.stderr
    assert "parallel_state.py" in recorded.output
    sample.git("sparse-checkout", "add", "python/sglang/srt/models")  # the advice
    assert sample.pg("apply").exit_code == 0
    assert sample.pg("check").exit_code == 0


def test_non_utf8_tracked_file_name(sample: Sample) -> None:
    """Git allows any bytes in a name; patchguard says no in one line."""
    name = os.path.join(os.fsencode(sample.root), b"python", b"caf\xe9.py")
    with open(name, "wb") as handle:
        handle.write(b"def f():\n    pass\n")
    sample.git("add", "-A")
    sample.git("commit", "-qm", "a latin-1 name")
    with open(name, "ab") as handle:
        handle.write(b"\n\ndef g():\n    pass\n")
    assert_clear_failure(sample.pg("record", "p"), 2, "caf\\xe9.py is not a UTF-8 file name")
    assert not locate(sample.root).manifest_path.exists()
    sample.record_eagle3()  # naming other paths still works
    assert sample.pg("check").exit_code == 0


def _damaged_bundle(sample: Sample, tmp_path: Path, kind: str) -> Path:
    """A bundle as a broken transfer or a hostile sender could leave it."""
    bundle = tmp_path / f"{kind}.json"
    if kind == "non-utf8":
        bundle.write_bytes(b'{"format": "patchguard.bundle", "note": "\xff\xfe"}')
    elif kind == "not-base64":
        data = json.loads(sample.pg("export").stdout)
        data["blobs"] = {oid: "!!not base64**" for oid in data["blobs"]}
        bundle.write_text(json.dumps(data))
    else:
        bundle.write_text("[" * 100_000 + "]" * 100_000)
    return bundle


@pytest.mark.parametrize(
    ("kind", "needle"),
    [
        ("non-utf8", "not valid JSON ('utf-8' codec"),
        ("not-base64", "is not base64"),
        ("nested", "nested too deeply"),
    ],
)
def test_a_damaged_bundle_is_refused_in_one_line(
    sample: Sample, tmp_path: Path, kind: str, needle: str
) -> None:
    sample.record_eagle3()
    bundle = _damaged_bundle(sample, tmp_path, kind)
    before = snapshot(sample.root)
    result = sample.pg("import", bundle)
    assert_clear_failure(result, 2, needle)
    assert len(result.stderr.strip().splitlines()) == 1
    assert snapshot(sample.root) == before


def test_stamp_diff_of_a_file_that_is_not_utf8(sample: Sample, tmp_path: Path) -> None:
    sample.record_eagle3()
    noise = tmp_path / "noise.jsonl"
    noise.write_bytes(b"\xff\xfe\x00binary log\n" + b"[" * 100_000 + b"\n")
    assert_clear_failure(sample.pg("stamp", "--diff", noise, noise), 2, "holds no patchguard stamp")
    results = tmp_path / "results.jsonl"  # a stamp among a log's bytes is still found
    results.write_bytes(b"\xff log line\n" + sample.pg("stamp").stdout.encode())
    same = sample.pg("stamp", "--diff", results, results)
    assert same.exit_code == 0, same.output
    assert same.output.startswith("same code")


def _pg_with(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["patchguard", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_git_dir_naming_another_repository_is_refused(
    sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """patchguard read the checkout it stood in while its git commands used GIT_DIR's."""
    sample.record_eagle3()
    sample.git("stash")
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", str(other))
    before = snapshot(sample.root)
    for variables in (
        {"GIT_DIR": str(other / ".git")},
        {"GIT_WORK_TREE": str(other)},
        {"GIT_WORK_TREE": str(sample.root / "python")},  # not the top: git's top is elsewhere
    ):
        for args in (("apply",), ("status",), ("check",)):
            result = _pg_with({**clean_env, **variables}, sample.root, *args)
            said = f"{variables} {args}: {result.stderr}"
            assert result.returncode == 2, said
            assert "Traceback" not in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1, said
            assert "does not name one checkout" in result.stderr, said
    assert snapshot(sample.root) == before


def test_git_dir_and_work_tree_of_the_checkout_are_honoured(
    sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """As git reads them: relative to the current directory, which may lie outside the tree."""
    sample.record_eagle3()
    sample.git("stash")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**clean_env, "GIT_DIR": "../sglang/.git", "GIT_WORK_TREE": "../sglang"}
    applied = _pg_with(env, elsewhere, "apply")
    assert applied.returncode == 0, applied.stderr
    assert "eagle3: unapplied -> applied" in applied.stdout
    assert _pg_with(env, elsewhere, "check").returncode == 0
    at_top = _pg_with({**clean_env, "GIT_DIR": ".git"}, sample.root, "status")
    assert at_top.returncode == 0, at_top.stderr
    assert "eagle3: applied" in at_top.stdout


def test_hooks_in_a_linked_worktree_run_with_gits_own_git_dir(
    sample: Sample, tmp_path: Path
) -> None:
    """git sets GIT_DIR (absolute) for the hooks of a linked worktree: they keep working."""
    sample.record_eagle3()
    assert sample.pg("install").exit_code == 0
    tree = tmp_path / "linked"
    sample.git("worktree", "add", "-q", str(tree), "old")
    git(tree, "stash", "-q")
    moved = git(tree, "checkout", "-q", "-b", "mine", "main", check=False)
    assert moved.returncode == 0, moved.stderr
    assert "re-applied eagle3" in moved.stderr
    assert "does not name one checkout" not in moved.stderr
