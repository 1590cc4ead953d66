"""Pre-flight for benchmarks: run, stamp, --import, the Python API, export/import, --json."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample, git, patchguard

import guard
from guard import GuardError, require
from guard.git.gitdir import locate


def pg_process(
    env: dict[str, str], *args: str | Path, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )


def test_run_passes_arguments_and_exit_status_through(sample: Sample, clean_env) -> None:
    sample.record_eagle3()
    script = "import sys; print(sys.argv[1:]); sys.exit(7)"
    result = pg_process(
        clean_env, "-C", sample.root, "run", "--", sys.executable, "-c", script, "a", "b c", "--x"
    )
    assert result.returncode == 7
    assert result.stdout.strip() == "['a', 'b c', '--x']"


def test_run_does_not_start_the_command_when_red(sample: Sample, clean_env, tmp_path) -> None:
    sample.record_eagle3()
    sample.git("stash")
    marker = tmp_path / "started"
    result = pg_process(clean_env, "-C", sample.root, "run", "--", "touch", str(marker))
    assert result.returncode == 1
    assert not marker.exists()
    assert "command NOT run" in result.stderr
    assert "patchguard apply eagle3" in result.stderr
    applied = pg_process(clean_env, "-C", sample.root, "run", "--apply", "--", "touch", str(marker))
    assert applied.returncode == 0
    assert marker.exists()


def test_set_e_script_prints_ok_only_when_green(sample: Sample, clean_env) -> None:
    sample.record_eagle3()
    script = f"set -e\ncd '{sample.root}'\npatchguard run -- echo ok\necho after\n"
    green = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=clean_env)
    assert green.stdout == "ok\nafter\n"
    sample.git("stash")
    red = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=clean_env)
    assert red.returncode == 1
    assert red.stdout == ""


def test_stamp_upstream_and_dirty_as_git_says(tmp_path: Path, clean_env) -> None:
    """The stamp reads the upstream from git status's headers: held to git's own for-each-ref
    (ahead, behind, gone) and `git status --porcelain=v1` (a conflicted path with a space)."""
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    git(tmp_path, "init", "-q", "-b", "main", str(origin))
    for message in ("a", "b"):
        git(origin, "commit", "-q", "--allow-empty", "-m", message)
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    git(clone, "reset", "-q", "--hard", "HEAD~1")
    for message in ("c", "d", "e"):
        git(clone, "commit", "-q", "--allow-empty", "-m", message)

    def stamped() -> dict[str, object]:
        return json.loads(pg_process(clean_env, "-C", clone, "stamp").stdout)

    track = git(
        clone, "for-each-ref", "--format=%(upstream:short) %(upstream:track)", "refs/heads/main"
    )
    assert track.stdout.strip() == "origin/main [ahead 3, behind 1]"
    assert stamped()["upstream"] == {"ref": "origin/main", "ahead": 3, "behind": 1}
    git(clone, "checkout", "-q", "-b", "side")
    (clone / "a b.txt").write_text("side\n")
    git(clone, "add", ".")
    git(clone, "commit", "-qm", "side")
    git(clone, "checkout", "-q", "main")
    (clone / "a b.txt").write_text("main\n")
    git(clone, "add", ".")
    git(clone, "commit", "-qm", "main")
    git(clone, "merge", "-q", "side", check=False)
    assert git(clone, "status", "--porcelain=v1").stdout == 'AA "a b.txt"\n'
    assert stamped()["dirty"] == ["a b.txt"]
    git(clone, "update-ref", "-d", "refs/remotes/origin/main")
    track = git(clone, "for-each-ref", "--format=%(upstream:track)", "refs/heads/main")
    assert track.stdout.strip() == "[gone]"
    assert stamped()["upstream"] is None


def test_stamp_of_a_checkout_with_a_file_name_that_is_not_utf8(tmp_path: Path, clean_env) -> None:
    """git prints a path's bytes as they are (`-z`); a changed file whose name is not UTF-8
    is named in the stamp as os.fsdecode names it, not an internal error."""
    name = os.fsdecode(b"caf\xe9.txt")
    git(tmp_path, "init", "-q")
    (tmp_path / name).write_text("one\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "a file")
    (tmp_path / name).write_text("two\n")
    stamped = pg_process(clean_env, "-C", tmp_path, "stamp")
    assert stamped.returncode == 0, stamped.stderr
    assert json.loads(stamped.stdout)["dirty"] == [name]


def test_stamp_diff_names_moved_head_and_lost_patch(sample: Sample, clean_env, tmp_path) -> None:
    sample.record_eagle3()
    before = tmp_path / "before.jsonl"
    before.write_text(pg_process(clean_env, "-C", sample.root, "stamp").stdout)
    stamp = json.loads(before.read_text())
    assert stamp["patches"] == {"eagle3": "applied"}
    assert stamp["branch"] == "main"
    assert set(stamp) >= {"repository", "head", "upstream", "dirty", "files", "symbols"}
    sample.git("stash")
    for number in range(7):
        state = sample.root / "python/sglang/srt/distributed/parallel_state.py"
        state.write_text(state.read_text() + f"X{number} = {number}\n")
        sample.git("commit", "-qam", f"upstream {number}")
    after = pg_process(clean_env, "-C", sample.root, "stamp").stdout
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "guard",
            "-C",
            str(sample.root),
            "stamp",
            "--diff",
            str(before),
            "-",
        ],
        input=after,
        capture_output=True,
        text=True,
        env=clean_env,
    )
    assert result.returncode == 0, result.stderr
    assert "HEAD moved 7 commits (" in result.stdout
    assert "1 file touched under python/sglang/srt/distributed/" in result.stdout
    assert "patch eagle3: applied -> unapplied" in result.stdout


@pytest.fixture
def importable(sample: Sample, tmp_path: Path) -> tuple[Sample, Path]:
    """The sample's package, importable from python/, whose __init__ must never run."""
    marker = tmp_path / "package-code-ran"
    init = sample.root / "python/sglang/__init__.py"
    # heavy as sglang's own: it imports what is not installed here (run, it would fail); a
    # package that surely fails on import is a guard that cannot hold
    init.write_text(f"open({str(marker)!r}, 'w').close()\nimport torch_is_not_here\n")
    sample.git("commit", "-qam", "heavy __init__")
    stale = tmp_path / "site-packages" / "sglang"
    stale.mkdir(parents=True)
    (stale / "__init__.py").write_text("")
    return sample, marker


def test_import_check_accepts_the_checkout(importable, clean_env) -> None:
    sample, marker = importable
    sample.record_eagle3()
    env = {**clean_env, "PYTHONPATH": str(sample.root / "python")}
    result = pg_process(env, "-C", sample.root, "check", "--import", "sglang.srt.models")
    assert result.returncode == 0, result.stderr
    assert not marker.exists()


def test_import_check_catches_another_copy_and_names_both_paths(
    importable, clean_env, tmp_path
) -> None:
    sample, marker = importable
    sample.record_eagle3()
    env = {**clean_env, "PYTHONPATH": str(tmp_path / "site-packages")}
    result = pg_process(env, "-C", sample.root, "check", "--import", "sglang")
    assert result.returncode == 1
    assert str(tmp_path / "site-packages" / "sglang") in result.stderr
    assert str(sample.root) in result.stderr
    run = pg_process(env, "-C", sample.root, "run", "--import", "sglang", "--", "true")
    assert run.returncode == 1
    assert not marker.exists()


def test_python_api_returns_report_or_raises_listing_everything(sample: Sample) -> None:
    assert guard.__all__ == ["GuardError", "require"]
    sample.record_eagle3()
    assert require(sample.root).ok
    sample.git("stash")
    with pytest.raises(GuardError) as caught:
        require(sample.root)
    assert len(caught.value.problems) == 1
    assert "get_embed_and_head" in str(caught.value)
    assert require(sample.root, apply=True).ok
    with pytest.raises(GuardError) as not_a_repo:
        require(sample.root.parent)
    assert not_a_repo.value.exit_code == 2


def test_export_import_round_trip_into_a_fresh_clone(sample: Sample, tmp_path: Path) -> None:
    sample.record_eagle3()
    assert sample.pg("require", f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward").exit_code == 0
    bundle = tmp_path / "eagle3.bundle.json"
    assert sample.pg("export", "-o", str(bundle)).exit_code == 0
    clone = tmp_path / "node2"
    git(tmp_path, "clone", "-q", str(sample.root), str(clone))
    imported = patchguard("-C", clone, "import", bundle)
    assert imported.exit_code == 0, imported.stderr
    assert "imported patch eagle3" in imported.output
    assert patchguard("-C", clone, "check").exit_code == 1
    assert patchguard("-C", clone, "apply").exit_code == 0
    assert patchguard("-C", clone, "check").exit_code == 0
    assert (clone / sample_repo.KIMI).read_bytes() == sample.kimi.read_bytes()


def test_a_bundle_from_a_crlf_checkout_applies_in_an_lf_one(sample: Sample, tmp_path: Path) -> None:
    """Patches are stored as git stores files, so line endings do not travel with them."""
    sample.git("config", "core.autocrlf", "true")
    sample.kimi.unlink()
    sample.git("checkout", "--", sample_repo.KIMI)
    assert b"\r\n" in sample.kimi.read_bytes()
    methods = sample_repo.EAGLE3_METHODS.replace("\n", "\r\n").encode()
    sample.kimi.write_bytes(
        sample.kimi.read_bytes().replace(b"\r\n\r\nEntryClass", methods + b"\r\n\r\nEntryClass")
    )
    assert sample.pg("record", "eagle3", sample_repo.KIMI).exit_code == 0
    bundle = tmp_path / "eagle3.bundle.json"
    assert sample.pg("export", "-o", str(bundle)).exit_code == 0
    clone = tmp_path / "lf-node"
    git(tmp_path, "clone", "-q", str(sample.root), str(clone))
    assert patchguard("-C", clone, "import", bundle).exit_code == 0
    assert patchguard("-C", clone, "apply").exit_code == 0
    assert (clone / sample_repo.KIMI).read_bytes() == sample.kimi.read_bytes().replace(
        b"\r\n", b"\n"
    )
    assert patchguard("-C", clone, "check").exit_code == 0


def test_import_refuses_a_file_only_git_can_convert_here(sample: Sample, tmp_path: Path) -> None:
    sample.record_eagle3()
    bundle = tmp_path / "eagle3.bundle.json"
    assert sample.pg("export", "-o", str(bundle)).exit_code == 0
    clone = tmp_path / "lfs-node"
    git(tmp_path, "clone", "-q", str(sample.root), str(clone))
    git(clone, "config", "filter.lfs.clean", "cat")
    (clone / ".git" / "info").mkdir(exist_ok=True)
    (clone / ".git" / "info" / "attributes").write_text("*.py filter=lfs\n")
    result = patchguard("-C", clone, "import", bundle)
    assert result.exit_code == 2
    assert "filter driver 'lfs'" in result.stderr and "nothing was imported" in result.stderr
    assert not (clone / ".git" / "patchguard" / "manifest.json").exists()


@pytest.mark.parametrize(
    ("mutate", "complaint"),
    [
        (lambda b: b.replace('"path": "python/', '"path": "../python/'), "path"),
        (lambda b: b.replace('"path": "python/', '"path": "/tmp/python/'), "path"),
        (lambda b: b.replace('"schema_version": 1', '"schema_version": 9', 1), "schema_version 9"),
    ],
)
def test_import_refuses_escaping_paths_and_unknown_versions(
    sample: Sample, tmp_path: Path, mutate, complaint
) -> None:
    sample.record_eagle3()
    bundle = tmp_path / "b.json"
    assert sample.pg("export", "-o", str(bundle)).exit_code == 0
    bundle.write_text(mutate(bundle.read_text()))
    assert sample.pg("drop", "eagle3").exit_code == 0
    result = sample.pg("import", str(bundle))
    assert result.exit_code == 2
    assert complaint in result.stderr
    assert sample.pg("list", "--json").output.count('"name"') == 0


def test_import_refuses_a_path_through_a_symlink_leaving_the_repo(
    sample: Sample, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (sample.root / "linked").symlink_to(outside)
    (outside / "evil.py").write_text("x = 1\n")
    sample.git("add", "linked")
    sample.git("commit", "-qm", "a symlink")
    sample.record_eagle3()
    bundle = tmp_path / "b.json"
    assert sample.pg("export", "-o", str(bundle)).exit_code == 0
    bundle.write_text(
        bundle.read_text().replace(f'"path": "{sample_repo.KIMI}"', '"path": "linked/evil.py"')
    )
    result = sample.pg("import", str(bundle))
    assert result.exit_code == 2
    assert "beyond a symbolic link (linked -> " in result.stderr


def test_every_report_has_json_and_no_colour(sample: Sample) -> None:
    sample.record_eagle3()
    sample.pg("install")
    for args in (
        ("check", "--json"),
        ("status", "--json"),
        ("apply", "--json"),
        ("unapply", "--json", "--dry-run"),
        ("list", "--json"),
        ("doctor", "--json"),
        ("stamp", "--json"),
    ):
        result = sample.pg(*args)
        assert result.exit_code == 0, (args, result.stderr)
        json.loads(result.output)
        assert "\x1b" not in result.output + result.stderr


def test_a_stamp_that_guards_nothing_is_not_ok(sample: Sample, clean_env) -> None:
    """`check` refuses to pass on nothing, so the stamp does not say ok either."""
    unguarded = json.loads(pg_process(clean_env, "-C", sample.root, "stamp").stdout)
    assert unguarded["ok"] is False  # no manifest at all
    assert unguarded["patches"] == {} and unguarded["symbols"] == {}
    sample.record_eagle3()
    assert json.loads(pg_process(clean_env, "-C", sample.root, "stamp").stdout)["ok"] is True
    # manifest.json is only derived from the history ref (a first save killed before writing
    # it): the patches are still recorded and vouched for
    locate(sample.root).manifest_path.unlink()
    derived = json.loads(pg_process(clean_env, "-C", sample.root, "stamp").stdout)
    assert derived["ok"] is True and list(derived["patches"]) == ["eagle3"]
    assert sample.pg("drop", "eagle3").exit_code == 0  # the manifest stays, guarding nothing
    assert pg_process(clean_env, "-C", sample.root, "check").returncode == 2
    dropped = json.loads(pg_process(clean_env, "-C", sample.root, "stamp").stdout)
    assert dropped["ok"] is False


def test_a_check_turns_the_collector_back_on(sample: Sample) -> None:
    """The check runs without the cyclic collector (guard.collector) and turns it back on: a
    process that runs many checks (a hunt) still collects what they leave."""
    sample.record_eagle3()
    assert gc.isenabled()
    assert sample.pg("check", "--json").exit_code == 0
    assert gc.isenabled()
