"""Shared fixtures: real git repositories, and the CLI run the way users run it."""

from __future__ import annotations

import atexit
import compileall
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import settings

# Hypothesis fails an example slower than 200 ms by default: a timing, which the suite never
# asserts (with a worker per core, a busy machine makes any example slow now and then).
settings.register_profile("patchguard", deadline=None)
settings.load_profile("patchguard")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def _isolate_from_the_machines_git_config() -> None:
    """Every git the tests start, directly or through patchguard, sees no user or system config.

    A global core.hooksPath, a template dir with hooks, or init.defaultBranch would otherwise
    change what the tests exercise (and could let a hook land in the user's own directory).
    Set at import, before any fixture reads os.environ, so subprocess environments inherit it.
    """
    home = Path(tempfile.mkdtemp(prefix="patchguard-tests-git-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)  # a run leaves nothing in /tmp
    (home / "gitconfig").write_text("")
    (home / "templates").mkdir()
    os.environ["GIT_CONFIG_GLOBAL"] = str(home / "gitconfig")
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"
    os.environ["GIT_TEMPLATE_DIR"] = str(home / "templates")


def _compile_patchguard_once() -> None:
    """Bytecode for guard/ before any test starts a patchguard process.

    With PYTHONDONTWRITEBYTECODE=1 in the environment, or in a fresh clone whose guard/ has no
    __pycache__ yet, every patchguard process the suite starts (the CLI, its hooks) compiled
    guard/ again before doing anything. This writes what Python itself writes on a
    first import when it may: guard/__pycache__, ignored by git. Cheap when it is up to date.
    """
    compileall.compile_dir(ROOT / "guard", quiet=1)
    compileall.compile_file(ROOT / "patchguard_entry.py", quiet=1)


_isolate_from_the_machines_git_config()
_compile_patchguard_once()

import sample_repo  # noqa: E402

from guard.cli.app import cli  # noqa: E402

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "patchguard tests",
    "GIT_AUTHOR_EMAIL": "tests@example.invalid",
    "GIT_COMMITTER_NAME": "patchguard tests",
    "GIT_COMMITTER_EMAIL": "tests@example.invalid",
}


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits in tests must not depend on the machine's git config."""
    for key, value in GIT_IDENTITY.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PATCHGUARD_SKIP", raising=False)


def git(
    root: Path, *args: str, check: bool = True, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args], cwd=root, check=check, capture_output=True, text=True, **kwargs
    )


def patchguard(*args: str | Path) -> Result:
    """Run the CLI in-process (stdout and stderr kept apart); pass -C for the repository."""
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@dataclass
class Sample:
    """The sglang-shaped repository from scripts/sample_repo.py."""

    root: Path
    commits: dict[str, str]

    @property
    def kimi(self) -> Path:
        return self.root / sample_repo.KIMI

    def pg(self, *args: str | Path) -> Result:
        return patchguard("-C", self.root, *args)

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return git(self.root, *args, check=check)

    def record_eagle3(self) -> Result:
        sample_repo.add_eagle3_methods(self.root)
        result = self.pg("record", "eagle3", sample_repo.KIMI, "-m", "EAGLE-3 delegation")
        assert result.exit_code == 0, result.output
        return result


class Histories:
    """Each history of scripts/sample_repo.py, built once per test process; a test gets a copy.

    Building one takes some twenty git processes, copying it a few dozen small file copies; the
    copy is the same repository (objects, refs, index), only its inodes are new, which git
    notices and re-reads. Built up front, so no test's own environment shapes another's history.
    """

    BUILDERS: tuple[Callable[[Path], dict[str, str]], ...] = (
        sample_repo.build,
        sample_repo.build_hunt,
        sample_repo.build_absorbing,
    )

    def __init__(self, base: Path) -> None:
        self._built = {
            build: (base / build.__name__, build(base / build.__name__)) for build in self.BUILDERS
        }

    def copy(self, build: Callable[[Path], dict[str, str]], root: Path) -> dict[str, str]:
        """What `build(root)` makes (root must not exist yet); returns the commit ids by name."""
        template, commits = self._built[build]
        shutil.copytree(template, root, symlinks=True)
        return dict(commits)


@pytest.fixture(scope="session")
def histories(tmp_path_factory: pytest.TempPathFactory) -> Histories:
    return Histories(tmp_path_factory.mktemp("histories"))


@pytest.fixture(scope="module")
def slowdown(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The regression hunt's history (scripts/sample_repo.py build_slowdown), once per module."""
    template = tmp_path_factory.mktemp("slowdown") / "sglang"
    return template, sample_repo.build_slowdown(template)


@pytest.fixture
def sample(tmp_path: Path, histories: Histories) -> Iterator[Sample]:
    root = tmp_path / "sglang"
    yield Sample(root, histories.copy(sample_repo.build, root))


def method_count(text: str, name: str) -> int:
    return text.count(f"def {name}(")


@pytest.fixture(scope="session")
def clean_env() -> dict[str, str]:
    """The environment for subprocesses: the test venv first on PATH."""
    env = {**os.environ, **GIT_IDENTITY}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env
