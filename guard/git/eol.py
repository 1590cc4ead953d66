"""git's line-ending conversion, so patchguard sees files as `git diff` does.

A working file can end its lines in CRLF while git stores LF. patchguard records, merges and
checks the stored form (a patch is then its three methods, not every line of the file) and
writes files back as `git checkout` would, by git's own rules (convert.c), held to what git
writes by a test. A filter driver, `working-tree-encoding`, or `ident` in a file that holds
`$Id` is a conversion only git can run: recording such a file is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

ATTRIBUTES = ("text", "eol", "crlf", "ident", "filter", "working-tree-encoding")

# Bytes git's text detection counts as non-printable: controls other than BS, TAB, ESC, FF
# (CR and LF are counted apart), and DEL.
_CONTROL = bytes(set(range(32)) - set(b"\b\t\x1b\x0c\r\n")) + b"\x7f"
_LONE_LF = re.compile(rb"(?<!\r)\n")
# A `text` (or legacy `crlf`) attribute's value, as git reads it; any other is "unspecified".
_ACTIONS = {"set": "text", "unset": "binary", "input": "text-lf", "auto": "auto"}


@dataclass(frozen=True)
class Conversion:
    """How one path's bytes differ between the worktree and git's object store."""

    text: bool  # git converts line endings for this path at all
    auto: bool  # only when git detects text, and never a file that already holds CRs
    crlf: bool  # checked out with CRLF line endings (else LF)
    refusal: str | None = None  # a conversion patchguard cannot reproduce, in words
    ident: bool = False  # git expands `$Id$` (a refusal for a file that holds one)

    def refuses(self, *contents: bytes | None) -> str | None:
        """Why patchguard cannot rebuild these contents as git would, if it cannot."""
        if self.refusal is None and self.ident and any(b"$Id" in c for c in contents if c):
            return "has $Id$ expanded by git (gitattributes ident)"
        return self.refusal

    def to_git(self, data: bytes, index_has_cr: Callable[[], bool]) -> bytes:
        """The bytes git would store for this working file (`git diff`'s view)."""
        if not self.text or b"\r\n" not in data:
            return data
        if self.auto and (looks_binary(data) or index_has_cr()):
            return data
        return data.replace(b"\r\n", b"\n")

    def to_worktree(self, data: bytes) -> bytes:
        """The bytes `git checkout` would write for this stored content."""
        if not (self.text and self.crlf) or data.count(b"\n") == data.count(b"\r\n"):
            return data
        if self.auto and (b"\r" in data or looks_binary(data)):
            return data
        return _LONE_LF.sub(b"\r\n", data)


def cannot_rebuild(path: str, why: str) -> str:
    """The one wording for a file patchguard will not take: why, and that git alone could."""
    return f"{path} {why}, a conversion only git itself can make"


def looks_binary(data: bytes) -> bool:
    """git's text detection: a NUL, a CR not before LF, or over 1/128 control bytes."""
    if b"\0" in data or data.count(b"\r") != data.count(b"\r\n"):
        return True
    control = len(data) - len(data.translate(None, _CONTROL))
    if data.endswith(b"\x1a"):  # a DOS end-of-file mark is allowed
        control -= 1
    printable = len(data) - control - data.count(b"\r") - data.count(b"\n")
    return (printable >> 7) < control


def decide(attributes: Mapping[str, str], config: Mapping[str, str]) -> Conversion:
    """The conversion git applies, from `git check-attr` values and the `git config` lines."""
    autocrlf = _autocrlf(config.get("core.autocrlf", "false"))  # it wins over core.eol
    eol_is_crlf = autocrlf == "true" if autocrlf else config.get("core.eol", "").lower() == "crlf"
    action = _ACTIONS.get(attributes.get("text", ""), "unspecified")
    if action == "unspecified":
        action = _ACTIONS.get(attributes.get("crlf", ""), "unspecified")
    if action != "binary":
        eol = attributes.get("eol")
        if eol in ("lf", "crlf"):
            action = ("auto-" if action == "auto" else "text-") + eol
    if action in ("text", "auto"):
        action += "-crlf" if eol_is_crlf else "-lf"
    if action == "unspecified":
        action = {"true": "auto-crlf", "input": "auto-lf"}.get(autocrlf or "", "binary")
    return Conversion(
        text=action != "binary",
        auto=action.startswith("auto-"),
        crlf=action.endswith("-crlf"),
        refusal=_refusal(attributes, config),
        ident=attributes.get("ident") == "set",
    )


def _autocrlf(value: str) -> str | None:
    """core.autocrlf: "true", "input", or None for false (git's boolean spellings)."""
    value = value.strip().lower()
    if value == "input":
        return "input"
    if value in ("true", "yes", "on") or (value.lstrip("-").isdigit() and int(value) != 0):
        return "true"
    return None


def _refusal(attributes: Mapping[str, str], config: Mapping[str, str]) -> str | None:
    driver = attributes.get("filter", "unspecified")
    if driver not in ("unspecified", "set", "unset") and any(
        f"filter.{driver}.{kind}" in config for kind in ("clean", "smudge", "process")
    ):
        return f"goes through the filter driver {driver!r} (gitattributes filter={driver})"
    encoding = attributes.get("working-tree-encoding", "unspecified")
    if encoding not in ("unspecified", "set", "unset"):
        return f"is checked out as {encoding} (gitattributes working-tree-encoding)"
    return None
