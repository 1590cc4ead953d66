"""The code of each definition a patch adds, held to the code that was recorded: one in place
by name may still be gutted to `pass` or changed by hand, and green must mean the recorded code
runs. Compared as parsed: comments and layout do not count, everything Python runs does (the
docstring, decorators, defaults, annotations). Never on the hooks' fast path.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import NamedTuple

# Fields that are spelling, not code: `u"x"` is `"x"`, a `# type:` comment is a comment.
_SPELLING = frozenset({"kind", "type_comment"})
Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class Edit(NamedTuple):
    """A definition present by name whose code is not the recorded one."""

    qualname: str
    line: int  # the first line that differs, in the file as it is
    text: str  # that line
    recorded_text: str  # the line where the recorded code differs, in the recorded file
    span: tuple[int, int]  # the definition's lines here (decorators included)
    recorded_span: tuple[int, int]
    indent: int  # columns the definition is moved right here against the recording

    def describe(self) -> str:
        return (
            f"{self.qualname} is not the recorded code: line {self.line} is `{self.text}`, "
            f"recorded `{self.recorded_text}`"
        )


def parse(content: bytes, path: str) -> ast.Module | None:
    """The module's syntax tree; None when it does not parse (said elsewhere)."""
    try:
        return ast.parse(content, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def edits(
    current: bytes,
    current_tree: ast.Module,
    current_at: Mapping[str, int],
    recorded: bytes,
    recorded_tree: ast.Module,
    recorded_at: Mapping[str, int],
) -> list[Edit]:
    """Each definition whose code differs, in the order of `recorded_at`: the qualified names
    with the line of their `def`/`class` (Python's last binding of each, as guard.truth.symbols
    finds them) in either file."""
    here, there = definitions(current_tree), definitions(recorded_tree)
    lines, recorded_lines = text_lines(current), text_lines(recorded)
    found = []
    for qualname, defined in recorded_at.items():
        mine, theirs = here.get(current_at.get(qualname, 0)), there.get(defined)
        if mine is None or theirs is None:
            continue  # a name not in place is a missing symbol, said elsewhere
        difference = _first_difference(mine, theirs, (mine.lineno, theirs.lineno))
        if difference is None:
            continue
        line, recorded_line = difference
        found.append(
            Edit(
                qualname,
                line,
                _at(lines, line),
                _at(recorded_lines, recorded_line),
                span(mine),
                span(theirs),
                mine.col_offset - theirs.col_offset,
            )
        )
    return found


def restored(current: bytes, recorded: bytes, found: Sequence[Edit]) -> bytes:
    """`current` with each edited definition's lines replaced by its recorded lines, every
    other line kept. The caller checks the result (it parses, and holds the recorded code)."""
    lines = current.splitlines(keepends=True)
    recorded_lines = recorded.splitlines(keepends=True)
    outermost = [  # a method of an added class goes back with its class
        edit
        for edit in found
        if not any(
            other is not edit and other.span[0] <= edit.span[0] <= edit.span[1] <= other.span[1]
            for other in found
        )
    ]
    for edit in sorted(outermost, key=lambda e: e.span[0], reverse=True):  # apart: last first
        start, end = edit.span
        first, last = edit.recorded_span
        lines[start - 1 : end] = [
            _shifted(line, edit.indent) for line in recorded_lines[first - 1 : last]
        ]
    return b"".join(lines)


def definitions(tree: ast.Module) -> dict[int, Definition]:
    """Every `def` and `class` statement by its line (two never start on one line)."""
    return {node.lineno: node for node in ast.walk(tree) if isinstance(node, Definition)}


def _first_difference(a: object, b: object, lines: tuple[int, int]) -> tuple[int, int] | None:
    """None when `a` and `b` are the same code; else the lines (in a, in b) of the innermost
    statement or expression where they first differ (`lines`: where a and b are)."""
    if isinstance(a, ast.AST) and isinstance(b, ast.AST):
        lines = (getattr(a, "lineno", lines[0]), getattr(b, "lineno", lines[1]))
        if type(a) is not type(b):
            return lines
        for name in a._fields:
            if name not in _SPELLING:
                found = _first_difference(getattr(a, name, None), getattr(b, name, None), lines)
                if found is not None:
                    return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for x, y in zip(a, b, strict=False):
            found = _first_difference(x, y, lines)
            if found is not None:
                return found
        if len(a) == len(b):
            return None
        # One side goes on: where it does, and where the other ends.
        shorter = min(len(a), len(b))
        return _goes_on(a, shorter, lines[0]), _goes_on(b, shorter, lines[1])
    if type(a) is not type(b) or a != b:  # 1 == True, but they are not the same code
        return lines
    return None


def _goes_on(items: list[object], shorter: int, line: int) -> int:
    if len(items) > shorter:
        return getattr(items[shorter], "lineno", line)
    last = items[-1] if items else None
    return getattr(last, "end_lineno", None) or line


def span(node: Definition) -> tuple[int, int]:
    """A definition's first and last lines, its decorators with it."""
    first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    return first, node.end_lineno or node.lineno


def text_lines(content: bytes) -> list[str]:
    """The lines as Python numbers them: split as bytes, where only \\n and \\r end a line (str's
    splitlines also splits at a form feed, and every line below would be told one too far)."""
    return [line.decode("utf-8", errors="replace") for line in content.splitlines()]


def _at(lines: list[str], number: int) -> str:
    text = lines[number - 1].strip() if 0 < number <= len(lines) else ""
    return text if len(text) <= 80 else text[:77] + "..."


def _shifted(line: bytes, columns: int) -> bytes:
    """A recorded line moved right (or left) to where the definition stands here."""
    if columns > 0 and line.strip():
        return b" " * columns + line
    if columns < 0 and line[:-columns].strip() == b"":
        return line[-columns:]
    return line
