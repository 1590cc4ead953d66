"""The cost of a command does not grow with the number of patches or files.

Counted, not timed: the git processes a re-applying hook starts (GIT_TRACE), and the parses a
command makes (guard.truth.parsed keeps them by content). Timings are for `make bench`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample
from helpers import stash_then_checkout

from guard.git.repo import Repo
from guard.tree.patching import apply_then_check
from guard.truth.symbols import SymbolIndex

GIT = shutil.which("git") or "git"
MODELS = "python/sglang/srt/models"


def with_patches(sample: Sample, patches: int, files_per_patch: int) -> None:
    """`patches` patches of `files_per_patch` model files each, all applied and verified."""
    paths = []
    for number in range(patches * files_per_patch):
        path = f"{MODELS}/gen_{number:02d}.py"
        text = sample_repo.KIMI_V2.replace(sample_repo.CLASS, f"Gen{number:02d}")
        (sample.root / path).write_text(text)
        paths.append(path)
    sample.git("add", "-A")
    sample.git("commit", "-q", "-m", "models")
    sample.git("branch", "other")  # the same files: a checkout moves nothing guarded
    for path in paths:
        target = sample.root / path
        text = target.read_text()
        target.write_text(
            text.replace("\n\nEntryClass", sample_repo.EAGLE3_METHODS + "\n\nEntryClass")
        )
    for number in range(patches):
        mine = paths[number * files_per_patch : (number + 1) * files_per_patch]
        assert sample.pg("record", f"p{number}", *mine).exit_code == 0
    assert sample.pg("install").exit_code == 0
    assert sample.pg("check", "-q").exit_code == 0


@pytest.mark.parametrize("shape", [(4, 1), (1, 4)], ids=["4 patches", "1 patch of 4 files"])
def test_a_reapplying_hook_starts_as_many_git_processes_for_one_patch_as_for_more(
    sample: Sample, tmp_path: Path, shape: tuple[int, int]
) -> None:
    one = Sample(tmp_path / "one", sample_repo.build(tmp_path / "one"))
    with_patches(one, 1, 1)
    with_patches(sample, *shape)
    trace = tmp_path / "git.trace"
    counted = []
    for repository in (sample, one):
        stderr, processes = stash_then_checkout(repository.root, "other", trace)
        assert "re-applied" in stderr
        assert repository.pg("check", "-q").exit_code == 0
        counted.append(processes)
    assert counted[0] == counted[1]


def test_each_content_is_parsed_once_per_command_and_never_again(
    sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_patches(sample, 3, 1)
    sample.git("stash", "-q")  # the next apply merges, writes and checks three files
    parsed: list[str] = []
    real_parse = SymbolIndex.parse

    def counting(source: bytes, path: str) -> SymbolIndex:
        parsed.append(path)
        return real_parse(source, path)

    monkeypatch.setattr(SymbolIndex, "parse", counting)
    outcomes, report = apply_then_check(Repo.discover(sample.root))
    assert report.ok and all(o.written for o in outcomes)
    assert len(parsed) == len(set(parsed))  # each file once, though assessed twice
    parsed.clear()
    _, report = apply_then_check(Repo.discover(sample.root))  # a new command, nothing changed
    assert report.ok
    assert parsed == []  # every parse was kept by its content
