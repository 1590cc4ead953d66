"""The store's derived files in states a hostile tester found: a push into this
checkout, manifest.json gone or left by a patchguard that wrote no manifest.from, a directory
where a file should be, a recovery that must keep a user's edit. Each must read the history
forwards, say one clear line, and lose nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import sample_repo
from conftest import Sample, git
from helpers import run_patchguard

from guard.git.gitpaths import HISTORY_REF

NEWEST = "\n    def newest_helper(self):\n        return 42\n"
STORE = Path(".git/patchguard")


def _history_of(sample: Sample) -> str:
    return git(sample.root, "show", f"{HISTORY_REF}:manifest.json").stdout


def _pushed_into(sample: Sample, env: dict[str, str]) -> None:
    """Another clone re-records eagle3 with one more method and pushes its history ref
    straight into this checkout (as `git push` lets anyone do): manifest.json lags."""
    other = sample.root.parent / "other"
    git(sample.root.parent, "clone", "-q", str(sample.root), str(other))
    git(other, "fetch", "-q", "origin", f"{HISTORY_REF}:{HISTORY_REF}")
    run_patchguard(other, env, ("apply",), 0)
    kimi = other / sample_repo.KIMI
    kimi.write_text(kimi.read_text().replace("\n\nEntryClass", NEWEST + "\n\nEntryClass"))
    run_patchguard(other, env, ("record", "eagle3", sample_repo.KIMI), 0)
    git(other, "push", "-q", str(sample.root), f"{HISTORY_REF}:{HISTORY_REF}")


def test_a_push_into_this_checkout_is_read_and_the_hooks_sh_trusts_no_old_key(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    run_patchguard(sample.root, clean_env, ("install",), 0)
    run_patchguard(sample.root, clean_env, ("check",), 0)  # a verified key for the old state
    _pushed_into(sample, clean_env)
    moved = subprocess.run(
        ["git", "checkout", "HEAD"], cwd=sample.root, env=clean_env, capture_output=True, text=True
    )
    assert "re-applied eagle3" in moved.stderr, moved.stderr  # the old key did not answer
    assert "def newest_helper(" in sample.kimi.read_text()
    run_patchguard(sample.root, clean_env, ("check",), 0)


def test_without_manifest_from_a_stale_manifest_is_still_read_forwards(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """A checkout from before manifest.from (or one that lost it), then a push into it: the
    stale manifest.json is an earlier state of the history, so the history is read."""
    sample.record_eagle3()
    (sample.root / STORE / "manifest.from").unlink()
    _pushed_into(sample, clean_env)
    refused = run_patchguard(sample.root, clean_env, ("check",), 1)
    assert "newest_helper" in refused.stdout + refused.stderr
    spec = f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward"
    said = run_patchguard(sample.root, clean_env, ("require", spec), 0)
    assert "another patchguard" not in said.stderr
    assert "newest_helper" in _history_of(sample) and spec in _history_of(sample)


def test_a_hand_edit_and_a_push_together_are_not_merged_silently(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    _pushed_into(sample, clean_env)
    manifest = sample.root / STORE / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"EAGLE-3 delegation"', '"edited by hand"'))
    pushed = _history_of(sample)
    refused = run_patchguard(sample.root, clean_env, ("require", "x.py::y"), 2)
    assert "edited by hand" in refused.stderr and "nothing was changed" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert _history_of(sample) == pushed


def test_a_history_without_manifest_json_is_derived_again_and_the_hooks_act(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    run_patchguard(sample.root, clean_env, ("install",), 0)
    (sample.root / STORE / "manifest.json").unlink()
    sample.git("stash", "-q")
    moved = subprocess.run(
        ["git", "checkout", "-q", sample.commits["old"]],
        cwd=sample.root,
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert "re-applied eagle3" in moved.stderr, moved.stderr
    assert json.loads((sample.root / STORE / "manifest.json").read_text())["patches"]
    for args in (("unapply", "eagle3"), ("apply", "eagle3"), ("check",)):
        run_patchguard(sample.root, clean_env, args, 0)


def test_a_directory_in_place_of_manifest_from_changes_nothing(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    before = _history_of(sample)
    tip = sample.git("rev-parse", HISTORY_REF).stdout
    (sample.root / STORE / "manifest.from").unlink()
    (sample.root / STORE / "manifest.from").mkdir()
    refused = run_patchguard(
        sample.root, clean_env, ("require", f"{sample_repo.KIMI}::EntryClass"), 2
    )
    assert "manifest.from" in refused.stderr and refused.stderr.count("\n") == 1
    assert sample.git("rev-parse", HISTORY_REF).stdout == tip and _history_of(sample) == before
    assert not (sample.root / STORE / "transaction").exists()


def test_a_directory_in_place_of_manifest_json_is_one_line(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    (sample.root / STORE / "manifest.json").unlink()
    (sample.root / STORE / "manifest.json").mkdir()
    for args in (("status",), ("check",), ("list",)):  # read from the history itself
        run_patchguard(sample.root, clean_env, args, 0)
    refused = run_patchguard(
        sample.root, clean_env, ("require", f"{sample_repo.KIMI}::EntryClass"), 2
    )
    assert "manifest.json" in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr


def test_a_damaged_manifest_json_says_it_is_derived(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    (sample.root / STORE / "manifest.json").write_text("not json{")
    refused = run_patchguard(sample.root, clean_env, ("check",), 2)
    assert "delete it and patchguard derives it again" in refused.stderr, refused.stderr
    (sample.root / STORE / "manifest.json").unlink()
    run_patchguard(sample.root, clean_env, ("check",), 0)


def test_a_recovery_that_keeps_an_edit_does_not_claim_an_undo(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    run_patchguard(sample.root, clean_env, ("unapply",), 0)
    result = subprocess.run(
        ["patchguard", "apply"],
        cwd=sample.root,
        env={**clean_env, "PATCHGUARD_KILL_AT": "journal-written"},
        capture_output=True,
    )
    assert result.returncode == -9
    sample.kimi.write_text(sample.kimi.read_text() + "# user edit\n")
    edited = sample.kimi.read_text()
    refused = run_patchguard(sample.root, clean_env, ("undo",), 1)
    assert "changed after the last apply" in refused.stderr, refused.stderr
    assert sample.kimi.read_text() == edited
