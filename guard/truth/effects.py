"""What a module's code may do to classes and module globals when it runs: an effect summary
per function and class, so that reading never says "present" over code that takes a method
away indirectly (issue 27). One rule, not a list of patterns:

- A function may change a name when its body (lambdas and classes in it included) sets or
  deletes an attribute of that name, rebinds that global, or reaches any name by reflection
  (`setattr`/`delattr` with a computed name, `exec`, `globals`, `vars`, `__dict__`,
  `sys.modules`, frames, the builtins module), or when a function or class of the checkout it
  runs may. A change of an attribute of a parameter counts only where the function may be
  handed something of the checkout; a change of the module's own globals only in the guarded
  module; a plain method's `self.x = ...` changes only its instance.
- Making an instance of a class of the checkout runs, as far as reading knows, every method of
  the class (then `K()`, `with k`, `if k`, `k + 1`, `f'{k}'`, a property may run any of them);
  deriving from a class runs its `__init_subclass__` and its metaclass (a metaclass of the
  checkout may drop anything).
- The import-time code of the module (its body, class bodies, decorators, defaults,
  annotations, bases) is read with the values its names may hold: what it calls, indexes,
  iterates, tests or operates on runs what the value may be or hold, in this module or, through
  its imports (`needs`, resolved by guard.tree.assess), in another module of the checkout.
- Code outside the checkout changes a class only through what it is handed, and keeps (wraps,
  registers) a function it is handed rather than calling it, except the builtins and library
  functions that call it at once (`sorted`, `map`, `functools.reduce`...); a function of the
  checkout is read for whether it calls what it is handed.

Each file gets one `Effects` (pickled with its parse, guard.truth.parsed): the closure of its own
import-time code, and the graph of its functions and classes that another module's check
follows. Building it is one walk of each function; a closure is one walk of the graph.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from guard.truth.statements import own_statements

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
# Builtins that never call what they are given, nor change bindings: their arguments are only
# read (the dunders of an instance they may run were counted when the instance was made).
_READING_BUILTINS = frozenset(
    {
        "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr",
        "complex", "dict", "dir", "divmod", "enumerate", "float", "format", "frozenset",
        "hasattr", "hash", "hex", "id", "int", "isinstance", "issubclass", "iter", "len",
        "list", "next", "object", "oct", "ord", "pow", "print", "range", "repr", "reversed",
        "round", "set", "slice", "str", "sum", "tuple", "type", "zip", "open", "super",
        "property", "staticmethod", "classmethod", "getattr",
    }
)  # fmt: skip
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
# Expressions that use their operands' values (and so may run what those hold).
_TOUCHING = (
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.BoolOp,
    ast.FormattedValue,
    ast.Await,
)
_IMPLICIT_CLASS_METHODS = frozenset({"__new__", "__init_subclass__", "__class_getitem__"})


ANY = "*"  # a change that may reach any name


@dataclass(frozen=True)
class Reach:
    """What running something may do: the names it may rebind or delete (a module global or an
    attribute of that name; ANY: any name), each with why; the names imported from elsewhere it
    reaches (kind, dotted origin); and the method names it calls on objects of unknown class
    (a module that defines such methods checks them)."""

    changes: dict[str, str] = field(default_factory=dict)
    needs: frozenset[tuple[str, str]] = frozenset()
    attributes: frozenset[str] = frozenset()
    runs_arguments: bool = False  # what it is handed may run (see _Node)

    def touching(self, parts: Iterable[str]) -> str | None:
        """Why a change may reach one of these names (a qualified name's parts), or None."""
        for name in (ANY, *parts):
            if name in self.changes:
                return self.changes[name]
        return None


@dataclass
class _Node:
    """One function (or class creation, or instantiation) of the file, before the closure."""

    changes: dict[str, str] = field(default_factory=dict)
    # changes of an attribute of a parameter ("param": they matter when it may be handed a
    # class), or of the module's own globals ("global": they matter in the guarded module)
    scoped: dict[str, tuple[str, str]] = field(default_factory=dict)
    needs: set[tuple[str, str]] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)  # keys of the graph, run with any arguments
    passes: set[str] = field(default_factory=set)  # keys run with its own parameters only
    returns: set[str] = field(default_factory=set)  # functions defined in it that it returns
    runs_arguments: bool = False  # it may call what it is handed (a decorator that runs it)


@dataclass
class Effects:
    """A file's effect summary: `at_import` for its own import; `graph` for other modules.

    Keys: `def:Q` (the function or method at qualname Q, run with any arguments), `bound:Q`
    (a plain method run on an instance), `new:K` (making and using an instance of class K),
    `hooks:K` (creating a class derived from K), `meta:K` (K used as a metaclass),
    `method:NAME` (any method of that name in the file)."""

    at_import: Reach
    graph: dict[str, _Node]
    imports: dict[str, str]  # a module-level name bound by an import: its dotted origin
    stars: tuple[str, ...]  # modules of `from M import *`
    values: dict[str, frozenset[str]]  # what a module-level name may hold after the import

    def value(self, name: str) -> Reach | None:
        """What using a module-level value of the file may run (None: the file does not bind
        the name). A name its own import may rebind indirectly may hold anything."""
        if name not in self.values:
            return None
        why = self.at_import.touching([name])
        if why is not None:
            return Reach({ANY: f"may be rebound by its module's import ({why})"})
        keys, needs = [], set()
        for ref in self.values[name]:
            kind, _, rest = ref.partition(":")
            if kind in ("def", "result", "uses"):
                keys.append(ref)
            elif kind in ("class", "instance"):
                keys.append(f"new:{rest}")
            elif kind == "import":
                needs.add(("call", rest))
            elif kind == "import-result":
                needs.add(("result", rest))
            elif kind == "danger":
                return Reach({ANY: f"holds {rest}"})
        found = _closure(self.graph, keys, home=False)
        return Reach(found.changes, found.needs | needs, found.attributes)

    def reach(self, key: str, quiet: bool = False, home: bool = False) -> Reach | None:
        """The closure of one node (None: the file has no such node); `quiet`: run with
        arguments that hold nothing of the checkout; `home`: for the guarded module itself
        (its own globals count)."""
        if key not in self.graph:
            return None
        return _closure(self.graph, [] if quiet else [key], [key] if quiet else [], home=home)

    def export(self, kind: str, name: str) -> Reach | None:
        """What another module reaches by importing `name` from here and using it as `kind`
        ("call": called or handed on; "call-quiet": called with arguments that hold nothing
        of the checkout; "result": what calling it returns, called; "base": a base class;
        "meta": a metaclass)."""
        if kind == QUIET:
            for prefix in ("def:", "new:"):
                found = self.reach(prefix + name, quiet=prefix == "def:")
                if found is not None:
                    return found
            return None
        prefixes = {
            "call": ("def:", "new:"),
            "result": ("result:",),
            "base": ("hooks:",),
            "meta": ("meta:",),
        }[kind]
        for prefix in prefixes:
            found = self.reach(prefix + name)
            if found is not None:
                entry = self.graph[prefix + name]
                runs = entry.runs_arguments or prefix == "new:"
                runs |= prefix == "result:" and any(
                    self.graph[k].runs_arguments for k in entry.calls if k in self.graph
                )
                return replace(found, runs_arguments=runs)
        return None


QUIET = "call-quiet"  # a need: called with arguments that hold nothing of the checkout


def _closure(
    graph: dict[str, _Node], hot: Iterable[str], quiet: Iterable[str] = (), *, home: bool
) -> Reach:
    """Everything reachable from the `hot` keys (run with any arguments) and the `quiet` ones
    (with arguments that hold nothing of the checkout); `home`: the graph is the guarded
    module's (its own globals count)."""
    changes: dict[str, str] = {}
    needs: set[tuple[str, str]] = set()
    attributes: set[str] = set()
    stack = [(k, True) for k in hot] + [(k, False) for k in quiet]
    seen: set[tuple[str, bool]] = set()
    while stack:
        key, handed = stack.pop()
        if (key, handed) in seen or key not in graph:
            continue
        seen.add((key, handed))
        node = graph[key]
        for name, why in node.changes.items():
            changes.setdefault(name, why)
        for name, (why, scope) in node.scoped.items():
            if handed or (scope == "global" and home):
                changes.setdefault(name, why)
        for kind, origin in node.needs:
            needs.add(("call" if kind == QUIET and handed else kind, origin))
        attributes |= node.attributes
        stack += [(k, True) for k in node.calls] + [(k, handed) for k in node.passes]
    return Reach(changes, frozenset(needs), frozenset(attributes))


def summarize(tree: ast.Module, keeping: frozenset[str], metaclasses: frozenset[str]) -> Effects:
    """The file's Effects; `keeping`: decorators (by origin) that neither call nor replace
    what they decorate, `metaclasses`: those that keep a class body's attributes (guard.truth.symbols'
    lists)."""
    return _Reader(tree, keeping, metaclasses).effects()


# A value at import time: the things of the file (and imports) it may be or hold.
_Refs = frozenset[str]  # "def:Q", "class:Q", "import:ORIGIN", "danger:NAME"


class _Reader:
    """Builds a file's Effects: the graph of its functions and classes (`_collect`), then the
    import-time code read with the values its names may hold (`_run`, to a fixpoint)."""

    def __init__(
        self, tree: ast.Module, keeping: frozenset[str], metaclasses: frozenset[str]
    ) -> None:
        self.tree = tree
        self.keeping = keeping
        self.metaclasses = metaclasses
        self.graph: dict[str, _Node] = {}
        self.functions: dict[str, list[str]] = {}  # a name: the qualnames of functions so named
        self.classes: dict[str, list[str]] = {}  # a name: the qualnames of classes so named
        self.members: dict[str, dict[str, list[str]]] = {}  # class qualname: name -> refs
        self.imports: dict[str, str] = {}
        self.all_imports: dict[str, set[str]] = {}  # any scope, any time
        self.stars: list[str] = []
        self.values: dict[str, set[str]] = {}  # flow-insensitive values of names at import
        self.changes: dict[str, str] = {}
        self.needs: set[tuple[str, str]] = set()
        self.attributes: set[str] = set()
        self.calls: set[str] = set()
        self.quiet_calls: set[str] = set()  # run with arguments holding nothing of the file
        self.changed = False
        self.top = {
            name
            for node in own_statements(tree.body)
            if not isinstance(node, ast.Import | ast.ImportFrom)
            for name in _bound_names(node)
        }

    # -- the file's functions and classes -------------------------------------------------

    def effects(self) -> Effects:
        self._collect(self.tree.body, "", None)
        for statement in self.tree.body:
            if isinstance(statement, ast.Import | ast.ImportFrom):
                for name, origin in _imported(statement):
                    self.imports[name] = origin
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

    def _collect(self, body: list[ast.stmt], prefix: str, owner: ast.ClassDef | None) -> None:
        """Every def and class reachable through class bodies and compound statements."""
        for node in own_statements(body):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                qualname = prefix + node.name
                self.functions.setdefault(node.name, []).append(qualname)
                plain = owner is not None and self._plain_method(node)
                strict, on_instance = self._function(node, qualname, owner is not None)
                self.graph[f"def:{qualname}"] = strict
                self.graph[f"bound:{qualname}"] = (
                    on_instance if plain else _Node(calls={f"def:{qualname}"})
                )
                self.graph[f"result:{qualname}"] = _Node(
                    calls=_results(self.graph[f"def:{qualname}"])
                )
                if owner is not None and not plain:  # a plain method runs on an instance only,
                    # and making one counted every method of its class (new:K)
                    for name in (node.name, ANY):
                        self.graph.setdefault(f"method:{name}", _Node()).calls.add(
                            f"def:{qualname}"
                        )
                if owner is not None:
                    self.members.setdefault(prefix[:-1], {}).setdefault(node.name, []).append(
                        f"def:{qualname}"
                    )
            elif isinstance(node, ast.ClassDef):
                qualname = prefix + node.name
                self.classes.setdefault(node.name, []).append(qualname)
                if owner is not None:
                    self.members.setdefault(prefix[:-1], {}).setdefault(node.name, []).append(
                        f"class:{qualname}"
                    )
                self._collect(node.body, qualname + ".", node)
                self._class_nodes(node, qualname)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for name, origin in _imported(node):
                    self.all_imports.setdefault(name, set()).add(origin)
                    if origin.endswith(".*"):
                        self.stars.append(origin[:-2])

    def _plain_method(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Run on an instance (its first parameter): not a static or class method."""
        if node.name in _IMPLICIT_CLASS_METHODS or not (node.args.posonlyargs or node.args.args):
            return False
        return not any(
            _last_name(d) in ("staticmethod", "classmethod") for d in node.decorator_list
        )

    def _class_nodes(self, node: ast.ClassDef, qualname: str) -> None:
        """new:K (every method, bases' too), hooks:K (what deriving from K runs), meta:K."""
        methods = [
            n
            for n in own_statements(node.body)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        new, hooks, meta = _Node(), _Node(), _Node()
        for method in methods:
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
                    if is_meta and dotted not in self.metaclasses:
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
        rebound: set[str] = set()
        callee_names: set[str] = set()
        callees: set[int] = set()
        held: set[int] = set()
        results_run: set[int] = set()
        values_run: set[int] = set()  # calls whose value is called, or handed to a callee
        handed: set[int] = set()
        returned: set[int] = set()
        calls: list[ast.Call] = []
        nested: dict[str, str] = {}
        for sub in own:
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store | ast.Del):
                rebound.add(sub.id)
            elif isinstance(sub, ast.Call):
                calls.append(sub)
                callees.add(id(sub.func))
                if isinstance(sub.func, ast.Name):
                    callee_names.add(sub.func.id)
                elif isinstance(sub.func, ast.Call):  # `g()()`: what g returns runs
                    results_run.add(id(sub.func.func))
                    values_run.add(id(sub.func))
                handed.update(id(a) for a in _arguments(sub))
                if self._holds(sub.func):
                    held.update(id(a) for a in _arguments(sub))
            elif isinstance(sub, ast.Return) and sub.value is not None:
                returned.update(id(part) for part in _walk([sub.value]))
            elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef) and qualname:
                key = f"{qualname}.<locals>.{sub.name}"
                self.graph[f"def:{key}"] = self._function(sub, key)[0]
                self.graph[f"result:{key}"] = _Node(calls=_results(self.graph[f"def:{key}"]))
                nested[sub.name] = key
        for sub in own:  # `r = g(); r()`: what g returns runs
            if (
                isinstance(sub, ast.Assign)
                and isinstance(sub.value, ast.Call)
                and any(isinstance(t, ast.Name) and t.id in callee_names for t in sub.targets)
            ):
                results_run.add(id(sub.value.func))
                values_run.add(id(sub.value))
        params = {
            a.arg
            for a in (*positional, *args.kwonlyargs, args.vararg, args.kwarg)
            if a is not None and a.arg not in rebound
        }
        if method and positional and not _static(node):  # self or cls: bound by Python
            params.discard(positional[0].arg)
        quiet = {id(call.func) for call in calls if self._handed_only(call, params)}
        uses = (callees, results_run, returned, held)
        handed = {id(a) for call in calls for a in _arguments(call)}
        found.runs_arguments = any(
            isinstance(sub, ast.Name)
            and sub.id in params
            and (id(sub) in callees or (id(sub) in handed and id(sub) not in held))
            for sub in own
        )
        read_only = set(_namespace_reads(own))
        on_self: dict[str, str] = {}  # what only a plain method's own instance takes
        where = f"in {_label(node)}"
        for sub in own:
            if (
                isinstance(sub, ast.Name)
                and sub.id in ("setattr", "delattr")
                and id(sub) not in callees
            ):
                found.changes.setdefault(ANY, f"hands {sub.id} on (line {sub.lineno}, {where})")
            if _computed_getattr(sub):  # it may run any method of that name: any method
                if id(sub) in values_run or (id(sub) in handed and id(sub) not in held):
                    found.attributes.add(ANY)
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
                edges = found.passes if id(sub) in quiet else found.calls
                keys = {f"def:{nested[sub.id]}"} if sub.id in nested else self._named(sub.id)
                for key in keys:
                    result = key.replace("def:", "result:", 1)
                    if id(sub) in callees:
                        edges.add(key)
                        if key.startswith("def:") and id(sub) in results_run:
                            found.calls.add(result)
                        elif key.startswith("def:") and id(sub) in returned:
                            found.returns.add(result)
                    elif id(sub) in returned:  # handed back, maybe inside what keeps it
                        found.returns.add(key)
                    elif id(sub) not in held:  # stored, aliased, handed to the file's code
                        edges.add(key)
                if sub.id not in nested:
                    self._imported_use(sub, sub.id, found, quiet, uses)
            elif isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load):
                dotted = _dotted(sub)
                root = dotted.split(".")[0] if dotted else ""
                if root in self.all_imports:
                    self._imported_use(sub, dotted or "", found, quiet, uses)
                    continue
                found.attributes.add(sub.attr)
                found.calls.add(f"method:{sub.attr}")
        bound = replace(found, changes=dict(found.changes))
        for name, why in on_self.items():
            found.changes.setdefault(name, why)
        return found, bound

    def _imported_use(
        self,
        node: ast.expr,
        dotted: str,
        found: _Node,
        quiet: set[int],
        uses: tuple[set[int], set[int], set[int], set[int]],
    ) -> None:
        """An imported name used in a function body, as the file's own names are: called
        (quietly, with only its own parameters; what it returns, when the body calls or hands
        that back), handed back, kept by code that does not call it, or else run."""
        callees, results_run, returned, held = uses
        root = dotted.split(".")[0]
        for origin in self.all_imports.get(root, ()):
            full = origin + dotted[len(root) :]
            if id(node) in callees:
                found.needs.add((QUIET if id(node) in quiet else "call", full))
                if id(node) in results_run:
                    found.needs.add(("result", full))
                elif id(node) in returned:
                    found.returns.add(self._import_node(("result", full)))
            elif id(node) in returned:
                found.returns.add(self._import_node(("call", full)))
            elif id(node) not in held:
                found.needs.add(("call", full))

    def _import_node(self, need: tuple[str, str]) -> str:
        """A graph key that stands for using a name from elsewhere (for what a function
        hands back)."""
        key = f"uses:{need[0]}:{need[1]}"
        self.graph.setdefault(key, _Node(needs={need}))
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
        for argument in [*call.args, *(k.value for k in call.keywords)]:
            for sub in ast.walk(argument):
                if isinstance(sub, ast.Lambda | ast.NamedExpr):
                    return False
                if (
                    isinstance(sub, ast.Name)
                    and sub.id not in params
                    and (
                        sub.id in self.top
                        or sub.id in self.all_imports
                        or sub.id in _CLASS_REACHING
                    )
                ):
                    return False
                if isinstance(sub, ast.Attribute) and sub.attr in _LOOKUP_ATTRIBUTES:
                    return False
        return True

    def _named(self, name: str) -> set[str]:
        """Graph keys a name of the file may run: its functions and classes of that name."""
        keys = {f"def:{q}" for q in self.functions.get(name, ()) if "." not in q}
        keys |= {f"new:{q}" for q in self.classes.get(name, ()) if "." not in q}
        return keys

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
            self._value(target.value)
            self._flow("." + target.attr, refs)
        elif isinstance(target, ast.Subscript):
            self._value(target.slice)
            self._bind(target.value, refs | self._value(target.value))

    def _flow(self, name: str, refs: _Refs) -> None:
        known = self.values.setdefault(name, set())
        if not refs <= known:
            known |= refs
            self.changed = True

    def _statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self._signature(node.args, node.returns)
            qualname = self._qualname(node)
            self._decorated(node.decorator_list, f"def:{qualname}")
            self._flow(node.name, frozenset({f"def:{qualname}"}))
            return
        if isinstance(node, ast.ClassDef):
            self._class(node)
            return
        if isinstance(node, ast.Expr) and self._bound_by_the_model(node.value):
            for argument in node.value.args:  # type: ignore[attr-defined]
                self._value(argument)
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
            for name, origin in _imported(node):
                if not origin.endswith(".*"):
                    self._flow(name, frozenset({f"import:{origin}"}))
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                for sub in ast.iter_child_nodes(target):
                    if isinstance(sub, ast.expr):
                        self._value(sub)
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
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(node, name, None)
            if isinstance(inner, list) and not isinstance(node, ast.Match):
                self._run([s for s in inner if isinstance(s, ast.stmt)])
        for handler in getattr(node, "handlers", ()):
            self._run(handler.body)

    def _qualname(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
        return self._qualnames.get(id(node), node.name)

    @property
    def _qualnames(self) -> dict[int, str]:
        if not hasattr(self, "_by_node"):
            self._by_node: dict[int, str] = {}
            stack: list[tuple[list[ast.stmt], str]] = [(self.tree.body, "")]
            while stack:
                body, prefix = stack.pop()
                for node in own_statements(body):
                    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                        self._by_node[id(node)] = prefix + node.name
                        if isinstance(node, ast.ClassDef):
                            stack.append((node.body, prefix + node.name + "."))
        return self._by_node

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
            if self._origin(decorator) in self.keeping or (
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
        one: if it calls what it is handed, they run (guard.tree.assess reads it)."""
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
        """`setattr(C, 'name', ...)` or `delattr(C, 'name')` as a statement: guard.truth.symbols
        reads it as the binding it is."""
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
        qualname = self._qualname(node)
        for base in node.bases:
            for ref in self._value(base):
                if ref.startswith("class:"):
                    self.calls.add(f"hooks:{ref[6:]}")
                elif ref.startswith("import:"):
                    self.needs.add(("base", ref[7:]))
                else:
                    self._runs(frozenset({ref}))
        for keyword in node.keywords:
            refs = self._value(keyword.value)
            if keyword.arg == "metaclass":
                for ref in refs:
                    if ref.startswith("class:"):
                        self.calls.add(f"meta:{ref[6:]}")
                    elif ref.startswith("import:"):
                        self.needs.add(("meta", ref[7:]))
                    else:
                        self._runs(frozenset({ref}))
            else:
                self._runs(refs)
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
            elif node.id == "__builtins__":
                refs.add("import:builtins")
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
        reading = name in _READING_BUILTINS and name not in self.values and not callee
        if name == "getattr" and reading and len(node.args) >= 2:
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


def _static(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> bool:
    return not isinstance(node, ast.Lambda) and any(
        _last_name(d) == "staticmethod" for d in node.decorator_list
    )


def _arguments(call: ast.Call) -> Iterator[ast.expr]:
    for argument in [*call.args, *(k.value for k in call.keywords)]:
        yield argument.value if isinstance(argument, ast.Starred) else argument


def _returned(node: _Node) -> set[str]:
    """What calling a function of the file may hand back: whatever it names of the file, and
    the functions it defines and returns."""
    named = {("class:" + k[4:]) if k.startswith("new:") else k for k in node.calls | node.returns}
    return {k for k in named if k.startswith(("def:", "class:", "result:", "uses:"))}


def _results(node: _Node) -> set[str]:
    """Graph keys that calling what a function returns may run."""
    return node.returns | {"result:" + k[4:] for k in node.returns if k.startswith("def:")}


def _own_code(nodes: list[ast.AST]) -> Iterator[ast.AST]:
    """The nodes a function body runs itself: a nested def's decorators, defaults and
    annotations, not its body."""
    stack = list(nodes)
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef):
            args = current.args
            stack += [*current.decorator_list, *args.defaults]
            stack += [d for d in (*args.kw_defaults, current.returns) if d is not None]
            stack += [
                a.annotation
                for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
                if a is not None and a.annotation is not None
            ]
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
    elif isinstance(node, ast.Call) and _last_name(node.func) in ("setattr", "delattr"):
        verb = _last_name(node.func)
        target = node.args[0] if node.args else None
        key = node.args[1] if len(node.args) >= 2 else None
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            yield _changed(key.value), f"{verb}s {key.value}", target
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
        origin.split(".")[0] == "builtins" for _, origin in _imported(node)
    ):
        yield ANY, "imports builtins", None


def _computed_getattr(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and _last_name(node.func) == "getattr"):
        return False
    key = node.args[1] if len(node.args) >= 2 else None
    return not (isinstance(key, ast.Constant) and isinstance(key.value, str))


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
        yield from (name for name, origin in _imported(node) if not origin.endswith(".*"))
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


def _walk(nodes: list[ast.AST]) -> Iterator[ast.AST]:
    stack = list(nodes)
    while stack:
        current = stack.pop()
        yield current
        stack.extend(ast.iter_child_nodes(current))


def _imported(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str]]:
    """(bound name, dotted origin) of each name an import binds; `M.*` for a star."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, alias.name
            else:
                root = alias.name.split(".")[0]
                yield root, root
        return
    module = "." * node.level + (node.module or "")
    for alias in node.names:
        joined = f"{module}.{alias.name}" if node.module else f"{module}{alias.name}"
        yield (alias.asname or alias.name), joined


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _last_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute):
        return target.attr
    return target.id if isinstance(target, ast.Name) else ""


def _label(node: ast.AST) -> str:
    return (
        f"{node.name}()" if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else "a lambda"
    )
