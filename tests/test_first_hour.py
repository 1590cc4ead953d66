"""What a new user trips over in the first hour (issue: first hour): each item has a test here."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sample_repo
from conftest import ROOT, Sample
from helpers import subcommands

KIMI = sample_repo.KIMI
CLASS = sample_repo.CLASS

ARGS_PRINTER = "import sys; print(sys.argv[1:])"


def pg_process(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["patchguard", *map(str, args)], env=env, capture_output=True, text=True
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture
def bench(sample: Sample, tmp_path: Path) -> Path:
    sample.record_eagle3()
    script = tmp_path / "bench.py"
    script.write_text(ARGS_PRINTER + "\n")
    return script


# --- 1. run stops reading its own options at the command ----------------------------------------


@pytest.mark.parametrize(
    "prefix",
    [(), ("--",), ("env", "FOO=1"), ("nice", "-n", "5")],
    ids=["plain", "dashdash", "env", "nice"],
)
def test_options_after_the_command_are_the_commands(
    sample: Sample, bench: Path, clean_env: dict[str, str], prefix: tuple[str, ...]
) -> None:
    result = pg_process(
        clean_env,
        "-C",
        sample.root,
        "run",
        *prefix,
        sys.executable,
        bench,
        "--apply",
        "x",
        "--help",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['--apply', 'x', '--help']"


# --- 2. --import checks the interpreter the command will use -------------------------------------


@pytest.fixture
def other_venv(sample: Sample, tmp_path: Path) -> Path:
    """Another interpreter, which (unlike patchguard's) imports sglang from the checkout."""
    venv = tmp_path / "other-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "sglang-checkout.pth").write_text(str(sample.root / "python") + "\n")
    return venv / "bin" / "python"


def test_import_is_checked_with_the_commands_interpreter(
    sample: Sample, bench: Path, other_venv: Path, clean_env: dict[str, str]
) -> None:
    result = pg_process(
        clean_env, "-C", sample.root, "run", "--import", "sglang", "--",
        other_venv, bench, "--apply", "x",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['--apply', 'x']"


def test_import_follows_a_scripts_shebang(
    sample: Sample, tmp_path: Path, other_venv: Path, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    script = tmp_path / "bench-script"
    script.write_text(f"#!{other_venv}\n{ARGS_PRINTER}\n")
    script.chmod(0o755)
    result = pg_process(clean_env, "-C", sample.root, "run", "--import", "sglang", script, "-v")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['-v']"


def test_import_failure_names_the_interpreter_and_the_flag(
    sample: Sample, bench: Path, clean_env: dict[str, str]
) -> None:
    result = pg_process(
        clean_env, "-C", sample.root, "run", "--import", "sglang", sys.executable, bench
    )
    assert result.returncode == 1
    assert f"{sys.executable} cannot import sglang at all" in result.stderr
    assert "--python PATH" in result.stderr
    assert "command NOT run" in result.stderr


# --- 5. -h everywhere; show --------------------------------------------------------------------


def test_dash_h_works_for_every_command() -> None:
    from click.testing import CliRunner

    from guard.cli.app import cli

    def helped(*args: str) -> str:
        result = CliRunner().invoke(cli, [*args, "-h"], prog_name="patchguard")
        assert result.exit_code == 0, (args, result.output)
        return result.output

    assert "Usage: patchguard [OPTIONS] COMMAND" in helped()
    for name in subcommands(cli):
        assert f"Usage: patchguard {name}" in helped(name)
    assert "Usage: patchguard bisect run" in helped("bisect", "run")


def test_show_prints_the_patch_plain_when_piped(sample: Sample) -> None:
    sample.record_eagle3()
    result = sample.pg("show", "eagle3")
    assert result.exit_code == 0
    assert "patch eagle3\n    EAGLE-3 delegation" in result.output
    assert f"base:     {sample.commits['main']}" in result.output
    assert f"file:     {KIMI}" in result.output
    assert f"requires: {KIMI}::{CLASS}.get_embed_and_head" in result.output
    assert "+    def set_embed_and_head(self, embed, head):" in result.output
    assert "\x1b[" not in result.output
    assert sample.pg("show", "nope").exit_code == 2


def test_show_is_coloured_and_paged_on_a_terminal(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    env = {**clean_env, "PAGER": "cat", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    main, secondary = pty.openpty()
    child = subprocess.Popen(
        ["patchguard", "-C", str(sample.root), "show"],
        stdin=secondary,
        stdout=secondary,
        env=env,
    )
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the terminal closed with the last writer
            break
        if not chunk:
            break
        shown += chunk
    assert child.wait(timeout=30) == 0
    os.close(main)
    assert b"\x1b[32m+    def get_embed_and_head(self):" in shown  # green, through the pager


# --- 7. duplicate record, undo says what it undid -------------------------------------------------


def test_record_warns_when_the_same_change_is_already_a_patch(sample: Sample) -> None:
    sample.record_eagle3()
    twin = sample.pg("record", "eagle3-copy", KIMI)  # stacks on eagle3: nothing new
    assert twin.exit_code == 2
    assert "holds no change beyond patch eagle3, already recorded on it" in twin.stderr
    assert "eagle3-copy" not in sample.pg("list").output


def test_undo_names_each_operation_and_lists_the_journal(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    assert sample.pg("apply").exit_code == 0
    assert sample.pg("unapply").exit_code == 0
    listed = sample.pg("undo", "--list").output.splitlines()
    assert listed[0].startswith("0. the unapply of eagle3 at ")
    assert listed[1].startswith("1. the apply of eagle3 at ")
    first = sample.pg("undo")
    assert first.output.startswith("undid the unapply of eagle3 at ")
    second = sample.pg("undo")
    assert second.output.startswith("undid the apply of eagle3 at ")
    assert KIMI in second.output
    # what is left is the change to the patches: the record itself, also undoable
    assert sample.pg("undo", "--list").output.startswith(f"0. recorded eagle3 ({KIMI}) at ")


# --- 8. a patch swept into HEAD's commit ---------------------------------------------------------


def test_status_says_when_the_patch_was_committed_in_head(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("commit", "-qam", "my experiment")
    status = sample.pg("status")
    head = sample.git("log", "-1", "--format=%h my experiment").stdout.strip()
    assert f"the patch is committed in HEAD: {head}" in status.output
    undo_line = status.output.splitlines()[-1].strip()
    assert undo_line == f"git reset -q --soft HEAD~1 && git restore --staged {KIMI}"
    subprocess.run(["sh", "-c", undo_line], cwd=sample.root, check=True)
    assert sample.git("rev-parse", "HEAD").stdout.strip() == sample.commits["main"]
    assert sample.pg("check").exit_code == 0  # the patch is back in the working tree only


@pytest.mark.parametrize(
    "publish",
    [("tag", "v0.5.10"), ("update-ref", "refs/remotes/origin/main", "HEAD")],
    ids=["tagged", "on-a-remote-branch"],
)
def test_an_upstream_commit_with_the_patch_as_is_is_not_called_committed(
    sample: Sample, publish: tuple[str, ...]
) -> None:
    """A release that absorbed the methods with the same text is upstream's: no
    advice to amend it, the state says what it is."""
    sample.record_eagle3()
    sample.git("commit", "-qam", "Release v0.5.10")
    sample.git(*publish)
    status = sample.pg("status")
    assert status.exit_code == 0
    assert "committed in HEAD" not in status.output
    assert "git reset" not in status.output
    assert f"{KIMI}: upstream (HEAD already contains this change)" in status.output
    sample.git("commit", "-q", "--allow-empty", "-m", "mine, on top of the release")
    assert "committed in HEAD" not in sample.pg("status").output  # HEAD did not bring it


def test_upstream_absorbing_the_patch_is_not_called_committed(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    sample.git("checkout", "-q", "upstream-has-methods")
    assert "committed in HEAD" not in sample.pg("status").output


# --- 9. hooks advice ----------------------------------------------------------------------------


def test_record_and_check_mention_install_until_hooks_are_installed(sample: Sample) -> None:
    recorded = sample.record_eagle3()
    assert "run: patchguard install" in recorded.stderr
    sample.git("stash")
    check = sample.pg("check")
    assert "hooks are not installed" in check.stderr
    sample.pg("install")
    assert "hooks are not installed" not in sample.pg("check").stderr


# --- 10. no Python None in human output ----------------------------------------------------------


def test_stamp_diff_says_detached_not_none(sample: Sample, tmp_path: Path) -> None:
    sample.record_eagle3()
    before = tmp_path / "before.jsonl"
    before.write_text(sample.pg("stamp").output)
    sample.git("stash")
    sample.git("checkout", "-q", "--detach")
    after = tmp_path / "after.jsonl"
    after.write_text(sample.pg("stamp").output)
    diff = sample.pg("stamp", "--diff", before, after).output
    assert "branch: main -> (detached HEAD)" in diff
    assert "None" not in diff


def test_no_python_none_in_human_output(sample: Sample, tmp_path: Path) -> None:
    sample.record_eagle3()
    sample.git("stash")
    sample.git("checkout", "-q", "--detach")
    stamp = tmp_path / "stamp.jsonl"
    stamp.write_text(sample.pg("stamp").output)
    for args in (
        ("status",),
        ("check",),
        ("list",),  # not `show`: its diff is the user's code, where None is legitimate
        ("apply",),
        ("undo", "--list"),
        ("stamp", "--diff", str(stamp), str(stamp)),
    ):
        result = sample.pg(*args)
        assert "None" not in result.output + result.stderr, args


def test_pre_commit_docs_pin_something_that_exists() -> None:
    """docs/hooks.md once told users `rev: v0.1.0`, a tag that never existed."""
    text = (ROOT / "docs" / "hooks.md").read_text()
    revs = re.findall(r"^\s*rev:\s*(\S+)", text, flags=re.M)
    assert revs
    for rev in revs:
        placeholder = rev.startswith("<")
        exists = (
            subprocess.run(
                ["git", "rev-parse", "--verify", "-q", f"{rev}^{{commit}}"], cwd=ROOT
            ).returncode
            == 0
        )
        assert placeholder or exists, rev
    assert "git ls-remote" in text


def test_a_manifest_that_guards_nothing_never_passes(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """Nothing guarded is not green: after dropping everything, no gate passes."""
    sample.record_eagle3()
    assert sample.pg("drop", "eagle3").exit_code == 0
    check = sample.pg("check")
    assert check.exit_code == 2
    assert "guards nothing" in check.stderr
    marker = sample.root.parent / "ran"
    run = pg_process(clean_env, "-C", sample.root, "run", "touch", marker)
    assert run.returncode == 2
    assert not marker.exists()
    assert pg_process(clean_env, "-C", sample.root, "check", "-q").returncode == 2
    sample.pg("install")
    sample.git("checkout", "-q", "--", KIMI)  # drop left the edit in the tree
    moved = sample.git("checkout", "-q", "old")  # the hooks: nothing to guard, nothing said
    assert moved.returncode == 0
    assert moved.stderr == ""
