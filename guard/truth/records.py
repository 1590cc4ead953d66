"""The parse cache's smallest records, as tuples with named fields.

A check of 40 files loads 40 kept parses (guard.truth.parsed), each with dozens to thousands of
these: one per definition (guard.truth.symbols.Definition) and per binding of the model
(guard.truth.model_names.Binding). A frozen dataclass loads through `__new__` and a `__dict__`
of its own; a tuple whose pickle calls `tuple.__new__` directly loads faster, and is as
immutable. A record equals a plain tuple of the same values; no code compares them so.
"""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    _Tuple = tuple[Any, ...]
else:
    _Tuple = tuple


class Record(_Tuple):
    """A tuple whose fields are the subclass's annotations, in order, each read by name."""

    __slots__ = ()
    FIELDS: tuple[str, ...] = ()

    def __init_subclass__(cls) -> None:
        cls.FIELDS = tuple(name for name in cls.__annotations__ if name != "FIELDS")
        for number, name in enumerate(cls.FIELDS):
            setattr(cls, name, property(itemgetter(number)))

    def __reduce__(self) -> tuple[object, ...]:
        return (tuple.__new__, (type(self), tuple(self)))

    def __repr__(self) -> str:
        named = ", ".join(
            f"{name}={value!r}" for name, value in zip(self.FIELDS, self, strict=True)
        )
        return f"{type(self).__name__}({named})"
