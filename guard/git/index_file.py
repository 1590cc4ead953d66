"""git's index file, read without git (gitformat-index): a git process costs the fast path
more than the read. An answer only when the format leaves no doubt, else None (git answers).

A cache tree valid at the top covers every entry, and git never leaves one valid over an
unmerged entry: such an index holds no conflict, and when that tree is HEAD's its entries are
HEAD's. A commit or a checkout writes one, so `check` right after either starts no git.
Versions 2 and 3 (version 4 compresses names), no split or sparse index. Names are searched,
not walked to: walking 20,000 entries in Python costs more than git would.
"""

from __future__ import annotations

import os
import zlib

from guard.git.objects import sha1

TYPE_CHECKING = False  # not typing's: this module is on a light path (tests/test_light_paths.py)
if TYPE_CHECKING:
    from collections.abc import Sequence

_HEADER = 12  # "DIRC", the version, the number of entries
_NAME_AT = 62  # an entry's fixed part: stat data, mode, object id, flags; then its name
_MODE_AT = 24
_ID_AT = 40
_ID_SIZE = 20
_ASSUME_VALID = 0x8000  # flags: `git update-index --assume-unchanged`
_EXTENDED = 0x4000  # flags: 16 more bits of flags follow (version 3)
_STAGE = 0x3000
_NAME_LENGTH = 0xFFF
_TYPE_BY_MODE = {0o100644: "blob", 0o100755: "blob", 0o120000: "blob", 0o160000: "commit"}
# Bytes ls-tree prints as they are (anything else it may quote, as core.quotePath says).
_PLAIN = frozenset(range(0x20, 0x7F)) - {ord('"'), ord("\\")}


def checksum(git_dir: str) -> str | None:
    """The index file's own SHA-1 (its last 20 bytes), read alone: the same checksum, the same
    index. None when there is no index, or `index.skipHash` left zeros there."""
    if _elsewhere():
        return None
    try:
        handle = os.open(os.path.join(git_dir, "index"), os.O_RDONLY)
        try:
            size = os.fstat(handle).st_size
            tail = os.pread(handle, _ID_SIZE, size - _ID_SIZE) if size > _HEADER + _ID_SIZE else b""
        finally:
            os.close(handle)
    except OSError:
        return None
    return _named_checksum(tail)


def _elsewhere() -> bool:
    """Does the environment send git to another index (GIT_INDEX_FILE, as a hook of `git
    commit` or `git stash` has it) or other replacements? Then git answers."""
    return "GIT_INDEX_FILE" in os.environ or "GIT_REPLACE_REF_BASE" in os.environ


def _named_checksum(tail: bytes) -> str | None:
    return tail.hex() if len(tail) == _ID_SIZE and tail.strip(b"\0") else None


class IndexFile:
    """One read of a worktree's index file."""

    __slots__ = ("_data", "_entries_end", "_extensions", "_found", "checksum")

    def __init__(self, data: bytes, extensions: dict[bytes, tuple[int, int]]) -> None:
        self._data = data
        self._extensions = extensions  # signature -> (start, end) of its data
        self._entries_end = min(start for start, _ in extensions.values()) - 8
        self._found: dict[str, list[tuple[int, int]] | None] = {}  # _entries, by path
        self.checksum = _named_checksum(data[-_ID_SIZE:])  # see checksum()

    @classmethod
    def read(cls, git_dir: str) -> IndexFile | None:
        if _elsewhere():
            return None
        try:
            with open(os.path.join(git_dir, "index"), "rb") as handle:
                data = handle.read()
            if any(name.startswith("sharedindex.") for name in os.listdir(git_dir)):
                return None  # a split index: entries live in another file
        except OSError:
            return None
        if data[:4] != b"DIRC" or data[4:8] not in (b"\0\0\0\2", b"\0\0\0\3"):
            return None
        extensions = _extensions(data)
        if extensions is None or b"link" in extensions or b"sdir" in extensions:
            return None
        return cls(data, extensions)

    def unmerged(self, paths: Sequence[str]) -> bool | None:
        """Whether a stage entry (1-3) is held for one of `paths`; None when a path has no
        entry at all (untracked) or none this reader can be sure of."""
        for path in paths:
            entries = self._entries(path)
            if not entries:
                return None
            if any(flags & _STAGE for _, flags in entries):
                return True
        return False

    def tree_entries(
        self, common_dir: str, commit: str, paths: Sequence[str]
    ) -> list[tuple[int, str, str, str]] | None:
        """(mode, type, id, path) of each of `paths` that `commit`'s tree holds, in ls-tree's
        order, when this index is that tree and says it for sure: None otherwise."""
        if not all(
            path and _PLAIN.issuperset(path.encode("utf-8", "surrogateescape")) for path in paths
        ):
            return None
        root = self.cache_tree_root()
        if root is None or root != _commit_tree(common_dir, commit):
            return None
        found = []
        for path in sorted(paths, key=str.encode):  # ls-tree's order: the bytes' (all plain)
            entries = self._entries(path)
            if entries is None:
                return None
            if not entries:
                below = self._data.find(path.encode() + b"/", _HEADER, self._entries_end)
                if below != -1:
                    return None  # a directory there, perhaps: ls-tree would list the tree
                continue  # HEAD has no such file: ls-tree prints no line
            [(at, flags)] = entries if len(entries) == 1 else [(-1, _STAGE)]
            if flags & (_ASSUME_VALID | _STAGE | _EXTENDED) or flags & _NAME_LENGTH > 0xFF:
                # Unmerged, intent-to-add, skip-worktree: git decides. So it does for flags
                # a name's bytes could spell (a name has no NUL byte): the assume-unchanged
                # bit, or a length of 256 or more, which every other entry leaves zero.
                return None
            mode = int.from_bytes(self._data[at + _MODE_AT : at + _MODE_AT + 4], "big")
            kind = _TYPE_BY_MODE.get(mode)
            if kind is None:
                return None
            found.append((mode, kind, self._data[at + _ID_AT : at + _ID_AT + _ID_SIZE].hex(), path))
        return found

    def _entries(self, path: str) -> list[tuple[int, int]] | None:
        """(start, flags) of each entry named `path`, one per stage; None when unsure.

        A match of the name counts where an entry can be: after flags that give its length, at
        a multiple of 8 bytes from the header. Any name may end with `path`, and its bytes may
        look like flags: the entries found must be one run (a path's stages), or None.
        """
        if path not in self._found:  # a search costs a pass over the entries: one per path
            self._found[path] = self._search(path)
        return self._found[path]

    def _search(self, path: str) -> list[tuple[int, int]] | None:
        data = self._data
        name = path.encode("utf-8", "surrogateescape")
        found: list[tuple[int, int]] = []
        at = data.find(name + b"\0", _HEADER, self._entries_end)
        while at != -1:
            for start in (at - _NAME_AT, at - _NAME_AT - 2):
                flags = self._named(start, name)
                if flags is not None:
                    if found and start != self._end(*found[-1], name):
                        return None
                    found.append((start, flags))
            at = data.find(name + b"\0", at + 1, self._entries_end)
        return found

    def _named(self, start: int, name: bytes) -> int | None:
        """The flags of an entry starting at `start` if it is one named `name`."""
        if start < _HEADER or (start - _HEADER) % 8:
            return None
        data = self._data
        flags = int.from_bytes(data[start + _NAME_AT - 2 : start + _NAME_AT], "big")
        name_at = start + _NAME_AT + (2 if flags & _EXTENDED else 0)
        if flags & _NAME_LENGTH != min(len(name), _NAME_LENGTH):
            return None
        return flags if data[name_at : name_at + len(name) + 1] == name + b"\0" else None

    @staticmethod
    def _end(start: int, flags: int, name: bytes) -> int:
        """Where the entry after this one starts: names are NUL-padded to a multiple of 8."""
        return start + ((_NAME_AT + (2 if flags & _EXTENDED else 0) + len(name) + 8) & ~7)

    def cache_tree_root(self) -> str | None:
        """The cache tree's id for the whole index; None when invalid (see the module)."""
        start, end = self._extensions[b"TREE"]  # the chain of extensions starts there
        tree = self._data[start:end]
        # The top entry: an empty path, NUL, "<entries> <subtrees>\n" ("-1": invalid), its id.
        line_end = tree.find(b"\n")
        counts = tree[1:line_end].split(b" ")
        entries = int.from_bytes(self._data[8:12], "big")
        if tree[:1] != b"\0" or len(counts) != 2 or counts[0] != str(entries).encode():
            return None
        tree_id = tree[line_end + 1 : line_end + 1 + _ID_SIZE]
        return tree_id.hex() if len(tree_id) == _ID_SIZE else None


def _extensions(data: bytes) -> dict[bytes, tuple[int, int]] | None:
    """Each extension's data, by signature, from the cache tree to the file's checksum; None
    when there is none. Found without walking the entries: the last "TREE" from which whole
    extensions (four letters, a size, the data) lead exactly to the end."""
    end = len(data) - _ID_SIZE  # the checksum (a SHA-256 index has a longer one: no chain)
    least = _HEADER + (_NAME_AT + 2) * int.from_bytes(data[8:12], "big")
    at = data.rfind(b"TREE", least, end)
    while at != -1:
        chain: dict[bytes, tuple[int, int]] = {}
        step = at
        while step + 8 <= end and data[step : step + 4].isalpha():
            size = int.from_bytes(data[step + 4 : step + 8], "big")
            chain[data[step : step + 4]] = (step + 8, step + 8 + size)
            step += 8 + size
        if step == end:
            return chain
        at = data.rfind(b"TREE", least, at)
    return None


def _commit_tree(common_dir: str, commit: str) -> str | None:
    """The tree of `commit`, read from its loose object (a commit just made is loose); None
    when it is packed, elsewhere, or replaced (`git replace`: git would show another tree)."""
    if len(commit) != 2 * _ID_SIZE or os.path.lexists(os.path.join(common_dir, "refs", "replace")):
        return None
    try:
        with open(os.path.join(common_dir, "objects", commit[:2], commit[2:]), "rb") as handle:
            raw = zlib.decompress(handle.read())
        if _packed_replace(common_dir):
            return None
    except (OSError, zlib.error):
        return None
    if sha1(raw).hexdigest() != commit or not raw.startswith(b"commit "):
        return None
    body = raw[raw.find(b"\0") + 1 :]
    if not body.startswith(b"tree ") or body[45:46] != b"\n":
        return None
    return body[5:45].decode("ascii")


def _packed_replace(common_dir: str) -> bool:
    try:
        with open(os.path.join(common_dir, "packed-refs"), "rb") as handle:
            return b" refs/replace/" in handle.read()
    except FileNotFoundError:
        return False
