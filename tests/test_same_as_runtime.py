"""`--same-as` and the stamp cover the code that runs.

Beside HEAD, the patches and the edits `git status` shows: edits it hides (entries marked
assume-unchanged or skip-worktree), untracked files of any kind in a guarded package (a built
`.so`, a `.json` config, a module outside `models/` on sglang's namespace layout), the
interpreter's version and its installed distributions (a second venv with another torch).
All through the installed CLI with real git and real interpreters.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample
from helpers import Checkout

from guard.ops import provenance

PARALLEL_STATE = "python/sglang/srt/distributed/parallel_state.py"


@pytest.fixture
def node(sample: Sample, clean_env: dict[str, str], tmp_path: Path) -> tuple[Checkout, Path]:
    """The sample with eagle3 recorded, and its own stamp written where the nodes share it."""
    sample.record_eagle3()
    checkout = Checkout(sample.root, clean_env)
    stamp = tmp_path / "node0.stamp"
    stamp.write_text(checkout.pg("stamp", check=0).stdout)
    return checkout, stamp


def differs(checkout: Checkout, stamp: Path, *args: str) -> str:
    """What `check --same-as` names (it must refuse: exit 1)."""
    return checkout.pg("check", "--same-as", str(stamp), *args, check=1).stderr


def test_edits_git_status_hides_are_named(node: tuple[Checkout, Path]) -> None:
    checkout, stamp = node
    checkout.pg("check", "--same-as", str(stamp), check=0)
    checkout.git("update-index", "--assume-unchanged", PARALLEL_STATE)
    edited = checkout.root / PARALLEL_STATE
    edited.write_text(edited.read_text() + "x = 1\n")
    init = checkout.root / "python/sglang/__init__.py"
    checkout.git("update-index", "--skip-worktree", "python/sglang/__init__.py")
    init.write_text(init.read_text() + "import os\n")
    assert checkout.git("status", "--porcelain", "-uno").stdout == f" M {sample_repo.KIMI}\n"
    said = differs(checkout, stamp)
    assert f"file {PARALLEL_STATE}: as HEAD has it -> " in said
    assert "file python/sglang/__init__.py: as HEAD has it -> " in said
    # a skip-worktree entry with no file is what a sparse checkout leaves out: no edit
    init.unlink()
    edited.write_text(edited.read_text().replace("x = 1\n", ""))
    checkout.pg("check", "--same-as", str(stamp), check=0)


def test_untracked_files_of_any_kind_in_the_namespace_package_tree_are_named(
    sample: Sample, clean_env: dict[str, str], tmp_path: Path
) -> None:
    """sglang 0.5.9's layout: `srt/` and `srt/models/` hold no __init__.py."""
    checkout = Checkout(sample.root, clean_env)
    checkout.git(
        "rm", "-q", "python/sglang/srt/__init__.py", "python/sglang/srt/models/__init__.py"
    )
    checkout.git("commit", "-qm", "namespace packages, as sglang 0.5.9")
    sample.record_eagle3()
    stamp = tmp_path / "node0.stamp"
    stamp.write_text(checkout.pg("stamp", check=0).stdout)
    # (an extension of another module's name: one named like the guarded file is red already)
    built = f"python/sglang/srt/models/fused_moe{sysconfig.get_config_var('EXT_SUFFIX')}"
    untracked = {
        built: b"\x7fELF, an extension module import prefers to the .py",
        "python/sglang/srt/models/configs/kimi.json": b'{"eagle": 3}\n',
        "python/sglang/srt/stray.py": b"import os\n",  # outside models/
        "python/sglang/defaults.json": b"{}\n",  # in the regular package above
        "python/sglang/srt/models/__pycache__/stale.cpython-311.pyc": b"bytecode",
        "scratch.json": b"{}\n",  # outside every package
    }
    for path, content in untracked.items():
        (checkout.root / path).parent.mkdir(parents=True, exist_ok=True)
        (checkout.root / path).write_bytes(content)
    said = differs(checkout, stamp)
    for path in list(untracked)[:4]:
        assert f"file {path}: as HEAD has it -> " in said
    assert "__pycache__" not in said
    assert "scratch.json" not in said


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second interpreter (a venv of the one running the tests, so the same Python version)
    whose search path holds another set of distributions."""
    root = tmp_path_factory.mktemp("serving") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root / "bin" / "python"


def install_fake(python: Path, name: str, version: str) -> None:
    """A distribution as pip leaves one: NAME-VERSION.dist-info/METADATA in site-packages."""
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for old in Path(site).glob(f"{name}-*.dist-info"):
        for file in old.iterdir():
            file.unlink()
        old.rmdir()
    info = Path(site) / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    asked = f"import importlib.metadata as m; print(m.version({name!r}))"
    said = subprocess.run([str(python), "-c", asked], capture_output=True, text=True, check=True)
    assert said.stdout.strip() == version  # what Python itself says is installed


def test_another_interpreter_or_another_torch_is_named_with_both_versions(
    node: tuple[Checkout, Path], venv: Path, tmp_path: Path
) -> None:
    checkout, _ = node
    install_fake(venv, "torch", "2.4.0")
    install_fake(venv, "sgl-kernel", "0.3.9")
    stamp = tmp_path / "serving.stamp"
    stamp.write_text(checkout.pg("stamp", "--python", str(venv), check=0).stdout)
    written = json.loads(stamp.read_text())["python"]
    assert written["executable"] == str(venv)
    assert written["distributions"]["torch"] == "2.4.0"
    assert written["distributions"]["sgl-kernel"] == "0.3.9"
    assert written["distributions"]["vllm"] is None
    checkout.pg("check", "--same-as", str(stamp), "--python", str(venv), check=0)
    # the test venv, first on PATH, has neither installed
    said = differs(checkout, stamp)
    assert f"torch not installed here, 2.4.0 in {stamp}" in said
    assert f"sgl-kernel not installed here, 0.3.9 in {stamp}" in said
    install_fake(venv, "torch", "2.5.1")  # a pip install: the interpreter is the same file
    said = differs(checkout, stamp, "--python", str(venv))
    assert f"torch 2.5.1 here, 2.4.0 in {stamp}" in said
    assert "sgl-kernel" not in said
    marker = tmp_path / "launched"
    ran = checkout.pg(
        "run",
        "--same-as",
        str(stamp),
        "--",
        str(venv),
        "-c",
        f"open({str(marker)!r}, 'w')",
        check=1,
    )
    assert f"torch 2.5.1 here, 2.4.0 in {stamp}" in ran.stderr
    assert not marker.exists()
    older = tmp_path / "older.stamp"
    older.write_text(stamp.read_text().replace('"version":"', '"version":"3.99.'))
    here = ".".join(map(str, sys.version_info[:3]))
    said = differs(checkout, older, "--python", str(venv))
    assert f"Python {here} here, 3.99.{here} in {older}" in said
    now = tmp_path / "now.stamp"
    now.write_text(checkout.pg("stamp", "--python", str(venv), check=0).stdout)
    changes = checkout.pg("stamp", "--diff", str(stamp), str(now), check=0).stdout
    assert "torch: 2.4.0 -> 2.5.1" in changes.splitlines()


def test_a_hunts_kept_sample_counts_only_on_the_same_interpreter_versions() -> None:
    """same_code, which the hunt keeps samples by: the interpreter's path may differ between
    nodes, its version and distributions may not."""
    base = {"head": "a", "patches": {}, "files": {}, "edits": {}}
    python = {"executable": "/a/python", "version": "3.11.7", "distributions": {"torch": "2.4.0"}}
    moved = {**python, "executable": "/b/python"}
    upgraded = {**python, "distributions": {"torch": "2.5.1"}}
    one = {**base, "python": python}
    assert provenance.same_code(one, {**base, "python": moved})
    assert not provenance.same_code(one, {**base, "python": upgraded})
    assert not provenance.same_code(one, {**base, "python": {**python, "version": "3.12.1"}})
    assert not provenance.same_code(one, base)  # an older patchguard's stamp said nothing
