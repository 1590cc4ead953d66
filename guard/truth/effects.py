"""What a module's code may do to classes and module globals when it runs, summarized per
function and class, so that reading never says "present" over code that takes a method away
indirectly. One rule, not a list of patterns:

- A function may change a name when its body sets or deletes an attribute of that name,
  rebinds that global, reaches names by reflection (a computed `setattr`, `exec`, `globals`,
  `__dict__`, `sys.modules`, frames, the builtins module), or runs code of the checkout that
  may. A parameter's attribute counts only where the function may be handed something of the
  checkout; the module's own globals only in the guarded module; `self.x = ...` only its
  instance.
- Making an instance of a class of the checkout may run every method of it (`K()`, `with k`,
  `k + 1`, a property...); deriving from a class runs its `__init_subclass__` and metaclass.
- The import-time code is read with the values its names may hold: what it calls, indexes,
  iterates or tests runs what those may be, here or, through its imports (`needs`, followed
  by guard.tree.worktree), in another module of the checkout.
- Code outside the checkout keeps (wraps, registers) what it is handed rather than call it,
  except the few library functions that call it at once (`sorted`, `map`, `functools.reduce`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

ANY = "*"  # a change that may reach any name


class Reach(NamedTuple):
    """What running something may do: the names it may rebind or delete (a module global or an
    attribute of that name; ANY: any name), each with why; the names imported from elsewhere it
    reaches (kind, dotted origin); and the method names it calls on objects of unknown class
    (a module that defines such methods checks them)."""

    changes: dict[str, str]
    needs: frozenset[tuple[str, str]] = frozenset()
    attributes: frozenset[str] = frozenset()
    runs_arguments: bool = False  # what it is handed may run (see _Node)

    def touching(self, parts: Iterable[str]) -> str | None:
        """Why a change may reach one of these names (a qualified name's parts), or None."""
        for name in (ANY, *parts):
            if name in self.changes:
                return self.changes[name]
        return None


@dataclass(eq=False)
class _Node:
    """One function (or class creation, or instantiation) of the file, before the closure."""

    changes: dict[str, str] = field(default_factory=dict)
    # changes of an attribute of a parameter ("param": they matter when it may be handed a
    # class), or of the module's own globals ("global": they matter in the guarded module)
    scoped: dict[str, tuple[str, str]] = field(default_factory=dict)
    needs: set[tuple[str, str]] = field(default_factory=set)
    calls: set[str] = field(default_factory=set)  # keys of the graph, run with any arguments
    passes: set[str] = field(default_factory=set)  # keys run with its own parameters only
    returns: set[str] = field(default_factory=set)  # functions defined in it that it returns
    runs_arguments: bool = False  # it may call what it is handed (a decorator that runs it)


class _LazyGraph(dict[str, _Node]):
    """The graph, each function's nodes (`def:Q`, `bound:Q`, `result:Q`) built by the first `in`
    that asks for them: an import runs few of a module's functions and another module's check
    asks for few, so most are never built. A node depends only on its function's code and the
    file's names, so when it is built does not matter.

    `pending`: the qualnames not built yet. A graph read back from the parse cache keeps no
    `build` (it holds the syntax tree): it is given one that parses the file again when a
    pending node is first asked for (guard.truth.symbols.resumed); `grown`: built since it was
    stored."""

    build: Callable[[str], None] | None = None
    grown = False

    def __init__(self, build: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.pending: set[str] = set()
        self.build = build

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or (isinstance(key, str) and self._built(key))

    def _built(self, key: str) -> bool:
        kind, _, qualname = key.partition(":")
        if kind not in ("def", "bound", "result") or qualname not in self.pending:
            return False
        self.pending.discard(qualname)
        self.grown = True
        try:
            assert self.build is not None, "a stored graph is read with its source"
            self.build(qualname)
        except RecursionError:  # deeper than reading follows: it may change anything
            too_deep = _Node(changes={ANY: f"{qualname} nests too deeply for reading"})
            for kind in ("def", "bound", "result"):
                dict.__setitem__(self, f"{kind}:{qualname}", too_deep)
        return True

    def __getstate__(self) -> dict[str, object]:
        return {"pending": set(self.pending)}  # the builders hold the syntax tree: not kept


class Effects(NamedTuple):
    """A file's effect summary: `at_import` for its own import; `graph` for other modules.

    Keys: `def:Q` (the function or method at qualname Q, run with any arguments), `bound:Q`
    (a plain method run on an instance), `new:K` (making and using an instance of class K),
    `hooks:K` (creating a class derived from K), `meta:K` (K used as a metaclass),
    `method:NAME` (any method of that name in the file)."""

    at_import: Reach
    graph: _LazyGraph
    imports: dict[str, str]  # a module-level name bound by an import: its dotted origin
    stars: tuple[str, ...]  # modules of `from M import *`
    values: dict[str, frozenset[str]]  # what a module-level name may hold after the import

    def value(self, name: str) -> Reach | None:
        """What using a module-level value of the file may run (None: the file does not bind it)."""
        if name not in self.values:
            return None
        why = self.at_import.touching([name])
        if why is not None:
            return Reach({ANY: f"may be rebound by its module's import ({why})"})
        using = _Node()
        dangers = running(self.values[name], using)
        if dangers:
            return Reach({ANY: f"holds {dangers[0]}"})
        return _closure(self.graph, using, home=False)

    def reach(self, key: str, quiet: bool = False, home: bool = False) -> Reach | None:
        """The closure of one node (None: the file has no such node); `quiet`: see QUIET,
        `home`: see _closure."""
        if key not in self.graph:
            return None
        return _closure(self.graph, _Node(passes={key}) if quiet else _Node(calls={key}), home=home)

    def export(self, kind: str, name: str) -> Reach | None:
        """What another module reaches by importing `name` from here and using it as `kind`
        ("call": called or handed on; QUIET; "result": what calling it returns, called;
        "base": a base class; "meta": a metaclass)."""
        named = {"result": ("result:",), "base": ("hooks:",), "meta": ("meta:",)}
        for prefix in named.get(kind, ("def:", "new:")):  # "call", QUIET
            found = self.reach(prefix + name, quiet=kind == QUIET and prefix == "def:")
            if found is None:
                continue
            entry = self.graph[prefix + name]
            # QUIET: handed nothing of the checkout, nothing it is handed runs
            runs = kind != QUIET and (entry.runs_arguments or prefix == "new:")
            runs |= prefix == "result:" and any(
                self.graph[k].runs_arguments for k in entry.calls if k in self.graph
            )
            return found._replace(runs_arguments=runs)
        return None


QUIET = "call-quiet"  # a need: called with arguments that hold nothing of the checkout


def running(refs: Iterable[str], node: _Node, quiet: bool = False) -> list[str]:
    """Add to `node` what running a value that holds `refs` runs (`quiet`: see QUIET; for a
    class, making and using an instance); the dangerous names among them (`setattr`...), which
    may change anything."""
    dangers = []
    for ref in sorted(refs):  # sorted: see _closure
        kind, _, rest = ref.partition(":")
        if kind in ("def", "result", "uses", "class", "instance"):
            (node.passes if quiet and kind == "def" else node.calls).add(_as_key(ref))
        elif kind == "import-result":
            node.needs.add(("result", rest))
        elif kind == "import":
            node.needs.add((QUIET if quiet else "call", rest))
        elif kind == "danger":
            dangers.append(rest)
    return dangers


def _as_key(ref: str) -> str:
    """The graph key that using a value runs: for a class or an instance, making one."""
    kind, _, rest = ref.partition(":")
    return f"new:{rest}" if kind in ("class", "instance") else ref


def _closure(graph: dict[str, _Node], start: _Node, *, home: bool) -> Reach:
    """Everything running `start` (with arguments that hold nothing of the checkout) reaches
    through `graph`; `home`: the graph is the guarded module's (its own globals count)."""
    changes: dict[str, str] = {}
    needs: set[tuple[str, str]] = set()
    attributes: set[str] = set()
    stack, seen = [("", False)], set()  # "": start
    while stack:
        key, handed = stack.pop()
        if (key, handed) in seen or (key and key not in graph):
            continue
        seen.add((key, handed))
        node = graph[key] if key else start
        for name, why in node.changes.items():
            changes.setdefault(name, why)
        for name, (why, scope) in node.scoped.items():
            if handed or (scope == "global" and home):
                changes.setdefault(name, why)
        needs |= {("call" if kind == QUIET and handed else kind, o) for kind, o in node.needs}
        attributes |= {k[7:] for k in node.calls if k.startswith("method:")}
        # Sorted: the first why found for a name is the one said, in every process (sets of
        # strings iterate in an order the hash seed decides).
        stack += [(k, True) for k in sorted(node.calls)]
        stack += [(k, handed) for k in sorted(node.passes)]
    return Reach(changes, frozenset(needs), frozenset(attributes))
