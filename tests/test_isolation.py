"""The suite runs against no user or system git configuration (see conftest)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def test_git_sees_no_global_or_system_config(tmp_path: Path) -> None:
    listed = subprocess.run(
        ["git", "config", "--list", "--show-origin"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert listed.stdout == ""  # outside a repository: only global and system would show


def test_new_repositories_get_no_template_hooks(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    assert not (tmp_path / "r" / ".git" / "hooks").exists() or not any(
        (tmp_path / "r" / ".git" / "hooks").iterdir()
    )
