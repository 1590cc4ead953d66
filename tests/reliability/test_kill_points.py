"""Each writer killed at each step boundary: the next command finishes or undoes it.

A writer is stopped dead by SIGKILL at a named point (guard.git.faults: PATCHGUARD_KILL_AT, set
only here), as `kill -9` or a power cut would stop it. Then the commands a user runs next
(status, check, apply) must read the state forwards: the history ref is the truth, manifest.json
is derived from it again before anything is decided, nothing the user typed is lost (their
newest definition, an edit made after the kill), and `check` agrees with the history. A loop
of real SIGKILLs at random moments gives a second opinion on the re-record.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Callable

import pytest
import sample_repo
from conftest import ROOT, Sample, git
from helpers import JOURNAL_POINTS, STORE_POINTS, pushes_an_update, run_patchguard

from guard.git.faults import KILL_VARIABLE
from guard.git.gitpaths import HISTORY_REF

EXTRA = "\n    def extra_capture(self):\n        return self.language_model\n"
BACKWARDS = ("another patchguard", "earlier version")


def killed(sample: Sample, env: dict[str, str], point: str, *args: str) -> None:
    """Run `patchguard ARGS` and see it die at `point` (not before, not after)."""
    result = subprocess.run(
        ["patchguard", *args],
        cwd=sample.root,
        env={**env, KILL_VARIABLE: point},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == -signal.SIGKILL, (point, args, result.stdout + result.stderr)


def history_manifest(sample: Sample) -> dict[str, object]:
    shown = git(sample.root, "show", f"{HISTORY_REF}:manifest.json")
    return json.loads(shown.stdout)  # type: ignore[no-any-return]


def derived_manifest(sample: Sample) -> dict[str, object]:
    return json.loads((sample.root / ".git/patchguard/manifest.json").read_text())  # type: ignore[no-any-return]


def read_forwards(
    sample: Sample, env: dict[str, str], backwards: tuple[str, ...] = BACKWARDS
) -> str:
    """status, check and apply after a kill: no traceback, no advice that reads the state
    backwards, manifest.json derived from the ref, and check green afterwards."""
    said = ""
    for args in (("status",), ("check",), ("apply",), ("check",)):
        result = run_patchguard(sample.root, env, args, None)
        said += result.stdout + result.stderr
        assert result.returncode in (0, 1), result.stdout + result.stderr
    assert not [phrase for phrase in backwards if phrase in said], said
    assert derived_manifest(sample) == history_manifest(sample)
    assert not (sample.root / ".git/patchguard/transaction").exists()
    run_patchguard(sample.root, env, ("check",), 0)
    return said


def rerecord(sample: Sample, env: dict[str, str], point: str) -> None:
    """The incident's shape: the user adds a method and records again; the kill may come
    on either side of the ref's move, and the newest definition must survive both."""
    sample.record_eagle3()
    text = sample.kimi.read_text()
    sample.kimi.write_text(text.replace("\n\nEntryClass", EXTRA + "\n\nEntryClass"))
    killed(sample, env, point, "record", "eagle3", sample_repo.KIMI)
    read_forwards(sample, env)
    assert "def extra_capture(" in sample.kimi.read_text()
    recorded = json.dumps(history_manifest(sample))
    moved = point != "store-begun"
    assert ("extra_capture" in recorded) == moved, recorded


def require(sample: Sample, env: dict[str, str], point: str) -> None:
    sample.record_eagle3()
    spec = f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward"
    killed(sample, env, point, "require", spec)
    read_forwards(sample, env)
    assert (spec in json.dumps(history_manifest(sample))) == (point != "store-begun")


def drop(sample: Sample, env: dict[str, str], point: str) -> None:
    sample.record_eagle3()
    sample.pg("require", f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward")
    killed(sample, env, point, "drop", "eagle3")
    read_forwards(sample, env)
    names = [p["name"] for p in history_manifest(sample)["patches"]]  # type: ignore[attr-defined]
    assert names == ([] if point != "store-begun" else ["eagle3"])
    assert "def get_embed_and_head(" in sample.kimi.read_text()  # drop leaves the worktree


def undo_rerecord(sample: Sample, env: dict[str, str], point: str) -> None:
    sample.record_eagle3()
    text = sample.kimi.read_text()
    sample.kimi.write_text(text.replace("\n\nEntryClass", EXTRA + "\n\nEntryClass"))
    assert sample.pg("record", "eagle3", sample_repo.KIMI).exit_code == 0
    killed(sample, env, point, "undo")
    # After the undo proper the worktree holds the later recording, which apply brings in
    # line (journaled, undoable); tests/test_first_week.py holds
    # how status words that.
    read_forwards(sample, env, backwards=("another patchguard",))
    recorded = json.dumps(history_manifest(sample))
    assert ("extra_capture" in recorded) == (point == "store-begun")


def import_bundle(sample: Sample, env: dict[str, str], point: str) -> None:
    sample.record_eagle3()
    bundle = sample.root.parent / "eagle3.json"
    assert sample.pg("export", "eagle3", "-o", bundle).exit_code == 0
    sample.pg("require", f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward")
    assert sample.pg("drop", "eagle3").exit_code == 0
    killed(sample, env, point, "import", str(bundle))
    read_forwards(sample, env)
    names = [p["name"] for p in history_manifest(sample)["patches"]]  # type: ignore[attr-defined]
    assert names == (["eagle3"] if point != "store-begun" else [])


def fetch_update(sample: Sample, env: dict[str, str], point: str) -> None:
    """Another node's re-record comes in by fetch; killed, the fetch is whole or not at all."""
    remote = sample.root.parent / "remote.git"
    git(sample.root.parent, "init", "-q", "--bare", str(remote))
    sample.record_eagle3()
    assert sample.pg("push", remote).exit_code == 0
    node1 = Sample(sample.root.parent / "node1", sample.commits)
    git(sample.root.parent, "clone", "-q", str(sample.root), str(node1.root))
    pushes_an_update(
        node1, remote, lambda text: text.replace("\n\nEntryClass", EXTRA + "\n\nEntryClass")
    )
    killed(sample, env, point, "fetch", str(remote))
    read_forwards(sample, env, backwards=("another patchguard",))  # it is the earlier one here
    fetched = "extra_capture" in json.dumps(history_manifest(sample))
    assert fetched == (point != "store-begun")
    assert ("def extra_capture(" in sample.kimi.read_text()) == fetched  # apply brought it


def apply_after_stash(sample: Sample, env: dict[str, str], point: str) -> None:
    sample.record_eagle3()
    sample.git("stash")
    killed(sample, env, point, "apply")
    read_forwards(sample, env)
    assert all(f"def {m}(" in sample.kimi.read_text() for m in sample_repo.METHODS)


def unapply(sample: Sample, env: dict[str, str], point: str) -> None:
    sample.record_eagle3()
    killed(sample, env, point, "unapply", "eagle3")
    read_forwards(sample, env)  # its apply puts the patch back, whichever side it was on
    assert all(f"def {m}(" in sample.kimi.read_text() for m in sample_repo.METHODS)


def lift_for_checkout(sample: Sample, env: dict[str, str], point: str) -> None:
    sample.record_eagle3()
    head = sample.git("rev-parse", "HEAD").stdout
    killed(sample, env, point, "git", "checkout", sample.commits["old"])
    assert sample.git("rev-parse", "HEAD").stdout == head  # killed before git ran
    read_forwards(sample, env)
    assert all(f"def {m}(" in sample.kimi.read_text() for m in sample_repo.METHODS)


STORY: dict[str, tuple[Callable[[Sample, dict[str, str], str], None], tuple[str, ...]]] = {
    "re-record": (rerecord, STORE_POINTS),
    "require": (require, STORE_POINTS),
    "drop": (drop, STORE_POINTS),
    "undo": (undo_rerecord, STORE_POINTS),
    "import": (import_bundle, STORE_POINTS),
    "fetch": (fetch_update, STORE_POINTS),
    "apply": (apply_after_stash, JOURNAL_POINTS),
    "unapply": (unapply, JOURNAL_POINTS),
    "git checkout": (lift_for_checkout, JOURNAL_POINTS[:1]),
}


def test_every_point_a_writer_passes_is_killed_at() -> None:
    sources = "".join(path.read_text() for path in (ROOT / "guard").rglob("*.py"))
    points = re.findall(r'faults\.point\("([^"]+)"\)', sources)
    assert sorted(points) == sorted([*STORE_POINTS, *JOURNAL_POINTS])


@pytest.mark.parametrize(
    ("writer", "point"),
    [(writer, point) for writer, (_, points) in STORY.items() for point in points],
)
def test_a_writer_killed_at_each_step_is_read_forwards(
    sample: Sample, clean_env: dict[str, str], writer: str, point: str
) -> None:
    story, _ = STORY[writer]
    story(sample, clean_env, point)


def test_an_edit_made_after_the_kill_survives_the_recovery(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """apply killed after writing the file, before its journal said done; the user then edits
    the file: the next writer's recovery must keep that edit, not put the old bytes back."""
    sample.record_eagle3()
    sample.git("stash")
    killed(sample, clean_env, "journal-first-file", "apply")
    sample.kimi.write_text(sample.kimi.read_text() + "\nLOCAL_SETTING = 1\n")
    edited = sample.kimi.read_text()
    for args in (("status",), ("apply",), ("check",)):
        run_patchguard(sample.root, clean_env, args, None)
    assert sample.kimi.read_text() == edited


def test_stale_manifest_after_the_ref_moved_is_not_read_backwards(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """As reported: the newest definition survives status, apply and check."""
    sample.record_eagle3()
    text = sample.kimi.read_text()
    sample.kimi.write_text(text.replace("\n\nEntryClass", EXTRA + "\n\nEntryClass"))
    killed(sample, clean_env, "store-ref-moved", "record", "eagle3", sample_repo.KIMI)
    status = run_patchguard(sample.root, clean_env, ("status",), 0)
    assert "applied" in status.stdout and "earlier" not in status.stdout
    run_patchguard(sample.root, clean_env, ("apply",), 0)
    assert "def extra_capture(" in sample.kimi.read_text()
    sample.kimi.write_text(text)  # the newest definition gone: the history requires it
    run_patchguard(sample.root, clean_env, ("check",), 1)


def test_sigkill_at_random_moments_of_a_rerecord(sample: Sample, clean_env: dict[str, str]) -> None:
    """The second opinion: real kills, at moments no fault point chose."""
    sample.record_eagle3()
    text = sample.kimi.read_text()
    chance = random.Random(31)
    for attempt in range(6):
        method = f"\n    def extra_{attempt}(self):\n        return {attempt}\n"
        text = text.replace("\n\nEntryClass", method + "\n\nEntryClass")
        sample.kimi.write_text(text)
        writer = subprocess.Popen(
            ["patchguard", "record", "eagle3", sample_repo.KIMI],
            cwd=sample.root,
            env=clean_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(chance.uniform(0.05, 0.6))
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        read_forwards(sample, clean_env)
        assert sample.kimi.read_text() == text  # every definition typed so far is still there


def test_compare_and_swap_refuses_a_ref_moved_under_a_writer(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """End to end: a writer waits at the step before its ref move while another node's state
    is pushed into this checkout (the store's lock does not stop a push); the writer must
    change nothing, and say to run it again, rather than overwrite that state."""
    sample.record_eagle3()
    first = sample.git("rev-parse", HISTORY_REF).stdout.strip()
    spec = f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward"
    assert sample.pg("require", spec).exit_code == 0
    pushed = sample.git("rev-parse", HISTORY_REF).stdout.strip()
    sample.git("update-ref", HISTORY_REF, first, pushed)  # the writer loads `first`'s state
    sample.pg("status")
    writer = subprocess.Popen(
        ["patchguard", "drop", "eagle3"],
        cwd=sample.root,
        env={**clean_env, KILL_VARIABLE: "store-begun:stop"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not _stopped(writer.pid):
        assert time.monotonic() < deadline and writer.poll() is None, writer.communicate()
        time.sleep(0.02)
    sample.git("update-ref", HISTORY_REF, pushed, first)  # another node's state comes in
    os.kill(writer.pid, signal.SIGCONT)
    _, stderr = writer.communicate(timeout=60)
    assert writer.returncode == 2, stderr
    assert "nothing was changed" in stderr and "Run it again" in stderr, stderr
    assert sample.git("rev-parse", HISTORY_REF).stdout.strip() == pushed
    assert not (sample.root / ".git/patchguard/transaction").exists()
    read_forwards(sample, clean_env)
    assert [p["name"] for p in history_manifest(sample)["patches"]] == ["eagle3"]  # type: ignore[attr-defined]


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize("reader", ["check --quiet", "the hook's sh"])
def test_no_verified_key_is_trusted_while_a_change_is_cut_off(
    sample: Sample, clean_env: dict[str, str], reader: str
) -> None:
    """The file back as it was verified under the old state, after a kill right after the
    ref moved: neither `check --quiet` nor a hook's sh may answer from the old key (each
    is the first reader after the kill: the slow path then derives manifest.json again)."""
    sample.record_eagle3()
    run_patchguard(sample.root, clean_env, ("install",), 0)
    run_patchguard(sample.root, clean_env, ("check",), 0)  # the old state's key, verified
    verified = sample.kimi.read_text()
    sample.kimi.write_text(verified.replace("\n\nEntryClass", EXTRA + "\n\nEntryClass"))
    killed(sample, clean_env, "store-ref-moved", "record", "eagle3", sample_repo.KIMI)
    sample.kimi.write_text(verified)
    if reader == "check --quiet":
        run_patchguard(sample.root, clean_env, ("check", "--quiet"), 1)  # the new state needs it
        return
    moved = subprocess.run(
        ["git", "checkout", "HEAD"], cwd=sample.root, env=clean_env, capture_output=True, text=True
    )
    assert "re-applied eagle3" in moved.stderr, moved.stderr  # Python decided: the new state
    assert "def extra_capture(" in sample.kimi.read_text()
    run_patchguard(sample.root, clean_env, ("check", "--quiet"), 0)
