"""libgit2's `git_merge_file` on buffers: a 3-way merge that writes nothing anywhere.

pygit2 declares only the index-entry variant, which needs the three inputs as blobs in the
object store: a read-only object store (a benchmark run as another user) could not merge, and
a plain `check` would write objects. The library pygit2 ships is loaded a second time here in
cffi's ABI mode, with the few declarations this needs (libgit2 1.x, include/git2/merge.h).
"""

from __future__ import annotations

import glob
import os
from functools import cache

TYPE_CHECKING = False  # typing costs the hooks ~3 ms
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

_DECLARATIONS = """
typedef struct {
    unsigned int version;
    const char *ptr;
    size_t size;
    const char *path;
    unsigned int mode;
} git_merge_file_input;
typedef struct {
    unsigned int version;
    const char *ancestor_label;
    const char *our_label;
    const char *their_label;
    int favor;
    uint32_t flags;
    unsigned short marker_size;
} git_merge_file_options;
typedef struct {
    unsigned int automergeable;
    const char *path;
    unsigned int mode;
    const char *ptr;
    size_t len;
} git_merge_file_result;
int git_merge_file(git_merge_file_result *out, const git_merge_file_input *ancestor,
    const git_merge_file_input *ours, const git_merge_file_input *theirs,
    const git_merge_file_options *opts);
void git_merge_file_result_free(git_merge_file_result *result);
int git_libgit2_init(void);
"""


@cache
def _library() -> tuple[Any, Any] | None:
    """(ffi, lib) for the libgit2 pygit2 uses; None when it cannot be found, and then merge3
    falls back to libgit2's index variant (correct, but it writes the inputs as objects)."""
    import cffi
    import pygit2

    ffi = cffi.FFI()
    ffi.cdef(_DECLARATIONS)
    for candidate in _candidates(os.path.dirname(pygit2.__file__)):
        try:
            lib = ffi.dlopen(candidate)
        except OSError:
            continue
        lib.git_libgit2_init()
        return ffi, lib
    return None


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
    loaded = _library()
    if loaded is None:
        return None
    ffi, lib = loaded
    keep = []
    inputs = []
    for data in (base, ours, theirs):
        buffer = ffi.new("char[]", data or b"\0")
        keep.append(buffer)
        entry = ffi.new("git_merge_file_input *")
        entry.version, entry.ptr, entry.size, entry.mode = 1, buffer, len(data), 0o100644
        inputs.append(entry)
    options = ffi.new("git_merge_file_options *")
    options.version = 1
    names = [ffi.new("char[]", label.encode()) for label in labels]
    options.ancestor_label, options.our_label, options.their_label = names
    from pygit2.ffi import C  # the same constant pygit2 was built with

    options.flags = C.GIT_MERGE_FILE_STYLE_MERGE
    if union:
        options.favor = C.GIT_MERGE_FILE_FAVOR_UNION
    result = ffi.new("git_merge_file_result *")
    if lib.git_merge_file(result, *inputs, options) < 0:
        return None
    try:
        return bool(result.automergeable), bytes(ffi.buffer(result.ptr, result.len))
    finally:
        lib.git_merge_file_result_free(result)
