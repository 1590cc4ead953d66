"""What users install and run: the wheel (with its package data) and `make demo`'s story."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import sample_repo
from conftest import ROOT, Sample


def test_wheel_installs_non_editable_and_guards_a_real_repo(tmp_path: Path, sample: Sample) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next(dist.glob("git_patchguard-*.whl"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, capture_output=True
    )
    tool = env_dir / "bin" / "patchguard"
    help_text = subprocess.run([str(tool), "--help"], capture_output=True, text=True, check=True)
    assert "record" in help_text.stdout

    sample_repo.add_eagle3_methods(sample.root)
    outside = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = lambda *args: subprocess.run(  # noqa: E731
        [str(tool), "-C", str(sample.root), *args], capture_output=True, text=True, env=outside
    )
    assert run("record", "eagle3", sample_repo.KIMI).returncode == 0
    assert run("install").returncode == 0  # the hook template is package data
    sample.git("stash")
    assert run("check").returncode == 1
    checkout = sample.git("checkout", "-q", "old", check=False)
    assert checkout.returncode == 0, checkout.stderr
    assert run("check").returncode == 0
    hook = (sample.root / ".git" / "hooks" / "post-checkout").read_text()
    assert f"install_python='{python}'" in hook
    assert f"launcher='{env_dir}/lib/" in hook  # the wheel's own patchguard_entry.py


def test_demo_tells_the_story_and_exits_0(clean_env: dict[str, str]) -> None:
    result = subprocess.run(
        ["sh", str(ROOT / "scripts" / "demo.sh")], capture_output=True, text=True, env=clean_env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "re-applied eagle3" in result.stdout
    assert "every step behaved as the story says" in result.stdout
