"""No other `guard` package can stand in for patchguard.

`guard` is a common name: a package of that name on PYTHONPATH used to run instead of
patchguard in the hooks (a silent no-op) and broke the CLI (`ModuleNotFoundError:
guard.entry`). Each test puts a real impostor package on PYTHONPATH and runs the installed
command, a git hook and a bisect step the way users do.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample, method_count

from guard.ops.install import launcher

IMPOSTOR_SAYS = "the impostor guard package ran"


@pytest.fixture
def impostor_env(tmp_path: Path, clean_env: dict[str, str]) -> dict[str, str]:
    """An environment whose PYTHONPATH holds a complete `guard` package that is not ours."""
    site = tmp_path / "impostor"
    package = site / "guard"
    package.mkdir(parents=True)
    for module in ("__init__", "__main__", "entry", "hookrun", "cli"):
        (package / f"{module}.py").write_text(
            f"import sys\nsys.stderr.write({IMPOSTOR_SAYS!r})\nsys.exit(0)\n"
        )
    return {**clean_env, "PYTHONPATH": str(site)}


def run(env: dict[str, str], root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["patchguard", "-C", str(root), *args], env=env, capture_output=True, text=True
    )


def test_the_command_runs_the_installed_patchguard(
    sample: Sample, impostor_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    for args in (("status",), ("check",), ("check", "--json"), ("--help",)):
        result = run(impostor_env, sample.root, *args)
        assert IMPOSTOR_SAYS not in result.stderr, args
        assert "Traceback" not in result.stderr, result.stderr
        assert result.returncode == 0, (args, result.stderr)
    assert "eagle3: applied" in run(impostor_env, sample.root, "status").stdout
    assert json.loads(run(impostor_env, sample.root, "check", "--json").stdout)["ok"] is True


def test_the_hooks_run_the_installed_patchguard(
    sample: Sample, impostor_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    assert sample.pg("install").exit_code == 0
    hook = (sample.root / ".git" / "hooks" / "post-checkout").read_text()
    assert f"launcher='{launcher()}'" in hook
    sample.git("stash")
    checkout = subprocess.run(
        ["git", "checkout", "-q", "old"],
        cwd=sample.root,
        env=impostor_env,
        capture_output=True,
        text=True,
    )
    assert checkout.returncode == 0, checkout.stderr
    assert IMPOSTOR_SAYS not in checkout.stderr
    assert "re-applied eagle3" in checkout.stderr
    assert method_count(sample.kimi.read_text(), sample_repo.METHODS[0]) == 1
    doctor = run(impostor_env, sample.root, "doctor")
    assert doctor.returncode == 0, doctor.stderr


def test_each_bisect_step_runs_the_installed_patchguard(
    sample: Sample, impostor_env: dict[str, str], tmp_path: Path
) -> None:
    sample.record_eagle3()
    assert run(impostor_env, sample.root, "git", "bisect", "start", "main", "old").returncode == 0
    log = tmp_path / "steps.jsonl"
    bisect = run(impostor_env, sample.root, "bisect", "run", "--log", str(log), "true")
    assert IMPOSTOR_SAYS not in bisect.stderr
    assert bisect.returncode == 0, bisect.stderr
    steps = [json.loads(line) for line in log.read_text().splitlines()]
    assert steps and all(step["patches"]["eagle3"] == "applied" for step in steps)
