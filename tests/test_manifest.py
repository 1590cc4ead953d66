"""The manifest: validated on every read, schema committed, stored where git operations can't reach."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Sample, git, patchguard

from guard.git.gitdir import locate


def manifest_path(sample: Sample) -> Path:
    return locate(sample.root).manifest_path


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda text: text[: len(text) // 2], "not valid JSON"),
        (
            lambda text: text.replace('"schema_version": 1', '"schema_version": 7'),
            "schema_version 7",
        ),
        (
            lambda text: text.replace('"path": "python/', '"path": "../python/'),
            "patches.0.files.0.path",
        ),
        (lambda text: text.replace('"patched_blob": "', '"patched_blob": "zz'), "patched_blob"),
        (lambda text: text.replace('"name": "eagle3"', '"nom": "eagle3"'), "patches.0.name"),
    ],
)
def test_broken_manifest_exits_2_naming_file_and_field(sample: Sample, mutate, expected) -> None:
    sample.record_eagle3()
    path = manifest_path(sample)
    path.write_text(mutate(path.read_text()))
    for command in ("check", "status", "apply", "list"):
        result = sample.pg(command)
        assert result.exit_code == 2, (command, result.output)
        assert str(path) in result.stderr
        assert expected in result.stderr
        assert "Traceback" not in result.output


def test_no_manifest_is_a_configuration_error(sample: Sample) -> None:
    result = sample.pg("check")
    assert result.exit_code == 2
    assert "patchguard record" in result.stderr


def test_not_a_git_repo_is_a_configuration_error(tmp_path: Path) -> None:
    result = patchguard("-C", tmp_path, "check")
    assert result.exit_code == 2
    assert "not inside a git working tree" in result.stderr


def test_manifest_and_content_survive_git_operations(sample: Sample) -> None:
    sample.record_eagle3()
    path = manifest_path(sample)
    assert path.parent == sample.root / ".git" / "patchguard"
    before = path.read_bytes()
    sample.git("stash")
    sample.git("checkout", "-q", "old")
    sample.git("reset", "-q", "--hard", "main")
    sample.git("checkout", "-q", "main")
    sample.git("clean", "-fdxq")
    sample.git("stash", "drop")
    sample.git("reflog", "expire", "--expire=now", "--all")
    sample.git("gc", "-q", "--prune=now")
    assert path.read_bytes() == before
    assert sample.pg("apply").exit_code == 0
    assert sample.pg("check").exit_code == 0


def test_linked_worktree_shares_the_manifest(sample: Sample, tmp_path: Path) -> None:
    sample.record_eagle3()
    other = tmp_path / "wt"
    sample.git("worktree", "add", "-q", str(other), "old")
    result = patchguard("-C", other, "check", "--json")
    assert result.exit_code == 1
    assert json.loads(result.output)["patches"][0]["state"] == "drifted"
    assert patchguard("-C", other, "apply").exit_code == 0
    assert patchguard("-C", other, "check").exit_code == 0


def test_works_from_a_subdirectory_with_paths_relative_to_it(git_repo) -> None:
    """pytest-git's repository: paths given from a subdirectory resolve like git's."""
    root = Path(str(git_repo.workspace))
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text("class A:\n    pass\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    (pkg / "mod.py").write_text("class A:\n    def added(self):\n        return 1\n")
    result = patchguard("-C", pkg, "record", "p", "mod.py", "--require", "mod.py::A")
    assert result.exit_code == 0, result.output
    assert "requires pkg/mod.py::A.added" in result.output
    assert "requires pkg/mod.py::A\n" in result.output + "\n"
    assert patchguard("-C", pkg, "check").exit_code == 0


def test_runtime_records_have_exactly_the_schemas_fields() -> None:
    from guard.store import manifest, schema

    for name in ("FileChange", "Patch", "Manifest"):
        runtime = list(getattr(manifest, name)._fields)
        assert runtime == list(getattr(schema, name).model_fields), name


def test_a_patch_without_a_description_reads_the_same_when_known_valid(sample: Sample) -> None:
    """The schema lets a hand-written manifest leave a description out: the second read, of
    bytes known valid (json alone, no pydantic), must give the same records as the first."""
    sample.record_eagle3()
    path = manifest_path(sample)
    data = json.loads(path.read_text())
    del data["patches"][0]["description"]
    path.write_text(json.dumps(data))
    for _ in range(2):
        listed = sample.pg("list", "--json")
        assert listed.exit_code == 0, listed.output
        assert json.loads(listed.stdout)["patches"][0]["description"] == ""


LOAD_AND_REPORT = """
import sys
from pathlib import Path
from guard.git.repo import Repo
from guard.store.derived import load_manifest
manifest = load_manifest(Repo.discover(Path(sys.argv[1])))
print(len(manifest.patches), "pydantic" in sys.modules)
"""


def test_validated_bytes_load_without_pydantic_and_edits_are_validated_again(
    sample: Sample,
) -> None:
    sample.record_eagle3()

    def load() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", LOAD_AND_REPORT, str(sample.root)],
            capture_output=True,
            text=True,
        )

    assert load().stdout.split() == ["1", "False"]  # recorded bytes are known-valid
    path = locate(sample.root).manifest_path
    path.write_text(path.read_text().replace('"name": "eagle3"', '"name": "bad name!"'))
    edited = load()
    assert edited.returncode != 0
    assert "patches.0.name" in edited.stderr  # validated again, and refused
