"""The cyclic collector off while one operation runs: a re-apply or a check (of 40 files, some
12,000 objects) frees by reference counts, so the collector would only walk it, and everything
imported, again and again. Back on after, so a long-running caller (a hunt) still collects cycles.
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
