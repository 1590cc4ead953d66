"""Git's object ids and sha1sum's digests, computed here: starting `git hash-object` for each
would cost a process per file on paths (the hooks' fast path among them) that need only the id."""

from __future__ import annotations

try:  # the bare C module: hashlib would cost more than the whole fast path
    from _sha1 import sha1
except ImportError:  # pragma: no cover - CPython built without it
    from hashlib import sha1

REGULAR_MODE = "100644"  # git's modes for a regular file, and an executable one
EXECUTABLE_MODE = "100755"


def blob_id(data: bytes) -> str:
    """The id git gives these bytes as a blob (what `git hash-object --no-filters` prints)."""
    return str(sha1(b"blob %d\0" % len(data) + data).hexdigest())


def digest(data: bytes) -> str:
    """The SHA-1 of the bytes, as `sha1sum` prints it: how a key names a file's content."""
    return str(sha1(data).hexdigest())
