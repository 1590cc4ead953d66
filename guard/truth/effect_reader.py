"""A file's effect summary (guard.truth.effects): the graph of its functions and classes, and its
import-time code (body, class bodies, decorators, defaults, annotations, bases) read over it with
the values its names may hold: flow-insensitive, to a fixpoint, since a name's value may come
from a statement below.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import replace

from guard.truth.effects import ANY, QUIET, Effects, _as_key, _closure, _LazyGraph, _Node, running
from guard.truth.model_names import _KEEPING_DECORATORS, _is_stdlib
from guard.truth.model_statements import _CODE_ATTRIBUTES, _KEEPING_METACLASSES
from guard.truth.statements import blocks, imported, last_name, own_statements

# Builtins that rebind or reach bindings when they run (by name, or handed to other code).
MUTATING_BUILTINS = frozenset(
    {"setattr", "delattr", "exec", "eval", "globals", "vars", "locals", "__import__"}
)
# Attributes that reach a namespace or rebind through it.
_REFLECTIVE_ATTRIBUTES = frozenset(
    {
        "__dict__",
        "__setattr__",
        "__delattr__",
        "__globals__",
        "__builtins__",
        "f_globals",
        "f_locals",
        "f_back",
        "_getframe",
        "currentframe",
        "get_referrers",
        *MUTATING_BUILTINS,
    }
)
# Callables from outside the checkout that call what they are handed at once.
_CALLING = frozenset(
    {
        *(f"builtins.{n}" for n in ("sorted", "min", "max", "map", "filter", "iter")),
        "functools.reduce",
        *(f"itertools.{n}" for n in ("starmap", "filterfalse", "takewhile", "dropwhile")),
        *(f"itertools.{n}" for n in ("groupby", "accumulate")),
        *(f"heapq.{n}" for n in ("nlargest", "nsmallest", "merge")),
        *(f"bisect.{n}" for n in ("bisect", "bisect_left", "bisect_right", "insort")),
        "timeit.timeit",
        "timeit.repeat",
        "weakref.finalize",  # at once when what it watches is already gone
        "sys.settrace",
        "sys.setprofile",
        "threading.settrace",
    }
)
# Library callables that keep what they are handed (wrap, register, cache), never call it.
_KEEPING_CALLS = frozenset(
    {
        *(f"functools.{n}" for n in ("wraps", "update_wrapper", "partial", "partialmethod")),
        *(f"functools.{n}" for n in ("lru_cache", "cache", "cached_property", "singledispatch")),
        "contextlib.contextmanager",
        "atexit.register",
        "weakref.ref",
        "typing.cast",
    }
)
# Builtins that reach an object's class from the object itself.
_CLASS_REACHING = frozenset({"type", "super", "vars", "globals", "locals", "getattr"})
_IMPLICIT_CLASS_METHODS = frozenset({"__new__", "__init_subclass__", "__class_getitem__"})


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


class _Reader:
    """The file's functions and classes as nodes of the effect graph, a function's body walked
    (`_build`) only when its node is first asked for; and its import-time code over them."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.graph = _LazyGraph(self._build)
        self.functions: dict[str, list[str]] = {}  # a name: the qualnames of functions so named
        self.classes: dict[str, list[str]] = {}  # a name: the qualnames of classes so named
        self.members: dict[str, dict[str, list[str]]] = {}  # class qualname: name -> refs
        self.all_imports: dict[str, set[str]] = {}  # any scope, any time
        self.stars: list[str] = []
        self.qualnames: dict[int, str] = {}  # each def and class statement collected, by id
        # functions collected whose nodes are not built yet: (def, in a class, plain method)
        self._pending: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool, bool]] = {}
        self.top = {
            name
            for node in own_statements(tree.body)
            if not isinstance(node, ast.Import | ast.ImportFrom)
            for name in _bound_names(node)
        }
        self.imports = {  # the module-level names its top-level imports bind
            name: origin
            for statement in tree.body
            if isinstance(statement, ast.Import | ast.ImportFrom)
            for name, origin in imported(statement)
        }
        self.values: dict[str, set[str]] = {}  # flow-insensitive values of names at import
        self.node = _Node()  # what the import runs (`passes`: with nothing of the checkout)
        self.changed = False
        self._collect(tree.body, "", None)

    def effects(self) -> Effects:
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

    def _collect(self, body: list[ast.stmt], prefix: str, owner: ast.ClassDef | None) -> None:
        """Every def and class reachable through class bodies and compound statements."""
        for node in own_statements(body):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualname = self.qualnames[id(node)] = prefix + node.name
                if owner is not None:
                    kind = "class" if isinstance(node, ast.ClassDef) else "def"
                    by_name = self.members.setdefault(prefix[:-1], {})
                    by_name.setdefault(node.name, []).append(f"{kind}:{qualname}")
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions.setdefault(node.name, []).append(qualname)
                plain = owner is not None and self._plain_method(node)
                # the last def of a name is the one its key names
                self._pending[qualname] = (node, owner is not None, plain)
                self.graph.pending.add(qualname)
                if owner is not None and not plain:  # a plain method runs on an instance only,
                    # and making one counted every method of its class (new:K)
                    for name in (node.name, ANY):
                        self.graph.setdefault(f"method:{name}", _Node()).calls.add(
                            f"def:{qualname}"
                        )
            elif isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, []).append(qualname)
                self._collect(node.body, qualname + ".", node)
                self._class_nodes(node, qualname)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for name, origin in imported(node):
                    self.all_imports.setdefault(name, set()).add(origin)
                    if origin.endswith(".*"):
                        self.stars.append(origin[:-2])

    def _build(self, qualname: str) -> None:
        """The nodes of one function collected (`def:`, `bound:`, `result:`), built once all
        the file's names are known: a body may call a function defined below it."""
        node, method, plain = self._pending.pop(qualname)
        strict, on_instance = self._function(node, qualname, method)
        self.graph[f"def:{qualname}"] = strict
        self.graph[f"bound:{qualname}"] = on_instance if plain else _Node(calls={f"def:{qualname}"})
        self.graph[f"result:{qualname}"] = _Node(calls=_results(strict))

    def _plain_method(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Run on an instance (its first parameter): not a static or class method."""
        if node.name in _IMPLICIT_CLASS_METHODS or not (node.args.posonlyargs or node.args.args):
            return False
        return not any(last_name(d) in ("staticmethod", "classmethod") for d in node.decorator_list)

    def _class_nodes(self, node: ast.ClassDef, qualname: str) -> None:
        """new:K (every method, bases' too), hooks:K (what deriving from K runs), meta:K."""
        new, hooks, meta = _Node(), _Node(), _Node()
        for method in own_statements(node.body):
            if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            plain = self._plain_method(method)
            new.calls.add(f"{'bound' if plain else 'def'}:{qualname}.{method.name}")
            meta.calls.add(f"def:{qualname}.{method.name}")
            if method.name == "__init_subclass__":
                hooks.calls.add(f"def:{qualname}.{method.name}")
        for base in [*node.bases, *(k.value for k in node.keywords if k.arg == "metaclass")]:
            is_meta = base not in node.bases
            name = _dotted(base) or ""
            root = name.split(".")[0]
            if name in self.classes:
                for target in self.classes[name]:
                    new.calls.add(f"{'meta' if is_meta else 'new'}:{target}")
                    hooks.calls.add(f"{'meta' if is_meta else 'hooks'}:{target}")
                    meta.calls.add(f"meta:{target}")
            elif root in self.all_imports:
                for origin in self.all_imports[root]:
                    dotted = origin + name[len(root) :]
                    if is_meta and dotted not in _KEEPING_METACLASSES:
                        hooks.changes[ANY] = (
                            f"its metaclass {name} (line {base.lineno}) may drop or replace "
                            "attributes of the classes it makes"
                        )
                    new.needs.add(("call", dotted))
                    hooks.needs.add(("meta" if is_meta else "base", dotted))
                    meta.needs.add(("meta", dotted))
        meta.changes[ANY] = (
            f"{qualname} is a metaclass of the checkout, which may drop or replace attributes "
            "of the classes it makes"
        )
        self.graph[f"new:{qualname}"] = new
        self.graph[f"hooks:{qualname}"] = hooks
        self.graph[f"meta:{qualname}"] = meta

    def _function(
        self,
        node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda,
        qualname: str | None = None,
        method: bool = False,
    ) -> tuple[_Node, _Node]:
        """The direct facts of running a function's body (lambdas and classes in it included),
        with any arguments, and as a plain method on an instance (where `self.x = ...` and
        `self.__dict__[k] = v` change only that instance). A function defined in it is a node
        of its own (`Q.<locals>.name`): what defines and returns a wrapper does not run it."""
        found = _Node()
        args = node.args
        positional = args.posonlyargs + args.args
        this = positional[0].arg if positional else None
        inner: list[ast.AST] = list(node.body) if isinstance(node.body, list) else [node.body]
        own = list(_own_code(inner))
        calls = [sub for sub in own if isinstance(sub, ast.Call)]
        callees = {id(call.func) for call in calls}
        callee_names = {call.func.id for call in calls if isinstance(call.func, ast.Name)}
        held = {id(a) for call in calls if self._holds(call.func) for a in _arguments(call)}
        # callees whose result runs: `g()()`, `r = g(); r()`
        results_run = {id(c.func.func) for c in calls if isinstance(c.func, ast.Call)} | {
            id(sub.value.func)
            for sub in own
            if isinstance(sub, ast.Assign)
            and isinstance(sub.value, ast.Call)
            and any(isinstance(t, ast.Name) and t.id in callee_names for t in sub.targets)
        }
        returned = {
            id(part)
            for sub in own
            if isinstance(sub, ast.Return) and sub.value is not None
            for part in ast.walk(sub.value)
        }
        rebound = {
            s.id for s in own if isinstance(s, ast.Name) and isinstance(s.ctx, ast.Store | ast.Del)
        }
        nested: dict[str, str] = {}
        for sub in own:
            if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef) and qualname:
                key = f"{qualname}.<locals>.{sub.name}"
                self.graph[f"def:{key}"] = self._function(sub, key)[0]
                self.graph[f"result:{key}"] = _Node(calls=_results(self.graph[f"def:{key}"]))
                nested[sub.name] = key
        params = {
            a.arg
            for a in (*positional, *args.kwonlyargs, args.vararg, args.kwarg)
            if a is not None and a.arg not in rebound
        }
        static = not isinstance(node, ast.Lambda) and any(
            last_name(d) == "staticmethod" for d in node.decorator_list
        )
        if method and positional and not static:  # self or cls: bound by Python
            params.discard(positional[0].arg)
        quiet = {id(call.func) for call in calls if self._handed_only(call, params)}
        handed = {id(a) for call in calls for a in _arguments(call)}
        found.runs_arguments = any(
            isinstance(sub, ast.Name)
            and sub.id in params
            and (id(sub) in callees or (id(sub) in handed and id(sub) not in held))
            for sub in own
        )
        read_only = set(_namespace_reads(own))
        on_self: dict[str, str] = {}  # what only a plain method's own instance takes
        where = "in a lambda" if isinstance(node, ast.Lambda) else f"in {node.name}()"
        for sub in own:
            if (
                isinstance(sub, ast.Name)
                and sub.id in ("setattr", "delattr")
                and id(sub) not in callees
            ):
                found.changes.setdefault(ANY, f"hands {sub.id} on (line {sub.lineno}, {where})")
            if (  # a computed getattr may run any method of that name: any method
                isinstance(sub, ast.Call)
                and last_name(sub.func) == "getattr"
                and named_argument(sub) is None
            ):
                if id(sub.func) in results_run or (id(sub) in handed and id(sub) not in held):
                    found.calls.add(f"method:{ANY}")
                continue
            if id(sub) in read_only:
                continue
            for name, why, target in _direct_mutations(sub):
                why = f"{why} (line {getattr(sub, 'lineno', 0)}, {where})"
                root = target.id if isinstance(target, ast.Name) else None
                if root is not None and root == this and method:
                    on_self.setdefault(name, why)
                elif root is not None and root in params:
                    found.scoped.setdefault(name, (why, "param"))
                elif (target is None and isinstance(sub, ast.Global)) or root in self.top:
                    found.scoped.setdefault(name, (why, "global"))
                else:
                    found.changes.setdefault(name, why)
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                if sub.id in nested:
                    keys = {f"def:{nested[sub.id]}"}
                else:
                    keys = self._named(sub.id) | self._imported(sub.id)
            elif isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load):
                keys = self._imported(_dotted(sub) or "")
                if not keys:
                    found.calls.add(f"method:{sub.attr}")
            else:
                continue
            edges = found.passes if id(sub) in quiet else found.calls
            for key in keys:
                if id(sub) in callees:
                    edges.add(key)
                    if id(sub) in results_run:
                        found.calls |= self._results_of(key)
                    elif id(sub) in returned:
                        found.returns |= self._results_of(key)
                elif id(sub) in returned:  # handed back, maybe inside what keeps it
                    found.returns.add(key)
                elif id(sub) not in held:  # stored, aliased, handed to the file's code
                    edges.add(key)
        bound = replace(found, changes=dict(found.changes))
        for name, why in on_self.items():
            found.changes.setdefault(name, why)
        return found, bound

    def _imported(self, dotted: str) -> set[str]:
        """Graph keys for using a name from elsewhere (`uses:call:ORIGIN`), followed as the
        file's own functions are: QUIET when called only with the function's own parameters,
        unless its caller was handed something."""
        root = dotted.split(".")[0]
        return {
            self._import_node(QUIET, origin + dotted[len(root) :])
            for origin in self.all_imports.get(root, ())
        }

    def _results_of(self, key: str) -> set[str]:
        """The key of calling what a function (of the file, or from elsewhere) returns."""
        if key.startswith("def:"):
            return {"result:" + key[4:]}
        if key.startswith("uses:call:"):
            return {self._import_node("result", key[10:])}
        return set()

    def _import_node(self, kind: str, origin: str) -> str:
        key = f"uses:{'call' if kind == QUIET else kind}:{origin}"
        self.graph.setdefault(key, _Node(needs={(kind, origin)}))
        return key

    def _holds(self, func: ast.expr) -> bool:
        """Does a callee in a function body keep what it is handed (the rule: guard.truth.effects)?
        Not the file's own functions and classes, nor imported names: they may call it."""
        if isinstance(func, ast.Name):
            builtin = func.id not in self.top and func.id not in self.all_imports
            return builtin and f"builtins.{func.id}" not in _CALLING
        dotted = _dotted(func) or ""
        root = dotted.split(".")[0]
        if root in self.top:  # `HOOKS.append(f)`: kept where the import may run it
            return False
        if root in self.all_imports:
            return any(o + dotted[len(root) :] in _KEEPING_CALLS for o in self.all_imports[root])
        return isinstance(func, ast.Attribute)

    def _handed_only(self, call: ast.Call, params: set[str]) -> bool:
        """Does the call hand on only the function's own parameters, literals and builtins
        (so what it changes through them matters only when they may hold a class)?"""
        reaching = (self.top, self.all_imports, _CLASS_REACHING)
        for argument in _arguments(call):
            for sub in ast.walk(argument):
                if isinstance(sub, ast.Lambda | ast.NamedExpr):
                    return False
                if (
                    isinstance(sub, ast.Name)
                    and sub.id not in params
                    and any(sub.id in names for names in reaching)
                ):
                    return False
                if isinstance(sub, ast.Attribute) and sub.attr in _LOOKUP_ATTRIBUTES:
                    return False
        return True

    def _named(self, name: str, cls: str = "new") -> set[str]:
        """The file's top-level functions and classes (`cls:K`) of that name."""
        keys = {f"def:{q}" for q in self.functions.get(name, ()) if "." not in q}
        keys |= {f"{cls}:{q}" for q in self.classes.get(name, ()) if "." not in q}
        return keys

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
        elif isinstance(target, ast.Attribute):
            self._changed_on(target.value, self._value(target.value), target.attr, lineno)
        elif isinstance(target, ast.Subscript):
            self._value(target.value)
            self._value(target.slice)

    def _changed_on(self, node: ast.expr, owner: _Refs, attribute: str, lineno: int) -> None:
        """An attribute set or deleted at import on `node`, which may hold `owner`: something an
        import gave may be this very module or one of its classes (`from . import mod as me;
        me.C = None`), and the binding model (guard.truth.model_statements) reads only a
        class's own name, not `EntryClass[0].m = None`; a function's _CODE_ATTRIBUTES too."""
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
        """A decorator runs, and is handed what it decorates (what that may run: _hands)."""
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
        """Something may call these (or, for a class, make and use an instance); `quiet`: QUIET."""
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


def resumed(graph: _LazyGraph, source: bytes, path: str, qualname: str) -> None:
    """Build the nodes of `qualname` into `graph`, the file's functions collected again from its
    source, which then builds the rest (the syntax tree is not kept before: a command holding
    every file's would spend its time in the cyclic collector)."""
    tree = ast.parse(source, filename=path)
    again = _Reader(tree)  # its class nodes are not kept: `graph` has them
    again.graph = graph
    graph.build = again._build
    again._build(qualname)


def _arguments(call: ast.Call) -> Iterator[ast.expr]:
    for argument in [*call.args, *(k.value for k in call.keywords)]:
        yield argument.value if isinstance(argument, ast.Starred) else argument


def _results(node: _Node) -> set[str]:
    """Graph keys that calling what a function returns may run."""
    return node.returns | {"result:" + k[4:] for k in node.returns if k.startswith("def:")}


def signature(args: ast.arguments, returns: ast.expr | None) -> list[ast.expr]:
    """What a `def` runs besides its decorators: its defaults and annotations."""
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    found = [*args.defaults, *args.kw_defaults, returns, *(a.annotation for a in every if a)]
    return [part for part in found if part is not None]


def _own_code(nodes: list[ast.AST]) -> Iterator[ast.AST]:
    """A body's own nodes: of a nested def, its decorators, defaults and annotations only."""
    stack = list(nodes)
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef):
            stack += [*current.decorator_list, *signature(current.args, current.returns)]
            continue
        stack.extend(ast.iter_child_nodes(current))


# Attributes whose change reaches other names' lookups (the class, its bases, its namespace).
_LOOKUP_ATTRIBUTES = frozenset(
    {"__class__", "__bases__", "__dict__", "__mro__", "__getattr__", "__getattribute__"}
)


def _changed(attribute: str) -> str:
    """The name an attribute's change reaches (ANY: it changes lookup, or mangling hides it)."""
    private = attribute.startswith("__") and not attribute.endswith("__")
    return ANY if private or attribute in _LOOKUP_ATTRIBUTES else attribute


def _direct_mutations(node: ast.AST) -> Iterator[tuple[str, str, ast.expr | None]]:
    """What in a function body changes a class or the module itself (before what it calls):
    (the name it may change, or ANY; why; the object changed, when it is one)."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
        verb = "deletes" if isinstance(node.ctx, ast.Del) else "sets"
        yield _changed(node.attr), f"{verb} the attribute {node.attr}", node.value
    elif isinstance(node, ast.Global):
        for name in node.names:
            yield name, f"rebinds the module global {name}", None
    elif isinstance(node, ast.Call) and last_name(node.func) in ("setattr", "delattr"):
        verb = last_name(node.func)
        target = node.args[0] if node.args else None
        key = named_argument(node)
        if key is not None:
            yield _changed(key), f"{verb}s {key}", target
        else:
            yield ANY, f"{verb}s a computed name", target
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        if node.id in MUTATING_BUILTINS - {"setattr", "delattr"} or node.id == "__builtins__":
            yield ANY, f"uses {node.id}", None
    elif isinstance(node, ast.Attribute) and node.attr in _REFLECTIVE_ATTRIBUTES:
        yield ANY, f"uses .{node.attr}", node.value
    elif isinstance(node, ast.Attribute) and _dotted(node) == "sys.modules":
        yield ANY, "uses sys.modules", None
    elif isinstance(node, ast.Import | ast.ImportFrom) and any(
        origin.split(".")[0] == "builtins" for _, origin in imported(node)
    ):
        yield ANY, "imports builtins", None


def named_argument(call: ast.Call) -> str | None:
    """The attribute name a `getattr`/`setattr`/`delattr` call spells out (None: computed)."""
    key = call.args[1] if len(call.args) >= 2 else None
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


_READING_METHODS = frozenset({"get", "items", "keys", "values", "copy", "__contains__"})


def _namespace_reads(nodes: list[ast.AST]) -> Iterator[int]:
    """Ids of `x.__dict__` nodes only read (`x.__dict__[k]`, `.get(k)`, `k in x.__dict__`)."""
    for node in nodes:
        candidates: list[ast.expr] = []
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            candidates = [node.value]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _READING_METHODS:
                candidates = [node.func.value]
        elif isinstance(node, ast.Compare):
            candidates = list(node.comparators)
        for candidate in candidates:
            if isinstance(candidate, ast.Attribute) and candidate.attr == "__dict__":
                yield id(candidate)


def _bound_names(node: ast.stmt) -> Iterator[str]:
    """The names a module-level statement binds."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node.name
    elif isinstance(node, ast.Import | ast.ImportFrom):
        yield from (name for name, origin in imported(node) if not origin.endswith(".*"))
    else:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.For | ast.AsyncFor):
            targets = [node.target]
        elif isinstance(node, ast.With | ast.AsyncWith):
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    yield sub.id
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                for sub in ast.walk(child):
                    if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                        yield sub.target.id


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _returned(node: _Node) -> set[str]:
    """What calling the function may hand back: what it names of the file, and what it returns."""
    calls = {k for k in node.calls if not k.startswith("uses:")}  # names from elsewhere, called
    named = {("class:" + k[4:]) if k.startswith("new:") else k for k in calls | node.returns}
    return {k for k in named if k.startswith(("def:", "class:", "result:", "uses:"))}
