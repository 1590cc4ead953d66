"""The graph of a file's functions and classes (guard.truth.effects): what running a function's
body may change itself and what else of the checkout it runs; what making, deriving from or
using a class as a metaclass runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import replace

from guard.truth.effects import ANY, MUTATING_BUILTINS, QUIET, _LazyGraph, _Node
from guard.truth.model_statements import _KEEPING_METACLASSES
from guard.truth.statements import imported, last_name, own_statements

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


class _FunctionGraph:
    """The file's functions and classes as nodes of the effect graph; a function's body is
    walked (`_build`) only when its node is first asked for."""

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
        file's own functions are. Called only with the function's own parameters, it runs
        with arguments that hold nothing of the checkout (QUIET) unless its caller was handed
        something."""
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
        """Does a callee, in a function body, keep what it is handed rather than call it?
        Code outside the checkout (a method of an object, a builtin) does, except the
        builtins and library functions that call it at once (sorted, map...); the file's own
        functions and classes and imported names may call it."""
        if isinstance(func, ast.Name):
            if func.id in self.top or func.id in self.all_imports:
                return False
            return f"builtins.{func.id}" not in _CALLING
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


def resumed(graph: _LazyGraph, source: bytes, path: str) -> Callable[[str], None]:
    """What builds the pending nodes of `graph`, the file's functions collected again from its
    source, each built into `graph` when asked (the syntax tree is not kept meanwhile: a
    command holding every file's would spend its time in the cyclic collector)."""
    tree = ast.parse(source, filename=path)
    again = _FunctionGraph(tree)  # its class nodes are not kept: `graph` has them
    again._collect(tree.body, "", None)
    again.graph = graph
    return again._build


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
    """The nodes a function body runs itself: a nested def's decorators, defaults and
    annotations, not its body."""
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
    """The name an attribute's change reaches (ANY for one that changes lookup, or a private
    name that mangling hides from reading)."""
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
    elif (
        isinstance(node, ast.Attribute) and node.attr == "modules" and _dotted(node.value) == "sys"
    ):
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
