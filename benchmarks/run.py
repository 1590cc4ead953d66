"""`make bench`: what patchguard costs per checkout, commit and command, against the baselines.

Builds its own repositories under benchmarks/work/ (sglang-shaped ones with about 2,000
files, with 1, 10 and 40 patches or one patch of 40 files, and a synthetic one with 20,000;
and checkouts of the sources of the real sglang wheel with patches on 1 or 40 of its real model
files, the wheel downloaded once into benchmarks/work/wheels), interleaves the rows so they
share the machine's state, and reports medians with ratios to (a), and each target's value and
verdict. Every target is a ratio of two rows of the same run (or, for a commit, a count of the
processes it starts), so a run on another machine still says whether it is met. Writes
benchmarks/results/latest.json and latest.md. Timings are measured here only; tests never
assert them.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import sample_repo  # noqa: E402

WORK = ROOT / "benchmarks" / "work"
RESULTS = ROOT / "benchmarks" / "results"
BIN = Path(sys.executable).parent
PATCHGUARD = str(BIN / "patchguard")
NO_HOOKS = ["-c", "core.hooksPath=/nonexistent/patchguard-bench"]
# As users run it: with bytecode caches (a session may set PYTHONDONTWRITEBYTECODE).
ENV = {
    **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def run(
    *args: str, cwd: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=ENV, capture_output=True, text=True, check=check)


def timed(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    """Wall time of one command, in milliseconds."""
    start = time.perf_counter()
    subprocess.run(
        args, cwd=cwd, env=env or ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return (time.perf_counter() - start) * 1000


# Runs of one command per sample of the rows whose targets are ratios of one command to another
# ((k), (m)): a run on this class of machine varies by up to a third around its median, and a
# ratio of two medians of 21 moved by about 0.1 between runs of `make bench` (Pinpoint's answer
# to an unclear result: more attempts). The median of the runs is the sample.
ATTEMPTS = 3


def timed_median(*args: str, cwd: Path | None = None) -> float:
    """`timed`, the median of ATTEMPTS runs."""
    return statistics.median(timed(*args, cwd=cwd) for _ in range(ATTEMPTS))


def build_repo(name: str, filler: int, guarded_extra: int = 0) -> Path:
    """A sample repository with the EAGLE-3 patch recorded, plus `guarded_extra` guarded files."""
    root = WORK / name
    if root.exists():
        shutil.rmtree(root)
    commits = sample_repo.build(root, filler=filler)
    for number in range(guarded_extra):
        path = root / f"python/sglang/srt/layers/gen/mod_{number:05d}.py"
        path.write_text(path.read_text() + f"\n\ndef guarded_{number}():\n    return {number}\n")
    sample_repo.add_eagle3_methods(root)
    run(PATCHGUARD, "-C", str(root), "record", "eagle3", "-m", "bench")
    run("git", "branch", "bench-b", commits["kimi-moved"], cwd=root)  # same kimi_k25.py as main
    return root


MODELS = "python/sglang/srt/models/gen"


def model_file(number: int) -> tuple[str, str]:
    """A model file of a real model's shape (a class of a dozen methods, about 120 lines)."""
    name = f"GenModel{number:02d}ForCausalLM"
    helpers = "".join(
        f"\n    def helper_{k}(self, hidden, scale={k}):\n"
        f"        hidden = self.language_model.norm(hidden) * scale\n"
        f"        return self.language_model.project(hidden, {k})\n"
        for k in range(24)
    )
    text = sample_repo.KIMI_V2.replace(sample_repo.CLASS, name).replace(
        "    def load_weights(", helpers.lstrip("\n") + "\n    def load_weights(", 1
    )
    return f"{MODELS}/model_{number:02d}.py", text


def build_patches(name: str, patches: int, files_per_patch: int = 1) -> Path:
    """`patches` patches of the EAGLE-3 shape, each on `files_per_patch` model files of their own.

    Branch bench-b differs from main in a file no patch touches, so its checkouts have
    nothing to move but what `git stash` took.
    """
    root = WORK / name
    if root.exists():
        shutil.rmtree(root)
    sample_repo.build(root, filler=2000)
    paths = []
    for number in range(patches * files_per_patch):
        path, text = model_file(number)
        sample_repo.write(root, path, text)
        paths.append(path)
    sample_repo.commit(root, "generated models")
    run("git", "branch", "bench-b", cwd=root)
    sample_repo.write(root, "README.md", "# sglang (sample), next release\n")
    sample_repo.commit(root, "readme")
    for path in paths:
        target = root / path
        text = target.read_text()
        target.write_text(
            text.replace("\n\nEntryClass", sample_repo.EAGLE3_METHODS + "\n\nEntryClass", 1)
        )
    for number in range(patches):
        mine = paths[number * files_per_patch : (number + 1) * files_per_patch]
        run(PATCHGUARD, "-C", str(root), "record", f"eagle3-{number:02d}", *mine, "-m", "bench")
    return root


def with_hooks(root: Path) -> Path:
    run(PATCHGUARD, "-C", str(root), "install")
    run(PATCHGUARD, "-C", str(root), "check", "--quiet")  # warm the verified cache
    return root


class Alternating:
    """Checkouts back and forth between main and `other`; each call times one checkout."""

    def __init__(self, root: Path, git_args: tuple[str, ...] = (), other: str = "bench-b") -> None:
        self.root, self.git_args, self.other, self.target = root, git_args, other, other

    def __call__(self) -> float:
        elapsed = timed("git", *self.git_args, "checkout", "-q", self.target, cwd=self.root)
        self.target = "main" if self.target == self.other else self.other
        return elapsed


class StashThenCheckout(Alternating):
    """(d): `git stash` (untimed), then the timed checkout whose hook re-applies the patch."""

    def __call__(self) -> float:
        run("git", "stash", "-q", cwd=self.root)
        elapsed = super().__call__()
        run("git", "stash", "drop", "-q", cwd=self.root)
        return elapsed


class StashAndPop:
    """(s): `git stash`, then `git stash pop`, both timed, hooks installed: what a user's own
    stash and pop cost, the patched files leaving the tree and coming back unchanged."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self) -> float:
        stashed = timed("git", "stash", "-q", cwd=self.root)
        return stashed + timed("git", "stash", "pop", "-q", cwd=self.root)


class FirstVisit(StashThenCheckout):
    """(p): as (d), with patchguard's caches of this worktree emptied first (untimed): a
    re-apply that nothing was kept for, where (d) and (o) meet a re-apply seen before. Reported
    without a target: every file is parsed exactly, and (p0) bounds what two cores can make
    of that."""

    def __call__(self) -> float:
        caches = self.root / ".git" / "patchguard-cache"
        if not caches.is_dir():  # the caches moved: this row would measure a visit seen before
            raise SystemExit(f"(p): no {caches} to empty; benchmarks/run.py must name the new one")
        shutil.rmtree(caches)
        return super().__call__()


class ExactParse:
    """(p0): the exact parse (guard.truth.symbols: ast.parse, the compiler's check, the model)
    of the patched model files of (p), in this process, one core: what no first visit can
    skip, so (o) + (p0) / 2 over (p1) bounds (p)'s ratio from below on two cores."""

    def __init__(self, root: Path) -> None:
        listed = run("git", "diff", "--name-only", cwd=root).stdout.split()
        self.files = [(path, (root / path).read_bytes()) for path in listed]

    def __call__(self) -> float:
        from guard.truth.symbols import SymbolIndex

        start = time.perf_counter()
        for path, content in self.files:
            SymbolIndex.parse(content, path)
        return (time.perf_counter() - start) * 1000


# Pairs of commits per sample of (g2): the hooks' cost per commit is a fraction of a
# millisecond against ~12 ms of git's own.
COMMITS = 20
# Without git's own `maintenance run --auto` after each commit: the same process in every
# commit, a few milliseconds of noise around the fraction of one that hooks cost.
COMMIT = ("git", "-c", "maintenance.auto=false")


class CommitPairs:
    """(g2): the hooks' cost of one commit, as the median over COMMITS order-balanced pairs of
    single commits (with the hooks, with empty hooks of the same names: Skia's pairwise way),
    each timed alone. A slow spell of the machine then lands on both commits of a pair.
    Reported without a target: the target is commit_processes()'s count."""

    def __init__(self, root: Path) -> None:
        self.root = root
        commit = ("commit", "-q", "--allow-empty", "-m", "x")
        self.hooked = (*COMMIT, *commit)
        self.empty = (*COMMIT, "-c", f"core.hooksPath={empty_hooks()}", *commit)

    def __call__(self) -> float:
        differences = []
        for number in range(COMMITS):
            first, second = (self.hooked, self.empty) if number % 2 else (self.empty, self.hooked)
            times = {first: timed(*first, cwd=self.root), second: timed(*second, cwd=self.root)}
            differences.append(times[self.hooked] - times[self.empty])
        return statistics.median(differences)


def commit_processes(root: Path) -> tuple[int, int] | str:
    """The programs a `git commit` in `root` starts (successful execve calls, git and each hook
    script included, as `strace -f` sees them): with patchguard's hooks, and with empty hooks
    of the same names. Equal when patchguard's hooks start no process of their own; a count,
    so one commit of each says it. The reason instead when strace cannot be run."""
    if shutil.which("strace") is None:
        return "not measured: strace is not installed"
    counts = []
    for hooks in ((), ("-c", f"core.hooksPath={empty_hooks()}")):
        trace = WORK / "commit.strace"
        traced = run(
            *("strace", "-f", "-e", "trace=execve", "-o", str(trace)),
            *(*COMMIT, *hooks, "commit", "-q", "--allow-empty", "-m", "x"),
            cwd=root,
            check=False,
        )
        if traced.returncode != 0:
            return f"not measured: strace failed: {traced.stderr.strip()[-200:]}"
        lines = trace.read_text().splitlines()
        counts.append(sum(1 for line in lines if "execve(" in line and line.endswith("= 0")))
    return counts[0], counts[1]


class LiftedCheckout:
    """(i): `patchguard git checkout` between commits whose patched file differs."""

    def __init__(self, root: Path) -> None:
        self.root, self.target = root, "old"

    def __call__(self) -> float:
        elapsed = timed(PATCHGUARD, "git", "checkout", "-q", self.target, cwd=self.root)
        self.target = "main" if self.target == "old" else "old"
        return elapsed


class LiftedPair:
    """(n): `patchguard git checkout old && patchguard git checkout main` in one timed sample:
    two of (i)'s moves, there and back, as a regression hunt makes them."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self) -> float:
        there = timed(PATCHGUARD, "git", "checkout", "-q", "old", cwd=self.root)
        return there + timed(PATCHGUARD, "git", "checkout", "-q", "main", cwd=self.root)


class GitsOwnPair:
    """(n0): what git's own moves cost for the same work as (n), on the same checkout, without
    hooks: `git stash`, `git checkout old`, `git checkout main`, `git stash pop`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __call__(self) -> float:
        moves = (("stash", "-q"), ("checkout", "-q", "old"), ("checkout", "-q", "main"))
        moves += (("stash", "pop", "-q"),)
        return sum(timed("git", *NO_HOOKS, *move, cwd=self.root) for move in moves)


# (m): the commands a person types, each against `python -c pass` (a) of the same environment,
# on the real sglang checkout with one recorded patch (its name is {name}); on the generated
# sample of 2,000 files when the wheel could not be had. `git status --short` (m0) beside them.
TYPED = (
    ("status", ("status",)),
    ("list", ("list",)),
    ("log", ("log",)),
    ("show NAME", ("show", "{name}")),
    ("stamp", ("stamp",)),
    ("apply, nothing to do", ("apply",)),
)

# (o), (p), (r), (s): the sglang wheel whose real model files the 40-patch rows patch.
SGLANG = "0.5.10"
WHEELS = WORK / "wheels"
REAL_PATCHES = 40


def sglang_wheel() -> tuple[Path | None, str]:
    """The wheel, downloaded once into benchmarks/work/wheels; or None and the reason."""
    wheels = sorted(WHEELS.glob(f"sglang-{SGLANG}-*.whl"))
    if not wheels:
        got = run(
            str(BIN / "pip"),
            "download",
            "-q",
            "--no-deps",
            f"sglang=={SGLANG}",
            "-d",
            str(WHEELS),
            check=False,
        )
        wheels = sorted(WHEELS.glob(f"sglang-{SGLANG}-*.whl"))
        if not wheels:
            reason = (got.stderr.strip().splitlines() or ["no wheel"])[-1]
            return None, f"pip download sglang=={SGLANG} failed: {reason}"
    return wheels[0], ""


def typed_method(text: str, number: int) -> str | None:
    """`text` with a small method typed right after the last method of its last class that
    ends in one (as a person adds one, in the file's own line endings), or None when the file
    has no such class."""
    classes = [
        node
        for node in ast.parse(text).body
        if isinstance(node, ast.ClassDef)
        and isinstance(node.body[-1], ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    if not classes:
        return None
    last = classes[-1].body[-1]
    indent = " " * last.col_offset
    lines = text.splitlines(keepends=True)
    end = last.end_lineno or len(lines)
    method = (
        f"\n{indent}def bench_capture_layers_{number:02d}(self, layer_ids=None):\n"
        f"{indent}    self.capture_aux_hidden_states = True\n"
        f"{indent}    return layer_ids or [{number}]\n"
    )
    newline = "\r\n" if "\r\n" in text else "\n"
    if not lines[end - 1].endswith("\n"):
        lines[end - 1] += newline
    return "".join(lines[:end]) + method.replace("\n", newline) + "".join(lines[end:])


def build_real(wheel: Path) -> dict[str, Path]:
    """(o), (p), (r), (s) and (m): checkouts of the wheel's sources (about 2,250 files), with
    patches on the first REAL_PATCHES model files of python/sglang/srt/models (one of them,
    apertus.py, committed with CRLF line endings): one patch per file, and one patch on the
    first file alone; a copy of each for each row that moves its tree (by row and count:
    "o-40", "o-1", ...), and "m-1", which (m) leaves where it is. Branch bench-b (the older
    release) differs from main by a comment line at the top of each of those files, so every
    checkout re-applies by 3-way merge; branch bench-same differs from main in a file no patch
    touches, so the patched files are the same at both commits."""
    base = WORK / "sglang-real-base"
    if base.exists():
        shutil.rmtree(base)
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.startswith("sglang/") and not member.endswith("/"):
                target = base / "python" / member
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(member))
    models = base / "python/sglang/srt/models"
    chosen: list[tuple[str, str]] = []
    for path in sorted(models.glob("*.py")):
        patched = typed_method(path.read_bytes().decode(), len(chosen))
        if path.name != "__init__.py" and patched is not None:
            chosen.append((str(path.relative_to(base)), patched))
        if len(chosen) == REAL_PATCHES:
            break
    run("git", "init", "-q", "-b", "main", cwd=base)
    for relative, _ in chosen:
        target = base / relative
        target.write_bytes(b"# (the older release's header)\n" + target.read_bytes())
    sample_repo.commit(base, "sglang, the older release")
    run("git", "branch", "bench-b", cwd=base)
    for relative, _ in chosen:
        target = base / relative
        target.write_bytes(target.read_bytes().split(b"\n", 1)[1])
    sample_repo.commit(base, f"sglang {SGLANG}")
    run("git", "checkout", "-q", "-b", "bench-same", cwd=base)
    sample_repo.write(base, "BENCH-NOTES.md", "a commit that touches no model file\n")
    sample_repo.commit(base, "notes")
    run("git", "checkout", "-q", "main", cwd=base)
    roots = {}  # (o)'s 40 and 1, then copies of them: patchguard's state goes along
    for count in (REAL_PATCHES, 1):
        root = WORK / f"sglang-real-o-{count}"
        if root.exists():
            shutil.rmtree(root)
        shutil.copytree(base, root, symlinks=True)
        for number, (relative, patched) in enumerate(chosen[:count]):
            # Bytes, as the file was: read_text() and write_text() would drop a file's CRs.
            (root / relative).write_bytes(patched.encode())
            run(PATCHGUARD, "-C", str(root), "record", f"real-{number:02d}", relative, "-m", "b")
        roots[f"o-{count}"] = with_hooks(root)
    for kind, count in (("p", 40), ("p", 1), ("r", 40), ("r", 1), ("s", 40), ("s", 1), ("m", 1)):
        source = roots[f"o-{REAL_PATCHES if count == 40 else 1}"]
        copy = WORK / source.name.replace("-o-", f"-{kind}-")
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(source, copy, symlinks=True)
        roots[f"{kind}-{count}"] = with_hooks(copy)
    shutil.rmtree(base)
    return roots


def empty_hooks() -> Path:
    """(g1): hooks of the same names that do nothing: git's own cost of running them."""
    hooks = WORK / "empty-hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    for name in (
        "reference-transaction",
        "post-commit",
        "post-checkout",
        "post-merge",
        "post-rewrite",
    ):
        (hooks / name).write_text("#!/bin/sh\nexit 0\n")
        (hooks / name).chmod(0o755)
    return hooks


def pre_commit_repo(source: Path) -> Path | None:
    """(e): a copy of the repository whose post-checkout hook is the pre-commit framework's."""
    venv = WORK / "pre-commit-venv"
    if not (venv / "bin" / "pre-commit").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        installed = run(str(venv / "bin" / "pip"), "install", "-q", "pre-commit", check=False)
        if installed.returncode != 0:
            print(f"(e) skipped: pre-commit could not be installed: {installed.stderr[-200:]}")
            return None
    root = WORK / "pre-commit-peer"
    if root.exists():
        shutil.rmtree(root)
    run("git", "clone", "-q", str(source), str(root))
    run("git", "branch", "bench-b", "origin/bench-b", cwd=root)
    (root / ".pre-commit-config.yaml").write_text("repos: []\n")
    run(str(venv / "bin" / "pre-commit"), "install", "-t", "post-checkout", cwd=root)
    return root


def measure(rows: dict[str, Callable[[], float]], runs: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in rows}
    for row in rows.values():  # untimed warm-up: both checkout targets, caches filled
        row()
        row()
    for _ in range(runs):
        for name, row in rows.items():
            samples[name].append(row())
    return samples


class AfterUnrelatedCommit:
    """(h): a commit that touches no guarded file (untimed), then the timed `check -q`."""

    def __init__(self, root: Path) -> None:
        self.root, self.number = root, 0

    def __call__(self) -> float:
        self.number += 1
        (self.root / "NOTES.md").write_text(f"note {self.number}\n")
        run("git", "add", "NOTES.md", cwd=self.root)
        run("git", "commit", "-q", "-m", f"note {self.number}", cwd=self.root)
        return timed(PATCHGUARD, "-C", str(self.root), "check", "-q")


def guarded_environment(root: Path) -> dict[str, str]:
    """ENV as `patchguard run` gives it to COMMAND in `root`: the import guard first on
    PYTHONPATH, with the run's config and key (guard.ops.attest). Its directory is removed when
    the benchmark exits."""
    import atexit

    from guard.git.repo import Repo
    from guard.ops.attest import AttestedRun
    from guard.tree import assess

    repo = Repo.discover(root)
    attested = AttestedRun(repo, assess.check(repo))
    atexit.register(attested.close)
    return attested.environment(ENV)


# (label, patches, files per patch): the repositories of the flatness rows (issue 22).
SCALES = (
    ("1 patch", 1, 1),
    ("10 patches", 10, 1),
    ("40 patches", 40, 1),
    ("1 patch of 40 files", 1, 40),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="samples per row (default 21)")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    run(sys.executable, "-m", "compileall", "-q", str(ROOT / "guard"))  # caches, as installed
    print("building repositories ...", flush=True)
    started = time.perf_counter()
    small = with_hooks(build_repo("sglang-2k", filler=2000))
    many = with_hooks(build_repo("sglang-2k-50-guarded", filler=2000, guarded_extra=49))
    large = with_hooks(build_repo("synthetic-20k", filler=20000))
    stash = with_hooks(build_repo("sglang-2k-stash", filler=2000))
    commits = with_hooks(build_repo("sglang-2k-commits", filler=2000))
    moves = with_hooks(build_repo("sglang-2k-moves", filler=2000))
    unrelated = with_hooks(build_repo("sglang-2k-unrelated", filler=2000))
    # One repository per scale: every row leaves its patches applied for the next.
    scaled = {label: with_hooks(build_patches(f"scale-{n}x{f}", n, f)) for label, n, f in SCALES}
    peer = pre_commit_repo(small)
    pair = with_hooks(build_repo("sglang-2k-pair", filler=2000))
    wheel, no_wheel = sglang_wheel()
    real = build_real(wheel) if wheel is not None else None
    processes = commit_processes(commits)

    python = sys.executable
    rows: dict[str, Callable[[], float]] = {
        "(a) python -c pass": lambda: timed(python, "-c", "pass"),
        "(q) python -c pass under run's import guard": partial(
            timed, python, "-c", "pass", env=guarded_environment(small)
        ),
        "(b) check, 1 guarded file": lambda: timed(PATCHGUARD, "-C", str(small), "check", "-q"),
        "(b) check, 50 guarded files": lambda: timed(PATCHGUARD, "-C", str(many), "check", "-q"),
        "(b') check --json (full path), 1 file": lambda: timed(
            PATCHGUARD, "-C", str(small), "check", "--json"
        ),
        "(c0) git checkout, no hook": Alternating(small, tuple(NO_HOOKS)),
        "(c1) git checkout, empty hooks of the same names": Alternating(
            small, ("-c", f"core.hooksPath={empty_hooks()}")
        ),
        "(c) git checkout, hook, nothing to do": Alternating(small),
        "(d) git checkout, hook re-applies 1 patch": StashThenCheckout(stash),
        "(f) check, 1 file, 20,000-file repo": lambda: timed(
            PATCHGUARD, "-C", str(large), "check", "-q"
        ),
        "(f') check --json, 20,000-file repo": lambda: timed(
            PATCHGUARD, "-C", str(large), "check", "--json"
        ),
        f"(g2) one commit, all hooks minus empty hooks, median of {COMMITS} pairs": CommitPairs(
            commits
        ),
        "(h) check -q right after a commit that touches no guarded file": AfterUnrelatedCommit(
            unrelated
        ),
        "(i) patchguard git checkout, patched file differs": LiftedCheckout(moves),
    }
    for label, root in scaled.items():
        rows[f"(j) re-apply hook, {label}"] = StashThenCheckout(root)
        rows[f"(k) check --json, {label}"] = partial(
            timed, PATCHGUARD, "-C", str(root), "check", "--json"
        )
        rows[f"(l) status, {label}"] = partial(timed, PATCHGUARD, "-C", str(root), "status")
    if peer is not None:
        rows["(e) git checkout, pre-commit hook, empty config"] = Alternating(peer)
    if real is not None:
        typed, name = real["m-1"], "real-00"
    else:
        typed, name = with_hooks(build_repo("sglang-2k-typed", filler=2000)), "eagle3"
    rows["(m0) git status --short"] = partial(timed_median, "git", "status", "--short", cwd=typed)
    for label, words in TYPED:
        words = tuple(word.format(name=name) for word in words)
        rows[f"(m) {label}"] = partial(timed_median, PATCHGUARD, "-C", str(typed), *words)
    rows["(n0) git's own: stash, checkout old, checkout main, stash pop"] = GitsOwnPair(pair)
    rows["(n) patchguard git checkout old, then main"] = LiftedPair(pair)
    if real is not None:
        for count, label in ((1, "1 patch"), (REAL_PATCHES, f"{REAL_PATCHES} patches")):
            mark = "1" if count == 1 else ""
            rows[f"(o{mark}) re-apply hook, {label}, real sglang files"] = StashThenCheckout(
                real[f"o-{count}"]
            )
            rows[f"(r{mark}) re-apply hook, {label}, real files the same at both commits"] = (
                StashThenCheckout(real[f"r-{count}"], other="bench-same")
            )
            rows[f"(s{mark}) git stash, then git stash pop, {label}, real sglang files"] = (
                StashAndPop(real[f"s-{count}"])
            )
            rows[f"(p{mark}) re-apply hook, {label}, real sglang files, first visit"] = FirstVisit(
                real[f"p-{count}"]
            )
        rows["(p0) exact parse of (p)'s 40 patched files, one core"] = ExactParse(real["o-40"])
    built = time.perf_counter() - started
    print(f"built in {built:.0f} s; measuring {len(rows)} rows x {args.runs} runs ...", flush=True)
    samples = measure(rows, args.runs)
    report = summarize(samples, args.runs, no_wheel, processes)
    measured = time.perf_counter() - started - built
    report["table"] = f"{report['table']}\n\nsetup {built:.0f} s, measuring {measured:.0f} s"
    print(report["table"])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "latest.json").write_text(
        json.dumps({**report, "samples_ms": samples}, indent=2) + "\n"
    )
    (RESULTS / "latest.md").write_text(report["table"] + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}/latest.json and latest.md")


def paired(samples: dict[str, list[float]], row: str, floor: str) -> float:
    """The median of a row's differences from its floor, pass by pass. The two are measured one
    right after the other in every pass, so a slow spell of the machine during one pass
    cancels out, where it would move one median of two and their difference with it (a
    fraction of a millisecond against ~15 ms of git's own per sample)."""
    return statistics.median(a - b for a, b in zip(samples[row], samples[floor], strict=True))


def summarize(
    samples: dict[str, list[float]],
    runs: int,
    no_wheel: str,
    processes: tuple[int, int] | str,
) -> dict[str, object]:
    medians = {name: statistics.median(values) for name, values in samples.items()}
    base = medians["(a) python -c pass"]
    c0 = "(c0) git checkout, no hook"
    lines = [
        f"patchguard benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores, median of {runs} runs "
        f"((m): of {runs} samples, each the median of {ATTEMPTS} runs)",
        "",
        "| row | median ms | x (a) |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {ms:.1f} | {ms / base:.2f} |" for name, ms in medians.items()]
    targets: dict[str, tuple[object, bool]] = {}
    # The hooks against the pre-commit framework's own no-op hook: each a cost above git's
    # checkout without hooks, pass by pass (paired).
    pre_commit = "(e) git checkout, pre-commit hook, empty config"
    nothing = "checkout with nothing to do, (c) - (c0) <= 1/4 x pre-commit's no-op hook (e) - (c0)"
    reapply = "re-apply of 1 patch, (d) - (c0) <= 1/3 x pre-commit's no-op hook (e) - (c0)"
    if pre_commit in medians:
        added_e = paired(samples, pre_commit, c0)
        added_c = paired(samples, "(c) git checkout, hook, nothing to do", c0)
        added_d = paired(samples, "(d) git checkout, hook re-applies 1 patch", c0)
        targets[nothing] = (f"{added_c:.1f} vs {added_e / 4:.1f}", added_c <= added_e / 4)
        targets[reapply] = (f"{added_d:.1f} vs {added_e / 3:.1f}", added_d <= added_e / 3)
    else:
        for target in (nothing, reapply):
            targets[target] = ("(e) not measured: pre-commit could not be installed", False)
    commit = "a commit starts no process: programs a git commit runs, hooks = empty hooks of the same names"
    if isinstance(processes, str):
        targets[commit] = (processes, False)
    else:
        targets[commit] = (f"{processes[0]} vs {processes[1]}", processes[0] == processes[1])
    # 40 patches against one: the whole checkout with its re-apply, and a user's stash and pop.
    one = SCALES[0][0]
    for label, *_ in SCALES[1:]:
        ratio = medians[f"(j) re-apply hook, {label}"] / medians[f"(j) re-apply hook, {one}"]
        targets[f"(j) checkout with its re-apply, {label} <= 2 x {one}'s"] = (
            round(ratio, 2),
            ratio <= 2,
        )
    for row, what in (
        ("o", "re-apply hook, {} patch{}, real sglang files"),
        ("r", "re-apply hook, {} patch{}, real files the same at both commits"),
        ("s", "git stash, then git stash pop, {} patch{}, real sglang files"),
    ):
        forty = f"({row}) " + what.format(REAL_PATCHES, "es")
        target = f"{forty} <= 2 x 1 patch's ({row}1)"
        if forty in medians:
            ratio = medians[forty] / medians[f"({row}1) " + what.format(1, "")]
            targets[target] = (round(ratio, 2), ratio <= 2)
        else:
            targets[target] = (f"not measured: {no_wheel}", False)
    for row in ("(b) check, 1 guarded file", "(b) check, 50 guarded files"):
        ratio = medians[row] / base
        targets[f"check --quiet, {row} <= 1.5 x (a)"] = (round(ratio, 2), ratio <= 1.5)
    after_commit = "(h) check -q right after a commit that touches no guarded file"
    ratio = medians[after_commit] / base
    targets[f"check --quiet, {after_commit} <= 1.5 x (a)"] = (round(ratio, 2), ratio <= 1.5)
    for label, _ in TYPED:
        ratio = medians[f"(m) {label}"] / base
        targets[f"(m) {label} <= 6 x python -c pass (a)"] = (round(ratio, 2), ratio <= 6)
    pair_ratio = (
        medians["(n) patchguard git checkout old, then main"]
        / medians["(n0) git's own: stash, checkout old, checkout main, stash pop"]
    )
    targets["(n) patchguard git checkout pair <= 4 x git's own (n0)"] = (
        round(pair_ratio, 2),
        pair_ratio <= 4,
    )
    lines += ["", "| target | value | met |", "|---|---|---|"]
    lines += [
        f"| {name} | {value} | {'yes' if met else 'NO'} |" for name, (value, met) in targets.items()
    ]
    reported = {
        "hook cost per checkout above git's empty hooks, (c) - (c1) per pass, ms": paired(
            samples,
            "(c) git checkout, hook, nothing to do",
            "(c1) git checkout, empty hooks of the same names",
        ),
        "hook cost per commit above git's empty hooks, (g2), ms": medians[
            f"(g2) one commit, all hooks minus empty hooks, median of {COMMITS} pairs"
        ],
        "import guard's cost to a process that imports no guarded module, (q) - (a) per pass, ms": (
            paired(samples, "(q) python -c pass under run's import guard", "(a) python -c pass")
        ),
        "check --json (full path) (b') / (a)": medians["(b') check --json (full path), 1 file"]
        / base,
        "(f) 20,000 / 2,000 files": medians["(f) check, 1 file, 20,000-file repo"]
        / medians["(b) check, 1 guarded file"],
        "(f') full path, 20,000 / 2,000 files": medians["(f') check --json, 20,000-file repo"]
        / medians["(b') check --json (full path), 1 file"],
    }
    for label, *_ in SCALES[1:]:
        for row in ("(k) check --json", "(l) status"):
            reported[f"{row}, {label} / {one}'s"] = (
                medians[f"{row}, {label}"] / medians[f"{row}, {one}"]
            )
    first = "(p) re-apply hook, 40 patches, real sglang files, first visit"
    if first in medians:
        single = medians["(p1) re-apply hook, 1 patch, real sglang files, first visit"]
        reported["(p) first visit, every cache emptied, 40 patches / 1 patch's (p1)"] = (
            medians[first] / single
        )
        reported["its floor with an exact parse on 2 cores, ((o) + (p0) / 2) / (p1)"] = (
            medians["(o) re-apply hook, 40 patches, real sglang files"]
            + medians["(p0) exact parse of (p)'s 40 patched files, one core"] / 2
        ) / single
    lines += ["", "| reported, no target | value |", "|---|---|"]
    lines += [f"| {name} | {value:.2f} |" for name, value in reported.items()]
    return {
        "medians_ms": medians,
        "targets": {name: {"value": value, "met": met} for name, (value, met) in targets.items()},
        "reported": {name: round(value, 2) for name, value in reported.items()},
        "table": "\n".join(lines),
    }


if __name__ == "__main__":
    main()
