"""A checkout file's module name and import root, namespace packages (PEP 420) included: held
against Python's own import system, and through `check --runtime` on sglang's real layout
(0.5.9/0.5.10: no `__init__.py` in `srt/` nor `srt/models/`), where a file imported as a
top-level module from its own folder always passed "is it the checkout's file?"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Sample
from helpers import run_patchguard

from guard.truth.module_names import module_of

LAYOUT = {  # file -> (module name, root) as the layout alone names them
    "python/sglang/srt/models/kimi_k25.py": ("sglang.srt.models.kimi_k25", "python"),
    "python/sglang/srt/utils.py": ("sglang.srt.utils", "python"),
    "python/sglang/__init__.py": ("sglang", "python"),
    "pkg/sub/mod.py": ("pkg.sub.mod", "."),
    "proj/src/nsp/x/y.py": ("nsp.x.y", "proj/src"),
    "top.py": ("top", "."),
    "tools/alone.py": ("alone", "tools"),
}
FILES = [
    "python/pyproject.toml",
    "python/sglang/__init__.py",
    "pkg/__init__.py",
    "proj/pyproject.toml",
    *LAYOUT,
]

FIND = r"""
import importlib.util, json, sys
answers = {}
for name, root in json.loads(sys.stdin.read()):
    sys.path[:] = [root] + [p for p in sys.path if p != root]
    spec = importlib.util.find_spec(name)
    answers[name] = spec.origin if spec is not None else None
    for loaded in [m for m in sys.modules if m.split(".")[0] == name.split(".")[0]]:
        del sys.modules[loaded]
print(json.dumps(answers))
"""


def test_module_names_are_those_python_finds_the_file_by(tmp_path: Path) -> None:
    for name in FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    named = {path: module_of(tmp_path, path) for path in LAYOUT}
    assert {p: (m, r.relative_to(tmp_path).as_posix()) for p, (m, r) in named.items()} == LAYOUT
    asked = [[m, str(r)] for m, r in named.values()]
    found = subprocess.run(
        [sys.executable, "-I", "-c", FIND],
        input=json.dumps(asked),
        capture_output=True,
        text=True,
        check=True,
    )
    origins = json.loads(found.stdout)
    for path, (module, _) in named.items():
        assert origins[module] == str(tmp_path / path), module


@pytest.fixture
def namespaced(sample: Sample) -> Sample:
    """The sample checkout with sglang 0.5.10's layout: `srt/` and `srt/models/` namespace
    packages, a method guarded in `deepseek_v2.py`."""
    for init in ("python/sglang/srt/__init__.py", "python/sglang/srt/models/__init__.py"):
        sample.git("rm", "-q", init)
    models = sample.root / "python/sglang/srt/models"
    (models / "deepseek_v2.py").write_text(
        "class DeepseekV3ForCausalLM:\n    def get_embed_and_head(self):\n        return None\n"
    )
    sample.git("add", "-A")
    sample.git("commit", "-qm", "namespace packages, as sglang 0.5.10")
    spec = "python/sglang/srt/models/deepseek_v2.py::DeepseekV3ForCausalLM.get_embed_and_head"
    assert sample.pg("require", spec).exit_code == 0
    return sample


def test_a_stale_installed_copy_under_namespace_packages_is_red(
    namespaced: Sample, clean_env: dict[str, str], tmp_path: Path
) -> None:
    """An installed sglang without the method (PYTHONPATH here, a site-packages in life) is what
    `import sglang.srt.models.deepseek_v2` loads: --runtime names it, never green."""
    args = ("check", "--runtime", "--python", sys.executable)
    run_patchguard(namespaced.root, clean_env, args, check=0)
    site = tmp_path / "site"
    shutil.copytree(namespaced.root / "python/sglang", site / "sglang")
    (site / "sglang/srt/models/deepseek_v2.py").write_text(
        "class DeepseekV3ForCausalLM:\n    pass\n"
    )
    env = {**clean_env, "PYTHONPATH": str(site)}
    result = run_patchguard(namespaced.root, env, args, check=1)
    stale = os.path.realpath(site / "sglang/srt/models/deepseek_v2.py")
    assert (
        f"sglang.srt.models.deepseek_v2 is imported from {stale}" in result.stdout + result.stderr
    )
    assert "not from this checkout" in result.stdout + result.stderr
