"""The statements a block runs in its own scope, for the binding model (guard.truth.model_statements)
and the effect summaries (guard.truth.effect_graph, guard.truth.effect_reader): the two must agree
on what a block holds, so one walk serves both (an `except` handler's or a `case`'s body counts,
a nested function's does not)."""

from __future__ import annotations

import ast
from collections.abc import Iterator


def own_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A block's statements and those of its compound statements (if, for, while, with, try
    and its handlers, match and its cases), in source order; not those of nested functions
    and classes, which run in scopes of their own."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        children: list[ast.stmt] = []
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(node, name, None)
            if isinstance(inner, list):
                children += [s for s in inner if isinstance(s, ast.stmt)]
        for handler in getattr(node, "handlers", ()):
            children += handler.body
        for case in getattr(node, "cases", ()):
            children += case.body
        stack.extend(reversed(children))
