"""Slips a person makes typing a patch by hand, caught when it is recorded.

A method typed one level too far left is a module-level function, and the required symbol
`file.py::name`: `check` would guard the slip itself, green while the class has none of the
methods. A misspelt method name (`get_embed_and_haed`) would become the requirement. `record`
refuses the first (unless `--as-typed`) and warns of the second (refused by `--strict`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Iterable
from typing import NamedTuple, TypeGuard

from guard.truth.bodies import parse, span, text_lines

# A module-level function whose first parameter is one of these is a method typed outside its
# class (`cls`: a classmethod's body typed at column 0).
_METHOD_FIRST = (["self"], ["cls"])


class Slips(NamedTuple):
    dedented: list[str]
    misspelt: list[str]


def slips(source: bytes, path: str, added_lines: Iterable[int]) -> Slips:
    tree = parse(source, path)
    if tree is None:
        return Slips([], [])  # record says what is wrong with the file itself
    added = set(added_lines)
    dedented = _dedented_methods(tree, text_lines(source), path, added)
    return Slips(dedented, _misspelt_delegations(tree, path, added))


def _dedented_methods(tree: ast.Module, lines: list[str], path: str, added: set[int]) -> list[str]:
    """Only in a file that defines a class: elsewhere no class could be meant."""
    found = []
    for node in module_methods(tree):
        if node.lineno not in added or (owner := likely_class(tree, node)) is None:
            continue
        index = tree.body.index(node)
        previous = tree.body[index - 1] if index else None
        if previous is None:
            where = "at the top"
        elif isinstance(previous, ast.ClassDef):
            where = f"right after class {previous.name}"
        else:  # its first line, short: `EntryClass = [KimiK25ForConditionalGeneration]`
            text = lines[previous.lineno - 1].strip().removesuffix(":")
            text = text if len(text) <= 60 else text[:57] + "..."
            where = f"after `{text}` (line {previous.lineno})"
        found.append(
            f"{path}:{node.lineno}: def {node.name}({_parameters(node)[0]}, ...) is at module "
            f"level, {where}, not in a class; {owner[1]}: probably meant inside class "
            f"{owner[0]} (indentation) -> indent lines {lines_of(node)} into class {owner[0]}"
        )
    return found


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in (*function.args.posonlyargs, *function.args.args)]


def lines_of(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """`26-27`: a definition's lines, its decorators with it."""
    first, last = span(node)
    return f"{first}-{last}"


def module_methods(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Methods typed outside their class. A function the module names is put to use on purpose
    (`Class.name = name`, `setattr(C, "n", name)`, `MethodType(name, obj)`): none of them."""
    named = {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }
    return [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and _parameters(node)[:1] in _METHOD_FIRST
        and node.name not in named
    ]


def likely_class(
    tree: ast.Module, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> tuple[str, str] | None:
    """The module-level class `function` likely belongs in, and why; None when none stands out."""
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    callers = [
        c.name
        for c in classes
        for n in ast.walk(c)
        if isinstance(n, ast.Call) and _of_self(n.func) and n.func.attr == function.name
    ]
    if callers:
        return callers[0], f"class {callers[0]} calls self.{function.name}()"
    used = {n.attr for n in ast.walk(function) if _of_self(n)}
    shared = sorted(((used & _defined(c), c.name) for c in classes), key=lambda s: -len(s[0]))
    if shared and shared[0][0] and (len(shared) == 1 or len(shared[1][0]) < len(shared[0][0])):
        names, name = shared[0]
        listed = ", ".join(f"self.{n}" for n in sorted(names)[:3])
        return name, f"class {name} defines {listed}, which it uses"
    above = [c for c in classes if c.lineno < function.lineno]
    if above:
        return above[-1].name, f"class {above[-1].name} is the nearest class above it"
    if len(classes) == 1:
        return classes[0].name, f"class {classes[0].name} is the only class"
    return None


def _of_self(node: ast.AST) -> TypeGuard[ast.Attribute]:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _defined(cls: ast.ClassDef) -> set[str]:
    """What a class defines for its instances: its methods and the `self.name` it assigns."""
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    assigned = {
        target.attr
        for n in ast.walk(cls)
        if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign)
        for target in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if _of_self(target)
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
            and _of_self(call.func.value)
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
    if a == b:
        return False
    start = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    rest_a, rest_b = a[start + 1 :], b[start + 1 :]
    swapped = (
        a[start : start + 2] == b[start : start + 2][::-1] and a[start + 2 :] == b[start + 2 :]
    )
    # substituted, one more letter in b, one more in a, or swapped
    return rest_a == rest_b or a[start:] == rest_b or rest_a == b[start:] or swapped


def strays_put_back(now: ast.Module, then: ast.Module) -> list[tuple[str, str, int]]:
    """(name, class, line) of each method of `now`'s classes that writing `then` over it would
    add again at module level (a slip recorded, then indented), where Python never runs it."""
    methods = {name: (cls, line) for name, cls, line in _methods_only(now)}
    return [
        (node.name, *methods[node.name]) for node in module_methods(then) if node.name in methods
    ]


def _methods_only(tree: ast.Module) -> list[tuple[str, str, int]]:
    """(name, class, line) of each class method no module-level function shares a name with."""
    level = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    return [
        (method.name, cls.name, method.lineno)
        for cls in tree.body
        if isinstance(cls, ast.ClassDef)
        for method in cls.body
        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and method.name not in level
    ]


def module_level_warnings(
    syntax: ast.Module | None, path: str, patch: str, names: Collection[str]
) -> list[str]:
    """`check`'s words for the functions `names` that `patch` added at module level: each still
    outside its class (`--as-typed`), and each now only a method (apply would put a copy back)."""
    if syntax is None:
        return []
    found = [
        f"{path}:{node.lineno}: def {node.name}({_parameters(node)[0]}, ...) is at module "
        f"level, not a method of class {owner[0]} (patch {patch} recorded it as typed; Python "
        f"never runs it as the method) -> indent lines {lines_of(node)} into class {owner[0]}, "
        f"then patchguard record {patch}"
        for node in module_methods(syntax)
        if node.name in names and (owner := likely_class(syntax, node)) is not None
    ]
    found += [
        f"{path}:{line}: {name}, which patch {patch} recorded at module level, is a method of "
        f"class {cls} now -> keep it there: patchguard record {patch} (patchguard apply would "
        "put a stray copy back)"
        for name, cls, line in _methods_only(syntax)
        if name in names
    ]
    return found


def may_slip(content: bytes, names: Collection[str]) -> bool:
    """Whether `content` may define one of `names` with `self`/`cls` at column 0, or indented:
    bytes decide, so a patch's module-level helper alone does not parse its file on every check."""
    if not names:
        return False
    alternatives = b"|".join(re.escape(name.encode()) for name in names)
    return bool(
        re.search(
            rb"^(?:(?:async\s+)?def\s+(?:%b)\s*\(\s*(?:self|cls)\b"
            rb"|[ \t]+(?:async\s+)?def\s+(?:%b)\b)" % (alternatives, alternatives),
            content,
            re.MULTILINE,
        )
    )
