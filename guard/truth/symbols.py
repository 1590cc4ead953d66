"""Find Python definitions by parsing, never by grep: a method is only "there" if it is in its class,
and only if importing the module binds it there (the binding model, guard.truth.model_statements).
"""

from __future__ import annotations

import ast
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property, partial
from typing import TYPE_CHECKING, NamedTuple

from guard.collector import without_collector
from guard.store.spec import Spec
from guard.truth.model_names import CANNOT_TELL, PRESENT, Resolution
from guard.truth.model_statements import _Model
from guard.truth.statements import blocks, last_name

if TYPE_CHECKING:
    from guard.truth.effects import Effects, _LazyGraph

# Decorators that legitimately define the same name twice in one block.
_REDEFINING_DECORATORS = frozenset({"overload", "setter", "getter", "deleter", "register"})


class Definition(NamedTuple):
    """One `def` or `class` statement, reachable from module level through classes only."""

    qualname: str
    kind: str
    lineno: int
    end_lineno: int
    start_lineno: int  # the first decorator's line, or lineno
    redefines: bool
    block: int

    def __reduce__(self) -> tuple[object, ...]:  # as Binding's: kept by the thousand too
        return (tuple.__new__, (type(self), tuple(self)))


class SourceSyntaxError(Exception):
    """A file does not parse; carries `path:line` for the report."""

    def __init__(self, path: str, lineno: int | None, message: str) -> None:
        self.path = path
        self.lineno = lineno or 0
        self.message = message
        super().__init__(f"{path}:{self.lineno}: {message}")


class SymbolIndex:
    """A file's definitions by qualified name, and the model of what importing it binds."""

    def __init__(self, definitions: Iterable[Definition], model: _Model) -> None:
        self.by_qualname: dict[str, list[Definition]] = {}
        for definition in definitions:
            self.by_qualname.setdefault(definition.qualname, []).append(definition)
        self.model = model
        self.reflection: tuple[int, str] | None = None  # (line, what): see _import_time
        self.attribute_write: int | None = None  # see _import_time
        # `from .x.y import z` at the top of the module, always run: (line, dots, "x.y")
        self.relative_imports: list[tuple[int, int, str]] = []
        # what its import-time code may change (guard.truth.effects)
        self.effects: Effects | None = None

    @classmethod
    def parse(
        cls, source: bytes, path: str, facts: Mapping[str, object] | None = None
    ) -> SymbolIndex:
        """`facts`: of the interpreter conditions are decided for (None: patchguard's own)."""
        with without_collector():  # a syntax tree holds no cycles: it would only be walked
            try:  # what the parser accepts and the compiler refuses, Python cannot import either
                tree = ast.parse(source, filename=path)
                compile(tree, path, "exec", dont_inherit=True)  # `def f(a, a)`, `nonlocal x`
            except SyntaxError as error:
                raise SourceSyntaxError(path, error.lineno, error.msg) from None
            except ValueError as error:  # e.g. NUL bytes in the source
                raise SourceSyntaxError(path, None, str(error)) from None
            except (RecursionError, MemoryError):  # CPython compiles nesting ast cannot build
                return cls([], _Model(unreadable=_TOO_DEEP))
            model = _Model(facts=facts)
            try:
                model.run(tree)
                index = cls(_walk(tree.body, prefix="", block_counter=iter(range(1 << 62))), model)
                index.reflection, index.attribute_write = _import_time(tree)
                from guard.truth.effect_reader import summarize

                index.effects = effects = summarize(tree)
                effects.graph.build = partial(resumed, effects.graph, source, path)  # not the tree
            except RecursionError:
                return cls([], _Model(unreadable=_TOO_DEEP))
            index.relative_imports = [
                (node.lineno, node.level, node.module or "")
                for node in tree.body
                if isinstance(node, ast.ImportFrom) and node.level and node.module
            ]
            return index

    def resolve(self, qualname: str) -> Resolution:
        """What importing the module binds at `qualname` once it ran, decided for this
        interpreter (see guard.truth.model_names): what reading cannot decide is never present."""
        parts = [unicodedata.normalize("NFKC", part) for part in qualname.split(".")]
        found = self.model.resolve(parts, parts[-1] in self._callable_names)
        if found.state != PRESENT:
            return found
        if self.reflection is not None:
            lineno, what = self.reflection
            return Resolution(
                CANNOT_TELL,
                reason=f"line {lineno} reaches bindings by reflection ({what}), which reading "
                "does not follow",
            )
        why = self.effects.at_import.touching(parts) if self.effects is not None else None
        if why is not None:
            return Resolution(CANNOT_TELL, reason=f"code run at import may change it: {why}")
        return found

    def defines_callable(self, qualname: str) -> bool:
        """Does the file define the name with `def` or `class` (so it must be callable)?"""
        return unicodedata.normalize("NFKC", qualname.rsplit(".", 1)[-1]) in self._callable_names

    @cached_property  # asked once per required name
    def _callable_names(self) -> frozenset[str]:
        return frozenset(
            unicodedata.normalize("NFKC", name.rsplit(".", 1)[-1]) for name in self.by_qualname
        )

    def find(self, qualname: str) -> list[Definition]:
        return self.by_qualname.get(qualname, [])

    def duplicates(self, qualname: str) -> list[Definition]:
        """Definitions that silently override an earlier one in the same block."""
        plain = [d for d in self.find(qualname) if not d.redefines]
        blocks: dict[int, list[Definition]] = {}
        for definition in plain:
            blocks.setdefault(definition.block, []).append(definition)
        return [d for group in blocks.values() if len(group) > 1 for d in group]

    def elsewhere(self, qualname: str) -> list[Definition]:
        """Definitions with the same last name at another place, to explain a miss."""
        leaf = qualname.rsplit(".", 1)[-1]
        return [
            d
            for name, defs in self.by_qualname.items()
            if name != qualname and name.rsplit(".", 1)[-1] == leaf
            for d in defs
        ]

    def defined_on_lines(self, lines: set[int]) -> list[str]:
        """Qualified names whose `def`/`class` line is among `lines` (e.g. the lines a patch adds)."""
        found = {
            d.qualname for defs in self.by_qualname.values() for d in defs if d.lineno in lines
        }
        return sorted(found, key=lambda name: min(d.lineno for d in self.by_qualname[name]))


def resumed(graph: _LazyGraph, source: bytes, path: str, qualname: str) -> None:
    """Build a node `graph` lacks (a graph parsed now, or one read from the cache)."""
    from guard.truth.effect_reader import resumed  # only when a node is built

    resumed(graph, source, path, qualname)


def describe_miss(index: SymbolIndex, spec: Spec, suggest: bool = True) -> str:
    """Why `spec` is missing: where a same-named definition is, or (`suggest`) the closest names."""
    others = index.elsewhere(spec.qualname)
    if not others:
        close = did_you_mean(spec.qualname, index.by_qualname) if suggest else ""
        return f"not defined in {spec.path}{close}"
    where = ", ".join(
        f"{'module level' if '.' not in d.qualname else d.qualname.rsplit('.', 1)[0]} "
        f"(line {d.lineno})"
        for d in others
    )
    owner = spec.qualname.rsplit(".", 1)[0] if "." in spec.qualname else "module level"
    return f"not in {owner}; a definition of that name is at {where}"


def did_you_mean(typed: str, known: Iterable[str]) -> str:
    """ " (did you mean X?)" with the closest known names, or nothing when none is close. Names
    beside the typed one (same class, same file) are compared by their last part, so a long
    shared prefix does not make every method of a class look close."""
    known = [name for name in known if name != typed]  # the typed name itself is no suggestion
    owner, _, leaf = typed.rpartition(".")
    siblings = {k.rpartition(".")[2]: k for k in known if k.rpartition(".")[0] == owner}
    import difflib  # here: only a symbol not found needs its suggestions

    close = [siblings[n] for n in difflib.get_close_matches(leaf, list(siblings), n=3)]
    close = close or difflib.get_close_matches(typed, known, n=3)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


_REFLECTIVE_CALLS = frozenset({"globals", "locals", "vars", "exec", "eval", "__import__"})
_REFLECTIVE_ATTRIBUTES = frozenset({"__dict__", "__setattr__", "__delattr__"})


def _import_time(tree: ast.Module) -> tuple[tuple[int, str] | None, int | None]:
    """What code run at import does that the model does not follow, each None if nothing: (line,
    what) of a change of bindings by reflection (see _reflective; in a function the module calls
    while it runs, any attribute write too); and the line of an attribute assignment or deletion
    (`mod.C = None`, `del mod.C.m`), which in a package's `__init__.py` may change a module of the
    package. Of several, the last one outside functions is named (the walk starts at the end)."""
    defined = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    called: set[str] = set()
    reflection, write = None, None
    stack: list[ast.AST] = list(tree.body)
    while stack:  # the import-time code: everything outside function bodies
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            stack += [*node.decorator_list, *node.args.defaults]
            stack += [n for n in (*node.args.kw_defaults, node.returns) if n is not None]
            continue
        reflection = reflection or _reflective(node)
        mutating = _mutating(node)
        if write is None and mutating and not isinstance(node, ast.Global | ast.Call):
            write = mutating[0]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
        stack.extend(n for n in ast.iter_child_nodes(node) if n is not None)
    for name in sorted(called & defined.keys()) if reflection is None else ():
        for node in ast.walk(defined[name]):
            found = _reflective(node) or _mutating(node)
            if reflection is None and found is not None:
                reflection = found[0], f"{found[1]} in {name}(), called at import time"
    return reflection, write


def _reflective(node: ast.AST) -> tuple[int, str] | None:
    lineno = getattr(node, "lineno", 0)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        if name in _REFLECTIVE_CALLS:
            return lineno, f"{name}()"
        if name in ("setattr", "delattr") and not (
            len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            return lineno, f"{name} with a computed name"
    if isinstance(node, ast.Attribute):
        if node.attr in _REFLECTIVE_ATTRIBUTES:
            return lineno, node.attr
        if node.attr == "modules" and isinstance(node.value, ast.Name) and node.value.id == "sys":
            return lineno, "sys.modules"
    return None


def _mutating(node: ast.AST) -> tuple[int, str] | None:
    """In a function run at import: what changes a class or the module from inside it."""
    lineno = getattr(node, "lineno", 0)
    if isinstance(node, ast.Delete) and any(isinstance(t, ast.Attribute) for t in node.targets):
        return lineno, "del of an attribute"
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Attribute) for t in targets):
            return lineno, "an attribute assignment"
    if isinstance(node, ast.Global):
        return lineno, "global"
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("setattr", "delattr")
    ):
        return lineno, node.func.id
    return None


def _walk(body: list[ast.stmt], prefix: str, block_counter: Iterator[int]) -> Iterator[Definition]:
    """Yield definitions in `body`, descending into classes and into compound statements."""
    block = next(block_counter)
    for node in body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            qualname = prefix + node.name
            yield Definition(
                qualname=qualname,
                kind="class" if isinstance(node, ast.ClassDef) else "def",
                lineno=node.lineno,
                end_lineno=node.end_lineno or node.lineno,
                start_lineno=min([node.lineno, *(d.lineno for d in node.decorator_list)]),
                redefines=any(last_name(d) in _REDEFINING_DECORATORS for d in node.decorator_list),
                block=block,
            )
            if isinstance(node, ast.ClassDef):
                yield from _walk(node.body, qualname + ".", block_counter)
        else:
            for inner in blocks(node):
                yield from _walk(inner, prefix, block_counter)


_TOO_DEEP = "the file nests too deeply for the model to read"
