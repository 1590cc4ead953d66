"""Answers kept by the content they were computed from: merges, parses. A cache, never a record.

Keys are under the namespace of patchguard's own code (guard.git.own_code: an answer another
patchguard kept is not this one's). An entry's CRC-32 of key and payload guards against torn and
misplaced entries, not an adversary: what could write here (the worktree's git dir) could write
git's hooks. So entries are never fsynced (a torn one is a miss), and a cache that cannot be
written only means computing again.
"""

from __future__ import annotations

import os
from pathlib import Path

from guard.git.atomic import atomic_write
from guard.git.own_code import model_namespace

_DIGEST = 4


class ContentCache:
    """At most about 2 x `keep` entries in `directory`; the oldest go when it grows past that."""

    def __init__(self, directory: Path, keep: int) -> None:
        self.directory = directory
        self.keep = keep
        self._entries: int | None = None  # counted on the first write of this process

    def get(self, key: str) -> bytes | None:
        key = f"{model_namespace()}-{key}"
        try:
            data = (self.directory / key).read_bytes()
        except OSError:
            return None
        payload = data[_DIGEST:]
        return payload if _digest(key, payload) == data[:_DIGEST] else None

    def put(self, key: str, payload: bytes) -> None:
        key = f"{model_namespace()}-{key}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if self._entries is None:
                self._entries = len(os.listdir(self.directory))
            if self._entries >= 2 * self.keep:
                self._prune()
            atomic_write(self.directory / key, _digest(key, payload) + payload, durable=False)
            self._entries += 1
        except OSError:
            return

    def _prune(self) -> None:
        """Keep the `keep` newest entries (and temp files a killed writer left go too)."""
        entries = sorted(self.directory.iterdir(), key=lambda p: p.stat().st_mtime)
        for stale in entries[: max(0, len(entries) - self.keep)]:
            stale.unlink(missing_ok=True)
        self._entries = min(len(entries), self.keep)


def _digest(key: str, payload: bytes) -> bytes:
    from zlib import crc32  # only when the cache is read or written: not every command is

    return crc32(payload, crc32(key.encode() + b"\0")).to_bytes(_DIGEST, "big")
