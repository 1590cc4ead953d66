"""Python's cyclic garbage collector, off while one operation runs.

A re-apply or a check allocates a great deal (a check of 40 files loads some 12,000 objects)
and frees it by reference counts: the collector would only walk it, and everything imported,
again and again. Back on after, so a long-running caller (a hunt) still collects the few cycles.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def without_collector() -> Iterator[None]:
    """The collector off inside (nested: the outermost turns it back on)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
