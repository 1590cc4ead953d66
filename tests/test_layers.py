"""Each module imports only downward: no import circle among guard's modules (issue 20).

Every import counts, at the top of a module, inside a function or under TYPE_CHECKING: a
lazy import is still a dependency, and a circle of them makes no layer usable alone.
"""

from __future__ import annotations

import ast
import subprocess
import sys

from conftest import ROOT

PACKAGE = ROOT / "guard"


def imports_of_guard_modules() -> dict[str, set[str]]:
    """Module name -> the guard modules it imports, anywhere in its text."""
    names = {path.stem for path in PACKAGE.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "guard":
                found |= {alias.name for alias in node.names if alias.name in names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("guard."):
                found.add(str(node.module).split(".")[1])
            elif isinstance(node, ast.Import):
                found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("guard.")}
        graph[path.stem] = found - {path.stem}
    return graph


def test_guard_modules_import_no_circle() -> None:
    graph = imports_of_guard_modules()
    assert {"errors", "gitpaths", "moves", "preflight", "render"} <= set(graph)
    remaining = dict(graph)
    while True:  # peel off the modules that import nothing still remaining
        leaves = {name for name, deps in remaining.items() if not deps & set(remaining)}
        if not leaves:
            break
        remaining = {name: deps for name, deps in remaining.items() if name not in leaves}
    circles = {name: sorted(deps & set(remaining)) for name, deps in remaining.items()}
    assert circles == {}, f"import circles among: {circles}"


def test_the_lowest_layers_need_nothing_above_them() -> None:
    graph = imports_of_guard_modules()
    assert graph["errors"] == set()  # the crash log's directory is passed in
    assert graph["bisect_status"] == set()
    assert "preflight" not in graph["moves"]  # a step's stamp comes from guard.provenance
    assert not {"moves", "preflight", "render"} & graph["provenance"]


def test_every_module_imports_alone() -> None:
    """As Python sees it, not only as the text says: each in a fresh interpreter."""
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem == "__main__":
            continue  # running it is the command itself
        module = "guard" if path.stem == "__init__" else f"guard.{path.stem}"
        result = subprocess.run(
            [sys.executable, "-c", f"import {module}"], capture_output=True, text=True
        )
        assert result.returncode == 0, f"{module}: {result.stderr}"
