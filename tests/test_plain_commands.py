"""The plain forms of status, list, show, log, stamp and apply run without click (issue 30):
the installed command must print what the click command prints, byte for byte, exit alike, and
import no click; status and apply answer verified content as they answered it in full.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Sample, patchguard
from helpers import modules_loaded

from guard.store.fastpath import ANSWERS_FILE, CACHE_DIR_NAME, LOGGED_FILE

FORMS = [
    ("status",),
    ("status", "--json"),
    ("status", "eagle3"),
    ("status", "nope"),
    ("list",),
    ("list", "--json"),
    ("show", "eagle3"),
    ("show",),
    ("show", "eagle3@{0}"),
    ("show", "nope"),
    ("log",),
    ("log", "--json"),
    ("log", "eagle3"),
    ("log", "nope"),
    ("apply",),
    ("apply", "--json"),
    ("apply", "nope"),
    ("status", "-C", "."),
]

HEAVY = (
    "click",
    "pygit2",
    "pydantic",
    "guard.tree.assess",
    "guard.cli.app",
    "guard.store.manifest",
)


def console(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it (stdout a pipe: the plain path)."""
    script = Path(sys.executable).parent / "patchguard"
    return subprocess.run(
        [str(script), *args], cwd=root, env=env, capture_output=True, text=True, check=False
    )


def assert_same(sample: Sample, env: dict[str, str], args: tuple[str, ...]) -> None:
    plain = console(sample.root, env, *args)
    clicked = patchguard("-C", sample.root, *args)
    assert "Traceback" not in plain.stderr, plain.stderr
    assert (plain.stdout, plain.stderr, plain.returncode) == (
        clicked.stdout,
        clicked.stderr,
        clicked.exit_code,
    ), args


def loaded(sample: Sample, *args: str) -> list[str]:
    """Which of HEAVY `patchguard ARGS` imports (sorted)."""
    return modules_loaded(sample.root, HEAVY, *args)


def forget_answers(sample: Sample) -> None:
    (sample.root / ".git" / CACHE_DIR_NAME / ANSWERS_FILE).unlink(missing_ok=True)


@pytest.mark.parametrize("verified", [False, True])
def test_plain_forms_print_what_click_prints(
    sample: Sample, clean_env: dict[str, str], verified: bool
) -> None:
    sample.record_eagle3()
    if verified:
        assert sample.pg("check", "--quiet").exit_code == 0
    for args in FORMS:
        assert_same(sample, clean_env, args)
    same_path = {**clean_env, "PATH": os.environ["PATH"]}  # the same python3 for both
    stamps = [console(sample.root, same_path, "stamp"), patchguard("-C", sample.root, "stamp")]
    first, second = (json.loads(s.stdout) for s in stamps)
    first.pop("timestamp"), second.pop("timestamp")
    assert first == second and first["ok"] and first["patches"] == {"eagle3": "applied"}


def test_a_recorded_answer_is_the_full_answer(sample: Sample, clean_env: dict[str, str]) -> None:
    sample.record_eagle3()
    assert sample.pg("check", "--quiet").exit_code == 0
    for args in (("status",), ("status", "--json"), ("apply",), ("stamp",)):
        recorded = console(sample.root, clean_env, *args)  # records, or answers from the record
        again = console(sample.root, clean_env, *args)
        forget_answers(sample)
        full = console(sample.root, clean_env, *args)
        outputs = [r.stdout for r in (recorded, again, full)]
        if args == ("stamp",):
            outputs = [json.dumps({**json.loads(o), "timestamp": None}) for o in outputs]
        assert outputs[0] == outputs[1] == outputs[2], args
        assert recorded.returncode == again.returncode == full.returncode == 0
    # Then the content changes: the patch is taken out by hand. No record answers that.
    sample.git("checkout", "--", sample.kimi.relative_to(sample.root).as_posix())
    status = console(sample.root, clean_env, "status")
    assert status.returncode == 1 and "eagle3: unapplied" in status.stdout
    assert_same(sample, clean_env, ("status",))
    applied = console(sample.root, clean_env, "apply")
    assert applied.returncode == 0 and "eagle3: unapplied -> applied" in applied.stdout


def test_a_patch_committed_in_head_is_said_every_time(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """What status says of HEAD's own commit is not in the content's key: never recorded."""
    sample.record_eagle3()
    sample.git("commit", "-qam", "wip")  # the slip: git commit -a swept the patch in
    sample.pg("check", "--quiet")
    for _ in range(2):
        status = console(sample.root, clean_env, "status")
        assert "the patch is committed in HEAD" in status.stdout, status.stdout
    assert_same(sample, clean_env, ("status",))
    # The next commit changes no file: the same content, the same key; but HEAD's own
    # commit no longer brought the patch, so status no longer says so.
    sample.git("commit", "-q", "--allow-empty", "-m", "next")
    status = console(sample.root, clean_env, "status")
    assert status.returncode == 0 and "committed in HEAD" not in status.stdout, status.stdout


def test_plain_forms_import_no_click(sample: Sample) -> None:
    sample.record_eagle3()
    assert sample.pg("check", "--quiet").exit_code == 0
    for args in [f for f in FORMS if "nope" not in f] + [("stamp",)]:
        assert not {"click", "pygit2", "pydantic", "guard.cli.app"} & set(loaded(sample, *args))
    # verified, and answered before: status, apply, list, show, log and stamp read no
    # manifest, nor assess
    for args in (("status",), ("apply",), ("list",), ("show", "eagle3"), ("log",), ("stamp",)):
        assert loaded(sample, *args) == [], args
    # --help, other options and mistakes are click's, as before
    assert "click" in loaded(sample, "status", "--help")
    assert "click" in loaded(sample, "apply", "--dry-run")
    assert "click" in loaded(sample, "list", "extra")


def test_list_and_show_answer_for_the_manifest_as_it_is(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    for args in (("list",), ("show", "eagle3"), ("list",), ("show", "eagle3")):
        assert_same(sample, clean_env, args)
    assert "EAGLE-3 delegation" in console(sample.root, clean_env, "list").stdout
    assert sample.pg("record", "eagle3", "-m", "another description").exit_code == 0
    for args in (("list",), ("show", "eagle3")):
        said = console(sample.root, clean_env, *args).stdout
        assert "another description" in said and "EAGLE-3 delegation" not in said, args
    assert sample.pg("undo").exit_code == 0  # the history's way back: the manifest as it was
    assert "EAGLE-3 delegation" in console(sample.root, clean_env, "list").stdout


def test_log_answers_for_the_history_as_it_is(sample: Sample, clean_env: dict[str, str]) -> None:
    """log's changes are kept by the history's tip; their times are worded in local time on
    every run (another TZ: other hours), and a new change is a new tip."""
    sample.record_eagle3()
    first = console(sample.root, clean_env, "log").stdout
    assert console(sample.root, clean_env, "log").stdout == first
    elsewhere = {**clean_env, "TZ": "Asia/Kolkata"}  # +05:30 all year
    recalled = console(sample.root, elsewhere, "log", "--json").stdout
    (sample.root / ".git" / CACHE_DIR_NAME / LOGGED_FILE).unlink()
    assert console(sample.root, elsewhere, "log", "--json").stdout == recalled
    assert json.loads(recalled)["changes"][0]["time"].endswith("+05:30")
    assert sample.pg("record", "eagle3", "-m", "another description").exit_code == 0
    after = console(sample.root, clean_env, "log").stdout
    assert after.startswith("0. ") and "re-recorded eagle3" in after.splitlines()[0]
    assert_same(sample, clean_env, ("log",))


def test_a_finished_write_keeps_the_answers_and_a_killed_one_is_said(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """Each move of a regression hunt leaves a finished entry in the undo journal: back at
    content seen before, status answers from its record again. A writer killed halfway leaves
    an unfinished one: status then says so, in full, every time until it is put back."""
    sample.record_eagle3()
    assert sample.pg("check", "--quiet").exit_code == 0
    assert console(sample.root, clean_env, "status").returncode == 0  # records the answer
    assert sample.pg("unapply").exit_code == 0 and sample.pg("apply").exit_code == 0
    assert sample.pg("check", "--quiet").exit_code == 0
    assert loaded(sample, "status") == []  # two finished entries more: the record answers
    sample.git("checkout", "--", sample.kimi.relative_to(sample.root).as_posix())
    killed = subprocess.run(
        [str(Path(sys.executable).parent / "patchguard"), "apply"],
        cwd=sample.root,
        env={**clean_env, "PATCHGUARD_KILL_AT": "journal-first-file"},
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -9
    for _ in range(2):
        said = console(sample.root, clean_env, "status")
        assert "interrupted apply" in said.stderr, said.stderr
    assert "guard.tree.assess" in loaded(sample, "status")


# Python's own audit event for every process it starts (no mock: the command runs as it is).
_FIRST_GIT_PROBE = """
import sys
first = []
def started(event, args):
    if event == "subprocess.Popen" and not first:
        loaded = [m for m in ("pathlib", "json", "guard.git.repo") if m in sys.modules]
        first.append((list(args[1]), loaded))
sys.addaudithook(started)
sys.argv = ["patchguard", "stamp"]
from guard.entry import main
try:
    main()
except SystemExit:
    pass
import json
print("first:", json.dumps(first[0]), file=sys.stderr)
"""


def test_stamp_starts_git_status_before_it_imports_the_rest(sample: Sample) -> None:
    """`git status` is most of a stamp's own time: it runs while pathlib, json and the
    repository's module load (guard.ops.provenance.stamp_at), not after them."""
    result = subprocess.run(
        [sys.executable, "-c", _FIRST_GIT_PROBE], cwd=sample.root, capture_output=True, text=True
    )
    assert "Traceback" not in result.stderr, result.stderr
    line = next(line for line in result.stderr.splitlines() if line.startswith("first:"))
    command, loaded = json.loads(line.removeprefix("first:"))
    assert command[:3] == ["git", "--no-optional-locks", "status"]
    assert loaded == []
    assert json.loads(result.stdout)["format"] == "patchguard.stamp/1"
