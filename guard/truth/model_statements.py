"""The binding model's run of a module's top-level code, statement by statement (never of function
bodies): each binding recorded in its scope, in execution order, with the condition under which
it runs (see Binding)."""

from __future__ import annotations

import ast
import sys

from guard.truth.model_names import (
    _MODULE_SCOPE,
    _UNKNOWN,
    Binding,
    _At,
    _Class,
    _Env,
    _is_stdlib,
    _Origin,
    _Scopes,
)
from guard.truth.statements import imported, own_statements

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
# Statements that bind nothing and never raise at import (`return`, `break` and `continue` outside
# their place do not compile).
_INERT_STATEMENTS = (ast.Pass, ast.Global, ast.Nonlocal, ast.Break, ast.Continue, ast.Return)
# A function's attributes that, set, change what calling it runs.
_CODE_ATTRIBUTES = frozenset({"__code__", "__defaults__", "__kwdefaults__"})


class _Model(_Scopes):
    """A statement that surely raises stops its body: at module level the import fails (`fails`); a
    raise that may happen (under a runtime condition, in a `with` that may suppress it) makes every
    answer cannot tell (`may_fail`). Outside try bodies, calls are assumed to return."""

    # -- running the module -------------------------------------------------------------------

    def run(self, tree: ast.Module) -> None:
        self.future_annotations = any(
            isinstance(n, ast.ImportFrom)
            and n.module == "__future__"
            and any(a.name == "annotations" for a in n.names)
            for n in tree.body
        )
        raises, may_raise = self._body(tree.body, _At(_MODULE_SCOPE, None, {}))
        if raises:
            self.fails = f"importing the module fails: {raises}"
        elif may_raise:
            self.may_fail = f"importing the module may fail: {may_raise}"

    def _body(self, body: list[ast.stmt], at: _At) -> tuple[str | None, str | None]:
        """Run `body`; (why it surely raises, why it may raise), each None when not."""
        may_raise = None
        for node in body:
            raises, maybe = self._stmt(node, at)
            if raises:
                return raises, may_raise
            may_raise = may_raise or maybe
        return None, may_raise

    def _stmt(self, node: ast.stmt, at: _At) -> tuple[str | None, str | None]:
        self._walrus(node, at)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            doubt = self._decorator_doubt(node.decorator_list, at.env, "decorator", "it")
            value: object = _UNKNOWN
            if not node.decorator_list:
                value = node
            elif self._origin(node.decorator_list[0], at.env) == "builtins.property":
                value = _Origin("builtins.property")
            name = self._name(at.scope, node.name)
            self._add(at, name, "def", node.lineno, doubt=doubt, value=value)
        elif isinstance(node, ast.ClassDef):
            return self._class(node, at), None
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                self._target(target, node.value, node.lineno, at)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self._target(node.target, node.value, node.lineno, at)
        elif isinstance(node, ast.AugAssign):
            self._target(node.target, None, node.lineno, at)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                self._delete(target, node.lineno, at)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for bound, origin in imported(node):
                if origin.endswith(".*"):
                    assert isinstance(node, ast.ImportFrom)
                    self._star(node, at)
                    continue
                name = self._name(at.scope, bound)
                self._add(at, name, "other", node.lineno, value=_Origin(origin))
        elif isinstance(node, ast.Expr):
            return self._call(node.value, node.lineno, at), None
        elif isinstance(node, ast.Raise):
            return f"the raise at line {node.lineno}", None
        elif isinstance(node, ast.Assert):
            if self._truth(node.test, at.env) is False:
                return f"the assert at line {node.lineno} always fails", None
        elif isinstance(node, ast.If):
            return self._if(node, at)
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            return self._loop(node, at)
        elif isinstance(node, ast.Try | ast.TryStar):
            return self._try(node, at)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if item.optional_vars is not None:
                    self._target(item.optional_vars, None, node.lineno, at)
            if all(self._origin(i.context_expr, at.env) in _PLAIN_CONTEXTS for i in node.items):
                return self._body(node.body, at)
            where = f"inside a with body (line {node.lineno}) that may swallow a failure"
            raises, maybe, _, _ = self._failing_body(node.body, at, where)
            if raises and not all(
                self._suppresses_all(item.context_expr, at.env) for item in node.items
            ):
                return None, f"{raises}, which the with at line {node.lineno} may not suppress"
            return None, maybe
        elif isinstance(node, ast.Match):
            return self._match(node, at)
        elif type(node).__name__ == "TypeAlias":  # `type X = ...` (3.12): binds X, lazily
            name = self._name(at.scope, node.name.id)  # type: ignore[attr-defined]
            self._add(at, name, "other", node.lineno)
        elif not isinstance(node, _INERT_STATEMENTS):  # as pyflakes' _unknown_handler: never
            kind = type(node).__name__  # silently nothing (tests/test_binding_forms.py checks them)
            unknown = f"line {node.lineno} is a statement reading does not know ({kind})"
            self._add(at, "*", "any", node.lineno, doubt=unknown)
        return None, None

    def _star(self, node: ast.ImportFrom, at: _At) -> None:
        """`from m import *`: a loaded standard module's exports; any other may rebind anything."""
        loaded = sys.modules.get(node.module or "") if node.level == 0 else None
        if loaded is not None and _is_stdlib(node.module or ""):
            exported = getattr(loaded, "__all__", None)
            if exported is None:
                exported = [n for n in vars(loaded) if not n.startswith("_")]
            for name in exported:
                if isinstance(name, str):
                    self._add(at, self._name(at.scope, name), "other", node.lineno)
            return
        star = f"`from {'.' * node.level}{node.module or ''} import *` at line {node.lineno} may rebind it"
        self._add(at, "*", "any", node.lineno, doubt=star)

    def _class(self, node: ast.ClassDef, at: _At) -> str | None:
        """Run a class body in its own scope; why creating the class surely raises, if it does."""
        inner = len(self.scopes)
        self.scopes[inner] = {}
        bases: list[int | str] = []
        origins: list[str] = []
        doubt = self._decorator_doubt(node.decorator_list, at.env, "class decorator", "the class")
        passes_on = None
        for base in node.bases:
            value = self._lookup_env(base, at.env)
            origin = self._origin(base, at.env)
            if isinstance(value, _Class):
                bases.append(value.scope)
                passes_on = passes_on or value.doubt or value.passes_on
            elif origin == "typing.NamedTuple":
                pass
            elif origin not in _PLAIN_BASES:
                bases.append(_text(base))
                origins += [origin] if origin else []
        for keyword in node.keywords:
            if (
                keyword.arg == "metaclass"
                and self._origin(keyword.value, at.env) not in _KEEPING_METACLASSES
            ):
                passes_on = (
                    f"the metaclass at line {keyword.value.lineno} may drop or replace class "
                    "attributes"
                )
        doubt = doubt or passes_on
        self.classes[inner] = _Class(inner, node.name, bases, origins)
        self.globals_of[inner] = frozenset(
            name for n in own_statements(node.body) if isinstance(n, ast.Global) for name in n.names
        )
        body = _At(inner, None, dict(at.env))
        raises, _ = self._body(node.body, body)
        if raises:
            return f"{raises} (in the body of class {node.name})"
        self._fields(node, body, at.env)
        hook = self.scopes[inner].get("__init_subclass__")
        if hook and not passes_on:
            passes_on = (
                f"{node.name}.__init_subclass__ (line {hook[-1].lineno}) may change the classes "
                "derived from it"
            )
        slots = self._slots(node, body.env)
        clash = sorted(slots & {n for n, bs in self.scopes[inner].items() if bs})
        if clash:
            return (
                f"class {node.name} at line {node.lineno}: {clash[0]!r} in __slots__ "
                "conflicts with a class variable"
            )
        for slot in sorted(slots):
            self._add(body, self._name(inner, slot), "value", node.lineno)
        name = self._name(at.scope, node.name)
        value = self.classes[inner] = _Class(inner, node.name, bases, origins, doubt, passes_on)
        self._add(at, name, "class", node.lineno, inner=inner, doubt=doubt, value=value)
        return None

    def _fields(self, node: ast.ClassDef, body: _At, env: _Env) -> None:
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
            name, value = self._name(body.scope, statement.target.id), statement.value
            if named_tuple and value is None:
                self._add(body, name, "value", statement.lineno)
            elif (
                dataclass
                and isinstance(value, ast.Call)
                and self._origin(value.func, env) == "dataclasses.field"
                and not any(k.arg == "default" for k in value.keywords)
            ):
                self._add(body, name, "del", statement.lineno)

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

    def _if(self, node: ast.If, at: _At) -> tuple[str | None, str | None]:
        truth = self._truth(node.test, at.env)
        if truth is True:
            return self._body(node.body, at)
        if truth is False:
            return self._body(node.orelse, at)
        test = _text(node.test)
        results, sections = [], []
        for body, holds in ((node.body, "true"), (node.orelse, "false")):
            when = at.when(f"when `{test}` is {holds}")
            start = self._order
            results.append(self._body(body, when))
            sections.append(self._last_made(at.scope, start, self._order, (when.condition,)))
        self._bound_either_way(at, sections)
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
            last = next((b for b in reversed(bindings) if start < b.order <= end), None)
            if last and last.condition in conditions and last.kind in ("def", "value", "other"):
                made[name] = last
        return made

    def _bound_either_way(self, at: _At, sections: list[dict[str, Binding]]) -> None:
        """A name every alternative section binds (if/else, try body/handlers) is bound after
        them whichever ran: one binding of it, under the statement's own condition."""
        if len(sections) < 2:
            return
        for name in set.intersection(*(set(s) for s in sections)):
            found = [s[name] for s in sections]
            kinds = {b.kind for b in found}
            kind = kinds.pop() if len(kinds) == 1 else "other"
            doubt = next((b.doubt for b in found if b.doubt), None)
            self._add(at, name, kind, found[-1].lineno, doubt=doubt)

    def _loop(
        self, node: ast.For | ast.AsyncFor | ast.While, at: _At
    ) -> tuple[str | None, str | None]:
        """A loop body runs (its first iteration) only when the model sees it must."""
        if isinstance(node, ast.While):
            enters = self._truth(node.test, at.env)
        else:
            enters = self._enters(node.iter, at.env)
        if enters is False:
            return self._body(node.orelse, at)
        runs = enters is True
        inside = at.when(f"in the loop at line {node.lineno}, which may run zero times", runs)
        if isinstance(node, ast.For | ast.AsyncFor):
            self._target(node.target, None, node.lineno, inside)
        may_raise = None
        current = inside
        for statement in node.body:
            if isinstance(statement, ast.Break | ast.Continue):
                break
            raised, maybe = self._stmt(statement, current)
            if raised:
                if current.condition == at.condition:
                    return raised, may_raise
                may_raise = may_raise or raised
                break
            may_raise = may_raise or maybe
            jump = _jump_in(statement)
            if jump is not None:
                current = inside.when(f"after the break or continue at line {jump}")
        breaks = _jump_in(node, only_break=True)
        if isinstance(node, ast.While) and runs:
            return None, may_raise  # `while True`: its else never runs
        orelse = at.when(f"unless the loop at line {node.lineno} breaks", breaks is None)
        raised, maybe = self._body(node.orelse, orelse)
        if raised and orelse.condition == at.condition:
            return raised, may_raise
        return None, may_raise or maybe or raised

    def _failing_body(
        self, body: list[ast.stmt], at: _At, where: str
    ) -> tuple[str | None, str | None, int | None, bool]:
        """Run a body whose failure is caught (try, a with that may swallow it): from its first
        statement that may fail on, each statement is conditional. (why it surely raises, why
        it may, the line that may fail first, whether the raise is surely reached)."""
        current, failing, may_raise = at, None, None
        for statement in body:
            if failing is None and self._may_fail(statement):
                failing = statement.lineno
                current = at.when(f"{where} at line {failing}")
            raised, maybe = self._stmt(statement, current)
            may_raise = may_raise or maybe
            if raised:
                return raised, may_raise, failing, failing in (None, statement.lineno)
        return None, may_raise, failing, False

    def _try(self, node: ast.Try | ast.TryStar, at: _At) -> tuple[str | None, str | None]:
        start = self._order
        where = "inside a try body that may fail"
        raises, may_raise, failing, surely = self._failing_body(node.body, at, where)
        body_made = (at.condition, at.when(f"{where} at line {failing}").condition)
        sections = [self._last_made(at.scope, start, self._order, body_made)]
        if raises or failing is not None:
            sure = raises is not None and surely and len(node.handlers) == 1
            for handler in node.handlers:
                start = self._order
                when = at.when(f"in the except handler at line {handler.lineno}", sure)
                if handler.name:
                    self._add(when, self._name(at.scope, handler.name), "del", handler.lineno)
                raised, maybe = self._body(handler.body, when)
                may_raise = may_raise or maybe or raised
                sections.append(self._last_made(at.scope, start, self._order, (when.condition,)))
            if not raises and failing is not None and not node.orelse:
                self._bound_either_way(at, sections)  # handlers catch
        if not raises:
            when = at.when(
                f"in the else of the try at line {node.lineno}, which runs only when its body did "
                "not fail",
                failing is None,
            )
            raised, maybe = self._body(node.orelse, when)
            may_raise = may_raise or maybe or (raised if when.condition != at.condition else None)
            if raised and when.condition == at.condition:
                raises = raised
        raised, maybe = self._body(node.finalbody, at)
        if raised:
            return raised, may_raise
        if raises and not node.handlers:
            return raises, may_raise
        return None, may_raise or maybe

    def _match(self, node: ast.Match, at: _At) -> tuple[str | None, str | None]:
        may_raise = None
        subject = self._value(node.subject, at.env)
        cases = node.cases
        if subject is not _UNKNOWN:  # a literal subject: value patterns that differ never match
            cases = [c for c in cases if self._may_match(c.pattern, subject, at.env)]
        for number, case in enumerate(cases):
            matches = _irrefutable(case.pattern) or (
                isinstance(case.pattern, ast.MatchValue)
                and subject is not _UNKNOWN
                and self._value(case.pattern.value, at.env) is not _UNKNOWN
            )
            sure = number == 0 and case.guard is None and matches
            when = at.when(f"in the case at line {case.pattern.lineno}", sure)
            for sub in ast.walk(case.pattern):
                bound = getattr(sub, "name", None) or getattr(sub, "rest", None)
                if isinstance(bound, str):
                    self._add(when, self._name(at.scope, bound), "other", case.pattern.lineno)
            raised, maybe = self._body(case.body, when)
            if raised and sure:
                return raised, may_raise
            may_raise = may_raise or maybe or raised
            if sure:
                break
        return None, may_raise

    # -- targets and calls --------------------------------------------------------------------

    def _target(self, target: ast.expr, value: ast.expr | None, lineno: int, at: _At) -> None:
        """Bind what an assignment target binds: names, and attributes of this file's classes;
        a subscript or another object's attribute binds neither."""
        if isinstance(target, ast.Name):
            kind, known = self._value_kind(value, at.env)
            name = self._name(at.scope, target.id)
            doubt = self._rebinding(at.scope, name, kind, lineno)
            self._add(at, name, kind, lineno, doubt=doubt, value=known)
        elif isinstance(target, ast.Tuple | ast.List):
            values: list[ast.expr | None] = [None] * len(target.elts)
            if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
                values = list(value.elts)
            for element, element_value in zip(target.elts, values, strict=True):
                self._target(element, element_value, lineno, at)
        elif isinstance(target, ast.Starred):
            self._target(target.value, None, lineno, at)
        elif isinstance(target, ast.Attribute):
            kind, _ = self._value_kind(value, at.env)
            self._on_classes(target.value, target.attr, kind, lineno, at)
            if target.attr in _CODE_ATTRIBUTES and isinstance(target.value, ast.Attribute):
                swapped = (  # `C.m.__code__ = ...`: the name stays, its code is another's
                    f"its {target.attr} is replaced at line {lineno}: the code that runs is not "
                    "the code defined"
                )
                for owner in self._classes_named(target.value.value, at):
                    self._add(owner, target.value.attr, "other", lineno, doubt=swapped)

    def _delete(self, target: ast.expr, lineno: int, at: _At) -> None:
        if isinstance(target, ast.Name):
            self._add(at, self._name(at.scope, target.id), "del", lineno)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._delete(element, lineno, at)
        elif isinstance(target, ast.Attribute):
            self._on_classes(target.value, target.attr, "del", lineno, at)

    def _on_classes(self, owner: ast.expr, name: str, kind: str, lineno: int, at: _At) -> None:
        for inner in self._classes_named(owner, at):
            doubt = self._rebinding(inner.scope, name, kind, lineno)
            self._add(inner, name, kind, lineno, doubt=doubt)

    def _call(self, node: ast.expr, lineno: int, at: _At) -> str | None:
        """An expression statement: setattr/delattr on this file's classes, exec, and exits."""
        if not isinstance(node, ast.Call):
            return None
        origin = self._origin(node.func, at.env)
        if origin in _EXITS:
            return f"the call to {origin.removeprefix('builtins.')}() at line {lineno}"
        if origin in ("builtins.setattr", "builtins.delattr") and len(node.args) >= 2:
            name, value = node.args[1], node.args[2] if len(node.args) > 2 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                kind = "del" if origin == "builtins.delattr" else self._value_kind(value, at.env)[0]
                self._on_classes(node.args[0], name.value, kind, lineno, at)
            else:
                doubt = f"the {origin[9:]} at line {lineno} with a computed name may change it"
                for inner in self._classes_named(node.args[0], at):
                    self._add(inner, "*", "any", lineno, doubt=doubt)
        elif origin in ("builtins.exec", "builtins.globals", "builtins.vars", "builtins.locals"):
            doubt = f"the call to {origin[9:]}() at line {lineno} may change any name"
            self._add(at, "*", "any", lineno, doubt=doubt)
        return None

    def _rebinding(self, scope: int, name: str, kind: str, lineno: int) -> str | None:
        """Why a function bound over an earlier binding of the name (`m = g` after `def m`,
        `C.m = f` or `setattr(C, "m", f)` after the class) is no answer from reading: the name
        is bound, but not to the code defined under it."""
        if kind != "def" or not self.scopes.get(scope, {}).get(name):
            return None
        return (
            f"rebound at line {lineno} to another function: the code that runs is not the "
            "code defined"
        )

    def _walrus(self, node: ast.stmt, at: _At) -> None:
        """`(m := ...)` in the statement's own expressions binds m here (a lambda's: its own)."""
        stack: list[ast.AST] = [*reversed(_own_expressions(node))]
        while stack:
            sub = stack.pop()
            if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                kind, known = self._value_kind(sub.value, at.env)
                name = self._name(at.scope, sub.target.id)
                self._add(at, name, kind, node.lineno, value=known)
            if not isinstance(sub, ast.Lambda):
                stack.extend(ast.iter_child_nodes(sub))


def _own_expressions(node: ast.stmt) -> list[ast.expr]:
    """What a statement itself evaluates (`if` test, `match` subject), not its bodies."""
    if isinstance(node, ast.For | ast.AsyncFor):
        return [node.iter]
    if isinstance(node, ast.With | ast.AsyncWith):
        return [item.context_expr for item in node.items]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return list(node.decorator_list)
    return [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr)]


_LOOPS = (ast.For, ast.AsyncFor, ast.While)
# Where a break or continue inside belongs to another loop, or to no loop here.
_JUMPS_OWN = (*_LOOPS, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _jump_in(node: ast.stmt, only_break: bool = False) -> int | None:
    """The line of a break (or continue) that leaves or restarts the loop `node` belongs to."""
    kinds = ast.Break if only_break else (ast.Break, ast.Continue)
    body = node.body if isinstance(node, _LOOPS) else [node]
    stack: list[ast.AST] = list(body)
    while stack:
        current = stack.pop()
        if isinstance(current, kinds):
            return current.lineno
        if not isinstance(current, _JUMPS_OWN) or current is node:
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
