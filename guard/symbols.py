"""Find Python definitions by parsing, never by grep: a method is only "there" if it is in its class."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

SPEC_SEPARATOR = "::"

# Decorators that legitimately define the same name twice in one block.
_REDEFINING_DECORATORS = frozenset({"overload", "setter", "getter", "deleter", "register"})


@dataclass(frozen=True, order=True)
class Spec:
    """A required symbol, written like a pytest node id: `path/to/file.py::Class.method`."""

    path: str
    qualname: str

    def __str__(self) -> str:
        return f"{self.path}{SPEC_SEPARATOR}{self.qualname}"


def parse_spec(text: str) -> Spec:
    """Parse `file.py::Outer.Inner.name`; raise ValueError saying what is wrong."""
    path, sep, qualname = text.partition(SPEC_SEPARATOR)
    if not sep:
        raise ValueError(f"{text!r} has no '::'; write it as path/to/file.py::Class.method")
    if not path:
        raise ValueError(f"{text!r} names no file; write it as path/to/file.py::{qualname}")
    if not path.endswith(".py"):
        raise ValueError(f"{text!r}: symbols are checked in Python files, and {path!r} is not one")
    parts = qualname.split(".")
    if not qualname or not all(part.isidentifier() for part in parts):
        raise ValueError(f"{text!r}: {qualname!r} is not a dotted Python name like Class.method")
    return Spec(path=path, qualname=qualname)


@dataclass(frozen=True)
class Definition:
    """One `def` or `class` statement, reachable from module level through classes only."""

    qualname: str
    kind: str
    lineno: int
    end_lineno: int
    start_lineno: int  # the first decorator's line, or lineno
    redefines: bool
    block: int


class SourceSyntaxError(Exception):
    """A file does not parse; carries `path:line` for the report."""

    def __init__(self, path: str, lineno: int | None, message: str) -> None:
        self.path = path
        self.lineno = lineno or 0
        self.message = message
        super().__init__(f"{path}:{self.lineno}: {message}")


@dataclass(frozen=True)
class Binding:
    """One statement that binds a name in a scope (module or class body), in source order."""

    kind: str  # "def", "class", "value" (a literal), "other" (call, name, import...), "del"
    lineno: int
    condition: str | None  # the `if` test it runs under, when that is not decided statically
    scope: int | None = None  # for a class: the scope of its body


@dataclass(frozen=True)
class Resolution:
    """Where Python would find a qualified name at runtime, or why it would not."""

    lineno: int | None  # None: absent
    reason: str = ""  # why absent
    condition: str | None = None  # present only when this holds


_MODULE_SCOPE = 0


class SymbolIndex:
    """All definitions of one source file, by qualified name, and every scope's bindings."""

    def __init__(
        self,
        definitions: Iterable[Definition],
        scopes: dict[int, dict[str, list[Binding]]] | None = None,
    ) -> None:
        self.by_qualname: dict[str, list[Definition]] = {}
        for definition in definitions:
            self.by_qualname.setdefault(definition.qualname, []).append(definition)
        self.scopes = scopes or {}

    @classmethod
    def parse(cls, source: bytes, path: str) -> SymbolIndex:
        try:
            tree = ast.parse(source, filename=path)
        except SyntaxError as error:
            raise SourceSyntaxError(path, error.lineno, error.msg) from None
        except ValueError as error:  # e.g. NUL bytes in the source
            raise SourceSyntaxError(path, None, str(error)) from None
        except (RecursionError, MemoryError) as error:  # the parser's stack: Python's own
            # compile fails the same way on this file, so it cannot run it either
            raise SourceSyntaxError(
                path, None, f"nested too deeply for Python to parse ({type(error).__name__})"
            ) from None
        scopes: dict[int, dict[str, list[Binding]]] = {}
        _bind(tree.body, _MODULE_SCOPE, None, scopes, iter(range(1, 1 << 62)))
        return cls(_walk(tree.body, prefix="", block_counter=iter(range(1 << 62))), scopes)

    def resolve(self, qualname: str) -> Resolution:
        """Follow the last binding of each part, as Python would: `Class.method` is looked up in
        the body of the class that `Class` names last; a name rebound to a literal or deleted
        after its definition is gone; code under `if TYPE_CHECKING:` or a constant false test
        never ran."""
        scope, condition = _MODULE_SCOPE, None
        parts = qualname.split(".")
        for depth, name in enumerate(parts):
            bindings = self.scopes.get(scope, {}).get(name, [])
            last = depth == len(parts) - 1
            found = _last_binding(bindings, expect_callable=not last or _has_def(bindings))
            if found.lineno is None:
                return found
            condition = found.condition or condition
            if last:
                return Resolution(found.lineno, condition=condition)
            binding = next(b for b in reversed(bindings) if b.lineno == found.lineno)
            if binding.kind != "class" or binding.scope is None:
                return Resolution(
                    None,
                    f"{name} is bound at line {binding.lineno} to something other than a class",
                )
            scope = binding.scope
        return Resolution(None, "empty name")

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


def describe_miss(index: SymbolIndex, spec: Spec) -> str:
    """Say why `spec` is not where it should be, pointing at a same-named definition if any."""
    others = index.elsewhere(spec.qualname)
    if not others:
        return f"not defined in {spec.path}{did_you_mean(spec.qualname, index.by_qualname)}"
    where = ", ".join(
        f"{'module level' if '.' not in d.qualname else d.qualname.rsplit('.', 1)[0]} "
        f"(line {d.lineno})"
        for d in others
    )
    owner = spec.qualname.rsplit(".", 1)[0] if "." in spec.qualname else "module level"
    return f"not in {owner}; a definition of that name is at {where}"


def did_you_mean(typed: str, known: Iterable[str]) -> str:
    """ " (did you mean X?)" with the closest known names, or nothing when none is close.

    Names beside the typed one (same class, same file) are compared by their last part, so a
    long shared prefix does not make every method of a class look close.
    """
    import difflib  # only on a miss

    known = [name for name in known if name != typed]  # the typed name itself is no suggestion
    owner, _, leaf = typed.rpartition(".")
    siblings = {k.rpartition(".")[2]: k for k in known if k.rpartition(".")[0] == owner}
    close = [siblings[n] for n in difflib.get_close_matches(leaf, list(siblings), n=3)]
    close = close or difflib.get_close_matches(typed, known, n=3)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Name):
        return target.id
    return ""


_COMPOUND_BODIES = ("body", "orelse", "finalbody", "handlers")


def _walk(body: list[ast.stmt], prefix: str, block_counter: Iterator[int]) -> Iterator[Definition]:
    """Yield definitions in `body`, descending into classes and into if/try/with at the same level.

    In source order, with a stack of the bodies being walked rather than recursion: a chain of
    `elif`s nests in the AST as deep as it is long, past Python's recursion limit.
    """
    stack = [(iter(body), prefix, next(block_counter))]
    while stack:
        nodes, prefix, block = stack[-1]
        node = next(nodes, None)
        if node is None:
            stack.pop()
        elif isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            qualname = prefix + node.name
            yield Definition(
                qualname=qualname,
                kind="class" if isinstance(node, ast.ClassDef) else "def",
                lineno=node.lineno,
                end_lineno=node.end_lineno or node.lineno,
                start_lineno=min([node.lineno, *(d.lineno for d in node.decorator_list)]),
                redefines=any(
                    _decorator_name(d) in _REDEFINING_DECORATORS for d in node.decorator_list
                ),
                block=block,
            )
            if isinstance(node, ast.ClassDef):
                stack.append((iter(node.body), qualname + ".", next(block_counter)))
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.AsyncWith | ast.TryStar):
            bodies: list[list[ast.stmt]] = []
            for field in _COMPOUND_BODIES:
                children = getattr(node, field, None) or []
                if field == "handlers":
                    bodies += [handler.body for handler in children]
                else:
                    bodies.append(children)
            for children in reversed(bodies):  # the first body on top: walked first
                stack.append((iter(children), prefix, next(block_counter)))


def _has_def(bindings: list[Binding]) -> bool:
    return any(b.kind in ("def", "class") for b in bindings)


def _last_binding(bindings: list[Binding], expect_callable: bool) -> Resolution:
    """The name's state after its block ran: the last unconditional binding decides; a
    conditional one makes it present only under its condition."""
    present: Binding | None = None
    condition: str | None = None
    gone = ""
    for binding in bindings:
        removes = binding.kind == "del" or (binding.kind == "value" and expect_callable)
        if binding.condition is None:
            present, condition = (None, None) if removes else (binding, None)
            if removes:
                gone = (
                    f"deleted at line {binding.lineno}"
                    if binding.kind == "del"
                    else f"rebound to a value at line {binding.lineno} (the last binding wins)"
                )
        elif not removes and present is None:
            present, condition = binding, binding.condition
        elif removes and present is not None and condition is None:
            condition = f"not ({binding.condition})"
    if present is None:
        return Resolution(None, gone or "not defined")
    return Resolution(present.lineno, condition=condition)


def _static_truth(test: ast.expr) -> bool | None:
    """True/False when an `if` test is decided before the code runs; None otherwise.

    A loop, not recursion: valid code may stack hundreds of `not`s, deeper than Python's
    recursion limit allows a recursive walk.
    """
    negations = 0
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negations = test.operand, negations + 1
    odd = negations % 2 == 1
    if isinstance(test, ast.Constant):
        return bool(test.value) ^ odd
    name = getattr(test, "id", None) if isinstance(test, ast.Name) else getattr(test, "attr", None)
    return odd if name == "TYPE_CHECKING" else None


def _test_text(test: ast.expr) -> str:
    """An `if` test as the report shows it; ast.unparse recurses, so a test nested deeper than
    Python's recursion limit is named by its line instead."""
    try:
        return ast.unparse(test)
    except RecursionError:
        return f"the test on line {test.lineno}"


_LITERALS = (
    ast.Constant,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.JoinedStr,
    ast.ListComp,
    ast.DictComp,
    ast.SetComp,
)


def _bind(
    body: list[ast.stmt],
    scope: int,
    condition: str | None,
    scopes: dict[int, dict[str, list[Binding]]],
    counter: Iterator[int],
) -> None:
    """Record, in order, every binding `body` makes in `scope` (see SymbolIndex.resolve)."""
    names = scopes.setdefault(scope, {})

    def add(name: str, kind: str, node: ast.stmt, inner: int | None = None) -> None:
        names.setdefault(name, []).append(Binding(kind, node.lineno, condition, inner))

    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            add(node.name, "def", node)
        elif isinstance(node, ast.ClassDef):
            inner = next(counter)
            _bind(node.body, inner, None, scopes, counter)
            add(node.name, "class", node, inner)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            if node.value is None:
                continue  # an annotation alone binds nothing
            kind = "value" if isinstance(node.value, _LITERALS) else "other"
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        add(leaf.id, kind, node)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    add(target.id, "del", node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                add((alias.asname or alias.name).split(".")[0], "other", node)
        elif isinstance(node, ast.If):
            _bind_if(node, scope, condition, scopes, counter)
        elif isinstance(node, ast.Try | ast.TryStar | ast.With | ast.AsyncWith):
            for field in _COMPOUND_BODIES:  # as before: try and with bodies count as run
                for child in getattr(node, field, None) or []:
                    _bind(
                        child.body if isinstance(child, ast.ExceptHandler) else [child],
                        scope,
                        condition,
                        scopes,
                        counter,
                    )


def _bind_if(
    node: ast.If,
    scope: int,
    condition: str | None,
    scopes: dict[int, dict[str, list[Binding]]],
    counter: Iterator[int],
) -> None:
    """An if/elif/else chain, each `elif` under the negation of the tests before it; a loop,
    since the chain nests in the AST as deep as it is long."""
    while True:
        truth = _static_truth(node.test)
        test = _test_text(node.test)
        if truth is not False:
            _bind(
                node.body, scope, condition if truth else _joined(condition, test), scopes, counter
            )
        if truth is True:
            return
        if truth is None:
            condition = _joined(condition, f"not ({test})")
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        _bind(node.orelse, scope, condition, scopes, counter)
        return


def _joined(outer: str | None, test: str) -> str:
    return test if outer is None else f"{outer} and {test}"
