"""Conflict markers as git writes them, found in a file's text.

A file still holding one is not resolved, whatever the index says (`git add` accepts it). A line
of seven `=` alone is an underline in reStructuredText docstrings, so it counts only in a file
that holds one of the other three (`<`, `|` for diff3, `>`, each alone or before a space and a
label), which never occur in Python or Markdown by accident. tests/test_conflicts.py pins the
rule to git's own output in all three styles.
"""

from __future__ import annotations

_OPENING = (b"<<<<<<<", b"|||||||", b">>>>>>>")
_SEPARATOR = b"======="


def marker_lines(content: bytes) -> list[int]:
    """The 1-based numbers of the lines that are conflict markers."""
    if not any(marker in content for marker in _OPENING):
        return []  # the common case: no marker anywhere, nothing to split
    labelled, separators = [], []
    for number, line in enumerate(content.splitlines(), 1):
        line = line.rstrip(b"\r")
        head, rest = line[:7], line[7:]
        if head in _OPENING and (not rest or rest[:1] == b" "):
            labelled.append(number)
        elif line == _SEPARATOR:
            separators.append(number)
    return sorted(labelled + separators) if labelled else []
