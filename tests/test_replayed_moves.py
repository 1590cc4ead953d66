"""Issue 30: a move of `patchguard git` seen before is replayed, and only when that is the truth.

A regression hunt goes back and forth over the same commits. A lift from a verified tree, and a
put-back from files seen before, write again what the full lift and put-back wrote then
(guard.tree.replay), journaled alike, without loading guard.tree.patching or the assessment.
Told apart by the modules the move loaded; the full path is had by emptying the replays.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import sample_repo
from conftest import ROOT, Histories
from helpers import JOURNAL_POINTS, Checkout, methods_once_in_class, move_probe

from guard.git.content_cache import ContentCache
from guard.git.faults import KILL_VARIABLE
from guard.git.gitdir import locate
from guard.git.gitpaths import JOURNAL_FILE, UNDO_DIR_NAME
from guard.git.objects import blob_id
from guard.git.own_code import model_namespace
from guard.store.fastpath import CACHE_DIR_NAME, current_key
from guard.tree.replay import REPLAYS_DIR

# There and back over commits where the patched file changes (c2), stays (c1: git leaves the
# lifted file alone, the undo puts it back) and holds the patch upstream (c3).
MOVES = ("c2", "work", "c1", "c3", "work")

# A move as the installed command makes it; then whether it loaded the full lift or put-back
# (the writing, the assessment, the model, libgit2).
PROBE = move_probe("guard.tree.patching", "guard.tree.assess", "guard.truth.symbols", "pygit2")


@pytest.fixture
def hunt(tmp_path: Path, clean_env: dict[str, str], histories: Histories) -> Checkout:
    """Branch `work` at c0 with the EAGLE-3 methods recorded, verified, hooks installed."""
    root = tmp_path / "sglang"
    result = Checkout(root, clean_env, histories.copy(sample_repo.build_hunt, root))
    result.git("checkout", "-q", "-b", "work", "c0")
    sample_repo.add_eagle3_methods(root)
    result.pg("record", "eagle3", sample_repo.KIMI, check=0)
    result.pg("install", check=0)
    result.pg("check", "-q", check=0)
    return result


@dataclass
class Move:
    """What one move said and left: its status and lines, the patched file, and the journal
    entries it made (their records, without the time)."""

    status: str
    said: list[str]
    kimi: bytes
    journal: list[tuple[object, ...]]
    full: bool = field(compare=False)


def move(hunt: Checkout, target: str, **env: str) -> Move:
    undo = locate(hunt.root).git_dir / UNDO_DIR_NAME
    known = set(undo.iterdir()) if undo.exists() else set()
    moved = subprocess.run(
        [sys.executable, "-c", PROBE, "git", "checkout", "-q", target],
        cwd=hunt.root,
        env={**hunt.env, **env},
        capture_output=True,
        text=True,
    )
    lines = moved.stderr.splitlines()
    assert lines[-1].startswith("heavy: ") and lines[-2].startswith("status: "), moved.stderr
    return Move(
        lines[-2],
        lines[:-2],
        hunt.kimi.read_bytes(),
        [_entry(path) for path in sorted(set(undo.iterdir()) - known)],
        lines[-1] != "heavy: ",
    )


def _entry(path: Path) -> tuple[object, ...]:
    record = json.loads((path / JOURNAL_FILE).read_text())
    files = [
        (f["path"], f["before_blob"], f["after_blob"], f["before_mode"]) for f in record["files"]
    ]
    return (
        path.name.split("-", 1)[1],
        record["operation"],
        record["state"],
        record["patches"],
        files,
    )


def replays(hunt: Checkout) -> Path:
    return locate(hunt.root).git_dir / CACHE_DIR_NAME / REPLAYS_DIR


def kept_names(hunt: Checkout) -> list[str]:
    """The keys of the replays this patchguard keeps (each file is named by its namespace and
    its key: guard.git.content_cache)."""
    prefix = f"{model_namespace()}-"
    return [p.name[len(prefix) :] for p in replays(hunt).iterdir() if p.name.startswith(prefix)]


# Puts an entry into a content cache as another patchguard would: a copy of this one's code
# with one module changed, run from where it lies (argv: that copy, directory, key, payload).
ANOTHER_PATCHGUARD = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import guard
from guard.git.content_cache import ContentCache
assert guard.__file__.startswith(sys.argv[1]), guard.__file__
ContentCache(Path(sys.argv[2]), 1024).put(sys.argv[3], sys.argv[4].encode())
"""


def full_moves(hunt: Checkout, targets: tuple[str, ...]) -> list[Move]:
    """Each move with nothing to replay from: the full lift and put-back."""
    done = []
    for target in targets:
        shutil.rmtree(replays(hunt), ignore_errors=True)
        done.append(move(hunt, target))
    return done


def test_a_move_seen_before_writes_what_the_full_move_wrote(hunt: Checkout) -> None:
    first = [move(hunt, target) for target in MOVES]
    assert first[0].full
    replayed = [move(hunt, target) for target in MOVES]
    assert not any(m.full for m in replayed), replayed
    full = full_moves(hunt, MOVES)
    assert all(m.full for m in full)
    assert replayed == full == first  # the same lines, bytes and journal entries
    said = [line for m in replayed for line in m.said]
    assert f"patchguard: re-applied eagle3 ({sample_repo.KIMI})" in said
    assert "patchguard: eagle3 is upstream here (HEAD has all of it); nothing to put back" in said
    # c1: git left the lifted file alone, and the undo put it back without a trace.
    operations = [[entry[1] for entry in m.journal] for m in replayed]
    assert operations == [["unapply", "apply"], ["unapply", "apply"], [], ["unapply"], ["apply"]]
    assert all(m.status == "status: 0" for m in replayed)
    assert methods_once_in_class(hunt.kimi)
    hunt.pg("check", "--json", check=0)  # the full path agrees


def test_undo_after_a_replayed_move_is_as_after_a_full_one(hunt: Checkout) -> None:
    def undo_twice() -> list[tuple[int, str, bytes]]:
        said = []
        for _ in range(2):  # the put-back, then the lift (which git's checkout overwrote)
            undone = hunt.pg("undo")
            text = undone.stdout + undone.stderr
            said.append((undone.returncode, _without_times(text), hunt.kimi.read_bytes()))
        hunt.pg("apply", check=0)
        hunt.pg("git", "checkout", "-q", "work", check=0)
        return said

    [move(hunt, target) for target in ("c2", "work")]
    assert not move(hunt, "c2").full
    after_replayed = undo_twice()
    assert full_moves(hunt, ("c2",))[0].full
    assert undo_twice() == after_replayed
    assert after_replayed[0][0] == 0 and after_replayed[0][2] == hunt.at("c2").encode()
    assert after_replayed[1][0] == 1 and "not undone" in after_replayed[1][1]


def _without_times(text: str) -> str:
    """`undo` names the entry by its time: 2026-12-02 03:59:12."""
    import re

    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "TIME", text)


def edit_the_patched_file(hunt: Checkout) -> None:
    """An edit of the user's own beside the patch (kept through every move)."""
    text = hunt.kimi.read_text()
    hunt.kimi.write_text(
        text.replace("        self.config = config\n", "        self.config = config  # mine\n")
    )


def commit_the_patch(hunt: Checkout) -> None:
    """HEAD's entries change, the files do not: the patch is HEAD's own now."""
    hunt.git("commit", "-q", "-am", "the patch, committed")


def require_forward(hunt: Checkout) -> None:
    """A changed manifest: every key is another."""
    hunt.pg("require", f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward", check=0)


@pytest.mark.parametrize("change", [edit_the_patched_file, commit_the_patch, require_forward])
def test_a_changed_input_takes_the_full_path(hunt: Checkout, change: object) -> None:
    for target in ("c1", "work", "c1", "work"):
        move(hunt, target)
    assert not move(hunt, "c1").full and not move(hunt, "work").full
    assert callable(change)
    change(hunt)
    there = move(hunt, "c1")
    assert there.full and there.status == "status: 0", there
    assert hunt.head() == hunt.commits["c1"] or change is commit_the_patch
    assert methods_once_in_class(hunt.kimi)
    if change is edit_the_patched_file:
        assert "self.config = config  # mine" in hunt.kimi.read_text()
    hunt.pg("check", check=0)


def test_a_lift_recorded_by_other_code_is_not_replayed(hunt: Checkout, tmp_path: Path) -> None:
    """Another patchguard (or pygit2's merge) may have decided other bytes: its record, kept in
    its own namespace, is never written again, even where this one's is gone."""
    for target in ("c2", "work"):
        move(hunt, target)
    cache = ContentCache(replays(hunt), 1024)
    here = current_key(str(hunt.root))
    assert here is not None and here.verified
    lifts = [name for name in kept_names(hunt) if name.startswith("lift-")]
    records = {name: json.loads(cache.get(name) or b"") for name in lifts}
    (name,) = [name for name, record in records.items() if record["before"] == here.key]
    record = records[name]
    bogus = b"# not what this patchguard takes out\n"
    record["writes"][0]["blob"] = blob_id(bogus)
    (replays(hunt) / f"{model_namespace()}-{name}").unlink()
    another = tmp_path / "another"
    shutil.copytree(ROOT / "guard", another / "guard", ignore=shutil.ignore_patterns("__pycache__"))
    with (another / "guard" / "git" / "eol.py").open("a") as module:
        module.write("\n# decides otherwise\n")
    for key, payload in ((blob_id(bogus), bogus.decode()), (name, json.dumps(record))):
        where = [str(another), str(replays(hunt)), key, payload]
        subprocess.run([sys.executable, "-I", "-c", ANOTHER_PATCHGUARD, *where], check=True)
    there = move(hunt, "c2")
    assert there.full and there.status == "status: 0", there
    assert hunt.head() == hunt.commits["c2"] and methods_once_in_class(hunt.kimi)
    assert bogus not in hunt.kimi.read_bytes()


@pytest.mark.parametrize("point", JOURNAL_POINTS)
def test_a_replayed_lift_killed_at_each_step_loses_nothing(hunt: Checkout, point: str) -> None:
    for target in ("c2", "work", "c2", "work"):
        move(hunt, target)
    patched = hunt.kimi.read_bytes()
    killed = subprocess.run(
        ["patchguard", "git", "checkout", "-q", "c2"],
        cwd=hunt.root,
        env={**hunt.env, KILL_VARIABLE: point},
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert hunt.head() == hunt.commits["c0"]  # git never ran
    again = move(hunt, "c2")
    assert again.status == "status: 0", again
    assert hunt.head() == hunt.commits["c2"] and methods_once_in_class(hunt.kimi)
    move(hunt, "work")
    assert hunt.kimi.read_bytes() == patched
    hunt.pg("check", check=0)


def test_kept_bytes_that_are_not_their_blob_are_never_written(hunt: Checkout) -> None:
    """Each kept file is held to the blob id it is kept by (the cache's own checksum only
    says the entry is whole): other bytes there mean the full lift and put-back."""
    for target in ("c2", "work"):
        move(hunt, target)
    cache = ContentCache(replays(hunt), 1024)
    bogus = b"# not the bytes of this blob\n"
    kept = [name for name in kept_names(hunt) if not name.startswith(("from-", "lift-"))]
    assert kept
    for name in kept:
        cache.put(name, bogus)
    for target in ("c2", "work"):
        moved = move(hunt, target)
        assert moved.full and moved.status == "status: 0", moved
        assert methods_once_in_class(hunt.kimi) and bogus not in hunt.kimi.read_bytes()
    hunt.pg("check", check=0)
