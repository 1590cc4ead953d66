"""Slips a person makes typing a patch by hand, caught when it is recorded.

Both are recorded as typed otherwise, and `check` would then guard the slip itself: a method
typed one indentation level too far left becomes a module-level function (and the required
symbol `file.py::name`), and a misspelt method name (`get_embed_and_haed`) becomes the
requirement. Each is told as a warning; `record --strict` refuses instead.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable


def slips(source: bytes, path: str, added_lines: Iterable[int]) -> list[str]:
    """What looks like a slip among the definitions on `added_lines` of `source`."""
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # record says what is wrong with the file itself
    added = set(added_lines)
    return [*_dedented_methods(tree, path, added), *_misspelt_delegations(tree, path, added)]


def _dedented_methods(tree: ast.Module, path: str, added: set[int]) -> list[str]:
    """`def name(self, ...)` at module level, in a run of defs right after a class."""
    found = []
    last_class: ast.ClassDef | None = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            last_class = node
            continue
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or last_class is None:
            last_class = None
            continue
        parameters = [*node.args.posonlyargs, *node.args.args]
        if node.lineno in added and parameters and parameters[0].arg == "self":
            found.append(
                f"{path}:{node.lineno}: def {node.name}(self, ...) is at module level, right "
                f"after class {last_class.name}: probably meant inside class {last_class.name} "
                "(indentation)"
            )
    return found


def _misspelt_delegations(tree: ast.Module, path: str, added: set[int]) -> list[str]:
    """A new method whose name is one edit away from a name the class calls on an attribute
    (`self.language_model.get_embed_and_head()`) that is not itself a method of the class."""
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        methods = {
            n.name: n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        delegated = {
            call.func.attr
            for call in ast.walk(cls)
            if isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Attribute)
            and isinstance(call.func.value.value, ast.Name)
            and call.func.value.value.id == "self"
        } - methods.keys()
        for name, method in methods.items():
            if method.lineno not in added:
                continue
            for other in sorted(delegated):
                if _one_edit_apart(name, other):
                    found.append(
                        f"{path}:{method.lineno}: {cls.name}.{name} is one letter away from "
                        f"{other}, which the class calls on an attribute: a typo?"
                    )
    return found


def _one_edit_apart(a: str, b: str) -> bool:
    """One substitution, insertion, deletion, or swap of two neighbours (Damerau's edits)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    start = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    if len(a) == len(b):
        rest_a, rest_b = a[start + 1 :], b[start + 1 :]
        swapped = (
            a[start + 2 :] == b[start + 2 :] and a[start : start + 2] == b[start : start + 2][::-1]
        )
        return rest_a == rest_b or swapped
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return longer[start + 1 :] == shorter[start:]
