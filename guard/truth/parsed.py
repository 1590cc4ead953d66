"""Each file's parse, kept by its content: a file that did not change is never parsed again.

Parsing is most of what assessing a file costs, on every checkout. Its result depends only on
the bytes, patchguard's code and the interpreter's facts (`sys.version_info`...), so it is kept
under the bytes' blob id in the content cache's namespace of patchguard's code and Python
(guard.git.own_code), prefixed for another interpreter's facts: a new patchguard or another
Python parses afresh. Entries are pickles in the git dir, which only patchguard writes.
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
    """The file's SymbolIndex, or the syntax error that stops Python from importing it."""
    key = _key(content, facts)
    kept = cache.get(key)
    try:
        found = None if kept is None else pickle.loads(kept)
    except Exception:  # not what _dumps wrote (an entry of a changed model): a miss
        found = None
    if isinstance(found, SymbolIndex):
        if found.effects is not None:
            found.effects.graph.build = partial(resumed, found.effects.graph, content, path)
        return found
    if isinstance(found, tuple) and len(found) == 3 and found[0] == "error":
        return SourceSyntaxError(path, found[1], found[2])
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
    kept: object = result
    if isinstance(result, SourceSyntaxError):
        kept = ("error", result.lineno, result.message)
    elif result.effects is not None:
        result.effects.graph.grown = False
    return pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL)
