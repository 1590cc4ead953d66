"""All or nothing across files: an apply or unapply of a two-file patch
either changes both files or neither, after a failed write and after a kill; the message says
what became of each file; journal leftovers are swept; duplicate patch names are refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Sample
from helpers import run_patchguard

from guard.git.gitdir import locate
from guard.git.repo import Repo
from guard.store import journal
from guard.store.journal import JOURNAL_FILE, PACK_FILE, UNDO_DIR_NAME, Journal

SMALL = "python/sglang/srt/a_small.py"  # written first (files go in path order)
LARGE = "python/sglang/srt/b_large.py"
LIMIT = 2_000  # bytes a file may grow to under RLIMIT_FSIZE
BIG_TEXT = "".join(f"VALUE_{i} = {i}\n" for i in range(300))  # well over LIMIT


def two_file_patch(sample: Sample, head: dict[str, str], patched: dict[str, str]) -> None:
    """Commit `head`, record `patched` as patch `two`, and leave it applied."""
    for path, text in head.items():
        (sample.root / path).write_text(text)
    sample.git("add", *head)
    sample.git("commit", "-qm", "two files")
    for path, text in patched.items():
        (sample.root / path).write_text(text)
    assert sample.pg("record", "two", *patched).exit_code == 0


def _limit_file_size() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))  # larger writes fail: EFBIG


def files(sample: Sample) -> dict[str, bytes]:
    return {path: (sample.root / path).read_bytes() for path in (SMALL, LARGE)}


def undo_entries(sample: Sample) -> list[str]:
    root = locate(sample.root).git_dir / UNDO_DIR_NAME
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


@pytest.mark.parametrize("operation", ["apply", "unapply"])
def test_a_write_that_fails_on_the_second_file_puts_the_first_back(
    sample: Sample, clean_env: dict[str, str], operation: str
) -> None:
    """A full disk, as a file-size limit: the first file fits, the second does not."""
    if operation == "apply":  # the patch grows the second file past the limit
        two_file_patch(
            sample, {SMALL: "A = 1\n", LARGE: "B = 1\n"}, {SMALL: "A = 2\n", LARGE: BIG_TEXT}
        )
        assert sample.pg("unapply").exit_code == 0
    else:  # the patch shrinks the second file; taking it out grows it back
        two_file_patch(
            sample, {SMALL: "A = 1\n", LARGE: BIG_TEXT}, {SMALL: "A = 2\n", LARGE: "B = 1\n"}
        )
    before, entries = files(sample), undo_entries(sample)
    result = subprocess.run(
        ["patchguard", "-C", str(sample.root), operation],
        env=clean_env,
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"cannot write {LARGE}: File too large" in lines[0]
    assert f"nothing was changed: {SMALL} put back as it was; {LARGE} not touched" in lines[0]
    assert files(sample) == before  # the first file was written, and put back
    assert undo_entries(sample) == entries  # no entry for what did not happen
    assert sample.pg(operation).exit_code == 0  # with room again, it simply works
    assert files(sample) != before


def killed_after_the_first_write(sample: Sample, operation: str) -> dict[str, bytes]:
    """The on-disk state a writer killed between its two writes leaves, made with the real
    journal: both old contents kept, the entry marked `writing`, only the first file replaced.

    (No honest way stops a real process exactly there: the two writes follow each other with
    nothing to wait on. test_a_real_sigkill_mid_apply kills a real one at random instead.)
    """
    repo = Repo.discover(sample.root)
    kept = Journal(repo.layout.git_dir, operation)
    new = {SMALL: b"A = 2\n", LARGE: b"B = 2\n"}
    for path, content in new.items():
        kept.before_write(path, repo.read_raw(path), content, "two")
    kept.mark_writing()
    repo.write_raw(SMALL, new[SMALL])
    return new


@pytest.fixture
def half_applied(sample: Sample) -> tuple[Sample, dict[str, bytes]]:
    two_file_patch(
        sample, {SMALL: "A = 1\n", LARGE: "B = 1\n"}, {SMALL: "A = 2\n", LARGE: "B = 2\n"}
    )
    assert sample.pg("unapply").exit_code == 0
    before = files(sample)
    killed_after_the_first_write(sample, "apply")
    assert files(sample) != before
    return sample, before


def test_after_a_kill_status_says_so_and_apply_completes(
    half_applied: tuple[Sample, dict[str, bytes]],
) -> None:
    sample, before = half_applied
    status = sample.pg("status")
    assert "interrupted" in status.stderr and SMALL in status.stderr
    assert "the interrupted apply of two" in sample.pg("undo", "--list").output
    assert sample.pg("apply").exit_code == 0
    assert files(sample) == {SMALL: b"A = 2\n", LARGE: b"B = 2\n"}
    assert "interrupted" not in sample.pg("status").stderr
    assert sample.pg("undo").exit_code == 0  # the whole apply is one entry: both come out
    assert files(sample) == before


def test_after_a_kill_undo_puts_the_half_written_files_back(
    half_applied: tuple[Sample, dict[str, bytes]],
) -> None:
    sample, before = half_applied
    result = sample.pg("undo")
    assert result.exit_code == 0, result.stderr
    assert result.output.startswith("undid the interrupted apply of two")
    assert files(sample) == before
    assert not any(name.endswith("-apply") for name in undo_entries(sample))
    assert sample.pg("undo", "--list").output.startswith("0. the unapply of two")


def test_after_a_kill_mid_unapply_a_move_puts_the_files_back_first(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    two_file_patch(
        sample, {SMALL: "A = 1\n", LARGE: "B = 1\n"}, {SMALL: "A = 2\n", LARGE: "B = 2\n"}
    )
    applied = files(sample)
    repo = Repo.discover(sample.root)
    kept = Journal(repo.layout.git_dir, "unapply")
    for path, content in {SMALL: b"A = 1\n", LARGE: b"B = 1\n"}.items():
        kept.before_write(path, repo.read_raw(path), content, "two")
    repo.write_raw(SMALL, b"A = 1\n")  # killed here: one file out, one in
    run_patchguard(sample.root, clean_env, ("git", "status", "--short"), 0)
    assert files(sample) == applied
    assert not any(entry.interrupted for entry in journal.entries(repo))


def test_a_real_sigkill_mid_apply_never_leaves_a_half_applied_patch(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """Killed as soon as the first file changes: whatever the kill caught, the next run ends
    with both files patched and one undo entry that takes both out."""
    big = BIG_TEXT * 200  # a second file large enough that its write takes a while
    two_file_patch(sample, {SMALL: "A = 1\n", LARGE: "B = 1\n"}, {SMALL: "A = 2\n", LARGE: big})
    assert sample.pg("unapply").exit_code == 0
    before = files(sample)
    process = subprocess.Popen(
        [sys.executable, "-m", "guard", "-C", str(sample.root), "apply"],
        env=clean_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    small = sample.root / SMALL
    deadline = time.monotonic() + 60
    while small.read_bytes() == before[SMALL] and process.poll() is None:
        assert time.monotonic() < deadline
    process.kill()  # a no-op once poll() has reaped it (os.kill would raise)
    process.wait()
    assert sample.pg("apply").exit_code == 0
    assert files(sample) == {SMALL: b"A = 2\n", LARGE: big.encode()}
    assert sample.pg("undo").exit_code == 0
    assert files(sample) == before


def test_journal_leftovers_of_a_killed_writer_are_swept(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    root = locate(sample.root).git_dir / UNDO_DIR_NAME
    assert sample.pg("apply").exit_code == 0
    entry = next(root.iterdir())
    stale_temp = entry / ".journal.json.4242-1-0.patchguard-tmp"  # killed mid-write
    stale_temp.write_bytes(b'{"half": ')
    assert sample.pg("unapply").exit_code == 0
    assert not stale_temp.exists()
    no_journal = root / f"{time.time_ns():020d}-apply"  # killed before its journal was written
    no_journal.mkdir()
    (no_journal / PACK_FILE).write_bytes(b"old bytes")
    assert sample.pg("apply").exit_code == 0
    assert not no_journal.exists()
    assert sample.pg("undo", "--list").output.startswith("0. the apply of eagle3")


def test_a_power_loss_before_the_entry_was_flushed_left_nothing_to_put_back(
    sample: Sample,
) -> None:
    """Journal.mark_writing makes the pack's name and the journal's durable with one fsync
    of the entry: a power loss before it may keep the journal without the pack. No file was
    written then, and the next writer sweeps the entry instead of failing on the pack."""
    sample.record_eagle3()
    sample.git("stash")
    assert sample.pg("apply").exit_code == 0
    applied = sample.kimi.read_bytes()
    assert sample.pg("unapply").exit_code == 0
    entry = max((locate(sample.root).git_dir / UNDO_DIR_NAME).iterdir())
    record = json.loads((entry / JOURNAL_FILE).read_text())
    sample.kimi.write_bytes(applied)  # as before that unapply: it never wrote a file
    (entry / JOURNAL_FILE).write_text(json.dumps({**record, "state": "writing"}))
    (entry / PACK_FILE).unlink()
    assert sample.pg("apply").exit_code == 0
    assert not entry.exists()
    assert sample.kimi.read_bytes() == applied
    assert sample.pg("check").exit_code == 0


def test_a_stray_file_beside_the_entries_hides_no_killed_writer(sample: Sample) -> None:
    """Recovery reads the newest entry by name: a file of the user's in the undo directory
    that sorts after every entry must not make it miss a killed writer's entry."""
    sample.record_eagle3()
    sample.git("stash")
    assert sample.pg("apply").exit_code == 0
    applied = sample.kimi.read_bytes()
    assert sample.pg("unapply").exit_code == 0
    root = locate(sample.root).git_dir / UNDO_DIR_NAME
    entry = max(root.iterdir())
    record = json.loads((entry / JOURNAL_FILE).read_text())
    sample.kimi.write_bytes(applied)  # killed before it wrote the file
    (entry / JOURNAL_FILE).write_text(json.dumps({**record, "state": "writing"}))
    (root / "notes").write_text("mine\n")
    assert sample.pg("apply").exit_code == 0
    assert not entry.exists()
    assert sample.kimi.read_bytes() == applied
    assert (root / "notes").read_text() == "mine\n"
    assert "interrupted" not in sample.pg("undo", "--list").output


def test_undo_and_recovery_take_the_same_entries(sample: Sample) -> None:
    """A directory of the user's in the undo directory that holds a journal.json (a copy kept
    by hand) is no entry for undo either, as it is none for recovery: undo reverts the real
    newest entry and leaves the copy alone."""
    sample.record_eagle3()
    sample.git("stash")
    original = sample.kimi.read_bytes()
    assert sample.pg("apply").exit_code == 0
    root = locate(sample.root).git_dir / UNDO_DIR_NAME
    (entry,) = root.iterdir()
    shutil.copytree(entry, root / "zz-my-copy")
    assert sample.pg("undo").exit_code == 0
    assert sample.kimi.read_bytes() == original
    assert (root / "zz-my-copy" / JOURNAL_FILE).is_file()


def test_duplicate_patch_names_are_refused(sample: Sample, tmp_path: Path) -> None:
    sample.record_eagle3()
    path = locate(sample.root).manifest_path
    data = json.loads(path.read_text())
    data["patches"].append(data["patches"][0])
    path.write_text(json.dumps(data))
    for command in ("status", "apply", "list"):
        result = sample.pg(command)
        assert result.exit_code == 2, command
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "patch name eagle3 is used more than once" in lines[0]
    path.write_text(json.dumps({**data, "patches": data["patches"][:1]}))
    bundle = tmp_path / "b.json"
    assert sample.pg("export", "-o", bundle).exit_code == 0
    exported = json.loads(bundle.read_text())
    exported["manifest"]["patches"] *= 2
    bundle.write_text(json.dumps(exported))
    imported = sample.pg("import", bundle)
    assert imported.exit_code == 2
    assert "used more than once" in imported.stderr


def test_an_entry_of_an_earlier_patchguard_is_undone_too(sample: Sample) -> None:
    """Before one pack per entry, each file's old bytes were kept in a file of their own."""
    sample.record_eagle3()
    sample.git("stash")
    before = sample.kimi.read_bytes()
    assert sample.pg("apply").exit_code == 0
    entry = next((locate(sample.root).git_dir / UNDO_DIR_NAME).iterdir())
    record = json.loads((entry / JOURNAL_FILE).read_text())
    (item,) = record["files"]
    kept = (entry / PACK_FILE).read_bytes()[item.pop("offset") :][: item.pop("size")]
    (entry / "before-0").write_bytes(kept)
    (entry / PACK_FILE).unlink()
    item["before"] = "before-0"
    del item["before_blob"]
    (entry / JOURNAL_FILE).write_text(json.dumps(record))
    assert sample.pg("undo").exit_code == 0
    assert sample.kimi.read_bytes() == before
