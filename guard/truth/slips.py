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
    lines = source.decode("utf-8", errors="replace").splitlines()
    return [
        *_dedented_methods(tree, lines, path, added),
        *_misspelt_delegations(tree, path, added),
    ]


def _dedented_methods(tree: ast.Module, lines: list[str], path: str, added: set[int]) -> list[str]:
    """`def name(self, ...)` at module level, wherever it stands (right after its class, or
    after `EntryClass = [...]`, the heredoc's slip), with the class it likely belongs in."""
    found = []
    methods = {id(node) for node in module_methods(tree)}
    for previous, node in zip([None, *tree.body], tree.body, strict=False):
        if id(node) not in methods or node.lineno not in added:
            continue
        assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        if isinstance(previous, ast.ClassDef):
            where = f"right after class {previous.name}"
        else:
            where = (
                f"after `{_opening(lines, previous)}` (line {previous.lineno})"
                if previous
                else "at the top"
            )
        owner = likely_class(tree, node)
        belongs = (
            f"{owner[1]}: probably meant inside class {owner[0]}"
            if owner
            else "probably meant inside a class"
        )
        found.append(
            f"{path}:{node.lineno}: def {node.name}(self, ...) is at module level, {where}, "
            f"not in a class; {belongs} (indentation)"
        )
    return found


def _opening(lines: list[str], node: ast.stmt) -> str:
    """A statement's first line, short: `EntryClass = [KimiK25ForConditionalGeneration]`."""
    text = lines[node.lineno - 1].strip().removesuffix(":") if node.lineno <= len(lines) else ""
    return text if len(text) <= 60 else text[:57] + "..."


def module_methods(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Functions at module level whose first parameter is `self` and that the module never
    names: methods typed outside their class. One the module does name is put to use on
    purpose (`Class.name = name`, `setattr(C, "n", name)`, `MethodType(name, obj)`), and
    is none of this."""
    named = {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    return [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and [a.arg for a in (*node.args.posonlyargs, *node.args.args)][:1] == ["self"]
        and node.name not in named
    ]


def likely_class(
    tree: ast.Module, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> tuple[str, str] | None:
    """The module-level class `function` likely belongs in, and why: the one whose methods
    call `self.<name>`; else the one that defines most of the `self.` names it uses; else the
    nearest class above it."""
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    callers = [c.name for c in classes if function.name in _self_calls(c)]
    if callers:
        return callers[0], f"class {callers[0]} calls self.{function.name}()"
    used = _self_names(function)
    shared = sorted(((used & _defined(c), c.name) for c in classes), key=lambda s: -len(s[0]))
    if shared and shared[0][0] and (len(shared) == 1 or len(shared[1][0]) < len(shared[0][0])):
        names, name = shared[0]
        listed = ", ".join(f"self.{n}" for n in sorted(names)[:3])
        return name, f"class {name} defines {listed}, which it uses"
    above = [c for c in classes if c.lineno < function.lineno]
    if above:
        return above[-1].name, f"class {above[-1].name} is the nearest class above it"
    return None


def _self_calls(cls: ast.ClassDef) -> set[str]:
    """The names a class's methods call on `self` (`self.name(...)`)."""
    return {
        node.func.attr
        for node in ast.walk(cls)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
    }


def _self_names(node: ast.AST) -> set[str]:
    """Every `self.name` read or written in `node`."""
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    }


def _defined(cls: ast.ClassDef) -> set[str]:
    """What a class defines for its instances: its methods and the `self.name` it assigns."""
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    assigned = {
        target.attr
        for n in ast.walk(cls)
        if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign)
        for target in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }
    return methods | assigned


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
