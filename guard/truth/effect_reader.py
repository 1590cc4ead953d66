"""A module's import-time code (its body, class bodies, decorators, defaults, annotations,
bases) read for its effect summary (guard.truth.effects) with the values its names may hold:
flow-insensitive, to a fixpoint, since a name's value may come from a statement below.
"""

from __future__ import annotations

import ast

from guard.truth.effect_graph import (
    _CALLING,
    _REFLECTIVE_ATTRIBUTES,
    _arguments,
    _bound_names,
    _changed,
    _dotted,
    _FunctionGraph,
    named_argument,
    signature,
)
from guard.truth.effects import ANY, MUTATING_BUILTINS, Effects, _as_key, _closure, _Node, running
from guard.truth.model_names import _KEEPING_DECORATORS, _is_stdlib
from guard.truth.model_statements import _CODE_ATTRIBUTES
from guard.truth.statements import blocks, imported, own_statements

# Expressions that use their operands' values (and so may run what those hold).
_TOUCHING = (
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.BoolOp,
    ast.FormattedValue,
    ast.Await,
)


def summarize(tree: ast.Module) -> Effects:
    """The file's Effects, with the binding model's decorators that neither call nor replace
    what they decorate and metaclasses that keep a class body's attributes."""
    return _Reader(tree).effects()


_MOST_REFS = 50_000  # what one name may hold; a real module's names hold up to ~20,000


class _Unsettled(Exception):
    """The import-time values grow past what reading settles."""


# A value at import time: the things of the file (and imports) it may be or hold.
_Refs = frozenset[str]  # "def:Q", "class:Q", "import:ORIGIN", "danger:NAME"


class _Reader(_FunctionGraph):
    """The graph of the file's functions and classes, and its import-time code over it."""

    def __init__(self, tree: ast.Module) -> None:
        super().__init__(tree)
        self.imports = {  # the module-level names its top-level imports bind
            name: origin
            for statement in tree.body
            if isinstance(statement, ast.Import | ast.ImportFrom)
            for name, origin in imported(statement)
        }
        self.values: dict[str, set[str]] = {}  # flow-insensitive values of names at import
        self.node = _Node()  # what the import runs (`passes`: with nothing of the checkout)
        self.changed = False

    def effects(self) -> Effects:
        self._collect(self.tree.body, "", None)
        try:
            for _ in range(8):  # values flow by assignment: a few passes reach the fixpoint
                self.changed = False
                self._run(self.tree.body)
                if not self.changed:
                    break
            else:
                raise _Unsettled
        except _Unsettled:
            self._mutates("import-time values that reading does not settle")
        top = {name for node in own_statements(self.tree.body) for name in _bound_names(node)}
        values = {name: frozenset(self.values.get(name, ())) for name in top}
        at_import = _closure(self.graph, self.node, home=True)
        return Effects(at_import, self.graph, self.imports, tuple(self.stars), values)

    def _mutates(self, why: str, name: str = ANY) -> None:
        self.node.changes.setdefault(name, why)

    def _run(self, body: list[ast.stmt]) -> None:
        for node in body:
            self._statement(node)

    def _bind(self, target: ast.expr, refs: _Refs) -> None:
        if isinstance(target, ast.Name):
            self._flow(target.id, refs)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._bind(element, refs)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, refs)
        elif isinstance(target, ast.Attribute):
            owner = self._value(target.value)
            self._changed_on(target.value, owner, target.attr, target.lineno)
            self._flow("." + target.attr, refs)
        elif isinstance(target, ast.Subscript):
            self._value(target.slice)
            self._bind(target.value, refs | self._value(target.value))

    def _delete(self, target: ast.expr, lineno: int) -> None:
        """`del (f.__code__, x)` deletes each element, as the binding model reads it."""
        if isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._delete(element, lineno)
            return
        for sub in ast.iter_child_nodes(target):
            if isinstance(sub, ast.expr):
                owner = self._value(sub)
                if isinstance(target, ast.Attribute) and sub is target.value:
                    self._changed_on(sub, owner, target.attr, lineno)

    def _changed_on(self, node: ast.expr, owner: _Refs, attribute: str, lineno: int) -> None:
        """An attribute set or deleted at import on `node`, which may hold `owner`: something an
        import gave may be this very module or one of its classes (`from . import mod as me;
        me.C = None`), and the binding model (guard.truth.model_statements) reads only a
        class's own name, not `EntryClass[0].m = None`. A function's `__code__` or defaults
        replaced: the name stays bound, but its code is not the code defined under it."""
        refs = [ref.partition(":")[::2] for ref in sorted(owner)]
        for kind, origin in refs:
            if kind == "import" and origin.split(".")[0] == "builtins":
                why = f"line {lineno} replaces builtins.{attribute}, which all later code runs"
                self._mutates(why)
                break
            if kind == "import-result" or (kind == "import" and not _is_stdlib(origin)):
                why = (
                    f"line {lineno} sets or deletes .{attribute} on {origin}, which may be this "
                    "module or one of its classes"
                )
                self._mutates(why, attribute)
                break
        named = node.id if isinstance(node, ast.Name) else None
        classes = [q for kind, q in refs if kind == "class" and q.rpartition(".")[2] != named]
        if classes:
            why = (
                f"line {lineno} sets or deletes .{attribute} on {ast.unparse(node)}, which "
                f"may be the class {classes[0]}"
            )
            self._mutates(why, _changed(attribute))
        for qualname in [q for kind, q in refs if kind == "def" and attribute in _CODE_ATTRIBUTES]:
            why = f"line {lineno} replaces the {attribute} of {qualname}"
            self._mutates(why, qualname.rpartition(".")[2])

    def _flow(self, name: str, refs: _Refs) -> None:
        known = self.values.setdefault(name, set())
        if not refs <= known:
            known |= refs
            self.changed = True
            if len(known) > _MOST_REFS:  # `R.add(mod.f, R.g)` again and again: each
                raise _Unsettled  # pass makes longer `mod.f.g.f...` of what R may hold

    def _statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for part in signature(node.args, node.returns):  # run when the `def` does
                self._value(part)
            qualname = self.qualnames[id(node)]
            self._decorated(node.decorator_list, f"def:{qualname}")
            self._flow(node.name, frozenset({f"def:{qualname}"}))
            return
        if isinstance(node, ast.ClassDef):
            self._class(node)
            return
        call = node.value if isinstance(node, ast.Expr) else None
        if (  # `setattr(C, 'name', ...)`: the binding model reads it as the binding it is
            isinstance(call, ast.Call)
            and self._origin(call.func) in ("builtins.setattr", "builtins.delattr")
            and (named := named_argument(call)) is not None
        ):
            values = [self._value(argument) for argument in call.args]
            self._changed_on(call.args[0], values[0], named, node.lineno)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            refs = self._value(node.value) if node.value is not None else frozenset()
            if isinstance(node, ast.AnnAssign):
                self._value(node.annotation)
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                self._bind(target, refs)
        elif isinstance(node, ast.For | ast.AsyncFor):
            self._bind(node.target, self._touch(self._value(node.iter)))
        elif isinstance(node, ast.If | ast.While):
            self._touch(self._value(node.test))
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                refs = self._touch(self._value(item.context_expr))
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, refs)
                    self._touch(self._value(item.optional_vars))  # its exit runs what it keeps
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for name, origin in imported(node):
                if not origin.endswith(".*"):
                    self._flow(name, frozenset({f"import:{origin}"}))
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                self._delete(target, node.lineno)
        elif isinstance(node, ast.Try | ast.TryStar):
            for handler in node.handlers:
                if handler.type is not None:
                    self._value(handler.type)
        elif isinstance(node, ast.Match):
            self._value(node.subject)
            for case in node.cases:
                if case.guard is not None:
                    self._value(case.guard)
                for sub in ast.walk(case.pattern):
                    if isinstance(sub, ast.expr):
                        self._value(sub)
                self._run(case.body)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self._value(child)
        if not isinstance(node, ast.Match):  # its cases ran above, each after its pattern
            for block in blocks(node):
                self._run(block)

    def _decorated(self, decorators: list[ast.expr], key: str) -> None:
        """A decorator runs, and gets what it decorates: one of the file may call it; one from
        elsewhere wraps or registers it (decorating is not calling)."""
        for decorator in decorators:
            refs = self._value(decorator)
            if self._origin(decorator) in _KEEPING_DECORATORS or (
                isinstance(decorator, ast.Attribute)
                and decorator.attr in ("setter", "getter", "deleter")
            ):
                continue
            self._runs(refs)
            self._hands(refs, frozenset({key}))

    def _hands(self, callee: _Refs, handed: _Refs, calling: bool = False) -> None:
        """Code handed functions or classes of the file may run them: code of the file may call
        what it gets, as `calling` code does (sorted, map...); a function from another module of
        the checkout runs them if it calls what it is handed (guard.tree.worktree reads it)."""
        if calling or any(r.startswith(("def:", "class:", "danger:")) for r in callee):
            self._runs(handed)
        keys = [_as_key(r) for r in handed if r.startswith(("def:", "class:", "instance:", "new:"))]
        for ref in callee:
            kind, _, rest = ref.partition(":")
            if kind in ("import", "import-result") and keys:
                need = "hands" if kind == "import" else "hands-result"
                self.node.needs |= {(need, f"{rest}\t{key}") for key in keys}

    def _origin(self, node: ast.expr) -> str | None:
        target = node.func if isinstance(node, ast.Call) else node
        dotted = _dotted(target)
        if dotted is None:
            return None
        root = dotted.split(".")[0]
        if root in self.imports:
            origin = self.imports[root] + dotted[len(root) :]
        elif root in self.functions or root in self.classes or root in self.values:
            return None
        else:
            origin = f"builtins.{dotted}"
        return f"{origin}()" if isinstance(node, ast.Call) else origin

    def _class(self, node: ast.ClassDef) -> None:
        qualname = self.qualnames[id(node)]
        for base in node.bases:
            refs = self._value(base)
            if isinstance(base, ast.Subscript):  # `Base[T]`: its alias's __mro_entries__ is Base
                refs = self._value(base.value)
            others = self._derived(refs, "hooks", "base")
            self._runs(others)
            if any(  # but `namedtuple(...)`, `type(...)`: a class
                not (kind == "import-result" and _is_stdlib(origin))
                for kind, _, origin in (ref.partition(":") for ref in others)
            ):
                why = (
                    f"the base at line {base.lineno} may be an object, not a class: its "
                    "__mro_entries__ may put other classes (and their __init_subclass__) in "
                    "its place"
                )
                self._mutates(why, node.name)
        for keyword in node.keywords:
            refs = self._value(keyword.value)
            self._runs(self._derived(refs, "meta", "meta") if keyword.arg == "metaclass" else refs)
        self._run(node.body)
        self.graph[f"new:{qualname}"].calls |= {  # `p = property(f)`: an instance may run it
            _as_key(r)
            for s in own_statements(node.body)
            if isinstance(s, ast.Assign | ast.AnnAssign | ast.AugAssign)
            for n in _bound_names(s)
            for r in self.values.get(n, ())
            if r.startswith(("def:", "class:", "instance:", "result:", "uses:"))
        }
        self._decorated(node.decorator_list, f"new:{qualname}")
        self._flow(node.name, frozenset({f"class:{qualname}"}))

    def _derived(self, refs: _Refs, key: str, need: str) -> _Refs:
        """A class statement derives from (or is made by) what `refs` hold: a class of the file
        runs its `key` node, one from elsewhere is a `need`; the rest is returned."""
        self.node.calls |= {f"{key}:{ref[6:]}" for ref in refs if ref.startswith("class:")}
        self.node.needs |= {(need, ref[7:]) for ref in refs if ref.startswith("import:")}
        return frozenset(ref for ref in refs if not ref.startswith(("class:", "import:")))

    def _runs(self, refs: _Refs, quiet: bool = False) -> None:
        """Something may call these (or, for a class, make and use an instance); `quiet`:
        with arguments that hold nothing of the checkout."""
        for name in running(refs, self.node, quiet):
            self._mutates(f"{name} handed to code that may call it, or called indirectly")
        for ref in sorted(refs):  # another ref keeps its ":", never a builtin's name
            if (builtin := ref.removeprefix("import:builtins.")) in MUTATING_BUILTINS:
                self._mutates(f"{builtin} reached through the builtins module")

    def _value(self, node: ast.expr) -> _Refs:
        """The refs an expression's value may hold; what evaluating it runs is recorded."""
        if isinstance(node, ast.Name):
            refs = set(self.values.get(node.id, ())) | self._named(node.id, "class")
            if node.id in MUTATING_BUILTINS:
                refs.add(f"danger:{node.id}")
            elif node.id == "__builtins__":  # its items too: `__builtins__["setattr"]`
                refs |= {"import:builtins", "danger:__builtins__"}
            return frozenset(refs)
        if isinstance(node, ast.Attribute):
            return self._attribute(self._value(node.value), node.attr)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Lambda):  # its body runs where the lambda is run
            for part in signature(node.args, None):
                self._value(part)
            key = f"def:<lambda>:{node.lineno}:{node.col_offset}"
            self.graph[key] = self._function(node)[0]
            return frozenset({key})
        if isinstance(node, ast.NamedExpr):
            assigned = self._value(node.value)
            self._bind(node.target, assigned)
            return assigned
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            for generator in node.generators:
                self._bind(generator.target, self._touch(self._value(generator.iter)))
                for test in generator.ifs:
                    self._value(test)
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            return frozenset().union(*(self._value(p) for p in parts))
        found: set[str] = set()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):  # a call's keywords and comprehensions: above
                found |= self._value(child)
        if isinstance(node, ast.Subscript):  # `Optional[K]` hands K to typing, keeps it
            container = self._value(node.value)
            self._touch(container)
            classes = frozenset(r for r in container if r.startswith("class:"))
            if classes:  # `K[int]` runs K.__class_getitem__
                self._runs(self._attribute(classes, "__class_getitem__") - classes)
        elif isinstance(node, _TOUCHING):
            self._touch(frozenset(found))
        return frozenset(found)

    def _store_in(self, node: ast.expr, refs: _Refs) -> None:
        """What a container (a name, an attribute, an item of one) may now hold."""
        if isinstance(node, ast.Name):
            self._flow(node.id, refs)
        elif isinstance(node, ast.Attribute):
            self._flow("." + node.attr, refs)
            self._store_in(node.value, refs)
        elif isinstance(node, ast.Subscript):
            self._store_in(node.value, refs)

    def _touch(self, refs: _Refs) -> _Refs:
        """A value is used (indexed, iterated, tested, operated on, entered): what it may be
        or hold may run (a defaultdict's factory, an instance's dunders)."""
        self._runs(frozenset(r for r in refs if not r.startswith("class:")))
        return refs

    def _attribute(self, base: _Refs, attr: str) -> _Refs:
        found = set(self.values.get("." + attr, ()))
        if attr in _REFLECTIVE_ATTRIBUTES and base:
            found.add(f"danger:{attr}")
        self._touch(base)
        for ref in base:
            kind, _, rest = ref.partition(":")
            if kind == "class":
                members = set(self.members.get(rest, {}).get(attr, ()))
                members |= {  # of the file's other classes: a base may provide it
                    f"def:{q}"
                    for q in self.functions.get(attr, ())
                    if "." in q and q.rsplit(".", 1)[0] != rest
                }
                found |= members or {ref}  # from object or a base elsewhere: the class's code
            elif kind == "import":
                found.add(f"import:{rest}.{attr}")
            else:
                found.add(ref)
        return frozenset(found)

    def _call(self, node: ast.Call) -> _Refs:
        callee = self._value(node.func)
        arguments = frozenset().union(*(self._value(a) for a in _arguments(node)))
        self._runs(callee, quiet=not arguments)
        name = node.func.id if isinstance(node.func, ast.Name) else None
        builtin = name not in self.values and not callee  # not a name the file binds
        if name == "getattr" and builtin and len(node.args) >= 2:
            key = named_argument(node)
            if key is not None:
                return self._attribute(self._value(node.args[0]), key)
            self._mutates(f"getattr with a computed name at line {node.lineno}")
            return frozenset()
        self._hands(callee, arguments, self._origin(node.func) in _CALLING)
        if isinstance(node.func, ast.Attribute):  # `HOOKS.append(f)`: the receiver keeps it
            self._store_in(node.func.value, arguments)
        returned = set(arguments) | {
            f"instance:{ref[6:]}" for ref in callee if ref.startswith("class:")
        }
        for ref in callee:
            if ref.startswith("def:") and ref in self.graph:
                returned |= _returned(self.graph[ref])
            elif ref.startswith("import:"):
                returned.add(f"import-result:{ref[7:]}")  # what one from elsewhere hands back
        return frozenset(returned)


def _returned(node: _Node) -> set[str]:
    """What calling a function of the file may hand back: whatever it names of the file, and
    what it returns."""
    calls = {k for k in node.calls if not k.startswith("uses:")}  # names from elsewhere, called
    named = {("class:" + k[4:]) if k.startswith("new:") else k for k in calls | node.returns}
    return {k for k in named if k.startswith(("def:", "class:", "result:", "uses:"))}
