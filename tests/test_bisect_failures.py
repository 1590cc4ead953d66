"""A failure of patchguard inside a bisect step aborts the bisect; it never marks a commit.

`git bisect run` reads a step's status: 0 good, 1-127 bad (125 skip), 128 and above abort. Only
the user's command may say good or bad. The history: c0 (the patch is recorded here), c1 docs,
c2 a valid model file nested deeper than Python's recursion limit lets a recursive walk go
(it once crashed the checker, so git marked c2 as the first bad commit), c3 docs, c4 the real
regression. Everything runs as users run it: the installed CLI and the real git.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import sample_repo
from conftest import git
from helpers import run_patchguard

from guard.truth.model_names import ABSENT, CANNOT_TELL, PRESENT
from guard.truth.symbols import SymbolIndex

KIMI = sample_repo.KIMI
DEPTH = 701  # `not`s: Python compiles and runs it; a recursive ast walk does not get through
DEEP_BLOCK = (
    f"\n    if {'not ' * DEPTH}DEBUG_DRAFT:\n"
    "        def debug_hook(self):\n"
    "            return None\n"
)


@dataclass
class Hunt:
    root: Path
    commits: dict[str, str]
    env: dict[str, str]
    bench: Path

    def pg(self, *args: str, check: int | None = None) -> subprocess.CompletedProcess[str]:
        return run_patchguard(self.root, self.env, args, check)

    def marks(self) -> list[str]:
        """The good/bad/skip marks git bisect has recorded (its log, less the start)."""
        log = git(self.root, "bisect", "log").stdout.splitlines()
        return [line for line in log if line.startswith("git bisect ") and "start" not in line]

    def methods_once(self) -> bool:
        text = (self.root / KIMI).read_text()
        return all(text.count(f"def {m}(") == 1 for m in sample_repo.METHODS)


def build_deep_hunt(root: Path) -> dict[str, str]:
    root.mkdir(parents=True)
    sample_repo.git(root, "init", "-q", "-b", "main")
    for path, text in sample_repo.OTHER_FILES.items():
        sample_repo.write(root, path, text)
    sample_repo.write(root, KIMI, sample_repo.KIMI_V1)
    commits = {"c0": sample_repo.commit(root, "c0: sglang with Kimi-K2.5")}
    sample_repo.write(root, "README.md", "# sglang (sample)\n\nServing framework.\n")
    commits["c1"] = sample_repo.commit(root, "c1: docs")
    deep = sample_repo.KIMI_V1.replace("\nclass ", "\nDEBUG_DRAFT = False\n\n\nclass ", 1).replace(
        "\n    def forward(", DEEP_BLOCK + "\n    def forward(", 1
    )
    sample_repo.write(root, KIMI, deep)
    commits["c2"] = sample_repo.commit(root, "c2: kimi: a deeply nested debug switch")
    sample_repo.write(root, "README.md", "# sglang (sample)\n\nServing framework, fast.\n")
    commits["c3"] = sample_repo.commit(root, "c3: docs")
    sample_repo.write(root, sample_repo.REGRESSION_FILE, "TP_GROUP = None\nSLOW_ALLREDUCE = True\n")
    commits["c4"] = sample_repo.commit(root, "c4: distributed: new all-reduce (slow)")
    return commits


@pytest.fixture
def hunt(tmp_path: Path, clean_env: dict[str, str]) -> Hunt:
    root = tmp_path / "sglang"
    commits = build_deep_hunt(root)
    bench = tmp_path / "bench.py"
    bench.write_text(sample_repo.HUNT_BENCH_TEXT)
    result = Hunt(root, commits, clean_env, bench)
    git(root, "checkout", "-q", "-b", "work", commits["c0"])
    sample_repo.add_eagle3_methods(root)
    result.pg("record", "eagle3", KIMI, check=0)
    result.pg("install", check=0)
    result.pg("git", "bisect", "start", commits["c4"], commits["c0"], check=0)
    return result


def test_the_deep_commit_is_measured_and_the_real_regression_found(
    hunt: Hunt, tmp_path: Path
) -> None:
    log = tmp_path / "hunt.jsonl"
    run = hunt.pg("bisect", "run", "--log", str(log), "python", str(hunt.bench), check=0)
    assert f"{hunt.commits['c4']} is the first bad commit" in run.stdout
    steps = {s["head"]: s for s in map(json.loads, log.read_text().splitlines())}
    deep = steps[hunt.commits["c2"]]  # the commit the checker once crashed on
    assert deep["exit"] == 0 and deep["ok"] and deep["patches"] == {"eagle3": "applied"}
    hunt.pg("git", "bisect", "reset", check=0)
    assert hunt.methods_once()


def test_an_internal_error_in_a_step_aborts_and_marks_nothing(hunt: Hunt, tmp_path: Path) -> None:
    """An unforeseen failure in patchguard's part of a step (here: the log's directory vanishes
    while the command runs, so appending to it fails) ends the bisect with one line saying why
    and how to go on; git marks nothing."""
    logs = tmp_path / "logs"
    logs.mkdir()
    vanishing = f"rm -r {logs} && python {hunt.bench}"
    run = hunt.pg("bisect", "run", "--log", str(logs / "hunt.jsonl"), "sh", "-c", vanishing)
    assert run.returncode != 0
    assert "first bad commit" not in run.stdout
    [line] = [x for x in run.stderr.splitlines() if "aborting the bisect" in x]
    assert f"bisect step at {hunt.commits['c2'][:10]} failed, aborting the bisect: " in line
    assert "internal error (FileNotFoundError" in line
    assert "run patchguard bisect run again to go on" in line
    crash_log = line.split("the traceback is in ", 1)[1].split(". Please", 1)[0]
    assert "FileNotFoundError" in Path(crash_log).read_text()
    assert hunt.marks() == []
    assert hunt.methods_once()
    hunt.pg("check", check=0)
    again = hunt.pg("bisect", "run", "python", str(hunt.bench), check=0)  # as the line says
    assert f"{hunt.commits['c4']} is the first bad commit" in again.stdout


def test_a_log_that_cannot_be_written_is_refused_before_any_step(
    hunt: Hunt, tmp_path: Path
) -> None:
    run = hunt.pg("bisect", "run", "--log", str(tmp_path / "gone" / "x.jsonl"), "true", check=2)
    assert "cannot write the bisect log" in run.stderr
    assert "running" not in run.stdout  # git bisect never started a step
    assert hunt.marks() == []


def test_a_step_killed_by_a_signal_aborts_and_marks_nothing(hunt: Hunt) -> None:
    """SIGKILL (the OOM killer, say) leaves no chance to speak: git would read 137 as a status;
    the step's wrapper says why instead, and aborts."""
    killer = "kill -KILL $PPID"  # the command's parent is patchguard's step
    run = hunt.pg("bisect", "run", "sh", "-c", killer)
    assert run.returncode != 0
    assert "first bad commit" not in run.stdout
    [line] = [x for x in run.stderr.splitlines() if "aborting the bisect" in x]
    assert f"bisect step at {hunt.commits['c2'][:7]}" in line
    assert "ended with status 137 before patchguard decided anything" in line
    assert "run patchguard bisect run again to go on" in line
    assert hunt.marks() == []
    assert hunt.methods_once()  # the killed step left them applied; put back once
    hunt.pg("check", check=0)


def test_a_step_that_cannot_take_the_lock_in_time_aborts(hunt: Hunt) -> None:
    """A timeout inside patchguard (another step holds the step lock) is no mark either."""
    lock = hunt.root / ".git" / "patchguard-bisect-step.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        env = {**hunt.env, "PATCHGUARD_LOCK_TIMEOUT": "0.2"}
        run = run_patchguard(hunt.root, env, ("bisect", "run", "true"), None)
    finally:
        os.close(fd)
    assert "first bad commit" not in run.stdout
    [line] = [x for x in run.stderr.splitlines() if "aborting the bisect" in x]
    assert "has been held for more than 0.2s" in line
    assert hunt.marks() == []
    assert hunt.methods_once()


# --- the checker on deep nesting, against Python itself --------------------------------------------


def deep_class(test: str) -> str:
    return f"class K:\n    if {test}:\n        def f(self):\n            pass\n"


def elif_chain(length: int) -> str:
    arms = "".join(f"    elif a{i}:\n        pass\n" for i in range(1, length))
    names = "".join(f"a{i} = False\n" for i in range(length))
    return f"{names}class K:\n    if a0:\n        pass\n{arms}    else:\n        def f(self):\n            pass\n"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (deep_class("not " * 700 + "True"), PRESENT),  # even: f is defined
        (deep_class("not " * 701 + "True"), ABSENT),  # odd: never defined
        (deep_class("not " * 900 + "flag"), CANNOT_TELL),  # decided only at runtime
        (elif_chain(2000), None),  # any answer but a wrong "present"
    ],
    ids=["700-nots", "701-nots", "900-nots-runtime", "2000-elifs"],
)
def test_deep_nesting_never_crashes_and_is_never_falsely_green(
    source: str, expected: str | None
) -> None:
    namespace: dict[str, object] = {"flag": False}
    exec(compile(source, "deep.py", "exec"), namespace)
    defined = hasattr(namespace["K"], "f")
    found = SymbolIndex.parse(source.encode(), "deep.py").resolve("K.f")
    assert found.state != PRESENT or defined
    if expected is not None:
        assert found.state == expected


@pytest.mark.parametrize("depth", [5000, 20000])  # RecursionError, then the parser's MemoryError
def test_a_file_too_deep_for_python_is_never_green_and_never_a_crash(depth: int) -> None:
    source = deep_class("not " * depth + "True")
    with pytest.raises((RecursionError, MemoryError)):
        compile(source, "deep.py", "exec")
    found = SymbolIndex.parse(source.encode(), "deep.py").resolve("K.f")
    assert found.state == CANNOT_TELL


# --- a step interrupted or killed is reported as what it was ---------------------------


@pytest.mark.parametrize(
    ("command", "said", "exit_code"),
    [
        ("kill -SEGV $$", "the command died from SIGSEGV (signal 11)", 4),
        (
            "exit 129",
            "the command exited 129, as a shell reports a program that died from SIGHUP",
            4,
        ),
        ("kill -INT $$", "the command was interrupted (SIGINT: Ctrl-C)", 130),
        (
            "exit 130",
            "the command exited 130, as a program that was interrupted (Ctrl-C) does",
            130,
        ),
    ],
    ids=["sigsegv", "exit-129", "sigint", "exit-130"],
)
def test_a_step_that_died_or_was_interrupted_says_so_marks_nothing_and_exits_as_documented(
    hunt: Hunt, command: str, said: str, exit_code: int
) -> None:
    """git bisect run stops on a status above 127 and marks nothing: the step says what ended
    the command (never "bad"), how to go on, and bisect run exits 130 or 4, not git's 256-N."""
    run = hunt.pg("bisect", "run", "sh", "-c", command)
    assert run.returncode == exit_code, run.stderr
    [line] = [x for x in run.stderr.splitlines() if "patches in place;" in x]
    assert f"bisect step at {hunt.commits['c2'][:10]}: patches in place; {said}." in line
    assert "(bad)" not in run.stderr
    assert "nothing is marked and the bisect stays at this commit" in line
    assert "run patchguard bisect run again to go on" in line
    assert "patchguard bisect reset" in line
    assert hunt.marks() == []
    assert hunt.methods_once()
    if exit_code == 4:  # once is enough: going on, as the line says, finds the regression
        again = hunt.pg("bisect", "run", "python", str(hunt.bench), check=0)
        assert f"{hunt.commits['c4']} is the first bad commit" in again.stdout


def test_a_step_whose_patchguard_part_fails_exits_4(hunt: Hunt, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    vanishing = f"rm -r {logs} && python {hunt.bench}"
    run = hunt.pg("bisect", "run", "--log", str(logs / "hunt.jsonl"), "sh", "-c", vanishing)
    assert run.returncode == 4
    assert hunt.marks() == []
