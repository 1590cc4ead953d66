"""`--runtime`: Python decides each required symbol, in a fresh process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Sample, git
from helpers import run_patchguard, wait_until

import guard
from guard.errors import GuardError

DEEPSEEK = "python/sglang/srt/models/deepseek_v2.py"
SPEC = f"{DEEPSEEK}::DeepseekV3ForCausalLM.get_embed_and_head"
CONDITIONAL = (
    "import os\n\n\nclass DeepseekV3ForCausalLM:\n"
    "    def __init__(self, config, quant_config=None):\n        self.config = config\n\n"
    '    if os.environ.get("SGLANG_NO_SUCH_SWITCH") is None:\n'
    "        def get_embed_and_head(self):\n            return None\n"
)


@pytest.fixture
def guarded(sample: Sample) -> Sample:
    """A guard on a method defined under a runtime condition that holds on this host."""
    (sample.root / DEEPSEEK).write_text(
        "class DeepseekV3ForCausalLM:\n    def get_embed_and_head(self):\n        return None\n"
    )
    sample.git("commit", "-qam", "the method")
    assert sample.pg("require", SPEC).exit_code == 0
    (sample.root / DEEPSEEK).write_text(CONDITIONAL)
    sample.git("commit", "-qam", "the method only without the switch")
    return sample


def pg(sample: Sample, env: dict[str, str], *args: str, check: int) -> str:
    result = run_patchguard(sample.root, env, args, check)
    return result.stdout + result.stderr


def test_reading_cannot_tell_and_python_can(guarded: Sample, clean_env: dict[str, str]) -> None:
    static = pg(guarded, clean_env, "check", check=1)
    assert "cannot tell from reading" in static
    assert "patchguard check --runtime" in static
    python = ("--python", sys.executable)
    assert "all guards hold" in pg(guarded, clean_env, "check", "--runtime", *python, check=0)
    ran = pg(
        guarded,
        clean_env,
        "run",
        "--runtime",
        *python,
        sys.executable,
        "-c",
        "print('ran')",
        check=0,
    )
    assert "ran" in ran
    switched = {**clean_env, "SGLANG_NO_SUCH_SWITCH": "1"}  # the other host: Python finds nothing
    failed = pg(guarded, switched, "run", "--runtime", *python, "true", check=1)
    assert "Python finds no DeepseekV3ForCausalLM.get_embed_and_head" in failed
    assert "command NOT run" in failed


def test_require_with_runtime_asks_this_interpreter(guarded: Sample) -> None:
    with pytest.raises(GuardError):
        guard.require(guarded.root)
    report = guard.require(guarded.root, runtime=True)
    assert [s.runtime for s in report.symbols] == ["present"]


def test_a_module_that_fails_to_import_is_red_with_its_error(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()  # kimi_k25.py imports torch, which this interpreter lacks
    output = pg(sample, clean_env, "check", "--runtime", "--python", sys.executable, check=1)
    assert (
        "cannot tell: importing sglang.srt.models.kimi_k25 failed: ModuleNotFoundError: "
        f"No module named 'torch' (interpreter {sys.executable})" in output
    )
    assert "--python PATH" in output  # the fix: the interpreter (or environment) that has torch
    assert "re-record" not in output and "missing" not in output
    assert "Traceback" not in output
    args = ("check", "--runtime", "--json", "--python", sys.executable)
    report = json.loads(run_patchguard(sample.root, clean_env, args, 1).stdout)
    assert {s["runtime"] for s in report["symbols"]} == {"cannot-tell"}
    assert not any(s["present"] for s in report["symbols"])


def test_a_copy_imported_from_elsewhere_is_red(
    guarded: Sample, clean_env: dict[str, str], tmp_path: Path
) -> None:
    other = tmp_path / "site"
    shutil.copytree(guarded.root / "python", other)
    env = {**clean_env, "PYTHONPATH": str(other)}
    output = pg(guarded, env, "check", "--runtime", "--python", sys.executable, check=1)
    assert f"imported from {os.path.realpath(other / DEEPSEEK.removeprefix('python/'))}" in output
    assert "not from this checkout" in output


def test_a_probe_that_takes_too_long_is_one_line(
    guarded: Sample, clean_env: dict[str, str]
) -> None:
    path = guarded.root / DEEPSEEK
    path.write_text("import time\ntime.sleep(60)\n" + path.read_text())
    args = ("check", "--runtime", "--runtime-timeout", "1", "--python", sys.executable)
    result = run_patchguard(guarded.root, clean_env, args, check=2)
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("patchguard: the runtime probe did not finish in 1 s")


def test_the_hook_banner_says_to_ask_python(guarded: Sample, clean_env: dict[str, str]) -> None:
    pg(guarded, clean_env, "install", check=0)
    branch = guarded.git("symbolic-ref", "--short", "HEAD").stdout.strip()
    assert git(guarded.root, "checkout", "-q", "HEAD~1", env=clean_env).stderr == ""  # green
    moved = git(guarded.root, "checkout", "-q", branch, env=clean_env, check=False)
    assert "guard FAILED after post-checkout" in moved.stderr
    assert "cannot tell from reading: bound at line 9 only when" in moved.stderr
    assert "ask Python: patchguard check --runtime" in moved.stderr


def test_a_module_that_starts_a_server_neither_stalls_the_probe_nor_outlives_it(
    guarded: Sample, clean_env: dict[str, str], tmp_path: Path
) -> None:
    """Children holding the probe's stdout, stderr, even its answer pipe."""
    pids = tmp_path / "pids"
    path = guarded.root / DEEPSEEK
    path.write_text(
        "import subprocess\n"
        f"with open({str(pids)!r}, 'w') as out:\n"
        "    for keep in (True, False):  # close_fds=False: it holds the answer pipe too\n"
        "        out.write('%d\\n' % subprocess.Popen(['sleep', '3600'], close_fds=keep).pid)\n"
        + path.read_text()
    )
    args = ("check", "--runtime", "--runtime-timeout", "30", "--python", sys.executable)
    assert "all guards hold" in run_patchguard(guarded.root, clean_env, args, 0).stdout

    def ended(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in "ZX"
        except FileNotFoundError:
            return True

    children = [int(pid) for pid in pids.read_text().split()]
    assert len(children) == 2
    try:  # an hour's sleep ends only by the kill
        wait_until(lambda: all(ended(pid) for pid in children), "the probe's children are killed")
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


FAKE = "patchguard-probe:" + json.dumps([[True, "present at runtime"]])


def check_runtime_after(guarded: Sample, env: dict[str, str], code: str, exit_code: int) -> str:
    """`check --runtime`'s error output once the guarded module ends with `code`."""
    path = guarded.root / DEEPSEEK
    path.write_text(path.read_text() + "\n" + code)
    args = ("check", "--runtime", "--python", sys.executable)
    return run_patchguard(guarded.root, env, args, exit_code).stderr


@pytest.mark.parametrize(
    "fooling",
    [
        f"import atexit\natexit.register(print, {FAKE!r})\nprint({FAKE!r})\n",
        f"import os\nos.write(1, {FAKE!r}.encode() + b'\\n')\nos.write(2, b'1 present\\n')\n",
        "import builtins\nbuiltins.getattr = lambda *args: (lambda self: None)\n",
    ],
    ids=["atexit-answer", "answer-on-fd-1-and-2", "replaced-getattr"],
)
def test_a_module_cannot_answer_for_the_probe(
    guarded: Sample, clean_env: dict[str, str], fooling: str
) -> None:
    """The module deletes the method, then prints answers or replaces builtins: Python
    finds nothing, and the module's own doing never turns that green."""
    deleted = "del DeepseekV3ForCausalLM.get_embed_and_head\n" + fooling
    output = check_runtime_after(guarded, clean_env, deleted, 1)
    assert "Python finds no DeepseekV3ForCausalLM.get_embed_and_head" in output


def test_a_method_rebound_to_a_value_is_red_though_callable_is_replaced(
    guarded: Sample, clean_env: dict[str, str]
) -> None:
    rebound = (
        "import builtins\nbuiltins.callable = lambda obj: True\n"
        "DeepseekV3ForCausalLM.get_embed_and_head = 42\n"
    )
    output = check_runtime_after(guarded, clean_env, rebound, 1)
    assert "DeepseekV3ForCausalLM.get_embed_and_head is 42 at runtime, not a function" in output


def test_a_probe_that_ends_without_answering_is_never_green(
    guarded: Sample, clean_env: dict[str, str]
) -> None:
    exits = f"print({FAKE!r}, flush=True)\nimport os\nos._exit(0)\n"
    said = check_runtime_after(guarded, clean_env, exits, 2)
    assert said.startswith(f"patchguard: the runtime probe with {sys.executable} ended without")


# The probe imports with the command's environment.
@pytest.mark.parametrize(
    ("command", "switch", "runs"),
    [
        (["env", "SGLANG_NO_SUCH_SWITCH=1"], None, False),
        (["env", "-u", "SGLANG_NO_SUCH_SWITCH"], "1", True),
        (["env", "--unset=SGLANG_NO_SUCH_SWITCH", "OTHER=1"], "1", True),
        (["env", "-i"], "1", True),
        (["nice", "env", "-S", "A=1 SGLANG_NO_SUCH_SWITCH=1"], None, False),
        ([], "1", False),
    ],
    ids=["env-VAR=1", "env-u", "env--unset=", "env-i", "nice-env-S", "inherited"],
)
def test_run_runtime_probes_with_the_commands_environment(
    guarded: Sample,
    clean_env: dict[str, str],
    tmp_path: Path,
    command: list[str],
    switch: str | None,
    runs: bool,
) -> None:
    env = {**clean_env, **({"SGLANG_NO_SUCH_SWITCH": switch} if switch else {})}
    marker = tmp_path / "ran"
    bench = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    result = run_patchguard(guarded.root, env, ("run", "--runtime", "--", *command, *bench), None)
    assert marker.exists() == runs, result.stderr
    assert result.returncode == (0 if runs else 1)
    if not runs:
        assert "Python finds no DeepseekV3ForCausalLM.get_embed_and_head" in result.stderr


@pytest.mark.parametrize(
    "options",
    [
        ["-i", "A=1"],
        ["-u", "HOME"],
        ["-uHOME", "B=x=y"],
        ["--unset=HOME"],
        ["--unset", "HOME", "--", "C=3"],
        ["-iu", "HOME", "B=2"],
        ["-", "A=1"],
        ["-u", "HOME", "-S", "A=1 B='two words'"],
        ["--ignore-environment", "--split-string=-u HOME D=4"],
        ["-C", "/", "A=1", "A=2"],
    ],
)
def test_the_environment_is_read_as_env_reads_it(options: list[str]) -> None:
    """The model of env(1) held against env(1) itself."""
    from guard.cli.preflight import unwrapped

    base = {"HOME": "/nowhere", "A": "0", "PATH": os.environ["PATH"]}
    printed = subprocess.run(
        ["env", *options, "printenv", "-0"], env=base, capture_output=True, check=True
    ).stdout
    real = dict(entry.split("=", 1) for entry in printed.decode().split("\0") if entry)
    words, modelled = unwrapped(["env", *options, "printenv", "-0"], base)
    assert words == ["printenv", "-0"]
    assert modelled == real
