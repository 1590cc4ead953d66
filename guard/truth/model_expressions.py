"""What the binding model knows of an expression before the code runs: only what Python computes
without running user code (literals, `sys.version_info`, comparisons of them). Anything else is
`_UNKNOWN` and a test it cannot decide is None: what depends on them is then conditional, never
surely bound.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Callable
from typing import Any

from guard.truth.model_names import (
    _IMPORTED_NAME,
    _MAX_DEPTH,
    _UNKNOWN,
    _Env,
    _LocalClass,
    _LocalDef,
    _Origin,
    _Scopes,
)
from guard.truth.statements import own_statements

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


class _Values(_Scopes):
    """The model's reading of expressions, in the environment of the statement that holds them."""

    def _value_kind(self, value: ast.expr | None, env: _Env) -> tuple[str, object]:
        """(kind, known value) of what an assignment binds: a literal is a "value", a lambda,
        a function or class of this file or a known wrapper is "def", the rest is "other"."""
        if value is None:
            return "other", _UNKNOWN
        if isinstance(value, ast.Lambda):
            return "def", _UNKNOWN
        if isinstance(value, _LITERALS):
            return "value", self._value(value, env)
        looked = self._lookup_env(value, env)
        if isinstance(looked, _LocalDef) or (isinstance(looked, _LocalClass) and not looked.doubt):
            return "def", looked
        if isinstance(value, ast.Call) and self._origin(value.func, env) in _MAKING_FUNCTIONS:
            return "def", _UNKNOWN
        return "other", looked

    def _decorator_doubt(
        self, decorators: list[ast.expr], env: _Env, what: str, replaces: str
    ) -> str | None:
        for decorator in decorators:
            if not self._keeps(decorator, env):
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
    ast.keyword,
    ast.arguments,
    ast.arg,
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
