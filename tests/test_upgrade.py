"""An upgrade of patchguard in place (what `pip install -U` does to the installed files): every
verdict kept by the old code is the old code's, and the new code decides afresh."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import sample_repo
from conftest import ROOT, Sample

from guard.git.gitdir import locate
from guard.store.fastpath import CACHE_DIR_NAME

# The new conflict-marker rule: the patched file (it holds the recorded method) now counts as
# holding conflict markers. A module outside guard/truth/ and guard/tree/. Put before the
# function's first line of code, which docstring edits leave alone.
_RULE = "    if not any(marker in content for marker in _OPENING):\n"
_NEW_RULE = '    if b"def get_embed_and_head" in content:\n        return [1]\n' + _RULE


def installed_copy(root: Path) -> Path:
    """A copy of the installed package (the launcher beside `guard`, the hook template beside
    that, as a source install has them), which an upgrade then changes in place."""
    shutil.copytree(ROOT / "guard", root / "guard", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "hooks", root / "hooks")
    shutil.copy(ROOT / "patchguard_entry.py", root)
    return root / "patchguard_entry.py"


def test_an_upgrade_that_decides_otherwise_is_never_hidden_by_kept_verdicts(
    sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    launcher = installed_copy(tmp_path / "site")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-I", str(launcher), "-C", str(sample.root), *args],
            capture_output=True,
            text=True,
            env=clean_env,
        )

    sample.record_eagle3()
    assert run("install").returncode == 0
    assert run("check", "--quiet").returncode == 0
    verified = run("check")
    assert verified.returncode == 0 and "since it was last verified" in verified.stdout
    assert any((locate(sample.root).git_dir / CACHE_DIR_NAME).iterdir())  # kept by the old code

    markers = tmp_path / "site" / "guard" / "git" / "markers.py"
    assert _RULE in markers.read_text()
    markers.write_text(markers.read_text().replace(_RULE, _NEW_RULE))

    assert run("check", "--quiet").returncode == 1
    check = run("check")
    assert check.returncode == 1 and "conflict" in check.stdout + check.stderr
    stamp = json.loads(run("stamp").stdout)
    assert stamp["patches"] == {"eagle3": "conflicted"} and not stamp["ok"]
    status = run("status", "--json")
    assert json.loads(status.stdout)["patches"][0]["state"] == "conflicted", status.stdout
    (sample.root / "README.md").write_text("# sglang (sample), edited\n")
    sample.git("commit", "-q", "-m", "docs", "README.md")
    switch = sample.git("checkout", "-q", "-b", "topic", check=False)
    assert "guard FAILED after post-checkout" in switch.stderr, switch.stderr
    assert switch.returncode == 1
    assert sample_repo.KIMI in switch.stderr
