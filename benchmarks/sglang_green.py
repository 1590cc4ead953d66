"""How much of real sglang stays green from reading (issue 27, "real code stays green").

Takes the sglang package out of a wheel (`pip download --no-deps sglang -d DIR`, or a wheel
already there), commits it as a checkout (`python/sglang/...`, so the models' imports of
sglang's other modules are modules of the checkout), and asks the static check for every
method defined directly in each top-level class of 30 model files (the first 30 by name that
define a class). Prints how many are not `present`, with the reason for each; `--json` gives
the figures for a results file. Needs the network (or the wheel): not part of the test suite.

Usage: python benchmarks/sglang_green.py [--wheel-dir DIR] [--files N] [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from guard.git.repo import Repo
from guard.tree.assess import check_symbol
from guard.tree.worktree import Worktree

MODELS = "python/sglang/srt/models"
IDENTITY = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def wheel(directory: Path) -> Path:
    found = sorted(directory.glob("sglang-*.whl"))
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "sglang", "-d", str(directory)],
            check=True,
        )
        found = sorted(directory.glob("sglang-*.whl"))
    return found[-1]


def checkout(archive: Path, root: Path) -> None:
    """The wheel's sglang package as one commit of a git checkout under python/."""
    with zipfile.ZipFile(archive) as opened:
        members = [n for n in opened.namelist() if n.startswith("sglang/") and n.endswith(".py")]
        opened.extractall(root / "python", members)
    env = {**os.environ, **IDENTITY}
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "sglang"], cwd=root, check=True, env=env)


def methods(path: Path) -> list[str]:
    """`Class.method` for every def directly in each top-level class of the file."""
    tree = ast.parse(path.read_bytes())
    return [
        f"{node.name}.{item.name}"
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def measure(root: Path, count: int) -> dict[str, object]:
    """Guard every method; the second pass reads the parses the first one kept (as every
    command after the first does)."""
    files = [p for p in sorted((root / MODELS).glob("*.py")) if methods(p)][:count]
    figures = one_pass(root, files)
    warm = one_pass(root, files)
    assert warm["which"] == figures["which"]
    figures["seconds_warm"] = warm["seconds"]
    return figures


def one_pass(root: Path, files: list[Path]) -> dict[str, object]:
    tree = Worktree(Repo.discover(root))
    total, not_green = 0, []
    started = time.perf_counter()
    for path in files:
        relative = path.relative_to(root).as_posix()
        for qualname in methods(path):
            total += 1
            result = check_symbol(tree, f"{relative}::{qualname}", None)
            if result.state != "present" or not result.ok:
                not_green.append(f"{relative}::{qualname}: {result.state}: {result.detail}")
    return {
        "files": len(files),
        "methods": total,
        "not_green": len(not_green),
        "share_not_green": round(len(not_green) / total, 4) if total else 0.0,
        "seconds": round(time.perf_counter() - started, 2),
        "which": not_green,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--wheel-dir", type=Path, default=Path(tempfile.gettempdir()) / "sglang-wheel"
    )
    parser.add_argument("--files", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.wheel_dir.mkdir(parents=True, exist_ok=True)
    archive = wheel(args.wheel_dir)
    root = Path(tempfile.mkdtemp(prefix="sglang-green-"))
    try:
        checkout(archive, root)
        figures = measure(root, args.files)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures["wheel"] = archive.name
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"{figures['wheel']}: {figures['methods']} methods in {figures['files']} model files, "
        f"{figures['not_green']} not present from reading ({figures['share_not_green']:.2%}), "
        f"{figures['seconds']} s (parses kept: {figures['seconds_warm']} s)"
    )
    for line in figures["which"]:  # type: ignore[attr-defined]
        print(f"  {line}")


if __name__ == "__main__":
    main()
