"""Find Python definitions by parsing, never by grep: a method is only "there" if it is in its class."""

from __future__ import annotations

import ast
import builtins
import sys
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from guard.truth.interpreters import own_facts
from guard.truth.statements import own_statements

TYPE_CHECKING = False  # not `from typing import ...`: the hooks import this module
if TYPE_CHECKING:
    from typing import Any

    from guard.truth.effects import Effects

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


PRESENT = "present"
ABSENT = "absent"
CANNOT_TELL = "cannot-tell"


@dataclass(frozen=True)
class Binding:
    """One statement that binds (or unbinds) a name in a scope (module or class body).

    `condition` says why the statement may not run when its scope's body does (an `if` test
    decided only at runtime, a try body that may fail first, a loop that may run zero times);
    None: it runs whenever the body does. `doubt` says why what it binds may not be what the
    source defines (a decorator or metaclass the model cannot read).
    """

    kind: str  # "def", "class", "value" (a literal: not callable), "other" (a value the model
    # cannot read), "del", "any" (may bind or unbind anything: `import *`, a computed setattr)
    lineno: int
    condition: str | None
    scope: int | None = None  # for a class: the scope of its body
    doubt: str | None = None
    order: int = 0  # execution order across a scope's names (a setattr after the class runs later)


@dataclass(frozen=True)
class Resolution:
    """What Python, importing the module, would find at a qualified name: one of three answers.

    PRESENT: it surely binds it (`lineno` is the binding); ABSENT: it surely does not;
    CANNOT_TELL: reading cannot decide (`reason` says why; the runtime probe can).
    """

    state: str
    lineno: int | None = None
    reason: str = ""
    # ABSENT from a class body that leaves the name unbound: the imported bases reading did
    # not follow (dotted origins, leading dots for a relative import), for the caller to read
    inherit: tuple[str, ...] = ()


_MODULE_SCOPE = 0


class SymbolIndex:
    """All definitions of one source file, by qualified name, and the model of what importing
    it binds (see `resolve`)."""

    def __init__(self, definitions: Iterable[Definition], model: _Model | None = None) -> None:
        self.by_qualname: dict[str, list[Definition]] = {}
        for definition in definitions:
            self.by_qualname.setdefault(definition.qualname, []).append(definition)
        self.model = model or _Model()
        self.reflection: tuple[int, str] | None = None  # (line, what): see _reflection
        self.attribute_write: int | None = None  # the first line that sets or deletes an attribute
        # `from .x.y import z` at the top of the module, always run: (line, dots, "x.y")
        self.relative_imports: list[tuple[int, int, str]] = []
        self.effects: Effects | None = (
            None  # what its import-time code may change (guard.truth.effects)
        )
        self._callables: frozenset[str] | None = None

    @classmethod
    def parse(
        cls, source: bytes, path: str, facts: Mapping[str, object] | None = None
    ) -> SymbolIndex:
        """`facts`: the interpreter's (guard.truth.interpreters) that conditions are decided for; None
        for patchguard's own."""
        try:
            tree = ast.parse(source, filename=path)
        except SyntaxError as error:
            raise SourceSyntaxError(path, error.lineno, error.msg) from None
        except ValueError as error:  # e.g. NUL bytes in the source
            raise SourceSyntaxError(path, None, str(error)) from None
        except (RecursionError, MemoryError):  # CPython compiles nesting that ast cannot build
            return cls([], _Model(unreadable=_TOO_DEEP))
        try:  # what the parser accepts and the compiler refuses, Python cannot import either
            compile(tree, path, "exec", dont_inherit=True)
        except SyntaxError as error:  # `def f(a, a)`, `return` at module level, `nonlocal x`
            raise SourceSyntaxError(path, error.lineno, error.msg) from None
        except (RecursionError, MemoryError):
            return cls([], _Model(unreadable=_TOO_DEEP))
        model = _Model(known={**_KNOWN_VALUES, **facts} if facts else _KNOWN_VALUES)
        try:
            model.run(tree)
            definitions = list(_walk(tree.body, prefix="", block_counter=iter(range(1 << 62))))
            reflection = _reflection(tree)
            attribute_write = _attribute_write(tree)
            from guard.truth.effects import summarize  # only when a file is parsed

            effects = summarize(tree, _KEEPING_DECORATORS, _KEEPING_METACLASSES)
        except RecursionError:
            return cls([], _Model(unreadable=_TOO_DEEP))
        index = cls(definitions, model)
        index.reflection = reflection
        index.attribute_write = attribute_write
        index.effects = effects
        index.relative_imports = [
            (node.lineno, node.level, node.module or "")
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.level and node.module
        ]
        return index

    def resolve(self, qualname: str) -> Resolution:
        """What importing the module binds at `qualname`: present, absent, or cannot tell.

        Each part is looked up as Python would: `Class.method` in the body of the class that
        `Class` names after the module ran (then in its bases), by the last binding of the name
        (a later literal, `del`, `delattr` or second `class` removes it), with conditions Python
        decides without running user code (`sys.version_info`, `sys.platform`, `TYPE_CHECKING`
        by what it is bound to, literals) decided for this interpreter. Anything else that may
        change the answer (a runtime condition, a try body that may fail first, a decorator or
        metaclass the model cannot read) makes it cannot tell, never present.
        """
        found = self.model.resolve(qualname, self._callable_names())
        if found.state == PRESENT and self.reflection is not None:
            lineno, what = self.reflection
            return Resolution(
                CANNOT_TELL,
                reason=f"line {lineno} reaches bindings by reflection ({what}), which reading "
                "does not follow",
            )
        parts = [unicodedata.normalize("NFKC", part) for part in qualname.split(".")]
        why = self.effects.at_import.touching(parts) if self.effects is not None else None
        if found.state == PRESENT and why is not None:
            return Resolution(CANNOT_TELL, reason=f"code run at import may change it: {why}")
        return found

    def defines_callable(self, qualname: str) -> bool:
        """Does the file define the name with `def` or `class` (so it must be callable)?"""
        return unicodedata.normalize("NFKC", qualname.rsplit(".", 1)[-1]) in self._callable_names()

    def _callable_names(self) -> frozenset[str]:
        if self._callables is None:  # asked once per required name: computed once
            self._callables = frozenset(
                unicodedata.normalize("NFKC", name.rsplit(".", 1)[-1]) for name in self.by_qualname
            )
        return self._callables

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
_COMPOUND_STATEMENTS = (
    ast.If,
    ast.Try,
    ast.TryStar,
    ast.With,
    ast.AsyncWith,
    ast.For,
    ast.AsyncFor,
    ast.While,
)


_REFLECTIVE_CALLS = frozenset({"globals", "locals", "vars", "exec", "eval", "__import__"})
_REFLECTIVE_ATTRIBUTES = frozenset({"__dict__", "__setattr__", "__delattr__"})


def _reflection(tree: ast.Module) -> tuple[int, str] | None:
    """The first place where the code that runs at import may change bindings in ways the model
    does not follow, or None: `globals()`, `locals()`, `vars()`, `exec`, `sys.modules`,
    `__dict__`, `type.__setattr__`, a `setattr`/`delattr` with a computed name; and, in a
    function the module calls while it runs, any `del` of an attribute, `setattr`, `delattr` or
    assignment to an attribute. Code that only runs when called later is not import time.

    Such a module's answers are never "present" from reading alone (cannot tell, ask Python).
    """
    defined = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    called: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:  # the import-time code: everything outside function bodies
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            stack += [*node.decorator_list, *node.args.defaults]
            stack += [n for n in (*node.args.kw_defaults, node.returns) if n is not None]
            continue
        found = _reflective(node)
        if found is not None:
            return found
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
        stack.extend(n for n in ast.iter_child_nodes(node) if n is not None)
    for name in sorted(called & defined.keys()):
        for node in ast.walk(defined[name]):
            found = _reflective(node) or _mutating(node)
            if found is not None:
                return found[0], f"{found[1]} in {name}(), called at import time"
    return None


def _attribute_write(tree: ast.Module) -> int | None:
    """The first line of import-time code that assigns or deletes an attribute (`mod.C = None`,
    `del mod.C.m`): in a package's `__init__.py`, that may change a module of the package."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        found = _mutating(node)
        if found is not None and not isinstance(node, ast.Global | ast.Call):
            return found[0]
        stack.extend(ast.iter_child_nodes(node))
    return None


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
                redefines=any(
                    _decorator_name(d) in _REDEFINING_DECORATORS for d in node.decorator_list
                ),
                block=block,
            )
            if isinstance(node, ast.ClassDef):
                yield from _walk(node.body, qualname + ".", block_counter)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                yield from _walk(case.body, prefix, block_counter)
        elif isinstance(node, _COMPOUND_STATEMENTS):
            for name in _COMPOUND_BODIES:
                children = getattr(node, name, None) or []
                if name == "handlers":
                    for handler in children:
                        yield from _walk(handler.body, prefix, block_counter)
                else:
                    yield from _walk(children, prefix, block_counter)


_TOO_DEEP = "the file nests too deeply for the model to read"
NOT_DEFINED = "not defined"

# What `if` tests and decorators may name, by where the name comes from (not by its spelling).
_KNOWN_VALUES: dict[str, object] = {
    "typing.TYPE_CHECKING": False,
    "typing_extensions.TYPE_CHECKING": False,
    **own_facts(),  # `sys.version_info`, `sys.platform`...: another interpreter's replace them
}
# Decorators that return a function or descriptor for what they decorate (never None or
# something else); a `()` suffix: the decorator is what calling it returns.
_KEEPING_DECORATORS = frozenset(
    {
        "builtins.property",
        "builtins.staticmethod",
        "builtins.classmethod",
        "functools.cache",
        "functools.cached_property",
        "functools.lru_cache",
        "functools.lru_cache()",
        "functools.wraps()",
        "functools.singledispatch",
        "functools.singledispatchmethod",
        "abc.abstractmethod",
        "typing.overload",
        "typing.final",
        "typing.override",
        "typing_extensions.overload",
        "typing_extensions.final",
        "typing_extensions.override",
        "dataclasses.dataclass",
        "dataclasses.dataclass()",
        "contextlib.contextmanager",
        "contextlib.asynccontextmanager",
        "enum.unique",
        "torch.no_grad()",
        "torch.inference_mode()",
        "torch.compile",
        "torch.compile()",
    }
)
# Metaclasses that keep a class body's attributes.
_KEEPING_METACLASSES = frozenset({"builtins.type", "abc.ABCMeta", "enum.EnumMeta", "enum.EnumType"})
# Bases the model knows to add nothing that could matter to a lookup in a subclass.
_PLAIN_BASES = frozenset({"builtins.object", "abc.ABC", "typing.Generic", "typing.Protocol"})
# Context managers that never swallow an exception of their body.
_PLAIN_CONTEXTS = frozenset(
    {
        "builtins.open()",
        "contextlib.nullcontext()",
        "contextlib.redirect_stdout()",
        "contextlib.redirect_stderr()",
        "warnings.catch_warnings()",
        "torch.no_grad()",
        "torch.inference_mode()",
    }
)
_EXITS = frozenset({"sys.exit", "builtins.exit", "builtins.quit", "os._exit"})
_MAX_DEPTH = 100  # of a test the model evaluates; deeper is cannot tell, never a crash


class _Unknown:
    """A value the model cannot know before the code runs."""


_UNKNOWN = _Unknown()
_IMPORTED_NAME = _Unknown()  # `__name__` of an imported module: some name, never "__main__"


@dataclass(frozen=True)
class _Origin:
    """Where a name comes from: `sys`, `functools.lru_cache`, `builtins.property`."""

    dotted: str


@dataclass(frozen=True)
class _LocalDef:
    """A plain function of this module (a decorator it defines)."""

    node: ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class _LocalClass:
    scope: int
    doubt: str | None = None  # why it may not be the class its body defines (a decorator...)


@dataclass
class _Class:
    name: str
    bases: list[int | str]  # a class scope of this file, or the text of a base it cannot read
    origins: list[str] = field(default_factory=list)  # where the unread bases are imported from
    passes_on: str | None = None  # why a class derived from it cannot be read (its metaclass)


@dataclass
class _Outcome:
    state: str
    reason: str = ""
    found: list[Binding] = field(default_factory=list)
    unbound: bool = True  # absent because nothing binds it (not: bound to a non-callable)
    inherit: tuple[str, ...] = ()  # see Resolution.inherit


_Env = dict[str, object]


class _Model:
    """An abstract run of the module's top-level code (never of function bodies).

    Each scope (module, class body) gets its bindings in execution order. A statement that
    surely raises stops its body: at module level the import fails (`fails`); a raise that may
    happen (under a runtime condition, in a `with` that may suppress it) makes every answer
    cannot tell (`may_fail`). Outside try bodies, calls are assumed to return.
    """

    def __init__(
        self, unreadable: str | None = None, known: Mapping[str, object] = _KNOWN_VALUES
    ) -> None:
        self.unreadable = unreadable
        self.known = known  # what names such as `sys.version_info` are for the interpreter
        self.scopes: dict[int, dict[str, list[Binding]]] = {_MODULE_SCOPE: {}}
        self.classes: dict[int, _Class] = {}
        self.globals_of: dict[int, frozenset[str]] = {}
        self.fails: str | None = None
        self.may_fail: str | None = None
        self.future_annotations = False
        self._order = 0

    # -- running the module -------------------------------------------------------------------

    def run(self, tree: ast.Module) -> None:
        self.future_annotations = any(
            isinstance(n, ast.ImportFrom)
            and n.module == "__future__"
            and any(a.name == "annotations" for a in n.names)
            for n in tree.body
        )
        raises, may_raise = self._body(tree.body, _MODULE_SCOPE, None, {})
        if raises:
            self.fails = f"importing the module fails: {raises}"
        elif may_raise:
            self.may_fail = f"importing the module may fail: {may_raise}"

    def _add(
        self,
        scope: int,
        name: str,
        kind: str,
        lineno: int,
        condition: str | None,
        env: _Env,
        *,
        inner: int | None = None,
        doubt: str | None = None,
        value: object = _UNKNOWN,
    ) -> None:
        if name in self.globals_of.get(scope, ()):
            scope = _MODULE_SCOPE  # `global m` in a class body: `def m` binds the module's m
        self._order += 1
        binding = Binding(kind, lineno, condition, inner, doubt, self._order)
        self.scopes.setdefault(scope, {}).setdefault(name, []).append(binding)
        if condition is not None:
            env[name] = _UNKNOWN
        elif kind == "del":
            env.pop(name, None)
        else:
            env[name] = value

    def _name(self, scope: int, name: str) -> str:
        """The name a class body really binds: `__m` in class `C` is `_C__m` (mangling)."""
        cls = self.classes.get(scope)
        if cls is None or not name.startswith("__") or name.endswith("__"):
            return name
        stripped = cls.name.lstrip("_")
        return f"_{stripped}{name}" if stripped else name

    def _body(
        self, body: list[ast.stmt], scope: int, condition: str | None, env: _Env
    ) -> tuple[str | None, str | None]:
        """Run `body`; (why it surely raises, why it may raise), each None when not."""
        may_raise = None
        for node in body:
            raises, maybe = self._stmt(node, scope, condition, env)
            if raises:
                return raises, may_raise
            may_raise = may_raise or maybe
        return None, may_raise

    def _stmt(
        self, node: ast.stmt, scope: int, condition: str | None, env: _Env
    ) -> tuple[str | None, str | None]:
        """Run one statement as Python would at import (function bodies are never run)."""
        self._walrus(node, scope, condition, env)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            doubt = self._decorator_doubt(node.decorator_list, env, "decorator", "it")
            value: object = _UNKNOWN
            if not node.decorator_list:
                value = _LocalDef(node)
            elif self._origin(node.decorator_list[0], env) == "builtins.property":
                value = _Origin("builtins.property")
            name = self._name(scope, node.name)
            self._add(scope, name, "def", node.lineno, condition, env, doubt=doubt, value=value)
        elif isinstance(node, ast.ClassDef):
            return self._class(node, scope, condition, env), None
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                self._target(target, node.value, node.lineno, scope, condition, env)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self._target(node.target, node.value, node.lineno, scope, condition, env)
        elif isinstance(node, ast.AugAssign):
            self._target(node.target, None, node.lineno, scope, condition, env)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                self._delete(target, node.lineno, scope, condition, env)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                origin = alias.name if alias.asname else alias.name.split(".")[0]
                name = self._name(scope, bound)
                self._add(scope, name, "other", node.lineno, condition, env, value=_Origin(origin))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    self._star(node, scope, condition, env)
                    continue
                module = f"{node.module}." if node.module else ""
                source = f"{'.' * node.level}{module}{alias.name}"  # relative: leading dots
                name = self._name(scope, alias.asname or alias.name)
                value = _Origin(source)
                self._add(scope, name, "other", node.lineno, condition, env, value=value)
        elif isinstance(node, ast.Expr):
            return self._call(node.value, node.lineno, scope, condition, env), None
        elif isinstance(node, ast.Raise):
            return f"the raise at line {node.lineno}", None
        elif isinstance(node, ast.Assert):
            if self._truth(node.test, env) is False:
                return f"the assert at line {node.lineno} always fails", None
        elif isinstance(node, ast.If):
            return self._if(node, scope, condition, env)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            return self._loop(node, scope, condition, env)
        elif isinstance(node, ast.Try | ast.TryStar):
            return self._try(node, scope, condition, env)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if item.optional_vars is not None:
                    self._target(item.optional_vars, None, node.lineno, scope, condition, env)
            if all(self._origin(i.context_expr, env) in _PLAIN_CONTEXTS for i in node.items):
                raises, maybe = self._body(node.body, scope, condition, env)
                return raises, maybe
            where = f"inside a with body (line {node.lineno}) that may swallow a failure"
            raises, maybe, _, _ = self._failing_body(node.body, scope, condition, env, where)
            if raises and not all(
                self._suppresses_all(item.context_expr, env) for item in node.items
            ):
                return None, f"{raises}, which the with at line {node.lineno} may not suppress"
            return None, maybe
        elif isinstance(node, ast.Match):
            return self._match(node, scope, condition, env)
        return None, None

    def _star(self, node: ast.ImportFrom, scope: int, condition: str | None, env: _Env) -> None:
        """`from m import *`: the names a standard module already loaded here exports; for
        any other module, anything may be rebound."""
        loaded = sys.modules.get(node.module or "") if node.level == 0 else None
        if loaded is not None and _is_stdlib(node.module or ""):
            exported = getattr(loaded, "__all__", None)
            if exported is None:
                exported = [n for n in vars(loaded) if not n.startswith("_")]
            for name in exported:
                if isinstance(name, str):
                    self._add(scope, self._name(scope, name), "other", node.lineno, condition, env)
            return
        star = f"`from {'.' * node.level}{node.module or ''} import *` at line {node.lineno} may rebind it"
        self._add(scope, "*", "any", node.lineno, condition, env, doubt=star)

    def _class(
        self, node: ast.ClassDef, scope: int, condition: str | None, env: _Env
    ) -> str | None:
        """Run a class body in its own scope; why creating the class surely raises, if it does."""
        inner = len(self.scopes)
        self.scopes[inner] = {}
        bases: list[int | str] = []
        origins: list[str] = []
        doubt = self._decorator_doubt(node.decorator_list, env, "class decorator", "the class")
        passes_on = None
        for base in node.bases:
            value = self._lookup_env(base, env)
            origin = self._origin(base, env)
            if isinstance(value, _LocalClass):
                bases.append(value.scope)
                passes_on = passes_on or value.doubt or self.classes[value.scope].passes_on
            elif origin == "typing.NamedTuple":
                pass
            elif origin not in _PLAIN_BASES:
                bases.append(_text(base))
                origins += [origin] if origin else []
        for keyword in node.keywords:
            if (
                keyword.arg == "metaclass"
                and self._origin(keyword.value, env) not in _KEEPING_METACLASSES
            ):
                passes_on = (
                    f"the metaclass at line {keyword.value.lineno} may drop or replace class "
                    "attributes"
                )
        doubt = doubt or passes_on
        self.classes[inner] = _Class(node.name, bases, origins)
        self.globals_of[inner] = frozenset(
            name for n in own_statements(node.body) if isinstance(n, ast.Global) for name in n.names
        )
        body_env = dict(env)
        raises, _ = self._body(node.body, inner, None, body_env)
        if raises:
            return f"{raises} (in the body of class {node.name})"
        self._fields(node, inner, env, body_env)
        hook = self.scopes[inner].get("__init_subclass__")
        if hook and not passes_on:
            passes_on = (
                f"{node.name}.__init_subclass__ (line {hook[-1].lineno}) may change the classes "
                "derived from it"
            )
        self.classes[inner].passes_on = passes_on
        slots = self._slots(node, body_env)
        if slots:
            clash = sorted(slots & {n for n, bs in self.scopes[inner].items() if bs})
            if clash:
                return (
                    f"class {node.name} at line {node.lineno}: {clash[0]!r} in __slots__ "
                    "conflicts with a class variable"
                )
            for slot in sorted(slots):
                self._add(inner, self._name(inner, slot), "value", node.lineno, None, body_env)
        value = _LocalClass(inner, doubt)
        name = self._name(scope, node.name)
        self._add(
            scope, name, "class", node.lineno, condition, env, inner=inner, doubt=doubt, value=value
        )
        return None

    def _fields(self, node: ast.ClassDef, inner: int, env: _Env, body_env: _Env) -> None:
        """NamedTuple fields are class attributes (their getters); a dataclass field made by
        `field()` without a default is taken off the class."""
        named_tuple = any(self._origin(b, env) == "typing.NamedTuple" for b in node.bases)
        dataclass = any(
            self._origin(d, env) in ("dataclasses.dataclass", "dataclasses.dataclass()")
            for d in node.decorator_list
        )
        for statement in node.body:
            if not isinstance(statement, ast.AnnAssign) or not isinstance(
                statement.target, ast.Name
            ):
                continue
            name, value = self._name(inner, statement.target.id), statement.value
            if named_tuple and value is None:
                self._add(inner, name, "value", statement.lineno, None, body_env)
            elif (
                dataclass
                and isinstance(value, ast.Call)
                and self._origin(value.func, env) == "dataclasses.field"
                and not any(k.arg == "default" for k in value.keywords)
            ):
                self._add(inner, name, "del", statement.lineno, None, body_env)

    def _slots(self, node: ast.ClassDef, env: _Env) -> frozenset[str]:
        for statement in node.body:
            if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__slots__" for t in statement.targets
            ):
                value = self._value(statement.value, env)
                if isinstance(value, str):
                    return frozenset({value})
                if isinstance(value, tuple | list | set | frozenset):
                    return frozenset(v for v in value if isinstance(v, str))
        return frozenset()

    def _suppresses_all(self, node: ast.expr, env: _Env) -> bool:
        """`contextlib.suppress(Exception)`: the body's raise ends the body, not the module."""
        return (
            isinstance(node, ast.Call)
            and self._origin(node.func, env) == "contextlib.suppress"
            and any(
                self._origin(a, env) in ("builtins.Exception", "builtins.BaseException")
                for a in node.args
            )
        )

    def _may_match(self, pattern: ast.pattern, subject: object, env: _Env) -> bool:
        if isinstance(pattern, ast.MatchValue):
            value = self._value(pattern.value, env)
            return value is _UNKNOWN or bool(value == subject)
        return True

    def _if(
        self, node: ast.If, scope: int, condition: str | None, env: _Env
    ) -> tuple[str | None, str | None]:
        truth = self._truth(node.test, env)
        if truth is True:
            return self._body(node.body, scope, condition, env)
        if truth is False:
            return self._body(node.orelse, scope, condition, env)
        test = _text(node.test)
        results, sections = [], []
        for body, holds in ((node.body, "true"), (node.orelse, "false")):
            when = _joined(condition, f"when `{test}` is {holds}")
            start = self._order
            results.append(self._body(body, scope, when, env))
            sections.append(self._last_made(scope, start, self._order, (when,)))
        self._bound_either_way(scope, sections, condition, env)
        return None, next((r or m for r, m in results if r or m), None)

    def _last_made(
        self, scope: int, start: int, end: int, conditions: tuple[str | None, ...]
    ) -> dict[str, Binding]:
        """Names whose last binding in the order range (start, end] binds them (no del)
        directly under one of `conditions`, not under a further condition of their own."""
        names = self.scopes.get(scope, {})
        if any(start < b.order <= end for b in names.get("*", [])):
            return {}
        made = {}
        for name, bindings in names.items():
            recent = [b for b in bindings if start < b.order <= end]
            if name != "*" and recent:
                made[name] = recent[-1]
        return {
            name: b
            for name, b in made.items()
            if b.condition in conditions and b.kind in ("def", "value", "other")
        }

    def _bound_either_way(
        self,
        scope: int,
        sections: list[dict[str, Binding]],
        condition: str | None,
        env: _Env,
    ) -> None:
        """A name every alternative section binds (if/else, try body/handlers) is bound after
        them whichever ran: one binding of it, under the statement's own condition."""
        if len(sections) < 2:
            return
        for name in set.intersection(*(set(s) for s in sections)):
            found = [s[name] for s in sections]
            kinds = {b.kind for b in found}
            kind = kinds.pop() if len(kinds) == 1 else "other"
            doubt = next((b.doubt for b in found if b.doubt), None)
            self._add(scope, name, kind, found[-1].lineno, condition, env, doubt=doubt)

    def _loop(
        self, node: ast.For | ast.AsyncFor | ast.While, scope: int, condition: str | None, env: _Env
    ) -> tuple[str | None, str | None]:
        """A loop body runs (its first iteration) only when the model sees it must."""
        if isinstance(node, ast.While):
            truth = self._truth(node.test, env)
            runs = truth is True
            if truth is False:
                return self._body(node.orelse, scope, condition, env)
        else:
            iterations = self._iterations(node.iter, env)
            runs = bool(iterations)
            if iterations == 0:
                return self._body(node.orelse, scope, condition, env)
        inside = (
            condition
            if runs
            else _joined(condition, f"in the loop at line {node.lineno}, which may run zero times")
        )
        if isinstance(node, ast.For | ast.AsyncFor):
            self._target(node.target, None, node.lineno, scope, inside, env)
        raises, may_raise = None, None
        current = inside
        for statement in node.body:
            if isinstance(statement, ast.Break | ast.Continue):
                break
            raised, maybe = self._stmt(statement, scope, current, env)
            if raised:
                raises = raised if current == condition else None
                may_raise = may_raise or (None if raises else raised)
                break
            may_raise = may_raise or maybe
            jump = _jump_in(statement)
            if jump is not None:
                current = _joined(inside, f"after the break or continue at line {jump}")
        if raises:
            return raises, may_raise
        breaks = _jump_in(node, only_break=True)
        if isinstance(node, ast.While) and runs:
            return None, may_raise  # `while True`: its else never runs
        orelse = (
            condition
            if breaks is None
            else _joined(condition, f"unless the loop at line {node.lineno} breaks")
        )
        raised, maybe = self._body(node.orelse, scope, orelse, env)
        if raised and orelse == condition:
            return raised, may_raise
        return None, may_raise or maybe or raised

    def _failing_body(
        self, body: list[ast.stmt], scope: int, condition: str | None, env: _Env, where: str
    ) -> tuple[str | None, str | None, int | None, bool]:
        """Run a body whose failure is caught (try, a with that may swallow it): from its first
        statement that may fail on, each statement is conditional. (why it surely raises, why
        it may, the line that may fail first, whether the raise is surely reached)."""
        current, failing, may_raise = condition, None, None
        for statement in body:
            if failing is None and self._may_fail(statement, env):
                failing = statement.lineno
                current = _joined(condition, f"{where} at line {failing}")
            raised, maybe = self._stmt(statement, scope, current, env)
            may_raise = may_raise or maybe
            if raised:
                return raised, may_raise, failing, failing in (None, statement.lineno)
        return None, may_raise, failing, False

    def _try(
        self, node: ast.Try | ast.TryStar, scope: int, condition: str | None, env: _Env
    ) -> tuple[str | None, str | None]:
        """From the first statement that may fail, the rest of a try body is conditional."""
        start = self._order
        where = "inside a try body that may fail"
        raises, may_raise, failing, surely = self._failing_body(
            node.body, scope, condition, env, where
        )
        body_made = (condition, _joined(condition, f"{where} at line {failing}"))
        sections = [self._last_made(scope, start, self._order, body_made)]
        if raises or failing is not None:
            sure = raises is not None and surely and len(node.handlers) == 1
            for handler in node.handlers:
                start = self._order
                when = (
                    condition
                    if sure
                    else _joined(condition, f"in the except handler at line {handler.lineno}")
                )
                if handler.name:
                    self._add(
                        scope, self._name(scope, handler.name), "del", handler.lineno, when, env
                    )
                raised, maybe = self._body(handler.body, scope, when, env)
                may_raise = may_raise or maybe or raised
                sections.append(self._last_made(scope, start, self._order, (when,)))
            if not raises and failing is not None and not node.orelse:
                self._bound_either_way(scope, sections, condition, env)  # handlers catch
        if not raises:
            when = (
                condition
                if failing is None
                else _joined(
                    condition,
                    f"in the else of the try at line {node.lineno}, which runs only when its body did not fail",
                )
            )
            raised, maybe = self._body(node.orelse, scope, when, env)
            may_raise = may_raise or maybe or (raised if when != condition else None)
            if raised and when == condition:
                raises = raised
        raised, maybe = self._body(node.finalbody, scope, condition, env)
        if raised:
            return raised, may_raise
        if raises and not node.handlers:
            return raises, may_raise
        return None, may_raise or maybe

    def _match(
        self, node: ast.Match, scope: int, condition: str | None, env: _Env
    ) -> tuple[str | None, str | None]:
        may_raise = None
        subject = self._value(node.subject, env)
        cases = node.cases
        if subject is not _UNKNOWN:  # a literal subject: value patterns that differ never match
            cases = [c for c in cases if self._may_match(c.pattern, subject, env)]
        for number, case in enumerate(cases):
            matches = _irrefutable(case.pattern) or (
                isinstance(case.pattern, ast.MatchValue)
                and subject is not _UNKNOWN
                and self._value(case.pattern.value, env) is not _UNKNOWN
            )
            sure = number == 0 and case.guard is None and matches
            when = (
                condition
                if sure
                else _joined(condition, f"in the case at line {case.pattern.lineno}")
            )
            for sub in ast.walk(case.pattern):
                bound = getattr(sub, "name", None) or getattr(sub, "rest", None)
                if isinstance(bound, str):
                    self._add(
                        scope, self._name(scope, bound), "other", case.pattern.lineno, when, env
                    )
            raised, maybe = self._body(case.body, scope, when, env)
            if raised and sure:
                return raised, may_raise
            may_raise = may_raise or maybe or raised
            if sure:
                break
        return None, may_raise

    # -- targets and calls --------------------------------------------------------------------

    def _target(
        self,
        target: ast.expr,
        value: ast.expr | None,
        lineno: int,
        scope: int,
        condition: str | None,
        env: _Env,
    ) -> None:
        """Bind what an assignment target binds: names, and attributes of this file's classes;
        a subscript or another object's attribute binds neither."""
        if isinstance(target, ast.Name):
            kind, known = self._value_kind(value, env)
            self._add(
                scope, self._name(scope, target.id), kind, lineno, condition, env, value=known
            )
        elif isinstance(target, ast.Tuple | ast.List):
            values: list[ast.expr | None] = [None] * len(target.elts)
            if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
                values = list(value.elts)
            for element, element_value in zip(target.elts, values, strict=True):
                self._target(element, element_value, lineno, scope, condition, env)
        elif isinstance(target, ast.Starred):
            self._target(target.value, None, lineno, scope, condition, env)
        elif isinstance(target, ast.Attribute):
            kind, _ = self._value_kind(value, env)
            for inner, when in self._classes_named(target.value, env, condition):
                self._add(inner, target.attr, kind, lineno, when, {})

    def _delete(
        self, target: ast.expr, lineno: int, scope: int, condition: str | None, env: _Env
    ) -> None:
        if isinstance(target, ast.Name):
            self._add(scope, self._name(scope, target.id), "del", lineno, condition, env)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._delete(element, lineno, scope, condition, env)
        elif isinstance(target, ast.Attribute):
            for inner, when in self._classes_named(target.value, env, condition):
                self._add(inner, target.attr, "del", lineno, when, {})

    def _classes_named(
        self, node: ast.expr, env: _Env, condition: str | None
    ) -> list[tuple[int, str | None]]:
        """The class scopes `node` may name: the one it surely names, or, when that is not
        known, every class of that name (each only possibly)."""
        value = self._lookup_env(node, env)
        if isinstance(value, _LocalClass):
            return [(value.scope, condition)]
        if not isinstance(node, ast.Name):
            return []
        maybe = _joined(condition, f"if `{node.id}` names the class")
        return [(s, maybe) for s, c in self.classes.items() if c.name == node.id]

    def _call(
        self, node: ast.expr, lineno: int, scope: int, condition: str | None, env: _Env
    ) -> str | None:
        """An expression statement: setattr/delattr on this file's classes, exec, and exits."""
        if not isinstance(node, ast.Call):
            return None
        origin = self._origin(node.func, env)
        if origin in _EXITS:
            return f"the call to {origin.removeprefix('builtins.')}() at line {lineno}"
        if origin in ("builtins.setattr", "builtins.delattr") and len(node.args) >= 2:
            name = node.args[1]
            for inner, when in self._classes_named(node.args[0], env, condition):
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    if origin == "builtins.delattr":
                        kind = "del"
                    else:
                        kind, _ = self._value_kind(
                            node.args[2] if len(node.args) > 2 else None, env
                        )
                    self._add(inner, name.value, kind, lineno, when, {})
                else:
                    doubt = f"the {origin[9:]} at line {lineno} with a computed name may change it"
                    self._add(inner, "*", "any", lineno, when, {}, doubt=doubt)
        elif origin in ("builtins.exec", "builtins.globals", "builtins.vars", "builtins.locals"):
            doubt = f"the call to {origin[9:]}() at line {lineno} may change any name"
            self._add(scope, "*", "any", lineno, condition, env, doubt=doubt)
        return None

    def _walrus(self, node: ast.stmt, scope: int, condition: str | None, env: _Env) -> None:
        """`(m := ...)` in a statement's own expressions binds m in this scope."""
        for expression in _own_expressions(node):
            for sub in _walk_expression(expression):
                if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                    kind, known = self._value_kind(sub.value, env)
                    name = self._name(scope, sub.target.id)
                    self._add(scope, name, kind, node.lineno, condition, env, value=known)

    # -- values -------------------------------------------------------------------------------

    def _value_kind(self, value: ast.expr | None, env: _Env) -> tuple[str, object]:
        """(kind, known value) of what an assignment binds: a literal is a "value", a lambda,
        a function or class of this file or a known wrapper is "def", the rest is "other"."""
        if value is None:
            return "other", _UNKNOWN
        if isinstance(value, ast.Lambda):
            return "def", _UNKNOWN
        if isinstance(value, _LITERALS):
            known = self._value(value, env)
            return "value", known
        looked = self._lookup_env(value, env)
        if isinstance(looked, _LocalDef) or (isinstance(looked, _LocalClass) and not looked.doubt):
            return "def", looked
        if isinstance(value, ast.Call):
            origin = self._origin(value.func, env)
            if origin in _KEEPING_DECORATORS or origin in (
                "functools.partial",
                "functools.partialmethod",
            ):
                return "def", _UNKNOWN
        return "other", looked

    def _lookup_env(self, node: ast.expr, env: _Env) -> object:
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id == "__name__":
                return _IMPORTED_NAME
            if hasattr(builtins, node.id):
                return _Origin(f"builtins.{node.id}")
            return _UNKNOWN
        if isinstance(node, ast.Attribute):
            inner = self._lookup_env(node.value, env)
            if isinstance(inner, _Origin):
                return _Origin(f"{inner.dotted}.{node.attr}")
        return _UNKNOWN

    def _origin(self, node: ast.expr, env: _Env) -> str | None:
        """The dotted origin of a decorator or base: `functools.lru_cache`, and `...()` for a
        call of one."""
        if isinstance(node, ast.Call):
            inner = self._origin(node.func, env)
            return None if inner is None else f"{inner}()"
        value = self._lookup_env(node, env)
        return value.dotted if isinstance(value, _Origin) else None

    def _decorator_doubt(
        self, decorators: list[ast.expr], env: _Env, what: str, replaces: str
    ) -> str | None:
        for decorator in decorators:
            if self._keeps(decorator, env):
                continue
            return f"the {what} at line {decorator.lineno} may replace {replaces}"
        return None

    def _keeps(self, decorator: ast.expr, env: _Env) -> bool:
        if self._origin(decorator, env) in _KEEPING_DECORATORS:
            return True
        if (
            isinstance(decorator, ast.Attribute)
            and decorator.attr in ("setter", "getter", "deleter")
            and self._lookup_env(decorator.value, env) == _Origin("builtins.property")
        ):
            return True
        local = self._lookup_env(decorator, env)
        return isinstance(local, _LocalDef) and _returns_a_function(local.node)

    def _value(self, node: ast.expr, env: _Env, depth: int = 0) -> object:
        """The value of an expression Python computes without running user code, or _UNKNOWN."""
        if depth > _MAX_DEPTH:
            return _UNKNOWN
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name | ast.Attribute):
            looked = self._lookup_env(node, env)
            if isinstance(looked, _Origin):
                return self.known.get(looked.dotted, _UNKNOWN)
            if isinstance(looked, _LocalDef | _LocalClass):
                return _UNKNOWN
            return looked
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = [self._value(e, env, depth + 1) for e in node.elts]
            if any(i is _UNKNOWN for i in items) or any(
                isinstance(e, ast.Starred) for e in node.elts
            ):
                return _UNKNOWN
            kind = {ast.Tuple: tuple, ast.List: list, ast.Set: frozenset}[type(node)]
            try:
                return kind(items)
            except TypeError:
                return _UNKNOWN
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
            operand = self._value(node.operand, env, depth + 1)
            if operand is _UNKNOWN:
                return _UNKNOWN
            if isinstance(node.op, ast.Not):
                return not operand
            return -operand if isinstance(operand, int | float) else _UNKNOWN
        if isinstance(node, ast.Compare):
            return self._compare(node, env, depth)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
            and not node.keywords
        ):
            owner = self._value(node.func.value, env, depth + 1)
            args = [self._value(a, env, depth + 1) for a in node.args]
            if isinstance(owner, str) and all(isinstance(a, str | tuple) for a in args):
                try:
                    return bool(getattr(owner, node.func.attr)(*args))
                except TypeError:
                    return _UNKNOWN
        if isinstance(node, ast.Subscript):
            container = self._value(node.value, env, depth + 1)
            index = (
                self._value(node.slice, env, depth + 1)
                if not isinstance(node.slice, ast.Slice)
                else _UNKNOWN
            )
            if isinstance(node.slice, ast.Slice):
                parts = [
                    self._value(p, env, depth + 1) if p is not None else None
                    for p in (node.slice.lower, node.slice.upper, node.slice.step)
                ]
                if any(p is _UNKNOWN for p in parts):
                    return _UNKNOWN
                index = slice(*parts)
            if isinstance(container, tuple | str) and isinstance(index, int | slice):
                try:
                    return container[index]
                except (IndexError, ValueError):
                    return _UNKNOWN
        return _UNKNOWN

    def _compare(self, node: ast.Compare, env: _Env, depth: int) -> object:
        left = self._value(node.left, env, depth + 1)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self._value(right_node, env, depth + 1)
            if _IMPORTED_NAME in (left, right) and "__main__" in (left, right):
                if not isinstance(op, ast.Eq | ast.NotEq):
                    return _UNKNOWN
                return isinstance(op, ast.NotEq)  # imported, a module is never `__main__`
            if _UNKNOWN in (left, right) or _IMPORTED_NAME in (left, right):
                return _UNKNOWN
            operator = _COMPARISONS.get(type(op))
            if operator is None:
                return _UNKNOWN
            try:
                result = operator(left, right)
            except TypeError:
                return _UNKNOWN
            if not result:
                return False
            left = right
        return True

    def _truth(self, node: ast.expr, env: _Env, depth: int = 0) -> bool | None:
        """Whether a test holds, when Python decides it without running user code."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, ast.BoolOp):
            truths = [self._truth(v, env, depth + 1) for v in node.values]
            decisive = isinstance(node.op, ast.Or)  # `or`: one true decides; `and`: one false
            if decisive in truths:
                return decisive
            return None if None in truths else not decisive
        negations = 0
        while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):  # any depth
            node, negations = node.operand, negations + 1
        if negations:
            inner = self._truth(node, env, depth + 1)
            return None if inner is None else inner ^ (negations % 2 == 1)
        value = self._value(node, env, depth)
        if value is _UNKNOWN:
            return None
        try:
            return bool(value)
        except Exception:  # a literal with an odd __bool__ is not decided
            return None

    def _iterations(self, node: ast.expr, env: _Env) -> int | None:
        """How many times a for loop over `node` runs, when reading decides it."""
        if isinstance(node, ast.Call) and self._origin(node.func, env) == "builtins.range":
            args = [self._value(a, env) for a in node.args]
            if node.keywords or not all(
                isinstance(a, int) and not isinstance(a, bool) for a in args
            ):
                return None
            try:
                return len(range(*[a for a in args if isinstance(a, int)]))
            except (TypeError, ValueError):
                return None
        if isinstance(node, ast.Dict) and None not in node.keys:
            return len(node.keys)
        value = self._value(node, env)
        if isinstance(value, tuple | list | str | bytes | frozenset):
            return len(value)
        return None

    def _may_fail(self, node: ast.stmt, env: _Env) -> bool:
        """Could this statement raise (in a try body, where failing is what is expected)?"""
        if isinstance(node, ast.Pass | ast.Global | ast.Nonlocal):
            return False
        if isinstance(node, ast.Expr):
            return not _safe_expression(node.value)
        if isinstance(node, ast.Assign):
            return not (
                all(isinstance(t, ast.Name) for t in node.targets) and _safe_expression(node.value)
            )
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            annotations = [
                a.annotation
                for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)
                if a.annotation
            ]
            if node.returns is not None:
                annotations.append(node.returns)
            checked = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
            if not self.future_annotations:
                checked += annotations
            return bool(node.decorator_list) or not all(map(_safe_expression, checked))
        if isinstance(node, ast.ClassDef):
            return bool(node.decorator_list or node.keywords) or not (
                all(isinstance(b, ast.Name) for b in node.bases)
                and not any(self._may_fail(s, env) for s in node.body)
            )
        if isinstance(node, ast.Import):
            return not all(_importable(a.name) for a in node.names)
        if isinstance(node, ast.ImportFrom):
            loaded = sys.modules.get(node.module or "") if node.level == 0 else None
            return (
                loaded is None
                or not _is_stdlib(node.module or "")
                or not all(a.name == "*" or hasattr(loaded, a.name) for a in node.names)
            )
        if isinstance(node, ast.If):
            return not _safe_expression(node.test) or any(
                self._may_fail(s, env) for s in (*node.body, *node.orelse)
            )
        return True

    # -- answering ----------------------------------------------------------------------------

    def resolve(self, qualname: str, callable_names: frozenset[str]) -> Resolution:
        if self.unreadable:
            return Resolution(CANNOT_TELL, None, self.unreadable)
        if self.fails:
            return Resolution(ABSENT, None, self.fails)
        parts = [unicodedata.normalize("NFKC", part) for part in qualname.split(".")]
        found = self._resolve_in(_MODULE_SCOPE, parts, parts[-1] in callable_names, 0)
        if found.state == PRESENT and self.may_fail:
            return Resolution(CANNOT_TELL, found.lineno, self.may_fail)
        return found

    def _resolve_in(
        self, scope: int, parts: list[str], callable_leaf: bool, depth: int
    ) -> Resolution:
        name, rest = self._name(scope, parts[0]), parts[1:]
        outcome = self._lookup(scope, name, callable_leaf or bool(rest), set())
        if outcome.state != PRESENT:
            inherit = () if rest else outcome.inherit
            return Resolution(outcome.state, None, outcome.reason, inherit)
        if not rest:
            return Resolution(PRESENT, outcome.found[-1].lineno)
        answers = []
        for binding in outcome.found:
            if binding.kind == "class" and binding.scope is not None and depth < _MAX_DEPTH:
                answers.append(self._resolve_in(binding.scope, rest, callable_leaf, depth + 1))
            elif binding.kind in ("other", "def"):
                answers.append(
                    Resolution(
                        CANNOT_TELL,
                        None,
                        f"{parts[0]} is bound at line {binding.lineno} to a value the model cannot read",
                    )
                )
            else:
                answers.append(
                    Resolution(
                        ABSENT,
                        None,
                        f"{parts[0]} is bound at line {binding.lineno} to something other than a class",
                    )
                )
        states = {a.state for a in answers}
        if states == {PRESENT}:
            return answers[-1]
        if len(states) == 1:
            return answers[0]
        undecided = next((a for a in answers if a.state == CANNOT_TELL), None)
        if undecided:
            return undecided
        lines = ", ".join(str(b.lineno) for b in outcome.found)
        return Resolution(
            CANNOT_TELL,
            None,
            f"{parts[0]} may name any of the classes at lines {lines}, and not all of them bind it",
        )

    def _lookup(self, scope: int, name: str, expect_callable: bool, seen: set[int]) -> _Outcome:
        """The name's binding in a scope; for a class whose body leaves it unbound (never bound,
        or deleted), in its bases, as attribute lookup goes on to them."""
        names = self.scopes.get(scope, {})
        bindings = sorted([*names.get(name, []), *names.get("*", [])], key=lambda b: b.order)
        outcome = _last_binding(bindings, expect_callable)
        cls = self.classes.get(scope)
        if outcome.state != ABSENT or not outcome.unbound or cls is None or scope in seen:
            return outcome
        seen.add(scope)
        unread, inherit = [], list(cls.origins)
        for base in cls.bases:
            if isinstance(base, str):
                unread.append(base)
                continue
            inherited = self._lookup(base, name, expect_callable, seen)
            if inherited.state != ABSENT:
                return inherited
            inherit += inherited.inherit
        if hasattr(type, name):  # every class has these (object's methods, type's attributes)
            return _Outcome(PRESENT, found=[Binding("def", 0, None)])
        if unread:  # red either way; say what reading could not rule out
            outcome = _Outcome(
                ABSENT,
                f"{outcome.reason} (unless its base {', '.join(unread)}, which the model cannot "
                "read, provides it)",
            )
        outcome.inherit = tuple(inherit)
        return outcome


_COMPARISONS: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


def _last_binding(bindings: list[Binding], expect_callable: bool) -> _Outcome:
    """The name's state after its scope ran: an unconditional binding decides; a conditional
    one that would change the answer makes it cannot tell."""
    now = _Outcome(ABSENT, NOT_DEFINED)
    for binding in bindings:
        if binding.kind == "any":
            if now.state != CANNOT_TELL:
                now = _Outcome(CANNOT_TELL, binding.doubt or "")
            continue
        new = _binding_outcome(binding, expect_callable)
        if binding.condition is None:
            now = new
        elif now.state == new.state == PRESENT:
            now = _Outcome(PRESENT, found=[*now.found, binding])
        elif now.state == new.state == ABSENT:
            pass
        elif CANNOT_TELL in (now.state, new.state):
            now = new if new.state == CANNOT_TELL else now
        elif new.state == PRESENT:
            now = _Outcome(CANNOT_TELL, f"bound at line {binding.lineno} only {binding.condition}")
        else:
            now = _Outcome(CANNOT_TELL, f"{new.reason}, {binding.condition}")
    return now


def _binding_outcome(binding: Binding, expect_callable: bool) -> _Outcome:
    if binding.kind == "del":
        return _Outcome(ABSENT, f"deleted at line {binding.lineno}")
    if binding.kind == "value" and expect_callable:
        return _Outcome(
            ABSENT,
            f"rebound to a value at line {binding.lineno} (the last binding wins)",
            unbound=False,
        )
    if binding.doubt:
        return _Outcome(CANNOT_TELL, binding.doubt)
    if binding.kind == "other" and expect_callable:
        return _Outcome(
            CANNOT_TELL, f"bound at line {binding.lineno} to a value the model cannot read"
        )
    return _Outcome(PRESENT, found=[binding])


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
_SAFE_EXPRESSIONS = (
    ast.Constant,
    ast.Name,
    ast.Tuple,
    ast.List,
    ast.Set,
    ast.Dict,
    ast.Lambda,
    ast.Starred,
    ast.expr_context,
    ast.boolop,
    ast.Not,
    ast.BoolOp,
    ast.UnaryOp,
    ast.keyword,
    ast.arguments,
    ast.arg,
)


def _safe_expression(node: ast.expr) -> bool:
    """Can evaluating `node` not raise? (Names are assumed bound; only in try bodies.)"""
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if not isinstance(current, _SAFE_EXPRESSIONS):
            return False
        if isinstance(current, ast.UnaryOp) and not isinstance(current.op, ast.Not):
            return False
        if isinstance(current, ast.Lambda):
            stack.extend([*current.args.defaults, *(d for d in current.args.kw_defaults if d)])
            continue
        stack.extend(ast.iter_child_nodes(current))
    return True


def _is_stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def _importable(module: str) -> bool:
    """Surely importable here: a standard module already loaded, or a top-level one found."""
    if module in sys.modules:
        return _is_stdlib(module)
    if "." in module or not _is_stdlib(module):
        return False
    import importlib.util  # only for a try body that imports

    return importlib.util.find_spec(module) is not None


def _returns_a_function(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A decorator of this file that hands back its argument or a function it defines."""
    if isinstance(node, ast.AsyncFunctionDef) or not node.args.args or not node.body:
        return False
    param = node.args.args[0].arg
    inner = {s.name for s in node.body if isinstance(s, ast.FunctionDef)}
    returns = [s for s in own_statements(node.body) if isinstance(s, ast.Return)]
    last = node.body[-1]
    return (
        isinstance(last, ast.Return)
        and all(isinstance(r.value, ast.Name) and r.value.id in inner | {param} for r in returns)
        and not any(
            isinstance(s, ast.Assign | ast.AugAssign | ast.Delete | ast.Global | ast.Nonlocal)
            for s in own_statements(node.body)
        )
    )


def _own_expressions(node: ast.stmt) -> list[ast.expr]:
    """The expressions a statement evaluates itself (not those of its bodies)."""
    if isinstance(node, ast.If | ast.While):
        return [node.test]
    if isinstance(node, ast.For | ast.AsyncFor):
        return [node.iter]
    if isinstance(node, ast.With | ast.AsyncWith):
        return [item.context_expr for item in node.items]
    if isinstance(node, ast.Match):
        return [node.subject]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return list(node.decorator_list)
    if isinstance(node, ast.Try | ast.TryStar):
        return []
    return [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr)]


def _walk_expression(node: ast.expr) -> Iterator[ast.AST]:
    """Every node of an expression, not entering lambdas (their names are their own)."""
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        yield current
        if not isinstance(current, ast.Lambda):
            stack.extend(ast.iter_child_nodes(current))


def _jump_in(node: ast.stmt, only_break: bool = False) -> int | None:
    """The line of a break (or continue) that leaves or restarts the loop `node` belongs to."""
    kinds = ast.Break if only_break else (ast.Break, ast.Continue)
    body = node.body if isinstance(node, ast.For | ast.AsyncFor | ast.While) else [node]
    stack: list[ast.AST] = list(body)
    while stack:
        current = stack.pop()
        if isinstance(current, kinds):
            return current.lineno
        if (
            isinstance(
                current,
                ast.For
                | ast.AsyncFor
                | ast.While
                | ast.FunctionDef
                | ast.AsyncFunctionDef
                | ast.ClassDef
                | ast.Lambda,
            )
            and current is not node
        ):
            continue
        stack.extend(ast.iter_child_nodes(current))
    return None


def _irrefutable(pattern: ast.pattern) -> bool:
    if isinstance(pattern, ast.MatchAs):
        return pattern.pattern is None or _irrefutable(pattern.pattern)
    if isinstance(pattern, ast.MatchOr):
        return any(_irrefutable(p) for p in pattern.patterns)
    return False


def _text(node: ast.expr) -> str:
    """The source of a test or base for a message; a deeply nested one is summarised."""
    try:
        text = ast.unparse(node)
    except RecursionError:
        return "a deeply nested expression"
    return text if len(text) <= 80 else text[:77] + "..."


def _joined(outer: str | None, clause: str) -> str:
    return clause if outer is None else f"{outer}, {clause}"
