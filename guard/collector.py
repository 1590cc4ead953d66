"""Python's cyclic garbage collector, off while one operation runs.

A re-apply or a check allocates a great deal and frees it by reference counts: syntax trees,
kept parses loaded from the cache (a check of 40 files loads some 12,000 objects), merged texts.
The collector would only walk them, and everything the process imported, again and again.
It is switched back on after, so a long-running caller (a hunt) still collects the few
cycles these leave.
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
