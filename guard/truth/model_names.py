"""The binding model's scopes and how a name is looked up in them: every statement that binds or
unbinds a name (guard.truth.model_statements records them), per scope (the module, each class
body), looked up as Python's attribute lookup goes (the last binding, then the bases); and the
environment expressions are read in (an import's origin, a function or class of the file, or a
value unknown until the code runs).
"""

from __future__ import annotations

import ast
import builtins
import unicodedata
from collections.abc import Mapping
from typing import NamedTuple

from guard.truth.interpreters import own_facts

PRESENT = "present"
ABSENT = "absent"
CANNOT_TELL = "cannot-tell"


class Binding(NamedTuple):
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

    def __reduce__(self) -> tuple[object, ...]:
        """A kept parse (guard.truth.parsed) holds thousands of these: loaded by `tuple.__new__`,
        not by the Python-level `__new__` of a NamedTuple, they load a quarter faster."""
        return (tuple.__new__, (type(self), tuple(self)))


class Resolution(NamedTuple):
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


class _LocalDef(NamedTuple):
    """A plain function of this module (a decorator it defines)."""

    node: ast.FunctionDef | ast.AsyncFunctionDef


class _LocalClass(NamedTuple):
    scope: int
    doubt: str | None = None  # why it may not be the class its body defines (a decorator...)
    passes_on: str | None = None  # why a class derived from it cannot be read


class _Class(NamedTuple):
    name: str
    bases: list[int | str]  # a class scope of this file, or the text of a base it cannot read
    origins: list[str]  # where the unread bases are imported from


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
    """The scopes the model fills and the lookups in them: what a name in a scope is bound to
    now (the environment) and, once the module ran, what importing it binds (`resolve`)."""

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
        """The dotted origin of a decorator or base: `functools.lru_cache`, and `...()` for a
        call of one."""
        if isinstance(node, ast.Call):
            inner = self._origin(node.func, env)
            return None if inner is None else f"{inner}()"
        value = self._lookup_env(node, env)
        return value.dotted if isinstance(value, _Origin) else None

    def _classes_named(self, node: ast.expr, at: _At) -> list[_At]:
        """The class scopes `node` may name: the one it surely names, or, when that is not
        known, every class of that name (each only possibly); outside their bodies, so with
        no environment of theirs."""
        value = self._lookup_env(node, at.env)
        if isinstance(value, _LocalClass):
            return [_At(value.scope, at.condition, {})]
        if not isinstance(node, ast.Name):
            return []
        maybe = _joined(at.condition, f"if `{node.id}` names the class")
        return [_At(s, maybe, {}) for s, c in self.classes.items() if c.name == node.id]

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
            at = f"{parts[0]} is bound at line {binding.lineno} to"
            if binding.kind == "class" and binding.scope is not None and depth < _MAX_DEPTH:
                answers.append(self._resolve_in(binding.scope, rest, callable_leaf, depth + 1))
            elif binding.kind in ("other", "def"):
                answers.append(Resolution(CANNOT_TELL, None, f"{at} a value the model cannot read"))
            else:
                answers.append(Resolution(ABSENT, None, f"{at} something other than a class"))
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
