"""Git's object ids and sha1sum's digests, computed here: starting `git hash-object` for each
would cost a process per file on paths (the hooks' fast path among them) that need only the id."""

from __future__ import annotations

try:  # the bare C module: hashlib stays off the light paths (tests/test_light_paths.py)
    from _sha1 import sha1 as _bare_sha1
except ImportError:  # pragma: no cover - CPython built without it
    from hashlib import sha1 as _bare_sha1

TYPE_CHECKING = False  # not typing's: this module is on a light path (tests/test_light_paths.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

REGULAR_MODE = "100644"  # git's modes for a regular file, and an executable one
EXECUTABLE_MODE = "100755"

# OpenSSL's SHA-1 (through hashlib) hashes several times faster than the bare module, but
# loading it is worth it only to a command that has hashed a megabyte and has more to hash (a
# first re-apply of many real model files); the hooks' fast path hashes a few kilobytes.
_OPENSSL_AFTER = 1 << 20
_hashed = [0]  # bytes hashed by the bare module in this process
_sha1: list[Callable[[bytes], Any]] = [_bare_sha1]


def sha1(data: bytes) -> Any:
    """A SHA-1 hash object of `data` (identical, from either implementation)."""
    if _hashed[0] < _OPENSSL_AFTER:
        _hashed[0] += len(data)
        if _hashed[0] >= _OPENSSL_AFTER:
            try:
                from hashlib import sha1 as openssl_sha1
            except ImportError:  # pragma: no cover - CPython built without OpenSSL
                openssl_sha1 = _bare_sha1
            _sha1[0] = openssl_sha1
    return _sha1[0](data)


def blob_id(data: bytes) -> str:
    """The id git gives these bytes as a blob (what `git hash-object --no-filters` prints)."""
    found = _blob_ids.get(data)
    if found is None:
        if _remembered[0] > _REMEMBER_BYTES:
            _blob_ids.clear()
            _remembered[0] = 0
        found = _blob_ids[data] = str(sha1(b"blob %d\0" % len(data) + data).hexdigest())
        _remembered[0] += len(data)
    return found


# Ids by content: a command asks one file's id several times; a process that moves between
# many commits (a hunt) keeps at most about this much of the files.
_blob_ids: dict[bytes, str] = {}
_remembered = [0]
_REMEMBER_BYTES = 64 << 20


def digest(data: bytes) -> str:
    """The SHA-1 of the bytes, as `sha1sum` prints it: how a key names a file's content."""
    return str(sha1(data).hexdigest())
