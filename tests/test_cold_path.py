"""The cold path avoids libgit2 where it can; it must never decide differently.

merge3 answers the exact identities of a 3-way merge itself, and a merge it has made before
from the cache (keyed by content). Both must equal what libgit2 says, and `check` must reach
the same verdict with the cache as without it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Sample, git
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard.git.gitdir import locate
from guard.git.repo import MERGE_CACHE_DIR, MergeResult, Repo

LABELS = ("base", "ours", "theirs")
lines = st.lists(st.sampled_from([b"a\n", b"b\n", b"c\n", b"\n", b"d"]), max_size=6).map(b"".join)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    root = tmp_path_factory.mktemp("merges")
    git(root, "init", "-q")
    return Repo.discover(root)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=lines, ours=lines, theirs=lines, which=st.sampled_from(["ours", "theirs", "both"]))
def test_identities_agree_with_libgit2(
    repo: Repo, base: bytes, ours: bytes, theirs: bytes, which: str
) -> None:
    if which == "ours":
        ours = base
    elif which == "theirs":
        theirs = base
    else:
        theirs = ours
    assert repo.merge3(base, ours, theirs, LABELS) == repo._libgit2_merge(
        base, ours, theirs, LABELS
    )


def test_a_cached_merge_is_the_merge(repo: Repo) -> None:
    base, ours, theirs = b"a\nb\nc\n", b"A\nb\nc\n", b"a\nb\nC\n"
    first = repo.merge3(base, ours, theirs, LABELS)
    cache = repo.layout.git_dir / MERGE_CACHE_DIR
    assert len(list(cache.iterdir())) >= 1
    assert (
        repo.merge3(base, ours, theirs, LABELS)
        == first
        == repo._libgit2_merge(base, ours, theirs, LABELS)
    )
    conflicted = repo.merge3(base, b"X\nb\nc\n", b"Y\nb\nc\n", LABELS)
    assert not conflicted.clean
    assert repo.merge3(base, b"X\nb\nc\n", b"Y\nb\nc\n", LABELS) == conflicted


def test_check_reaches_the_same_verdict_with_and_without_the_caches(sample: Sample) -> None:
    from conftest import patchguard

    sample.record_eagle3()
    sample.git("stash")
    sample.git("checkout", "-q", "old")  # drifted: a real merge decides
    layout = locate(sample.root)

    def report() -> dict[str, object]:  # --json always takes the full path
        data = json.loads(patchguard("-C", sample.root, "check", "--json").output)
        data.pop("head")
        return data

    cold = report()
    assert (layout.git_dir / MERGE_CACHE_DIR).is_dir()
    warm = report()
    shutil.rmtree(layout.git_dir / MERGE_CACHE_DIR)
    (layout.store_dir / "validated").unlink()
    assert cold == warm == report()
    assert cold["patches"][0]["state"] == "drifted"  # type: ignore[index]


def test_the_hook_path_loads_neither_pydantic_nor_libgit2(sample: Sample) -> None:
    sample.record_eagle3()
    sample.git("stash")
    probe = (
        "import sys; from pathlib import Path; from guard.cli import hookrun; "
        "status = hookrun.run('post-checkout', ['a', 'b', '1'], '', Path.cwd()); "
        "print(status, sorted({m.split('.')[0] for m in sys.modules} "
        "& {'pydantic', 'pygit2'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=sample.root, capture_output=True, text=True
    )
    assert result.stdout.strip() == "0 []", result.stderr
    assert "re-applied eagle3" in result.stderr


conflicting = st.lists(st.sampled_from([b"a\n", b"b\n", b"c\n", b"x\n", b"\n"]), max_size=8).map(
    b"".join
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=conflicting, ours=conflicting, theirs=conflicting, union=st.booleans())
def test_the_in_memory_merge_is_libgit2s_merge(
    repo: Repo, base: bytes, ours: bytes, theirs: bytes, union: bool
) -> None:
    """The buffer merge (no object written) answers exactly as pygit2's object-store one."""
    from guard.git.inmemory_merge import merge_file

    found = merge_file(base, ours, theirs, LABELS, union)
    assert found is not None
    expected = repo._libgit2_merge(base, ours, theirs, LABELS, union)
    assert found == (expected.clean, expected.content)


def test_the_in_memory_merge_loads_neither_pygit2_nor_cffi_and_uses_pygit2s_libgit2() -> None:
    """Loading pygit2 and cffi would cost a first re-apply more than its merges; the library
    and the enum values are the ones pygit2 was built with."""
    probe = (
        "import sys; from guard.git import inmemory_merge as m; "
        "print(m.merge_file(b'a\\n', b'b\\n', b'a\\n', ('x', 'y', 'z')), "
        "sorted({'pygit2', 'cffi'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.stdout.strip() == "(True, b'b\\n') []", result.stderr
    import pygit2
    from pygit2.ffi import C

    from guard.git import inmemory_merge

    assert inmemory_merge.GIT_MERGE_FILE_STYLE_MERGE == C.GIT_MERGE_FILE_STYLE_MERGE
    assert inmemory_merge.GIT_MERGE_FILE_FAVOR_UNION == C.GIT_MERGE_FILE_FAVOR_UNION
    assert inmemory_merge._pygit2_directory() == os.path.dirname(pygit2.__file__)


def test_a_cached_merge_renamed_to_another_key_is_a_miss(repo: Repo) -> None:
    """An entry is bound to its key (guard.git.content_cache): swapped or copied, it is not used."""
    base = b"renamed\nb\nc\n"
    cache = repo.layout.git_dir / MERGE_CACHE_DIR

    def merged(ours: bytes, theirs: bytes) -> tuple[MergeResult, Path]:
        before = set(cache.iterdir()) if cache.is_dir() else set()
        result = repo.merge3(base, ours, theirs, LABELS)
        (entry,) = set(cache.iterdir()) - before
        return result, entry

    first, entry = merged(b"R\nb\nc\n", b"renamed\nb\nC\n")
    second, other = merged(b"X\nb\nc\n", b"renamed\nb\nY\n")
    entry.write_bytes(other.read_bytes())  # the second merge's entry under the first's key
    assert repo.merge3(base, b"R\nb\nc\n", b"renamed\nb\nC\n", LABELS) == first != second
