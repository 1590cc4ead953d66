"""Stand-ins for what a real sglang model file imports (torch, transformers, the rest of sglang).

A benchmark script in a test calls `install()` before it imports the real model file. The
finder goes at the END of sys.meta_path, so every module a real finder finds (the checkout's
own files above all) loads for real; only the missing ones are made up. A made-up module
answers any attribute with a permissive class that can be called, subscripted, subclassed,
compared and used as a decorator, which is all a model file does with its imports at import
time. Nothing here is patchguard's: it only lets the real file run where torch is absent.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

MADE_UP = ("torch", "transformers", "numpy", "sglang", "triton", "einops", "PIL")
_ABSENT = frozenset({"npu", "hpu", "xpu", "musa", "mlu"})  # devices sglang probes with hasattr


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


class _Permissive:
    """What both a stand-in class and its instances answer."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]  # used as a decorator
        return _Any

    def __getitem__(self, item: Any) -> Any:
        return _Any

    def __setitem__(self, item: Any, value: Any) -> None:
        pass

    def __iter__(self) -> Any:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __int__(self) -> int:
        return 0

    __index__ = __int__

    def __float__(self) -> float:
        return 0.0

    def __len__(self) -> int:
        return 0

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> bool:
        return False

    def _same(self, *other: Any) -> Any:
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _same
    __or__ = __ror__ = __and__ = __rand__ = __neg__ = __invert__ = __mod__ = __pow__ = _same


class _AnyMeta(_Permissive, type):
    def __new__(
        cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **_: Any
    ) -> Any:
        return super().__new__(cls, name, bases, namespace)

    def __init__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **_: Any):
        super().__init__(name, bases, namespace)

    def __getattr__(cls, name: str) -> Any:
        if _dunder(name):
            raise AttributeError(name)
        return _Any

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], type):
            return args[0]  # used as a decorator
        return type.__call__(cls)

    def __hash__(cls) -> int:
        return id(cls)


class _Any(_Permissive, metaclass=_AnyMeta):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if _dunder(name):
            raise AttributeError(name)
        return _Any

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.any_schema()


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if _dunder(name) or name in _ABSENT:
            raise AttributeError(name)
        return _Any


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, made_up: tuple[str, ...]) -> None:
        self.made_up = frozenset(made_up)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name.split(".")[0] not in self.made_up:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StandInModule(spec.name)
        module.__path__ = []
        module.__version__ = "2.9.1"  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def install(made_up: tuple[str, ...] = MADE_UP) -> None:
    """Modules under these top-level names are made up where no real finder finds them."""
    sys.meta_path.append(_StandIns(made_up))
