"""A first visit (no cache has seen the commit) re-applies on both cores (guard.tree.warmup):
a forked child assesses the patches from the last one back and warms the content caches.

Whatever the child does, the parent decides: the same checkout says the same, writes the
same bytes and leaves the same cache entries with the child running, killed at once (no
warm-up at all), killed after its first patch, or stopped there (the parent wakes it to stop
it, and reaps it). Counted and compared, never timed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import GIT_IDENTITY, git, patchguard

from guard.tree.warmup import ASSESSED, BEGUN

MODELS = 6
HOOK_TIMEOUT = 60  # a child left stopped would hold the checkout forever


def model(number: int, *, older: bool = False) -> str:
    """A model file; main's has a helper upstream added above the patch's place."""
    helper = "" if older else "    def helper(self):\n        return self.value * 2\n\n"
    # Model 4's older version already has the patch's method (absorbed, with a docstring);
    # model 5's older version changed the line right above where the patch sits (conflict).
    ending = "        return x + self.value\n"
    if older and number == 5:
        ending = "        return x - self.value\n"
    absorbed = (
        f"\n    def extra_{number}(self) -> int:\n"
        '        """Upstream\'s own copy."""\n'
        f"        return {number}\n"
        if older and number == 4
        else ""
    )
    return (
        f"class Model{number}:\n"
        f"    def __init__(self):\n        self.value = {number}\n\n"
        f"{helper}"
        f"    def forward(self, x):\n{ending}{absorbed}"
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six patches recorded on main, each on a model file of its own; `older` differs in
    every one of them (so every patch merges), hooks installed, the patches applied."""
    with pytest.MonkeyPatch.context() as environment:  # the tests' identity is per test
        for key, value in GIT_IDENTITY.items():
            environment.setenv(key, value)
        return _build(tmp_path_factory.mktemp("first-visit") / "repo")


def _build(root: Path) -> Path:
    models = root / "pkg" / "models"
    models.mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (models / "__init__.py").write_text("")
    git(root, "init", "-q", "-b", "main")
    for number in range(MODELS):
        (models / f"m{number}.py").write_text(model(number, older=True))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "older")
    git(root, "branch", "older")
    for number in range(MODELS):
        (models / f"m{number}.py").write_text(model(number))
    git(root, "commit", "-q", "-am", "main")
    for number in range(MODELS):
        path = models / f"m{number}.py"
        path.write_text(
            path.read_text() + f"\n    def extra_{number}(self):\n        return {number}\n"
        )
        recorded = patchguard("-C", root, "record", f"p{number}", path, "-m", "extra")
        assert recorded.exit_code == 0, recorded.output
    assert patchguard("-C", root, "install").exit_code == 0
    return root


def first_visit(template: Path, tmp_path: Path, kill_at: str | None) -> dict[str, object]:
    """A copy of the template moved to `older` by a plain git checkout after `git stash`,
    with no cache: what the checkout said, and what it left."""
    root = tmp_path / (kill_at or "child").replace(":", "-")
    shutil.copytree(template, root, symlinks=True)
    git(root, "stash", "-q")
    shutil.rmtree(root / ".git" / "patchguard-cache", ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "PATCHGUARD_KILL_AT"}
    if kill_at is not None:
        env["PATCHGUARD_KILL_AT"] = kill_at
    moved = subprocess.run(
        ["git", "-c", "maintenance.auto=false", "checkout", "-q", "older"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=HOOK_TIMEOUT,
    )
    cache = root / ".git" / "patchguard-cache"
    return {
        "exit": moved.returncode,
        "said": moved.stderr,
        "files": {p.name: p.read_bytes() for p in sorted((root / "pkg" / "models").iterdir())},
        "git status": git(root, "status", "--porcelain").stdout,
        "status": patchguard("-C", root, "status").output,
        "entries": {
            kind: sorted(p.name for p in (cache / kind).iterdir()) for kind in ("parsed", "merges")
        },
    }


def test_the_first_visit_is_the_same_whatever_becomes_of_the_child(
    template: Path, tmp_path: Path
) -> None:
    alone = first_visit(template, tmp_path, BEGUN)  # the child dies before it assesses anything
    said = str(alone["said"])
    assert alone["exit"] == 1, said  # model 5 conflicts: the guard fails loudly
    for number in (0, 1, 2, 3):
        assert f"re-applied p{number} (pkg/models/m{number}.py)" in said
    assert "p5" in said and "conflict" in said
    files = alone["files"]
    assert isinstance(files, dict)
    assert b"def extra_0(self):" in files["m0.py"] and b"def helper" not in files["m0.py"]
    assert files["m4.py"].count(b"def extra_4") == 1  # upstream's copy, not a second one
    assert b"extra_5" not in files["m5.py"]  # left untouched, not half merged
    for kill_at in (None, ASSESSED, f"{ASSESSED}:stop"):
        assert first_visit(template, tmp_path, kill_at) == alone, kill_at


def test_nothing_is_left_half_written_or_running(template: Path, tmp_path: Path) -> None:
    """A child stopped halfway: the parent resumes it to stop it and reaps it, and no
    temporary file of a cache entry stays behind."""
    first_visit(template, tmp_path, f"{ASSESSED}:stop")
    root = tmp_path / f"{ASSESSED}-stop"
    cache = root / ".git" / "patchguard-cache"
    assert not [p for p in cache.rglob("*") if p.name.endswith(".patchguard-tmp")]
    mine = [
        pid for pid in os.listdir("/proc") if pid.isdigit() and _cwd(pid) == str(root.resolve())
    ]
    assert mine == []


def _cwd(pid: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def test_a_child_left_behind_holds_no_lock(
    template: Path, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """The hook killed (kill -9, the OOM killer) while its child waits stopped: the child
    must not keep the worktree's lock (a flock the fork shares), or every patchguard command
    after it waits for a process nobody will end. The next apply takes the lock at once and
    finishes the job."""
    root = tmp_path / "orphan"
    shutil.copytree(template, root, symlinks=True)
    git(root, "stash", "-q")
    shutil.rmtree(root / ".git" / "patchguard-cache", ignore_errors=True)
    env = {**os.environ, "PATCHGUARD_KILL_AT": f"{BEGUN}:stop"}
    moving = subprocess.Popen(
        ["git", "-c", "maintenance.auto=false", "checkout", "-q", "older"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    child = None
    try:
        while child is None:
            assert moving.poll() is None, "the checkout ended before its child stopped"
            child = next((pid for pid in _mine(root) if _state(pid) == "T"), None)
        parent = int(_status(child)["PPid"])
        os.kill(parent, signal.SIGKILL)
        moving.wait(timeout=HOOK_TIMEOUT)
        applied = subprocess.run(
            ["patchguard", "-C", str(root), "apply"],
            env={**clean_env, "PATCHGUARD_LOCK_TIMEOUT": "5"},
            capture_output=True,
            text=True,
            timeout=HOOK_TIMEOUT,
        )
        assert "held for more than" not in applied.stderr
        assert applied.returncode == 1, applied.stderr  # model 5 conflicts, as in a full run
        models = root / "pkg" / "models"
        files = {p.name: p.read_bytes() for p in sorted(models.iterdir())}
        assert files == first_visit(template, tmp_path, None)["files"]  # what a full run writes
    finally:
        moving.kill()
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(child), signal.SIGKILL)


def _mine(root: Path) -> list[str]:
    return [p for p in os.listdir("/proc") if p.isdigit() and _cwd(p) == str(root.resolve())]


def _status(pid: str) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def _state(pid: str) -> str:
    try:
        return _status(pid)["State"][0]
    except OSError:
        return ""
