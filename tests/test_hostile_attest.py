"""Hostile round on attested runs and reading: forms a user's model file or
benchmark really takes, each held against Python itself first (without patchguard, the
interpreter really runs other code), then against the installed CLI."""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample

CLASS, METHOD = sample_repo.CLASS, sample_repo.METHODS[1]
TORCH = "class nn:\n    Module = object\n"
# Python's own answer: is the method the class has at import the one defined in the file?
DEFINED = (
    "import sglang.srt.models.kimi_k25 as k; "
    f"m = getattr(getattr(k, {CLASS!r}, None), {METHOD!r}, None); "
    "c = getattr(m, '__code__', None); "
    f"print('defined', getattr(c, 'co_filename', '') == k.__file__ and c.co_name == {METHOD!r})"
)


@pytest.fixture
def patched(sample: Sample, tmp_path: Path, clean_env: dict[str, str]) -> tuple[Sample, dict]:
    """The sample with eagle3 recorded; an environment whose Python imports the checkout."""
    sample.record_eagle3()
    stubs = tmp_path / "stubs"
    (stubs / "torch").mkdir(parents=True)
    (stubs / "torch" / "__init__.py").write_text(TORCH)
    env = {**clean_env, "PYTHONPATH": f"{stubs}{os.pathsep}{sample.root / 'python'}"}
    return sample, env


def cli(sample: Sample, env: dict, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["patchguard", "-C", str(sample.root), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=sample.root,
    )
    assert "Traceback (most recent call last)" not in result.stderr.split("=" * 72)[-1]
    return result


# Rebinding the recorded method through an expression that holds the class but is not its
# name: an item of a list or dict, a loop variable, a call's result.
THROUGH_AN_EXPRESSION = [
    f"EntryClass[0].{METHOD} = None",
    f"x = EntryClass[0]; x.{METHOD} = None",
    f"for c in EntryClass:\n    c.{METHOD} = None",
    f"next(iter(EntryClass)).{METHOD} = None",
    f"{{'k': {CLASS}}}['k'].{METHOD} = None",
    f"(lambda: {CLASS})().{METHOD} = None",
    f"del EntryClass[0].{METHOD}",
    f"__builtins__['setattr']({CLASS}, {METHOD!r}, None)",
    f"__builtins__.get('setattr')({CLASS}, {METHOD!r}, None)",
    # its code swapped: the name stays bound to the function, which runs other code
    f"EntryClass[0].{METHOD}.__code__ = (lambda self: 1).__code__",
    f"_f = {CLASS}.{METHOD}; _f.__code__ = (lambda self: 1).__code__",
    f"getattr({CLASS}, {METHOD!r}).__code__ = (lambda self: 1).__code__",
    f"    {METHOD}.__code__ = (lambda self: 1).__code__",  # in the class body
]


@pytest.mark.parametrize("form", THROUGH_AN_EXPRESSION)
def test_check_is_never_green_over_a_rebinding_through_an_expression(patched, form) -> None:
    sample, env = patched
    text = sample.kimi.read_text()
    if form.startswith(" "):  # the class body's last statement
        sample.kimi.write_text(text.replace("\n\nEntryClass", f"\n{form}\n\n\nEntryClass"))
    else:
        sample.kimi.write_text(text + form + "\n")
    python = subprocess.run(
        [sys.executable, "-c", DEFINED], capture_output=True, text=True, env=env
    )
    assert "defined False" in python.stdout, python.stderr  # Python finds no recorded method
    result = cli(sample, env, "check")
    assert result.returncode != 0, result.stdout + result.stderr


def attestations(stamp: Path) -> dict:
    return json.loads(stamp.read_text().splitlines()[-1])["attestations"]


def stale_copy(sample: Sample, where: Path) -> Path:
    """The unpatched package, as a non-editable install leaves it."""
    for path in sample.git("ls-files", "python/sglang").stdout.split():
        copy = where / Path(path).relative_to("python")
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(sample.git("show", f"HEAD:{path}").stdout)
    return where


@pytest.mark.parametrize(
    "spawn",
    [
        "subprocess.run(['env', '-i', 'PYTHONPATH=' + STALE, sys.executable, '-c', CHILD])",
        "subprocess.run(['env', 'PYTHONPATH=' + STALE, sys.executable, '-c', CHILD])",
        "subprocess.run([sys.executable, '-c', CHILD], env={**os.environ, 'PYTHONPATH': STALE})",
        "os.environ['PYTHONPATH'] = STALE; subprocess.run([sys.executable, '-c', CHILD])",
        "subprocess.run(['timeout', '30', sys.executable, '-E', '-c', CHILD], cwd=STALE)",
        "os.system(f'cd {STALE} && {sys.executable} -E -c \"{CHILD}\"')",
        "subprocess.run(f'PYTHONPATH={STALE} {sys.executable} -c \"{CHILD}\"', shell=True)",
        "subprocess.run(['bash', '-ec', f'export PYTHONPATH={STALE}; exec {sys.executable} "
        '-c "{CHILD}"\'])',
    ],
    ids=[
        "env -i",
        "env PYTHONPATH=",
        "env= PYTHONPATH",
        "os.environ PYTHONPATH",
        "timeout -E",
        "os.system -E",
        "shell=True PYTHONPATH=",
        "bash -ec export",
    ],
)
def test_a_child_the_guard_cannot_reach_is_named_and_the_run_not_counted(
    patched, tmp_path, spawn
) -> None:
    """The benchmark imports the checkout's model, then starts a worker whose Python lost the
    guard (its PYTHONPATH replaced, its environment cleared, -I past a wrapper): the worker
    runs the stale install, so the run proves nothing."""
    sample, env = patched
    stale = stale_copy(sample, tmp_path / "site")
    stubs = tmp_path / "stubs"
    (stale / "torch").mkdir()
    (stale / "torch" / "__init__.py").write_text((stubs / "torch" / "__init__.py").read_text())
    script = tmp_path / "bench.py"
    script.write_text(
        "import os, subprocess, sys\n"
        "import sglang.srt.models.kimi_k25\n"
        f"STALE, CHILD = {str(stale)!r}, {DEFINED!r}\n"
        f"{spawn}\n"
    )
    stamp = tmp_path / "runs.jsonl"
    result = cli(sample, env, "run", "--stamp", str(stamp), "--", sys.executable, str(script))
    assert "defined False" in result.stdout, result.stderr  # the worker ran the stale code
    assert attestations(stamp)["counted"] is False, result.stderr
    assert "cannot attest" in result.stderr


def test_the_guard_is_kept_by_a_right_child(patched, tmp_path) -> None:
    """A worker whose environment keeps the guard (PYTHONPATH extended, env setting another
    variable) is no problem: the run counts."""
    sample, env = patched
    script = tmp_path / "bench.py"
    script.write_text(
        "import os, subprocess, sys\n"
        "import sglang.srt.models.kimi_k25\n"
        "os.environ['PYTHONPATH'] += os.pathsep + '/nonexistent'\n"
        f"subprocess.run(['env', 'X=1', sys.executable, '-c', {DEFINED!r}], check=True)\n"
        f"subprocess.run([sys.executable, '-c', {DEFINED!r}], env={{**os.environ}}, check=True)\n"
    )
    stamp = tmp_path / "runs.jsonl"
    result = cli(sample, env, "run", "--stamp", str(stamp), "--", sys.executable, str(script))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("defined True") == 2
    assert attestations(stamp)["counted"] is True, result.stderr


@pytest.mark.parametrize(
    ("wrapper", "named"),
    [
        (["env", "PYTHONPATH={stale}"], "a PYTHONPATH of its own"),
        (["timeout", "30", "env", "-C", "{tmp}"], None),  # keeps the guard: counted
        (["taskset", "-c", "0", "env", "-C", "{stale}", "-u", "PYTHONPATH"], "a PYTHONPATH"),
        (["timeout", "-s", "KILL", "30", "env", "-C", "{stale}", "python3", "-E"], "-E"),
        (["sh", "-c", 'cd {stale} && PYTHONPATH=. exec "$0" "$@"'], "a PYTHONPATH"),
    ],
    ids=["env PYTHONPATH=", "timeout env -C", "taskset env -u", "timeout -E", "sh -c"],
)
def test_a_command_that_takes_the_guard_out_itself_is_named(
    patched, tmp_path, wrapper, named
) -> None:
    """`run -- env PYTHONPATH=... python bench.py`, or a wrapper before `python -E`: the
    command's own Python runs without the guard, and `run` says why by name, not only that
    nothing was imported."""
    sample, env = patched
    stale = stale_copy(sample, tmp_path / "site")
    (stale / "torch").mkdir()
    (stale / "torch" / "__init__.py").write_text(TORCH)
    words = [w.format(stale=stale, tmp=tmp_path) for w in wrapper]
    python = [] if "python3" in words else [sys.executable]
    stamp = tmp_path / "runs.jsonl"
    result = cli(sample, env, "run", "--stamp", str(stamp), "--", *words, *python, "-c", DEFINED)
    if named is None:
        assert "defined True" in result.stdout, result.stderr
        assert attestations(stamp)["counted"] is True, result.stderr
        return
    assert "defined False" in result.stdout, result.stderr  # Python ran the stale copy
    assert attestations(stamp)["counted"] is False
    assert "which skips the import guard" in result.stderr and named in result.stderr


COMPAT = (
    f"from sglang.srt.models.kimi_k25 import {CLASS} as K\n"
    f"K.{METHOD} = lambda self: None  # an old shim, imported after the model\n"
)


@pytest.mark.parametrize("last", [False, True], ids=["then more imports", "last import"])
def test_a_module_that_rebinds_the_method_after_the_model_ran_is_refused(
    patched, tmp_path, last
) -> None:
    """Another module of the package rebinds the recorded method once the model has run: the
    benchmark then runs the shim's code, so the run is not counted and `run` exits 1."""
    sample, env = patched
    compat = sample.kimi.with_name("kimi_compat.py")
    compat.write_text(COMPAT)
    then = "" if last else "import json, csv, decimal; "
    script = f"import sglang.srt.models.kimi_compat; {then}{DEFINED}"
    python = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert "defined False" in python.stdout, python.stderr  # Python runs the shim's lambda
    stamp = tmp_path / "runs.jsonl"
    result = cli(sample, env, "run", "--stamp", str(stamp), "--", sys.executable, "-c", script)
    assert result.returncode == 1, result.stderr
    assert attestations(stamp)["counted"] is False
    assert f"{METHOD} is the function at {compat}" in result.stderr


def test_the_guard_is_not_compiled_again_in_every_process(patched) -> None:
    """With PYTHONDONTWRITEBYTECODE=1 (many images set it) no process writes the guard's
    bytecode, so every Python of the run compiled the guard's source again (more than the guard itself may
    cost): the run's directory carries it, and Python reads it."""
    sample, env = patched
    probe = (
        "import importlib.util, os, sys; "
        "guard = os.path.join(os.environ['PATCHGUARD_ATTEST'], 'sitecustomize.py'); "
        "print('cached', os.path.exists(importlib.util.cache_from_source(guard)))"
    )
    env = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
    result = cli(sample, env, "run", "--", sys.executable, "-c", probe)
    assert "cached True" in result.stdout, result.stderr


@pytest.mark.parametrize("level", [1, 2])
def test_an_unchecked_pyc_that_python_dash_o_runs_is_named_by_check(patched, level) -> None:
    """A benchmark run with `python -O` (or -OO) reads `kimi_k25.cpython-3X.opt-1.pyc`: an
    unchecked-hash one compiled from the unpatched file is the code it runs."""
    sample, env = patched
    patched_text = sample.kimi.read_text()
    sample.kimi.write_text(sample.git("show", f"HEAD:{sample_repo.KIMI}").stdout)
    cached = importlib.util.cache_from_source(str(sample.kimi), optimization=level)
    py_compile.compile(
        str(sample.kimi),
        cfile=cached,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    sample.kimi.write_text(patched_text)
    flag = "-" + "O" * level
    python = subprocess.run(
        [sys.executable, flag, "-c", DEFINED], capture_output=True, text=True, env=env
    )
    assert "defined False" in python.stdout, python.stderr  # Python runs the stale bytecode
    result = cli(sample, env, "check")
    assert result.returncode == 1, result.stdout
    assert f"opt-{level}.pyc holds code compiled from another" in result.stdout + result.stderr


def test_a_checkout_with_crlf_line_endings_is_attested(patched, tmp_path) -> None:
    """core.autocrlf=true (a checkout shared with Windows): the file on disk has CRLF, git and
    the check see LF. Python imports the bytes on disk, the patched code: the run counts."""
    sample, env = patched
    sample.git("config", "core.autocrlf", "true")
    sample.kimi.write_bytes(sample.kimi.read_bytes().replace(b"\n", b"\r\n"))
    assert sample.git("status", "--short").stdout.split() == ["M", sample_repo.KIMI]
    stamp = tmp_path / "runs.jsonl"
    result = cli(sample, env, "run", "--stamp", str(stamp), "--", sys.executable, "-c", DEFINED)
    assert result.returncode == 0, result.stderr
    assert "defined True" in result.stdout
    assert attestations(stamp)["counted"] is True


def test_after_the_slip_is_fixed_check_advises_what_works(sample: Sample, clean_env) -> None:
    """(7) The slip recorded as typed, then indented into the class by hand: `apply` refuses
    (it would put the stray copy back), so check must not send the user there."""
    text = sample.kimi.read_text()
    slip = f"\ndef {METHOD}(self):\n    return self.language_model.{METHOD}()\n"
    sample.kimi.write_text(text + slip)
    recorded = cli(sample, clean_env, "record", "s1", sample_repo.KIMI, "--as-typed")
    assert recorded.returncode == 0, recorded.stderr
    method = f"    def {METHOD}(self):\n        return self.language_model.{METHOD}()\n\n"
    sample.kimi.write_text(text.replace("\n\nEntryClass", f"\n{method}\nEntryClass"))
    python = subprocess.run(
        [sys.executable, "-c", f"import ast, sys; ast.parse(open({str(sample.kimi)!r}).read())"]
    )
    assert python.returncode == 0
    applied = cli(sample, clean_env, "apply", "s1")
    assert applied.returncode == 1  # apply refuses to put the stray copy back
    checked = cli(sample, clean_env, "check")
    assert checked.returncode == 1
    said = checked.stdout + checked.stderr
    assert "patchguard apply s1" not in said, said
    assert "patchguard record s1" in said


@pytest.mark.parametrize(
    "wrapper",
    [["timeout", "-s", "KILL", "30"], ["taskset", "-c", "0"], ["nice", "-n", "5", "setsid"]],
    ids=["timeout", "taskset", "nice setsid"],
)
def test_import_checks_the_python_a_wrapper_runs(patched, tmp_path, wrapper) -> None:
    """(3) `run --import` before `timeout 30 env PYTHONPATH=STALE python`: the pre-flight
    checks the interpreter and environment the command gets past its wrappers, and refuses
    to start it, instead of checking python3 on PATH with patchguard's environment."""
    sample, env = patched
    stale = stale_copy(sample, tmp_path / "site")
    pythonpath = f"PYTHONPATH={stale}{os.pathsep}{tmp_path / 'stubs'}"
    command = [*wrapper, "env", pythonpath, sys.executable, "-c", DEFINED]
    module = "sglang.srt.models.kimi_k25"
    result = cli(sample, env, "run", "--import", module, "--", *command)
    assert result.returncode == 1
    assert "command NOT run" in result.stderr, result.stderr
    assert "defined" not in result.stdout


@pytest.mark.parametrize("python", [{"version": "3.11.7", "distributions": ["torch"]}])
def test_a_stamp_whose_interpreter_is_malformed_is_refused_in_one_line(
    patched, tmp_path, python
) -> None:
    sample, env = patched
    stamped = cli(sample, env, "stamp")
    data = json.loads(stamped.stdout)
    (tmp_path / "stamp.json").write_text(json.dumps({**data, "python": python}))
    result = cli(sample, env, "check", "--same-as", str(tmp_path / "stamp.json"))
    assert result.returncode == 2, result.stderr
    assert "the stamp's 'python' is" in result.stderr


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("upstream", {"remote": "origin/main"}),
        ("upstream", {"ref": "origin/main", "ahead": [3], "behind": 0}),
        ("dirty", [["a.py"]]),
        ("dirty", [1, 2]),
    ],
)
def test_a_stamp_holding_other_kinds_of_values_is_refused_in_one_line_by_diff(
    patched, tmp_path, key, value
) -> None:
    """Hand-edited stamps: `stamp --diff` words an upstream by its ref and counts and sorts
    the dirty paths, so anything else there is the stamp's fault, said in one line (it was
    an internal error: a KeyError, an unhashable list, a join over numbers)."""
    sample, env = patched
    data = json.loads(cli(sample, env, "stamp").stdout)
    (tmp_path / "a.json").write_text(json.dumps(data))
    (tmp_path / "b.json").write_text(json.dumps({**data, key: value}))
    result = cli(sample, env, "stamp", "--diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert result.returncode == 2, result.stderr
    assert f"the stamp's {key!r} is" in result.stderr
    assert "internal error" not in result.stderr


BENCH = 'def main():\n    print("bench", "{}")\n\n\nif __name__ == "__main__":\n    main()\n'


@pytest.mark.parametrize("how", ["-m", "path"])
def test_a_patched_benchmark_run_as_main_is_attested(sample: Sample, clean_env, tmp_path, how):
    """The patch is to the benchmark script itself, run as `python -m sglang.bench_x` or by
    its path: the checkout's code runs as __main__, so the run counts (it was never counted,
    so compare could count nothing)."""
    bench = sample.root / "python" / "sglang" / "bench_x.py"
    bench.write_text(BENCH.format("v1"))
    sample.git("add", "-A")
    sample.git("commit", "-qm", "a benchmark")
    bench.write_text(BENCH.format("patched"))
    recorded = cli(sample, clean_env, "record", "bp", "python/sglang/bench_x.py")
    assert recorded.returncode == 0, recorded.stderr
    env = {**clean_env, "PYTHONPATH": str(sample.root / "python")}
    command = ["-m", "sglang.bench_x"] if how == "-m" else [str(bench)]
    stamp = tmp_path / "runs.jsonl"
    result = cli(sample, env, "run", "--stamp", str(stamp), "--", sys.executable, *command)
    assert result.returncode == 0, result.stderr
    assert "bench patched" in result.stdout
    seen = attestations(stamp)
    assert seen["counted"] is True, seen
    assert [p["verdict"] for p in seen["processes"]] == ["ok"]
