"""Helpers shared by test files (fixtures stay in conftest)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest
import sample_repo
from conftest import Sample, git

NOBODY = 65534
# Every kill point (guard.git.faults), in the order a writer passes them
# (tests/reliability/test_kill_points.py holds them to the code).
STORE_POINTS = ("store-begun", "store-ref-moved", "store-derived")
JOURNAL_POINTS = ("journal-marked", "journal-first-file", "journal-written")


def subcommands(command: click.Command) -> dict[str, click.Command]:
    """A group's commands by name, in the order its help lists them ({} for a command).

    Asked of the group as click asks it: patchguard's group imports a command's module only
    when asked for it, so `group.commands` holds none of them.
    """
    if not isinstance(command, click.Group):
        return {}
    context = click.Context(command)
    found = {name: command.get_command(context, name) for name in command.list_commands(context)}
    return {name: sub for name, sub in found.items() if sub is not None}


def as_another_user() -> list[str]:
    """The command prefix that runs a program as `nobody`; skips the test where it cannot."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run as another user")
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    if subprocess.run([*prefix, sys.executable, "-c", "import guard"]).returncode != 0:
        pytest.skip("this checkout of patchguard is not readable by another user")
    return prefix


@contextmanager
def home_others_can_read() -> Iterator[Path]:
    """A directory outside pytest's private temp tree, which another user may enter."""
    home = Path(tempfile.mkdtemp(prefix="patchguard-other-user-"))
    try:
        home.chmod(0o755)
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def stash_then_checkout(root: Path, target: str, trace: Path) -> tuple[str, int]:
    """`git stash`, then a checkout of `target` whose hooks re-apply what it took: (the
    checkout's stderr, the git processes its hooks started, as GIT_TRACE counts them)."""
    subprocess.run(["git", "stash", "-q"], cwd=root, check=True, capture_output=True)
    trace.write_text("")  # GIT_TRACE appends
    moved = subprocess.run(
        ["git", "-c", "maintenance.auto=false", "checkout", "-q", target],
        cwd=root,
        env={**os.environ, "GIT_TRACE": str(trace)},
        capture_output=True,
        text=True,
    )
    assert moved.returncode == 0, moved.stderr
    return moved.stderr, trace.read_text().count("trace: built-in: git ") - 1  # the checkout


def run_patchguard(
    root: Path, env: dict[str, str], args: tuple[str, ...], check: int | None
) -> subprocess.CompletedProcess[str]:
    """The installed CLI, as a user runs it in `root`: never a traceback; `check` is the exit."""
    result = subprocess.run(
        ["patchguard", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in result.stderr, result.stderr
    if check is not None:
        assert result.returncode == check, result.stdout + result.stderr
    return result


@dataclass
class Checkout:
    """A checkout of a sample_repo history, driven as users drive it: the installed CLI
    (`run_patchguard`) and the git CLI, both in `env`."""

    root: Path
    env: dict[str, str]
    commits: dict[str, str] = field(default_factory=dict)

    @property
    def kimi(self) -> Path:
        return self.root / sample_repo.KIMI

    def pg(self, *args: str, check: int | None = None) -> subprocess.CompletedProcess[str]:
        return run_patchguard(self.root, self.env, args, check)

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return git(self.root, *args, check=check, env=self.env)

    def rev(self, name: str) -> str:
        return self.git("rev-parse", name).stdout.strip()

    def head(self) -> str:
        return self.rev("HEAD")

    def at(self, rev: str) -> str:
        """The model file as commit `rev` has it."""
        return self.git("show", f"{rev}:{sample_repo.KIMI}").stdout

    def head_file(self) -> str:
        return self.at("HEAD")

    def unmerged(self) -> str:
        return self.git("ls-files", "--unmerged").stdout

    def stash_count(self) -> int:
        return len(self.git("stash", "list").stdout.splitlines())


def move_probe(*heavy: str) -> str:
    """`python -c` code that runs a patchguard command as the installed one does (its words
    after the code), then says its status ("status: N") and which of the `heavy` modules it
    loaded ("heavy: a,b", sorted; "heavy: " for none), on stderr."""
    return f"""
import sys
from guard.entry import main
sys.argv = ["patchguard", *sys.argv[1:]]
try:
    main()
except SystemExit as done:
    print("status:", done.code, file=sys.stderr)
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print("heavy:", ",".join(heavy), file=sys.stderr)
"""


def methods_once_in_class(path: Path) -> bool:
    """Each EAGLE-3 method defined once, inside the model's class (before EntryClass)."""
    text = path.read_text()
    cls = text.index(f"class {sample_repo.CLASS}")
    entry = text.index("EntryClass")
    return all(
        text.count(f"def {m}(") == 1 and cls < text.index(f"def {m}(") < entry
        for m in sample_repo.METHODS
    )


# How long a signal test waits for a child to get somewhere, or to end: a bound for a hung
# child, never a measure (a busy machine, the suite's other worker included, is slow).
PATIENCE = 300


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def blocked_reading_its_stdin(pid: int) -> bool:
    """Whether `pid` waits in a read of a pipe on its file descriptor 0 (Linux's /proc: the
    kernel function it sleeps in is pipe_read, anon_pipe_read in newer kernels; the system
    call's first argument is the descriptor). A read of another pipe, such as a git
    command's output, does not count: Ctrl-C then reaches that git, not the read."""
    if "pipe_read" not in Path(f"/proc/{pid}/wchan").read_text():
        return False
    fields = Path(f"/proc/{pid}/syscall").read_text().split()
    return len(fields) > 1 and int(fields[1], 16) == 0


def children_of(pid: int) -> str:
    """The command lines of the processes `pid` started, one a line (Linux's /proc).

    A child forked but not yet exec'd still shows its parent's command line: look for the
    program at the start of a line, not anywhere in it."""
    found = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        with contextlib.suppress(FileNotFoundError):  # it may just have ended
            found.append(Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" "))
    return b"\n".join(found).decode(errors="replace")


@contextmanager
def killed_at_the_end(child: subprocess.Popen[str]) -> Iterator[None]:
    """A test that fails while its child runs ends that child's whole group, then reaps it."""
    try:
        yield
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def pushes_an_update(
    node: Sample, remote: Path, edit: Callable[[str], str], message: str = "tuned"
) -> None:
    """Another node takes the patch from `remote`, edits its file, records and pushes it back:
    an update waiting there for the first node's fetch."""
    assert node.pg("fetch", remote).exit_code == 0
    assert node.pg("apply").exit_code == 0
    node.kimi.write_text(edit(node.kimi.read_text()))
    assert node.pg("record", "eagle3", sample_repo.KIMI, "-m", message).exit_code == 0
    assert node.pg("push", remote).exit_code == 0


# The CLI as the installed command runs it (guard.entry), then which of `modules` it loaded.
_LOADED_PROBE = """
import sys
from guard.entry import main
asked = sys.argv[1].split(",")
sys.argv = ["patchguard", *sys.argv[2:]]
try:
    main()
except SystemExit:
    pass
loaded = sorted(m for m in sys.modules if m in asked)
print("loaded:", ",".join(loaded), file=sys.stderr)
"""


def modules_loaded(root: Path, modules: Iterable[str], *args: str) -> list[str]:
    """Which of `modules` `patchguard ARGS`, run in `root` in a fresh interpreter, imports."""
    result = subprocess.run(
        [sys.executable, "-c", _LOADED_PROBE, ",".join(modules), *args],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("loaded:")]
    assert len(lines) == 1, result.stdout + result.stderr
    return [name for name in lines[0].removeprefix("loaded:").strip().split(",") if name]


def hunt_checkout(
    tmp_path: Path, env: dict[str, str], slowdown: tuple[Path, dict[str, str]]
) -> Checkout:
    """A copy of the slowdown history on branch `work` at s00, the patch recorded, the hooks
    installed; the benchmark counts its runs in BENCH_COUNTER (`runs_made`)."""
    template, commits = slowdown
    root = tmp_path / "sglang"
    shutil.copytree(template, root, symlinks=True)
    checkout = Checkout(root, {**env, "BENCH_COUNTER": str(tmp_path / "runs")}, dict(commits))
    checkout.git("checkout", "-q", "-b", "work", "s00")
    sample_repo.add_eagle3_methods(root)
    checkout.pg("record", "eagle3", sample_repo.KIMI, check=0)
    checkout.pg("install", check=0)
    return checkout


def runs_made(hunt: Checkout) -> int:
    """The runs of the slowdown history's benchmark so far."""
    counter = Path(hunt.env["BENCH_COUNTER"])
    return int(counter.read_text()) if counter.exists() else 0
