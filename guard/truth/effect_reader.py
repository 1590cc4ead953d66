"""The import-time code of a module read for its effect summary (guard.truth.effects): the
module's body, class bodies, decorators, defaults, annotations and bases, with the values its
names may hold (flow-insensitive, to a fixpoint), so that what it calls, indexes, iterates,
tests or operates on runs what those values may be or hold, through the graph of the file's
functions and classes (guard.truth.effect_graph) or, by its imports, in another module.
`summarize` builds a file's Effects.
"""

from __future__ import annotations

import ast

from guard.truth.effect_graph import (
    _CALLING,
    _REFLECTIVE_ATTRIBUTES,
    _bound_names,
    _changed,
    _dotted,
    _FunctionGraph,
)
from guard.truth.effects import ANY, MUTATING_BUILTINS, QUIET, Effects, Reach, _closure, _Node
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


# A value at import time: the things of the file (and imports) it may be or hold.
_Refs = frozenset[str]  # "def:Q", "class:Q", "import:ORIGIN", "danger:NAME"


class _Reader(_FunctionGraph):
    """Builds a file's Effects: the graph of its functions and classes (`_collect`), then the
    import-time code read with the values its names may hold (`_run`, to a fixpoint)."""

    def __init__(self, tree: ast.Module) -> None:
        super().__init__(tree)
        self.imports = {  # the module-level names its top-level imports bind
            name: origin
            for statement in tree.body
            if isinstance(statement, ast.Import | ast.ImportFrom)
            for name, origin in imported(statement)
        }
        self.values: dict[str, set[str]] = {}  # flow-insensitive values of names at import
        self.changes: dict[str, str] = {}
        self.needs: set[tuple[str, str]] = set()
        self.attributes: set[str] = set()
        self.calls: set[str] = set()
        self.quiet_calls: set[str] = set()  # run with arguments holding nothing of the file
        self.changed = False

    def effects(self) -> Effects:
        self._collect(self.tree.body, "", None)
        for _ in range(8):  # values flow by assignment: a few passes reach the fixpoint
            self.changed = False
            self._run(self.tree.body)
            if not self.changed:
                break
        else:
            self._mutates("import-time values that reading does not settle")
        at_import = _closure(self.graph, self.calls, self.quiet_calls, home=True)
        reach = Reach(
            {**at_import.changes, **self.changes},
            frozenset(self.needs | at_import.needs),
            frozenset(self.attributes | at_import.attributes),
        )
        top = {name for node in own_statements(self.tree.body) for name in _bound_names(node)}
        values = {name: frozenset(self.values.get(name, ())) for name in top}
        return Effects(reach, self.graph, self.imports, tuple(self.stars), values)

    # -- the import-time code -------------------------------------------------------------

    def _mutates(self, why: str, name: str = ANY) -> None:
        self.changes.setdefault(name, why)

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
            self._imported_changed(owner, target.attr, target.lineno)
            self._class_changed(target.value, owner, target.attr, target.lineno)
            self._code_swapped(owner, target.attr, target.lineno)
            self._flow("." + target.attr, refs)
        elif isinstance(target, ast.Subscript):
            self._value(target.slice)
            self._bind(target.value, refs | self._value(target.value))

    def _imported_changed(self, owner: _Refs, attribute: str, lineno: int) -> None:
        """An attribute set or deleted, at import, on something an import gave (a module or
        what it holds, or what calling it returned): that may be this very module or one of its
        classes (`from . import mod as me; me.C = None`, `from .mod import C as K; del K.m`,
        `importlib.import_module(__name__).C = None`), which reading cannot tell apart from
        another module's, so the name is one its import may change. Set on the builtins
        module, it may change anything."""
        for ref in sorted(owner):
            kind, _, origin = ref.partition(":")
            if kind == "import" and origin.split(".")[0] == "builtins":
                why = f"line {lineno} replaces builtins.{attribute}, which all later code runs"
                self._mutates(why)  # `__build_class__`: every class statement after it
                return
            if kind == "import-result" or (kind == "import" and not _is_stdlib(origin)):
                why = (
                    f"line {lineno} sets or deletes .{attribute} on {origin}, which may be this "
                    "module or one of its classes"
                )
                self._mutates(why, attribute)
                return

    def _code_swapped(self, owner: _Refs, attribute: str, lineno: int) -> None:
        """`f.__code__ = ...` (or its defaults) on what may be a function of the file, however
        it is reached (`EntryClass[0].m`, an alias, `getattr`, the class body's own name): the
        name stays bound, but the code that runs is not the code defined under it."""
        if attribute not in _CODE_ATTRIBUTES:
            return
        for ref in sorted(owner):
            kind, _, qualname = ref.partition(":")
            if kind == "def":
                why = f"line {lineno} replaces the {attribute} of {qualname}"
                self._mutates(why, qualname.rpartition(".")[2])

    def _class_changed(self, node: ast.expr, owner: _Refs, attribute: str, lineno: int) -> None:
        """An attribute set or deleted, at import, on an expression that may hold one of the
        file's classes without naming it (`EntryClass[0].m = None`, `for c in EntryClass:
        c.m = None`): the binding model (guard.truth.model_statements) reads only the class's
        own name, so the name is one the module may change."""
        for ref in sorted(owner):
            kind, _, qualname = ref.partition(":")
            if kind != "class" or (
                isinstance(node, ast.Name) and node.id == qualname.rpartition(".")[2]
            ):
                continue
            why = (
                f"line {lineno} sets or deletes .{attribute} on {ast.unparse(node)}, which may be "
                f"the class {qualname}"
            )
            self._mutates(why, _changed(attribute))
            return

    def _flow(self, name: str, refs: _Refs) -> None:
        known = self.values.setdefault(name, set())
        if not refs <= known:
            known |= refs
            self.changed = True

    def _statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self._signature(node.args, node.returns)
            qualname = self.qualnames[id(node)]
            self._decorated(node.decorator_list, f"def:{qualname}")
            self._flow(node.name, frozenset({f"def:{qualname}"}))
            return
        if isinstance(node, ast.ClassDef):
            self._class(node)
            return
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and self._bound_by_the_model(call):
            values = [self._value(argument) for argument in call.args]
            named = str(ast.literal_eval(call.args[1]))  # a string constant: the model's own
            self._imported_changed(values[0], named, node.lineno)
            self._class_changed(call.args[0], values[0], named, node.lineno)
            self._code_swapped(values[0], named, node.lineno)
        elif isinstance(node, ast.Assign):
            refs = self._value(node.value)
            for target in node.targets:
                self._bind(target, refs)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            refs = self._value(node.value) if node.value is not None else frozenset()
            if isinstance(node, ast.AnnAssign):
                self._value(node.annotation)
            self._bind(node.target, refs)
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
                for sub in ast.iter_child_nodes(target):
                    if isinstance(sub, ast.expr):
                        owner = self._value(sub)
                        if isinstance(target, ast.Attribute) and sub is target.value:
                            self._imported_changed(owner, target.attr, node.lineno)
                            self._class_changed(sub, owner, target.attr, node.lineno)
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

    def _signature(self, args: ast.arguments, returns: ast.expr | None) -> None:
        """Defaults and annotations run when the `def` does."""
        for expression in [*args.defaults, *args.kw_defaults, returns]:
            if expression is not None:
                self._value(expression)
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None and arg.annotation is not None:
                self._value(arg.annotation)

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
            if any(r.startswith(("def:", "class:", "danger:")) for r in refs):
                self._runs(frozenset({key}))  # code of the file may call what it decorates
            self._hands(refs, frozenset({key}))

    def _hands(self, callee: _Refs, handed: _Refs) -> None:
        """A function from another module of the checkout gets functions or classes of this
        one: if it calls what it is handed, they run (guard.tree.worktree reads it)."""
        keys = [
            f"new:{r.partition(':')[2]}" if r.startswith(("class:", "instance:")) else r
            for r in handed
            if r.startswith(("def:", "class:", "instance:", "new:"))
        ]
        for ref in callee:
            kind, _, rest = ref.partition(":")
            if kind in ("import", "import-result") and keys:
                need = "hands" if kind == "import" else "hands-result"
                self.needs |= {(need, f"{rest}\t{key}") for key in keys}

    def _bound_by_the_model(self, node: ast.expr) -> bool:
        """`setattr(C, 'name', ...)` or `delattr(C, 'name')` as a statement: the binding model
        (guard.truth.model_statements) reads it as the binding it is."""
        return (
            isinstance(node, ast.Call)
            and self._origin(node.func) in ("builtins.setattr", "builtins.delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        )

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
        kept = set().union(  # `p = property(f)`: an instance may run what the class keeps
            *(
                self.values.get(n, set())
                for s in own_statements(node.body)
                if isinstance(s, ast.Assign | ast.AnnAssign | ast.AugAssign)
                for n in _bound_names(s)
            )
        )
        self.graph[f"new:{qualname}"].calls |= {
            f"new:{r[6:]}" if r.startswith(("class:", "instance:")) else r
            for r in kept
            if r.startswith(("def:", "class:", "instance:", "result:", "uses:"))
        }
        self._decorated(node.decorator_list, f"new:{qualname}")
        self._flow(node.name, frozenset({f"class:{qualname}"}))

    def _derived(self, refs: _Refs, key: str, need: str) -> _Refs:
        """A class statement derives from (or is made by) what `refs` hold: a class of the file
        runs its `key` node, one from elsewhere is a `need`; the rest is returned."""
        self.calls |= {f"{key}:{ref[6:]}" for ref in refs if ref.startswith("class:")}
        self.needs |= {(need, ref[7:]) for ref in refs if ref.startswith("import:")}
        return frozenset(ref for ref in refs if not ref.startswith(("class:", "import:")))

    def _runs(self, refs: _Refs, quiet: bool = False) -> None:
        """Something may call these (or, for a class, make and use an instance); `quiet`:
        with arguments that hold nothing of the checkout."""
        for ref in refs:
            kind, _, rest = ref.partition(":")
            if kind == "def":
                (self.quiet_calls if quiet else self.calls).add(f"def:{rest}")
            elif kind in ("class", "instance"):
                self.calls.add(f"new:{rest}")
            elif kind in ("result", "uses"):
                self.calls.add(ref)
            elif kind == "import-result":
                self.needs.add(("result", rest))
            elif kind == "import":
                builtin = rest.removeprefix("builtins.")
                if rest.startswith("builtins.") and builtin in MUTATING_BUILTINS:
                    self._mutates(f"{builtin} reached through the builtins module")
                self.needs.add((QUIET if quiet else "call", rest))
            elif kind == "danger":
                self._mutates(f"{rest} handed to code that may call it, or called indirectly")

    def _value(self, node: ast.expr) -> _Refs:
        """The refs an expression's value may hold; what evaluating it runs is recorded."""
        if isinstance(node, ast.Constant):
            return frozenset()
        if isinstance(node, ast.Name):
            refs = set(self.values.get(node.id, ()))
            refs |= {f"def:{q}" for q in self.functions.get(node.id, ()) if "." not in q}
            refs |= {f"class:{q}" for q in self.classes.get(node.id, ()) if "." not in q}
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
            self._signature(node.args, None)
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
            if isinstance(child, ast.expr):
                found |= self._value(child)
            elif isinstance(child, ast.keyword | ast.comprehension):
                for sub in ast.iter_child_nodes(child):
                    if isinstance(sub, ast.expr):
                        found |= self._value(sub)
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
                members |= {f"def:{q}" for q in self._inherited(rest, attr)}
                found |= members or {ref}  # from object or a base elsewhere: the class's code
            elif kind == "import":
                found.add(f"import:{rest}.{attr}")
            else:
                found.add(ref)
        return frozenset(found)

    def _inherited(self, qualname: str, attr: str) -> list[str]:
        """Methods of that name of the file's other classes (a base may provide it)."""
        return [
            q for q in self.functions.get(attr, ()) if "." in q and q.rsplit(".", 1)[0] != qualname
        ]

    def _call(self, node: ast.Call) -> _Refs:
        callee = self._value(node.func)
        arguments: set[str] = set()
        for argument in [*node.args, *(k.value for k in node.keywords)]:
            arguments |= self._value(argument)
        self._runs(callee, quiet=not arguments)
        name = node.func.id if isinstance(node.func, ast.Name) else None
        builtin = name not in self.values and not callee  # not a name the file binds
        if name == "getattr" and builtin and len(node.args) >= 2:
            key = node.args[1]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return self._attribute(self._value(node.args[0]), key.value)
            self._mutates(f"getattr with a computed name at line {node.lineno}")
            return frozenset()
        if self._origin(node.func) in _CALLING or any(
            r.startswith(("def:", "class:", "danger:")) for r in callee
        ):
            self._runs(frozenset(arguments))  # what it is handed, it calls (or may: the file's)
        self._hands(callee, frozenset(arguments))
        if isinstance(node.func, ast.Attribute):  # `HOOKS.append(f)`: the receiver keeps it
            self._store_in(node.func.value, frozenset(arguments))
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
    the functions it defines and returns."""
    named = {("class:" + k[4:]) if k.startswith("new:") else k for k in node.calls | node.returns}
    return {k for k in named if k.startswith(("def:", "class:", "result:", "uses:"))}
