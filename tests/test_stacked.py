"""Two and three patches stacked on one file, through every command that moves them.

Each patch is recorded on top of the ones before it (a second patch records only its own change,
commit 167ed7e). Two layouts: `touching` puts every patch's methods at the end of the class, one
right after the other, so their lines touch; `apart` puts them at separate places in the file.
A 3-way merge (git's, and libgit2's) takes a patch out or puts it on without the ones it touches
only in stack order; out of order it refuses, as a rebase that reorders such commits does. So
there patchguard must say which patches to move together, change nothing, and the pasted
command must work. Apart, every order works on its own.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import sample_repo
from conftest import git, patchguard
from helpers import run_patchguard

KIMI = sample_repo.KIMI


@dataclass(frozen=True)
class Stacked:
    """A patch of the stack: the methods it adds, and the edit that adds them."""

    name: str
    methods: tuple[str, ...]
    before: str  # the text the patch's lines go in front of (`None`: the end of the file)
    text: str


def method(name: str) -> str:
    return f"\n    def {name}(self):\n        return {len(name)}\n"


EAGLE3 = Stacked("eagle3", sample_repo.METHODS, "\n\nEntryClass", sample_repo.EAGLE3_METHODS)
LAYOUTS = {
    "touching": [
        EAGLE3,
        Stacked("draft", ("draft_vocab",), "\n\nEntryClass", method("draft_vocab")),
        Stacked("aux", ("aux_layers",), "\n\nEntryClass", method("aux_layers")),
    ],
    "apart": [
        EAGLE3,
        Stacked("draft", ("draft_vocab",), "\n    def forward(", method("draft_vocab")),
        Stacked("aux", ("aux_layers",), "", "\n\ndef aux_layers():\n    return 3\n"),
    ],
}


def add(root: Path, patch: Stacked) -> None:
    path = root / KIMI
    text = path.read_text()
    if patch.before:
        assert patch.before in text
        path.write_text(text.replace(patch.before, patch.text + patch.before, 1))
    else:
        path.write_text(text + patch.text)


def record_stack(root: Path, patches: Sequence[Stacked], pg: PG) -> bytes:
    """Record each patch on top of the ones before; returns the file with all of them."""
    for patch in patches:
        add(root, patch)
        pg("record", patch.name, KIMI, check=0)
    return (root / KIMI).read_bytes()


class PG:
    """The CLI in one repository (no traceback ever; `check` is the exit wanted): the installed
    one, or with no `env` the same CLI in-process, for tests that only apply and unapply."""

    def __init__(self, root: Path, env: dict[str, str] | None) -> None:
        self.root, self.env = root, env

    def __call__(self, *args: str, check: int | None = None) -> subprocess.CompletedProcess[str]:
        if self.env is not None:
            return run_patchguard(self.root, self.env, args, check)
        result = patchguard("-C", self.root, *args)
        done = subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)
        if check is not None:
            assert done.returncode == check, done.stdout + done.stderr
        return done


def assert_applied(root: Path, patches: Sequence[Stacked], applied: set[str]) -> None:
    """Each applied patch's methods are in the file exactly once, the others' not at all."""
    text = (root / KIMI).read_text()
    for patch in patches:
        for name in patch.methods:
            wanted = 1 if patch.name in applied else 0
            assert text.count(f"def {name}(") == wanted, (patch.name, name, text)


def build(root: Path, env: dict[str, str] | None) -> tuple[Path, PG]:
    sample_repo.build(root)
    pg = PG(root, env)
    pg("install", check=0)
    return root, pg


@pytest.fixture
def repo(tmp_path: Path, clean_env: dict[str, str]) -> tuple[Path, PG]:
    return build(tmp_path / "sglang", clean_env)


@pytest.fixture
def repo_in_process(tmp_path: Path) -> tuple[Path, PG]:
    return build(tmp_path / "sglang", None)


def orders(count: int) -> list[tuple[int, ...]]:
    return list(itertools.permutations(range(count)))


def layouts_and_orders() -> list[tuple[str, int, tuple[int, ...]]]:
    return [(layout, n, order) for layout in LAYOUTS for n in (2, 3) for order in orders(n)]


def move_one(root: Path, pg: PG, verb: str, name: str, together: Sequence[str]) -> None:
    """`apply NAME` / `unapply NAME`; when it must move `together` with other patches, it
    changes nothing and names them all: paste that command."""
    before = (root / KIMI).read_bytes()
    result = pg(verb, name)
    if not together:
        assert result.returncode == 0, result.stdout + result.stderr
        return
    assert result.returncode == 1, result.stdout + result.stderr
    assert (root / KIMI).read_bytes() == before
    advice = result.stdout.split(f"-> patchguard {verb} ", 1)[1].splitlines()[0].split()
    assert advice == list(together)
    pasted = pg(verb, *advice)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr


@pytest.mark.parametrize(("layout", "count", "order"), layouts_and_orders())
def test_unapply_then_apply_one_at_a_time_in_every_order(
    repo_in_process: tuple[Path, PG], layout: str, count: int, order: tuple[int, ...]
) -> None:
    root, pg = repo_in_process
    patches = LAYOUTS[layout][:count]
    everything = record_stack(root, patches, pg)
    head = git(root, "show", f"HEAD:{KIMI}").stdout.encode()
    applied = {p.name for p in patches}

    for index in order:
        name = patches[index].name
        if name not in applied:
            continue  # taken out together with a patch before it in this order
        above = [p.name for p in patches[index + 1 :] if p.name in applied]
        together = [name, *above] if layout == "touching" and above else []
        move_one(root, pg, "unapply", name, together)
        applied -= {name, *together}
        assert_applied(root, patches, applied)
    assert (root / KIMI).read_bytes() == head

    for index in order:
        name = patches[index].name
        if name in applied:
            continue
        below = [p.name for p in patches[:index] if p.name not in applied]
        together = [*below, name] if layout == "touching" and below else []
        if together:
            # a conflict is a failed guard: status exits as check would
            status = pg("status", name, check=1).stdout
            assert f"recorded on top of patch {', '.join(below)}, not applied here" in status
        move_one(root, pg, "apply", name, together)
        applied |= {name, *together}
        assert_applied(root, patches, applied)
    assert (root / KIMI).read_bytes() == everything
    pg("check", check=0)


STACKS = [(layout, count) for layout in LAYOUTS for count in (2, 3)]


@pytest.mark.parametrize(("layout", "count"), STACKS)
def test_checkout_where_the_file_differs_and_back(
    repo: tuple[Path, PG], layout: str, count: int
) -> None:
    """The move exits 0, every method once; back, the very same bytes."""
    root, pg = repo
    patches = LAYOUTS[layout][:count]
    everything = record_stack(root, patches, pg)
    every_name = {p.name for p in patches}
    for dry_run in ("unapply", "apply"):
        pg(dry_run, "--dry-run", check=0)
        assert (root / KIMI).read_bytes() == everything
    pg("git", "status", check=0)
    moved = pg("git", "checkout", "-q", "old", check=0)
    for patch in patches:
        assert f"re-applied {patch.name} " in moved.stderr
    assert git(root, "diff", "--quiet", "main", "old", "--", KIMI, check=False).returncode == 1
    assert_applied(root, patches, every_name)
    pg("check", check=0)
    pg("git", "checkout", "-q", "main", check=0)
    assert (root / KIMI).read_bytes() == everything
    pg("check", check=0)


@pytest.mark.parametrize(("layout", "count"), STACKS)
def test_stash_and_pop_with_the_stack_applied(
    repo: tuple[Path, PG], layout: str, count: int
) -> None:
    root, pg = repo
    patches = LAYOUTS[layout][:count]
    everything = record_stack(root, patches, pg)
    readme = root / "README.md"
    readme.write_text("# sglang (sample)\n\nmy notes\n")
    pg("git", "stash", check=0)  # stashes the notes, not the patches
    assert readme.read_text() == "# sglang (sample)\n"
    assert (root / KIMI).read_bytes() == everything
    pg("git", "stash", "pop", check=0)
    assert readme.read_text().endswith("my notes\n")
    assert (root / KIMI).read_bytes() == everything

    git(root, "stash", "-q")  # a plain stash sweeps the patches in; the pop brings them back once
    assert (root / KIMI).read_text() == git(root, "show", f"HEAD:{KIMI}").stdout
    pg("git", "stash", "pop", check=0)
    assert_applied(root, patches, {p.name for p in patches})
    assert readme.read_text().endswith("my notes\n")
    pg("check", check=0)


@pytest.mark.parametrize("count", [2, 3])
def test_bisect_run_with_a_stack_finds_the_real_regression(
    tmp_path: Path, clean_env: dict[str, str], count: int
) -> None:
    """The hunt (c3 absorbs eagle3 upstream, c4 brings the regression) with patches on top."""
    root = tmp_path / "sglang"
    commits = sample_repo.build_hunt(root)
    git(root, "checkout", "-q", "-b", "work", "c0")
    pg = PG(root, clean_env)
    patches = LAYOUTS["touching"][:count]
    everything = record_stack(root, patches, pg)
    pg("install", check=0)
    bench = tmp_path / "bench.py"
    bench.write_text(sample_repo.HUNT_BENCH_TEXT)
    pg("git", "bisect", "start", "c4", "c0", check=0)
    log = tmp_path / "hunt.jsonl"
    run = pg("bisect", "run", "--log", str(log), "python", str(bench), check=0)
    assert f"{commits['c4']} is the first bad commit" in run.stdout
    steps = [json.loads(line) for line in log.read_text().splitlines()]
    assert steps and all(s["exit"] == 0 and s["ok"] for s in steps)
    for step in steps:
        assert set(step["patches"]) == {p.name for p in patches}
        assert set(step["patches"].values()) <= {"applied", "upstream"}
    pg("git", "bisect", "reset", check=0)
    assert (root / KIMI).read_bytes() == everything
    pg("check", check=0)
