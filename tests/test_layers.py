"""The package shows its layers, and each imports only downward.

Every import counts, at the top of a module, inside a function or under TYPE_CHECKING: a
lazy import is still a dependency, and an import up the layers makes no layer usable alone.
"""

from __future__ import annotations

import ast
import subprocess
import sys

from conftest import ROOT

PACKAGE = ROOT / "guard"
# Lowest first. guard.errors and guard.collector are the foundation (they import nothing of
# ours); the entry points at the top of the package (entry, __init__, __main__) may import any
# layer.
LAYERS = ("errors", "git", "store", "truth", "tree", "ops", "hunt", "cli", "entry")
TOP = {
    "__init__": "entry",
    "__main__": "entry",
    "entry": "entry",
    "errors": "errors",
    "collector": "errors",
}


def module_name(path: object) -> str:
    relative = path.relative_to(ROOT).with_suffix("")  # type: ignore[attr-defined]
    parts = list(relative.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, object]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> str:
    """guard.store.history -> store; guard.entry -> entry; guard -> entry (the public API)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "entry"
    return TOP.get(parts[1], parts[1]) if len(parts) == 2 else parts[1]


def imports_of_guard_modules() -> dict[str, set[str]]:
    """Module name -> the guard modules it imports, anywhere in its text."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):  # type: ignore[attr-defined]
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "guard":
                module = str(node.module)
                submodules = {f"{module}.{a.name}" for a in node.names} & set(known)
                found |= submodules or {module}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.split(".")[0] == "guard"}
        graph[name] = found - {name}
    return graph


def test_every_module_sits_in_a_layer_and_the_top_stays_small() -> None:
    found = modules()
    layers = {layer_of(name) for name in found}
    assert layers == set(LAYERS), layers ^ set(LAYERS)
    top = [path for path in PACKAGE.glob("*.py")]
    assert len(top) <= 14, sorted(p.name for p in top)
    too_long = {
        name: lines
        for name, path in found.items()
        if (lines := len(path.read_text().splitlines())) > 900  # type: ignore[attr-defined]
    }
    assert too_long == {}, f"modules over 900 lines: {too_long}"


def test_imports_go_only_down_the_layers() -> None:
    rank = {layer: number for number, layer in enumerate(LAYERS)}
    upward = {
        f"{name} -> {imported}"
        for name, imported_names in imports_of_guard_modules().items()
        for imported in imported_names
        if rank[layer_of(imported)] > rank[layer_of(name)]
    }
    assert upward == set(), f"imports up the layers: {sorted(upward)}"


def test_guard_modules_import_no_circle() -> None:
    graph = imports_of_guard_modules()
    assert {"guard.errors", "guard.git.gitpaths", "guard.ops.moves", "guard.cli.render"} <= set(
        graph
    )
    remaining = dict(graph)
    while True:  # peel off the modules that import nothing still remaining
        leaves = {name for name, deps in remaining.items() if not deps & set(remaining)}
        if not leaves:
            break
        remaining = {name: deps for name, deps in remaining.items() if name not in leaves}
    circles = {name: sorted(deps & set(remaining)) for name, deps in remaining.items()}
    assert circles == {}, f"import circles among: {circles}"


def test_the_lowest_modules_need_nothing_above_them() -> None:
    graph = imports_of_guard_modules()
    assert graph["guard.errors"] == set()  # the crash log's directory is passed in
    assert "guard.cli.preflight" not in graph["guard.ops.moves"]  # a stamp: guard.ops.provenance
    assert (
        not {"guard.ops.moves", "guard.cli.preflight", "guard.cli.render"}
        & graph["guard.ops.provenance"]
    )


def test_a_layer_package_imports_nothing() -> None:
    """The hooks' fast path imports single modules of guard.git and guard.store: an `__init__`
    that imports (re-exports) would pull the rest of its layer in with them."""
    for path in PACKAGE.glob("*/__init__.py"):
        tree = ast.parse(path.read_text())
        imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        assert imports == [], f"{path.relative_to(ROOT)} imports"


def test_every_module_imports_alone() -> None:
    """As Python sees it, not only as the text says: each in a fresh interpreter."""
    for name in modules():
        if name == "guard.__main__":
            continue  # running it is the command itself
        result = subprocess.run(
            [sys.executable, "-c", f"import {name}"], capture_output=True, text=True
        )
        assert result.returncode == 0, f"{name}: {result.stderr}"


def test_the_design_document_names_every_module() -> None:
    """docs/design.md's table per layer is how a reader finds a module's concern."""
    design = (ROOT / "docs" / "design.md").read_text()
    unnamed = [
        name
        for name, path in modules().items()
        if path.name != "__init__.py"
        and name != "guard.__main__"  # type: ignore[attr-defined]
        and f"{path.name}`" not in design  # type: ignore[attr-defined]
    ]
    assert unnamed == [], f"modules docs/design.md does not name: {unnamed}"
