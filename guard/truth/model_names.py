"""The binding model's scopes (the module, each class body), looked up as Python's attribute
lookup goes (the last binding, then the bases), and the environment expressions are read in.

Of an expression the model knows only what Python computes without running user code (literals,
`sys.version_info`, comparisons of them). Anything else is `_UNKNOWN` and a test it cannot
decide is None: what depends on them is then conditional, never surely bound.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from guard.truth.interpreters import own_facts
from guard.truth.statements import own_statements

PRESENT = "present"
ABSENT = "absent"
CANNOT_TELL = "cannot-tell"


class Binding(NamedTuple):
    """One statement that binds (or unbinds) a name in a scope (module or class body).

    `condition` says why the statement may not run when its scope's body does (an `if` test
    decided only at runtime, a try body that may fail first, a loop that may run zero times);
    None: it runs whenever the body does. `doubt` says why what it binds may not be what the
    source defines (a decorator or metaclass the model cannot read)."""

    kind: str  # "def", "class", "value" (a literal: not callable), "other" (a value the model
    # cannot read), "del", "any" (may bind or unbind anything: `import *`, a computed setattr)
    lineno: int
    condition: str | None
    scope: int | None = None  # for a class: the scope of its body
    doubt: str | None = None
    order: int = 0  # execution order across a scope's names (a setattr after the class runs later)

    def __reduce__(self) -> tuple[object, ...]:
        """A kept parse (guard.truth.parsed) holds thousands of these: loaded by `tuple.__new__`,
        not by the Python-level `__new__` of a NamedTuple, they load a quarter faster."""
        return (tuple.__new__, (type(self), tuple(self)))


class Resolution(NamedTuple):
    """What Python, importing the module, would find at a qualified name: one of three answers.

    PRESENT: it surely binds it (`lineno` is the binding); ABSENT: it surely does not;
    CANNOT_TELL: reading cannot decide (`reason` says why; the runtime probe can)."""

    state: str
    lineno: int | None = None
    reason: str = ""
    # ABSENT from a class body that leaves the name unbound: the imported bases reading did
    # not follow (dotted origins, leading dots for a relative import), for the caller to read
    inherit: tuple[str, ...] = ()


_MODULE_SCOPE = 0

NOT_DEFINED = "not defined"

# What `if` tests and decorators may name, by where the name comes from (not by its spelling).
_KNOWN_VALUES: dict[str, object] = {
    "typing.TYPE_CHECKING": False,
    "typing_extensions.TYPE_CHECKING": False,
    **own_facts(),  # `sys.version_info`, `sys.platform`...: another interpreter's replace them
}

_MAX_DEPTH = 100  # of a test the model evaluates; deeper is cannot tell, never a crash


class _Unknown:
    """A value the model cannot know before the code runs."""


_UNKNOWN = _Unknown()
_IMPORTED_NAME = _Unknown()  # `__name__` of an imported module: some name, never "__main__"


class _Origin(NamedTuple):
    """Where a name comes from: `sys`, `functools.lru_cache`, `builtins.property`."""

    dotted: str


# A plain function of this module (a decorator it defines), as the environment holds it.
_LocalDef = ast.FunctionDef | ast.AsyncFunctionDef


class _Class(NamedTuple):
    """A class of this file: the model's record of it, and its value in the environment."""

    scope: int  # of its body
    name: str
    bases: list[int | str]  # a class scope of this file, or the text of a base it cannot read
    origins: list[str]  # where the unread bases are imported from
    doubt: str | None = None  # why it may not be the class its body defines (a decorator...)
    passes_on: str | None = None  # why a class derived from it cannot be read


class _Outcome(NamedTuple):
    state: str
    reason: str = ""
    found: tuple[Binding, ...] = ()
    unbound: bool = True  # absent because nothing binds it (not: bound to a non-callable)
    inherit: tuple[str, ...] = ()  # see Resolution.inherit


_Env = dict[str, object]


class _At(NamedTuple):
    """Where a statement runs: its scope, its `condition` (a Binding's) and the environment."""

    scope: int
    condition: str | None
    env: _Env

    def when(self, clause: str, surely: bool = False) -> _At:
        """Code that runs whenever this does (`surely`), or only under `clause` too."""
        return self if surely else self._replace(condition=_joined(self.condition, clause))


class _Scopes:
    """The scopes the model fills and the lookups in them; once the module ran, `resolve`."""

    def __init__(
        self, unreadable: str | None = None, facts: Mapping[str, object] | None = None
    ) -> None:
        self.unreadable = unreadable
        self.known = {**_KNOWN_VALUES, **facts} if facts else _KNOWN_VALUES
        self.scopes: dict[int, dict[str, list[Binding]]] = {_MODULE_SCOPE: {}}
        self.classes: dict[int, _Class] = {}
        self.globals_of: dict[int, frozenset[str]] = {}
        self.fails: str | None = None
        self.may_fail: str | None = None
        self.future_annotations = False
        self._order = 0

    def _add(
        self,
        at: _At,
        name: str,
        kind: str,
        lineno: int,
        *,
        inner: int | None = None,
        doubt: str | None = None,
        value: object = _UNKNOWN,
    ) -> None:
        scope, condition, env = at
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
        """A decorator's or base's dotted origin (`functools.lru_cache`; `...()` for a call)."""
        if isinstance(node, ast.Call):
            inner = self._origin(node.func, env)
            return None if inner is None else f"{inner}()"
        value = self._lookup_env(node, env)
        return value.dotted if isinstance(value, _Origin) else None

    def _classes_named(self, node: ast.expr, at: _At) -> list[_At]:
        """The class scopes `node` surely names, or else every class so named (each only
        possibly); with no environment, as seen from outside their bodies."""
        value = self._lookup_env(node, at.env)
        if isinstance(value, _Class):
            return [_At(value.scope, at.condition, {})]
        if not isinstance(node, ast.Name):
            return []
        maybe = _joined(at.condition, f"if `{node.id}` names the class")
        return [_At(s, maybe, {}) for s, c in self.classes.items() if c.name == node.id]

    # -- reading expressions, in the environment of the statement that holds them -------------

    def _value_kind(self, value: ast.expr | None, env: _Env) -> tuple[str, object]:
        """(kind, known value) of what an assignment binds (the kinds: Binding.kind)."""
        if value is None:
            return "other", _UNKNOWN
        if isinstance(value, ast.Lambda):
            return "def", _UNKNOWN
        if isinstance(value, _LITERALS):
            return "value", self._value(value, env)
        looked = self._lookup_env(value, env)
        if isinstance(looked, _LocalDef) or (isinstance(looked, _Class) and not looked.doubt):
            return "def", looked
        if isinstance(value, ast.Call) and self._origin(value.func, env) in _MAKING_FUNCTIONS:
            return "def", _UNKNOWN
        return "other", looked

    def _decorator_doubt(
        self, decorators: list[ast.expr], env: _Env, what: str, replaces: str
    ) -> str | None:
        for decorator in decorators:
            local = self._lookup_env(decorator, env)
            if not (
                self._origin(decorator, env) in _KEEPING_DECORATORS
                or (isinstance(local, _LocalDef) and _returns_a_function(local))
                or (
                    isinstance(decorator, ast.Attribute)  # a property's
                    and decorator.attr in ("setter", "getter", "deleter")
                    and self._lookup_env(decorator.value, env) == _Origin("builtins.property")
                )
            ):
                return f"the {what} at line {decorator.lineno} may replace {replaces}"
        return None

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
            if isinstance(looked, _LocalDef | _Class):
                return _UNKNOWN
            return looked
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = [self._value(e, env, depth + 1) for e in node.elts]  # `*x` is unknown
            if any(i is _UNKNOWN for i in items):
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
        if isinstance(node, ast.Slice):  # a subscript's: bounds one level below the subscript
            bounds = (node.lower, node.upper, node.step)
            parts = [None if p is None else self._value(p, env, depth) for p in bounds]
            return _UNKNOWN if any(p is _UNKNOWN for p in parts) else slice(*parts)
        if isinstance(node, ast.Subscript):
            container = self._value(node.value, env, depth + 1)
            index = self._value(node.slice, env, depth + 1)
            if isinstance(container, tuple | str) and isinstance(index, int | slice):
                try:
                    return container[index]
                except (IndexError, ValueError, TypeError):  # `x[:"2"]` raises when it runs
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
        while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
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

    def _enters(self, node: ast.expr, env: _Env) -> bool | None:
        """Whether a for loop over `node` runs its body, when reading decides it (not how many
        times: `len(range(10**20))` overflows)."""
        if isinstance(node, ast.Call) and self._origin(node.func, env) == "builtins.range":
            args = [self._value(a, env) for a in node.args]
            if node.keywords or not all(
                isinstance(a, int) and not isinstance(a, bool) for a in args
            ):
                return None
            try:
                return bool(range(*[a for a in args if isinstance(a, int)]))
            except (TypeError, ValueError):
                return None
        if isinstance(node, ast.Dict) and None not in node.keys:
            return bool(node.keys)
        value = self._value(node, env)
        if isinstance(value, tuple | list | str | bytes | frozenset):
            return bool(value)
        return None

    def _may_fail(self, node: ast.stmt) -> bool:
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
            checked = [*args.defaults, *(d for d in args.kw_defaults if d is not None)]
            if not self.future_annotations:  # annotations are evaluated when the def runs
                annotated = (*args.posonlyargs, *args.args, *args.kwonlyargs)
                checked += [a.annotation for a in annotated if a.annotation]
                checked += [node.returns] if node.returns is not None else []
            return bool(node.decorator_list) or not all(map(_safe_expression, checked))
        if isinstance(node, ast.ClassDef):
            return bool(node.decorator_list or node.keywords) or not (
                all(isinstance(b, ast.Name) for b in node.bases)
                and not any(self._may_fail(s) for s in node.body)
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
                self._may_fail(s) for s in (*node.body, *node.orelse)
            )
        return True

    # -- answering ----------------------------------------------------------------------------

    def resolve(self, parts: list[str], callable_leaf: bool) -> Resolution:
        if self.unreadable:
            return Resolution(CANNOT_TELL, None, self.unreadable)
        if self.fails:
            return Resolution(ABSENT, None, self.fails)
        found = self._resolve_in(_MODULE_SCOPE, parts, callable_leaf)
        if found.state == PRESENT and self.may_fail:
            return Resolution(CANNOT_TELL, found.lineno, self.may_fail)
        return found

    def _resolve_in(self, scope: int, parts: list[str], callable_leaf: bool) -> Resolution:
        name, rest = self._name(scope, parts[0]), parts[1:]
        outcome = self._lookup(scope, name, callable_leaf or bool(rest), set())
        if outcome.state != PRESENT:
            inherit = () if rest else outcome.inherit
            return Resolution(outcome.state, None, outcome.reason, inherit)
        if not rest:
            return Resolution(PRESENT, outcome.found[-1].lineno)
        answers = []
        for binding in outcome.found:  # a class or a function: a callable was expected
            if binding.kind == "class" and binding.scope is not None:
                answers.append(self._resolve_in(binding.scope, rest, callable_leaf))
            else:
                why = f"bound at line {binding.lineno} to a value the model cannot read"
                answers.append(Resolution(CANNOT_TELL, None, f"{parts[0]} is {why}"))
        states = {a.state for a in answers}
        if states == {PRESENT}:
            return answers[-1]
        if len(states) == 1:
            return answers[0]
        undecided = next((a for a in answers if a.state == CANNOT_TELL), None)
        if undecided:
            return undecided
        lines = ", ".join(str(b.lineno) for b in outcome.found)
        why = (
            f"{parts[0]} may name any of the classes at lines {lines}, and not all of them bind it"
        )
        return Resolution(CANNOT_TELL, reason=why)

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
            return _Outcome(PRESENT, found=(Binding("def", 0, None),))
        if unread:  # red either way; say what reading could not rule out
            outcome = _Outcome(
                ABSENT,
                f"{outcome.reason} (unless its base {', '.join(unread)}, which the model cannot "
                "read, provides it)",
            )
        return outcome._replace(inherit=tuple(inherit))


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
        if binding.condition is None or new.state == CANNOT_TELL:
            now = new
        elif now.state == new.state == PRESENT:
            now = _Outcome(PRESENT, found=(*now.found, binding))
        elif now.state in (new.state, CANNOT_TELL):  # what this binding may do changes nothing
            pass
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
    return _Outcome(PRESENT, found=(binding,))


def _joined(outer: str | None, clause: str) -> str:
    return clause if outer is None else f"{outer}, {clause}"


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
)


def _safe_expression(node: ast.expr) -> bool:
    """Can evaluating `node` not raise? (Names are assumed bound; only in try bodies.)"""
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if not isinstance(current, _SAFE_EXPRESSIONS):  # of unary operators, only `not`
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
# Calls that return a function or descriptor: an assignment of one binds a "def".
_MAKING_FUNCTIONS = _KEEPING_DECORATORS | {"functools.partial", "functools.partialmethod"}
