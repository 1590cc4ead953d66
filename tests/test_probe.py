"""`--runtime`: Python decides each required symbol, in a fresh process (issue 19, item 3)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import Sample, git
from helpers import run_patchguard

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
        "importing sglang.srt.models.kimi_k25 failed: ModuleNotFoundError: No module named 'torch'"
        in output
    )
    assert "Traceback" not in output


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
