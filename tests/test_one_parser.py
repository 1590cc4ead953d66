"""One way into the CLI: click parses every command. guard.entry answers `check` and
`check -q/--quiet` (with -C DIR) from the verified cache, and hands everything else, a miss
included, to click; the exit-code contract is guard.errors.handled's alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import Sample
from helpers import modules_loaded

from guard.cli.app import COMMANDS

SCRIPT = Path(sys.executable).parent / "patchguard"


def console(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it."""
    return subprocess.run(
        [str(SCRIPT), *args], cwd=root, env=env, capture_output=True, text=True, check=False
    )


def test_every_command_is_parsed_by_click(sample: Sample, clean_env: dict[str, str]) -> None:
    """Each command's --help is click's, and a mistyped option click's usage error (exit 2),
    the commands that had a second, hand-written way in included."""
    for name in sorted(COMMANDS):
        helped = console(sample.root, clean_env, name, "--help")
        assert helped.returncode == 0, (name, helped.stderr)
        assert helped.stdout.startswith(f"Usage: patchguard {name} "), (name, helped.stdout)
    for name in ("status", "list", "show", "log", "stamp", "apply", "check"):
        wrong = console(sample.root, clean_env, name, "--no-such-option")
        assert wrong.returncode == 2, (name, wrong.stderr)
        assert f"Usage: patchguard {name} " in wrong.stderr
        assert "Error: No such option '--no-such-option'" in wrong.stderr, wrong.stderr


CLICKS = [
    ("status",),
    ("list",),
    ("show", "eagle3"),
    ("log",),
    ("stamp",),
    ("apply",),
    ("check", "--json"),
    ("check", "-q", "--json"),
    ("-C", ".", "-C", ".", "check", "-q"),
    ("check", "-C", ".", "-C", ".", "-q"),
    ("hook", "--pre-commit", "post-merge"),
]
ENTRY = [
    ("check",),
    ("check", "-q"),
    ("check", "--quiet"),
    ("-C", ".", "check", "--quiet"),
    ("check", "-q", "-C", "."),
    ("-C", ".", "check", "-C", ".", "-q"),
    ("hook", "post-checkout", "0" * 40, "0" * 40, "1"),
    ("hook", "post-merge", "0"),
]


def test_only_the_entry_forms_answer_verified_content_without_click(sample: Sample) -> None:
    """On verified content, `check [-q] [-C DIR]` and the re-applying hooks pass without
    click (or any assessment); every other form runs through click."""
    sample.record_eagle3()
    assert sample.pg("check", "--quiet").exit_code == 0
    for args in CLICKS:
        assert modules_loaded(sample.root, ["click"], *args) == ["click"], args
    for args in ENTRY:
        assert modules_loaded(sample.root, ["click", "guard.tree.assess"], *args) == [], args
    # The installed hooks' own forms never load click, verified or not: a re-apply pays only
    # for its own work (guard.cli.hookrun.run_hook, which the hidden click command calls too).
    assert modules_loaded(sample.root, ["click"], "hook", "post-commit") == []


def test_a_check_form_that_misses_is_clicks(sample: Sample, clean_env: dict[str, str]) -> None:
    """Not verified: the check runs in full, and a -C naming a file is click's usage error."""
    sample.record_eagle3()
    sample.git("checkout", "--", sample.kimi.relative_to(sample.root).as_posix())
    failed = console(sample.root, clean_env, "check", "-q")
    assert failed.returncode == 1 and "guard FAILED" in failed.stderr
    (sample.root / "a-file").write_text("")
    not_a_dir = console(sample.root, clean_env, "check", "-C", "a-file")
    assert not_a_dir.returncode == 2
    assert "Usage: patchguard check" in not_a_dir.stderr and "is a file" in not_a_dir.stderr


def test_the_commands_answer_the_content_as_it_is(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """No answer is kept: list, show and log say the recording as it is now; log words its
    times in the local time of each run; a patch committed in HEAD is said while it is."""
    sample.record_eagle3()
    assert "EAGLE-3 delegation" in console(sample.root, clean_env, "list").stdout
    assert sample.pg("record", "eagle3", "-m", "another description").exit_code == 0
    for args in (("list",), ("show", "eagle3")):
        said = console(sample.root, clean_env, *args).stdout
        assert "another description" in said and "EAGLE-3 delegation" not in said, args
    log = console(sample.root, {**clean_env, "TZ": "Asia/Kolkata"}, "log", "--json").stdout
    assert json.loads(log)["changes"][0]["time"].endswith("+05:30")
    assert sample.pg("undo").exit_code == 0
    assert "EAGLE-3 delegation" in console(sample.root, clean_env, "list").stdout
    sample.git("commit", "-qam", "wip")  # the slip: git commit -a swept the patch in
    assert sample.pg("check", "--quiet").exit_code == 0
    status = console(sample.root, clean_env, "status")
    assert "the patch is committed in HEAD" in status.stdout, status.stdout
    sample.git("commit", "-q", "--allow-empty", "-m", "next")
    status = console(sample.root, clean_env, "status")
    assert status.returncode == 0 and "committed in HEAD" not in status.stdout, status.stdout


def test_a_killed_writer_is_said_by_status_until_it_is_put_back(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    assert sample.pg("check", "--quiet").exit_code == 0
    sample.git("checkout", "--", sample.kimi.relative_to(sample.root).as_posix())
    killed = console(
        sample.root, {**clean_env, "PATCHGUARD_KILL_AT": "journal-first-file"}, "apply"
    )
    assert killed.returncode == -9
    for _ in range(2):
        said = console(sample.root, clean_env, "status")
        assert "interrupted apply" in said.stderr, said.stderr
    assert console(sample.root, clean_env, "apply").returncode == 0
    assert "interrupted" not in console(sample.root, clean_env, "status").stderr


def test_a_hook_says_which_hook_failed(tmp_path: Path, clean_env: dict[str, str]) -> None:
    """The hook's error goes through the one contract, its line naming the hook."""
    outside = console(
        tmp_path, {**clean_env, "GIT_CEILING_DIRECTORIES": str(tmp_path)}, "hook", "post-commit"
    )
    assert outside.returncode == 2
    assert outside.stderr.startswith("patchguard: post-commit hook: "), outside.stderr
    assert len(outside.stderr.splitlines()) == 1
