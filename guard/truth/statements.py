"""The statements a block runs in its own scope: one walk, so that the binding model
(guard.truth.model_statements) and the effect summaries (guard.truth.effect_reader) agree."""

from __future__ import annotations

import ast
from collections.abc import Iterator


def own_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A block's statements and those of its compound statements, in source order; not those
    of nested functions and classes, which run in scopes of their own."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            stack.extend(reversed([inner for block in blocks(node) for inner in block]))


def blocks(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The blocks a statement holds, handlers' and cases' too, in source order."""
    for name in ("body", "orelse", "finalbody"):
        inner = getattr(node, name, None)
        if isinstance(inner, list):
            yield inner
    for handler in getattr(node, "handlers", ()):
        yield handler.body
    for case in getattr(node, "cases", ()):
        yield case.body


def imported(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str]]:
    """(bound name, dotted origin) of each name an import binds; `M.*` for a star; a relative
    origin has its leading dots."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            root = alias.name.split(".")[0]  # `import a.b` binds a, to a
            yield (alias.asname, alias.name) if alias.asname else (root, root)
        return
    module = "." * node.level + (node.module or "")
    for alias in node.names:
        joined = f"{module}.{alias.name}" if node.module else f"{module}{alias.name}"
        yield (alias.asname or alias.name), joined


def last_name(node: ast.expr) -> str:
    """The last name a decorator or callee is spelled with (`staticmethod`, `f` of `m.f(...)`)."""
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ""
