"""Upstream's edits judged by what Python binds, on the real-sized model file.

A copy of the methods that upstream defines only under a runtime condition is not "upstream":
the user's unconditional copy stays. A line after the class that binds neither the class nor
a method (`Class.supports_eagle3 = True`) never turns a clean merge into a conflict.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import sample_repo
from conftest import git
from helpers import run_patchguard

from guard.truth.model_names import PRESENT
from guard.truth.symbols import SymbolIndex

KIMI = sample_repo.KIMI
CLASS = sample_repo.CLASS
FILLER = "".join(
    f"\n    def layer_{n}(self, hidden):\n        return self.language_model.layers[{n}](hidden)\n"
    for n in range(120)
)
NPU_GUARD = 'import os\n\n_is_npu = os.environ.get("SGLANG_IS_NPU") == "1"\n'


@dataclass
class Checkout:
    root: Path
    env: dict[str, str]
    bench: Path

    @property
    def kimi(self) -> Path:
        return self.root / KIMI

    def pg(self, *args: str, check: int | None = None) -> subprocess.CompletedProcess[str]:
        return run_patchguard(self.root, self.env, args, check)

    def git(self, *args: str) -> str:
        return git(self.root, *args, env=self.env).stdout

    def run_bench(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(self.bench)], cwd=self.root, capture_output=True, text=True
        )


def _upstream_branch(checkout: Checkout, name: str, edit: str) -> None:
    """A commit of upstream's on branch `name`, from `base`, leaving `base` checked out."""
    checkout.git("checkout", "-q", "-b", name, "base")
    text = checkout.kimi.read_text()
    if edit == "npu":
        indented = "".join(
            f"    {line}" if line.strip() else line
            for line in sample_repo.UPSTREAM_METHODS.splitlines(True)
        )
        text = text.replace('"""\n\nfrom torch', '"""\n\n' + NPU_GUARD + "from torch", 1)
        marker = "\n    def forward("
        text = text.replace(marker, "\n    if _is_npu:\n" + indented + marker, 1)
    else:
        text = text.replace("\n\nEntryClass", f"\n\n{CLASS}.supports_eagle3 = True\n\nEntryClass")
    checkout.kimi.write_text(text)
    checkout.git("commit", "-qam", f"upstream: {edit}")
    checkout.git("checkout", "-q", "base")


@pytest.fixture
def checkout(tmp_path: Path, clean_env: dict[str, str]) -> Checkout:
    """`work` at a real-sized model file, with the EAGLE-3 patch recorded and the hooks on."""
    root = tmp_path / "sglang"
    sample_repo.build_hunt(root)
    bench = tmp_path / "bench.py"
    bench.write_text(sample_repo.HUNT_BENCH_TEXT)
    result = Checkout(root, clean_env, bench)
    result.git("checkout", "-q", "-b", "base", "c0")
    text = result.kimi.read_text().replace("\n\nEntryClass", FILLER + "\n\nEntryClass", 1)
    result.kimi.write_text(text)
    assert text.count("\n") > 300
    result.git("commit", "-qam", "a real-sized model file")
    _upstream_branch(result, "npu", "npu")
    _upstream_branch(result, "attr", "attr")
    result.git("checkout", "-q", "-b", "work", "base")
    sample_repo.add_eagle3_methods(root)
    result.pg("record", "eagle3", KIMI, check=0)
    result.pg("install", check=0)
    return result


def _unconditional_in_class(path: Path) -> bool:
    index = SymbolIndex.parse(path.read_bytes(), KIMI)
    return all(
        index.resolve(f"{CLASS}.{method}").state == PRESENT for method in sample_repo.METHODS
    )


def test_a_conditional_copy_upstream_keeps_the_users_copy(checkout: Checkout) -> None:
    checkout.pg("git", "checkout", "-q", "npu", check=0)
    text = checkout.kimi.read_text()
    assert "    if _is_npu:\n" in text  # upstream's copy is there, as upstream wrote it
    for method in sample_repo.METHODS:
        assert text.count(f"def {method}(") == 2
    assert _unconditional_in_class(checkout.kimi)
    status = checkout.pg("status", check=0).stdout
    assert "eagle3: applied" in status
    assert "HEAD has a conditional copy" in status
    checkout.pg("check", check=0)
    ran = checkout.pg("run", sys.executable, str(checkout.bench), check=0)
    assert "bench: ok" in ran.stdout
    # Green only because of the user's copy: without it, on this (non-NPU) host, Python lacks
    # the methods, and reading says so rather than calling HEAD's copy upstream.
    checkout.pg("unapply", "eagle3", check=0)
    assert "lacks" in checkout.run_bench().stderr
    result = checkout.pg("check", check=1)
    assert "cannot tell from reading" in result.stderr
    assert "only when `_is_npu` is true" in result.stderr
    assert "-> patchguard apply eagle3" in result.stderr


def test_a_class_attribute_after_the_class_is_no_conflict(checkout: Checkout) -> None:
    result = checkout.pg("git", "checkout", "-q", "attr", check=0)
    assert "conflict" not in result.stderr
    text = checkout.kimi.read_text()
    assert f"{CLASS}.supports_eagle3 = True\n" in text
    assert _unconditional_in_class(checkout.kimi)
    checkout.pg("check", check=0)
    assert "bench: ok" in checkout.run_bench().stdout
    checkout.pg("git", "checkout", "-q", "work", check=0)  # and back
    assert _unconditional_in_class(checkout.kimi)
    assert "supports_eagle3" not in checkout.kimi.read_text()
