"""libgit2's `git_merge_file` on buffers: a 3-way merge that writes nothing anywhere.

pygit2 declares only the index-entry variant, which needs the three inputs as blobs in the
object store: a read-only object store (a benchmark run as another user) could not merge, and
a plain `check` would write objects. The library pygit2 ships is loaded a second time here
through ctypes, with the few declarations this needs (libgit2 1.x, include/git2/merge.h), and
without importing pygit2 or cffi: those cost a first re-apply ~80 ms, more than its merges.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from functools import cache

TYPE_CHECKING = False  # typing costs the hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Iterator

# libgit2's enums (include/git2/merge.h), held to pygit2's own by tests/test_cold_path.py
GIT_MERGE_FILE_STYLE_MERGE = 1 << 0  # git_merge_file_flag_t
GIT_MERGE_FILE_FAVOR_UNION = 3  # git_merge_file_favor_t


class _Input(ctypes.Structure):  # git_merge_file_input
    _fields_ = (
        ("version", ctypes.c_uint),
        ("ptr", ctypes.c_char_p),
        ("size", ctypes.c_size_t),
        ("path", ctypes.c_char_p),
        ("mode", ctypes.c_uint),
    )


class _Options(ctypes.Structure):  # git_merge_file_options
    _fields_ = (
        ("version", ctypes.c_uint),
        ("ancestor_label", ctypes.c_char_p),
        ("our_label", ctypes.c_char_p),
        ("their_label", ctypes.c_char_p),
        ("favor", ctypes.c_int),
        ("flags", ctypes.c_uint32),
        ("marker_size", ctypes.c_ushort),
    )


class _Result(ctypes.Structure):  # git_merge_file_result
    _fields_ = (
        ("automergeable", ctypes.c_uint),
        ("path", ctypes.c_char_p),
        ("mode", ctypes.c_uint),
        ("ptr", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
    )


@cache
def _library() -> ctypes.CDLL | None:
    """The libgit2 pygit2 uses; None when it cannot be found, and then merge3 falls back to
    libgit2's index variant (correct, but it writes the inputs as objects)."""
    for candidate in _candidates(_pygit2_directory()):
        try:
            lib = ctypes.CDLL(candidate)
        except OSError:
            continue
        merge = lib.git_merge_file
        merge.argtypes = (
            ctypes.POINTER(_Result),
            *(ctypes.POINTER(_Input),) * 3,
            ctypes.POINTER(_Options),
        )
        merge.restype = ctypes.c_int
        lib.git_merge_file_result_free.argtypes = (ctypes.POINTER(_Result),)
        lib.git_merge_file_result_free.restype = None
        lib.git_libgit2_init()
        return lib
    return None


def _pygit2_directory() -> str:
    """Where pygit2 is installed (the wheel's libgit2 sits beside it), found as `import` would
    find it but without running it; pygit2's own when it is loaded already."""
    loaded = sys.modules.get("pygit2")
    if loaded is not None:
        return os.path.dirname(str(loaded.__file__))
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("pygit2")
    if spec is not None and spec.origin:
        return os.path.dirname(spec.origin)
    import pygit2  # found by another finder only: its own answer

    return os.path.dirname(pygit2.__file__)


def _candidates(package: str) -> Iterator[str]:
    """The libgit2 a pygit2 wheel bundles, then the system's (a pygit2 built against it).
    The system's is looked up last, and only when no bundled one loads: find_library starts
    ldconfig and a compiler (five processes, ~15 ms) to find it."""
    yield from sorted(glob.glob(os.path.join(package, os.pardir, "pygit2.libs", "libgit2*.so*")))
    yield from sorted(glob.glob(os.path.join(package, "libgit2*.so*")))
    import ctypes.util  # ~20 ms: only when no bundled library loaded

    system = ctypes.util.find_library("git2")
    if system:
        yield system


def merge_file(
    base: bytes, ours: bytes, theirs: bytes, labels: tuple[str, str, str], union: bool = False
) -> tuple[bool, bytes] | None:
    """(clean, content), or None when this libgit2 cannot be loaded (the caller falls back).

    `union`: a conflicting region gets both sides, ours first (git merge-file --union)."""
    lib = _library()
    if lib is None:
        return None
    inputs = [
        _Input(version=1, ptr=data or b"\0", size=len(data), mode=0o100644)
        for data in (base, ours, theirs)
    ]
    options = _Options(version=1, flags=GIT_MERGE_FILE_STYLE_MERGE)
    options.ancestor_label, options.our_label, options.their_label = (
        label.encode() for label in labels
    )
    if union:
        options.favor = GIT_MERGE_FILE_FAVOR_UNION
    result = _Result()
    merged = lib.git_merge_file(
        ctypes.byref(result), *map(ctypes.byref, inputs), ctypes.byref(options)
    )
    if merged < 0:
        return None
    try:
        return bool(result.automergeable), ctypes.string_at(result.ptr, result.len)
    finally:
        lib.git_merge_file_result_free(ctypes.byref(result))
