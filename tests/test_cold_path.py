"""The cold path avoids libgit2 where it can; it must never decide differently.

merge3 answers the exact identities of a 3-way merge itself, a merge it has made before from
the cache (keyed by content), and a new one with `git merge-file`. Each must be what `git
merge-file` says, run here by hand on files, and `check` must reach the same verdict with the
cache as without it.
"""

from __future__ import annotations

import json
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


def git_merge_file(
    base: bytes, ours: bytes, theirs: bytes, labels: tuple[str, str, str], union: bool = False
) -> MergeResult:
    """git's answer, asked as a person would: three files, `git merge-file -p`."""
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            Path(directory, name).write_bytes(data)
        named = ["-L", labels[1], "-L", labels[0], "-L", labels[2]]
        union_asked = ["--union"] if union else []
        result = subprocess.run(
            ["git", "merge-file", "-p", *named, *union_asked, "ours", "base", "theirs"],
            cwd=directory,
            capture_output=True,
        )
    assert 0 <= result.returncode < 128, result.stderr
    return MergeResult(clean=result.returncode == 0, content=result.stdout)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=lines, ours=lines, theirs=lines, which=st.sampled_from(["ours", "theirs", "both"]))
def test_identities_agree_with_git(
    repo: Repo, base: bytes, ours: bytes, theirs: bytes, which: str
) -> None:
    if which == "ours":
        ours = base
    elif which == "theirs":
        theirs = base
    else:
        theirs = ours
    assert repo.merge3(base, ours, theirs, LABELS) == git_merge_file(base, ours, theirs, LABELS)


def test_a_cached_merge_is_the_merge(repo: Repo) -> None:
    base, ours, theirs = b"a\nb\nc\n", b"A\nb\nc\n", b"a\nb\nC\n"
    first = repo.merge3(base, ours, theirs, LABELS)
    cache = repo.layout.git_dir / MERGE_CACHE_DIR
    assert len(list(cache.iterdir())) >= 1
    assert (
        repo.merge3(base, ours, theirs, LABELS)
        == first
        == git_merge_file(base, ours, theirs, LABELS)
    )
    conflicted = repo.merge3(base, b"X\nb\nc\n", b"Y\nb\nc\n", LABELS)
    assert not conflicted.clean
    assert repo.merge3(base, b"X\nb\nc\n", b"Y\nb\nc\n", LABELS) == conflicted


def test_a_merge_seen_before_starts_no_process(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept by content: with no git on PATH, a merge made before is still answered (and a new
    one is one line saying git is missing)."""
    from guard.errors import ConfigError

    base, ours, theirs = b"seen\nb\nc\n", b"SEEN\nb\nc\n", b"seen\nb\nC\n"
    first = repo.merge3(base, ours, theirs, LABELS)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no git there
    assert Repo.discover(repo.workdir).merge3(base, ours, theirs, LABELS) == first
    with pytest.raises(ConfigError, match="Is git on PATH"):
        repo.merge3(base, b"NEW\nb\nc\n", theirs, LABELS)


def test_a_merge_with_nowhere_to_write_its_inputs_is_one_line(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from guard.errors import ConfigError

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "gone"))
    with pytest.raises(ConfigError, match=r"cannot write the inputs of `git merge-file` in .*gone"):
        repo.merge3(b"a\nb\n", b"A\nb\n", b"a\nB\nnowhere\n", LABELS)


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


@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=conflicting, ours=conflicting, theirs=conflicting, union=st.booleans())
def test_a_new_merge_is_gits_merge(
    repo: Repo, base: bytes, ours: bytes, theirs: bytes, union: bool
) -> None:
    """A merge no cache holds (a fresh Repo each time: its cache may hold one, by content,
    and then that entry must be git's answer too)."""
    assert repo.merge3(base, ours, theirs, LABELS, union) == git_merge_file(
        base, ours, theirs, LABELS, union
    )


CASES = {
    "clean": (b"a\nb\nc\n", b"A\nb\nc\n", b"a\nb\nC\n"),
    "conflict": (b"a\nb\nc\n", b"X\nb\nc\n", b"Y\nb\nc\n"),
    "crlf": (b"a\r\nb\r\nc\r\n", b"X\r\nb\r\nc\r\n", b"Y\r\nb\r\nc\r\n"),
    "no final newline": (b"a\nb\nc", b"a\nb\nX", b"Y\nb\nc"),
    "no final newline, conflict": (b"a\nb\nc", b"a\nb\nX", b"a\nb\nY"),
    "empty base": (b"", b"ours\n", b"theirs\n"),
}


@pytest.mark.parametrize("union", [False, True], ids=["markers", "union"])
@pytest.mark.parametrize("case", list(CASES))
def test_the_shapes_git_merges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, union: bool
) -> None:
    """Each shape as `git merge-file` merges it, its markers named by the labels; for a user
    whose git config asks for diff3 markers, the same (the cache keeps one answer)."""
    git(tmp_path, "init", "-q")
    labels = ("the base", "patch eagle3", "upstream")
    base, ours, theirs = CASES[case]
    expected = git_merge_file(base, ours, theirs, labels, union)
    config = tmp_path / "gitconfig"
    config.write_text("[merge]\n\tconflictStyle = diff3\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    merged = Repo.discover(tmp_path).merge3(base, ours, theirs, labels, union)
    assert merged == expected
    assert merged.clean == (case in ("clean", "no final newline") or union)
    if not merged.clean:
        assert b"<<<<<<< patch eagle3\n" in merged.content.replace(b"\r", b"")
        assert b">>>>>>> upstream" in merged.content
    if case == "crlf":
        assert merged.content.count(b"\r\n") == merged.content.count(b"\n")


def test_a_merge_git_refuses_is_one_line(repo: Repo) -> None:
    from guard.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"`git merge-file` could not merge ours \(.*binary"
    ) as raised:
        repo.merge3(b"a\0\n", b"b\0\n", b"c\0\n", LABELS)
    assert "patchguard-merge-" not in str(raised.value)  # a directory already gone


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
