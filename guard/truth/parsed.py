"""Each file's parse, kept by its content: a file that did not change is never parsed again.

Parsing and modelling a file (guard.truth.symbols) is most of what assessing it costs, paid for
every patched file on every checkout. The result is a pure function of the bytes and of
patchguard's code and interpreter (conditions such as `sys.version_info` are decided for the
running Python), so it is kept under the blob id of the bytes, in the content cache's namespace
of all of that (guard.git.own_code), and, for another interpreter's facts
(guard.truth.interpreters), of those facts too: a new patchguard or another Python parses
afresh. Entries are pickles of guard.truth.symbols objects in the worktree's git dir, which only
patchguard writes (see guard.git.content_cache).
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from functools import partial

from guard.git.content_cache import ContentCache
from guard.git.objects import blob_id, digest
from guard.truth.symbols import SourceSyntaxError, SymbolIndex, resumed


def parse(
    content: bytes, path: str, cache: ContentCache, facts: Mapping[str, object] | None = None
) -> SymbolIndex | SourceSyntaxError:
    """The file's SymbolIndex, or the syntax error that stops Python from importing it.

    `facts`: the interpreter's whose conditions are decided; None for patchguard's own."""
    key = _key(content, facts)
    kept = cache.get(key)
    if kept is not None:
        found = _loads(kept, path)
        if isinstance(found, SymbolIndex) and found.effects is not None:
            graph = found.effects.graph
            graph.source = partial(resumed, graph, content, path)
        if found is not None:
            return found
    result: SymbolIndex | SourceSyntaxError
    try:
        result = SymbolIndex.parse(content, path, facts)
    except SourceSyntaxError as error:
        result = error
    cache.put(key, _dumps(result))
    return result


def keep_grown(
    content: bytes, index: SymbolIndex, cache: ContentCache, facts: Mapping[str, object] | None
) -> None:
    """Store the index again when its effect graph built nodes since it was stored (its
    functions' nodes are built when asked: guard.truth.effects), so the next command that asks
    the same finds them built instead of parsing the file again."""
    if index.effects is not None and index.effects.graph.grown:
        cache.put(_key(content, facts), _dumps(index))


def _key(content: bytes, facts: Mapping[str, object] | None) -> str:
    if facts is None:
        return blob_id(content)
    return f"{digest(repr(sorted(facts.items())).encode())[:8]}-{blob_id(content)}"


def _dumps(result: SymbolIndex | SourceSyntaxError) -> bytes:
    # A syntax error is kept without its path: the same bytes may sit at another path.
    kept = (
        ("error", result.lineno, result.message)
        if isinstance(result, SourceSyntaxError)
        else result
    )
    if isinstance(result, SymbolIndex) and result.effects is not None:
        result.effects.graph.grown = False
    return pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL)


def _loads(data: bytes, path: str) -> SymbolIndex | SourceSyntaxError | None:
    """None for anything but what _dumps wrote (an entry of a changed model is a miss)."""
    try:
        kept = pickle.loads(data)
    except Exception:
        return None
    if isinstance(kept, SymbolIndex):
        return kept
    if isinstance(kept, tuple) and len(kept) == 3 and kept[0] == "error":
        return SourceSyntaxError(path, kept[1], kept[2])
    return None
