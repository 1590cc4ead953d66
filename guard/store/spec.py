"""The syntax of a required symbol: here, below the reading that resolves it
(guard.truth.symbols), because the manifest's schema validates it."""

from __future__ import annotations

from typing import NamedTuple

SPEC_SEPARATOR = "::"


class Spec(NamedTuple):
    """A required symbol, written like a pytest node id: `path/to/file.py::Class.method`."""

    path: str
    qualname: str

    def __str__(self) -> str:
        return f"{self.path}{SPEC_SEPARATOR}{self.qualname}"


def parse_spec(text: str) -> Spec:
    """Parse `file.py::Outer.Inner.name`; raise ValueError saying what is wrong."""
    path, sep, qualname = text.partition(SPEC_SEPARATOR)
    if not sep:
        raise ValueError(f"{text!r} has no '::'; write it as path/to/file.py::Class.method")
    if not path:
        raise ValueError(f"{text!r} names no file; write it as path/to/file.py::{qualname}")
    if not path.endswith(".py"):
        raise ValueError(f"{text!r}: symbols are checked in Python files, and {path!r} is not one")
    parts = qualname.split(".")
    if not qualname or not all(part.isidentifier() for part in parts):
        raise ValueError(f"{text!r}: {qualname!r} is not a dotted Python name like Class.method")
    return Spec(path=path, qualname=qualname)
