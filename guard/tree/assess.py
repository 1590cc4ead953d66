"""Decide each patch's state by content, and check required symbols: the read-only half.

A state is never decided by searching for a string. Text is compared by 3-way merges
(libgit2), symbols by parsing (guard.truth.symbols). guard.tree.patching writes only what this module
decided, so a merge is only written when it is clean *and* every required symbol sits exactly
once at its qualified place in the result.
"""

from __future__ import annotations

import ast
import pickle
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property
from pathlib import PurePosixPath

from guard.errors import ConfigError
from guard.git import objects
from guard.git.markers import marker_lines
from guard.git.repo import Repo
from guard.git.worktree_paths import UnsafePath, one_walk
from guard.store import fastpath
from guard.store.manifest import FileChange, Manifest, Patch
from guard.store.manifest import Resolution as PatchResolution
from guard.store.spec import Spec, parse_spec
from guard.truth import bodies, parsed, slips
from guard.truth.effects import ANY, Effects, Reach
from guard.truth.model_names import ABSENT, CANNOT_TELL, NOT_DEFINED, PRESENT, Resolution
from guard.truth.symbols import SourceSyntaxError, SymbolIndex, describe_miss


class State(StrEnum):
    APPLIED = "applied"
    UNAPPLIED = "unapplied"
    DRIFTED = "drifted"
    UPSTREAM = "upstream"
    CONFLICTED = "conflicted"  # the file itself is in conflict: unmerged, markers, no parse
    CONFLICT = "does-not-merge"  # the patch does not merge with a fine file (was "conflict")
    DOUBLED = "doubled"
    EDITED = "edited"  # every added name is in place, but a definition's code is not recorded
    MISSING_FILE = "missing-file"
    OUTSIDE_SPARSE = "outside-sparse"
    UNSAFE_PATH = "unsafe-path"


GOOD_STATES = frozenset({State.APPLIED, State.UPSTREAM})
CANNOT_TELL_FROM_READING = "cannot tell from reading"
ASK_PYTHON = "ask Python: patchguard check --runtime (or define it unconditionally)"
ASK_THE_RIGHT_PYTHON = (
    "probe with the interpreter that has the module's dependencies: --python PATH (or give "
    "the probe the environment they need, e.g. run --runtime -- env VAR=... python ...)"
)
UPSTREAM_AS_TEXT = "HEAD already contains this change"
# A patch is as bad as its worst file; mixed applied/upstream files make it "applied".
_SEVERITY = [
    State.UNSAFE_PATH,
    State.CONFLICTED,
    State.OUTSIDE_SPARSE,
    State.MISSING_FILE,
    State.CONFLICT,
    State.EDITED,
    State.DOUBLED,
    State.DRIFTED,
    State.UNAPPLIED,
    State.APPLIED,
    State.UPSTREAM,
]


@dataclass
class FileVerdict:
    """One file of one patch: its state, why, and what `apply` would write.

    `patched` is the change that still stands for this file, as the patched text: the recorded
    one, or only its rest when HEAD already defines everything the patch adds (unapply reverses
    exactly that).
    """

    path: str
    state: State
    detail: str
    merged: bytes | None = None
    patched: bytes | None = None
    version: FileChange | None = None  # the version decided from: the recording or a resolution
    stacked_on: list[str] = field(default_factory=list)  # a conflict: patches to apply first
    conflict: str | None = None  # for CONFLICTED: UNMERGED, MARKERS or SYNTAX
    # for EDITED: the edit is kept by a resolution for this version of upstream's file, as
    # re-recording away from the patch's base would re-base it (or a resolution decided)
    keep_by_resolving: bool = False
    held: FileChange | None = None  # another version of the patch, which the worktree holds


UNMERGED = "unmerged"  # git left stage entries in the index: `patchguard apply` can finish it
MARKERS = "markers"  # conflict markers in the text, nothing in the index to merge from
SYNTAX = "syntax"  # no marker, but the file does not parse


@dataclass(frozen=True)
class CommittedPatch:
    """HEAD's own commit brought the patch (a `git commit -a` that swept it in)."""

    summary: str  # "abc1234 subject"
    only_the_patch: bool  # the commit changed nothing else


@dataclass
class PatchVerdict:
    name: str
    files: list[FileVerdict]
    committed_in_head: CommittedPatch | None = None

    @property
    def state(self) -> State:
        states = {f.state for f in self.files}
        return next(s for s in _SEVERITY if s in states)

    @property
    def ok(self) -> bool:
        return self.state in GOOD_STATES


@dataclass
class SymbolResult:
    """One required symbol: present, absent, or cannot tell from reading (never green)."""

    spec: str
    ok: bool
    detail: str
    patch: str | None
    state: str = ""  # guard.truth.symbols' answer; "" means PRESENT when ok, else ABSENT
    runtime: str | None = None  # the runtime probe's answer (guard.truth.probe), which then decides

    def __post_init__(self) -> None:
        self.state = self.state or (PRESENT if self.ok else ABSENT)


@dataclass
class ImportResult:
    """Where an interpreter imports a module from, and whether that is this checkout."""

    module: str
    python: str
    location: str | None
    ok: bool
    detail: str


@dataclass
class CheckReport:
    """What `check` and the hooks report: patch states, required symbols, import locations."""

    head: str | None
    patches: list[PatchVerdict]
    symbols: list[SymbolResult]
    imports: list[ImportResult] = field(default_factory=list)
    runtime_seconds: float | None = None  # what the runtime probe cost, when it ran
    # What holds but should not stay (stray copies of a patch's methods): said on every
    # check, which is why a report with warnings is never remembered as verified
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        parts: tuple[PatchVerdict | SymbolResult | ImportResult, ...] = (
            *self.patches,
            *self.symbols,
            *self.imports,
        )
        return all(part.ok for part in parts)

    @property
    def undecided(self) -> list[SymbolResult]:
        """Symbols reading cannot decide (a runtime condition, a decorator it cannot read)."""
        return [s for s in self.symbols if s.state == CANNOT_TELL]

    @property
    def checks_nothing(self) -> bool:
        """No patch and no guard: `ok` would be vacuous, so it is never remembered or trusted."""
        return not self.patches and not self.symbols

    def problems(self) -> list[str]:
        """One line per problem: the file, the patch or symbol, and the command that fixes it."""
        broken: dict[tuple[str | None, str], list[str]] = {}
        for symbol in self.symbols:
            if not symbol.ok:
                spec = parse_spec(symbol.spec)
                broken.setdefault((symbol.patch, spec.path), []).append(spec.qualname)
        lines = []
        for patch in self.patches:
            for verdict in patch.files:
                if verdict.state in GOOD_STATES:
                    continue
                lost = broken.pop((patch.name, verdict.path), [])
                label = "defined twice" if verdict.state is State.DOUBLED else "missing"
                symbols = f"; {label}: {', '.join(lost)}" if lost else ""
                lines.append(
                    f"{verdict.path}: patch {patch.name} {in_words(verdict)}{symbols} -> "
                    f"{fix_for(patch.name, verdict)}"
                )
        for symbol in self.symbols:
            spec = parse_spec(symbol.spec)
            if symbol.ok or (symbol.patch, spec.path) not in broken:
                continue
            if symbol.state == CANNOT_TELL and symbol.runtime is None:
                lines.append(f"{symbol.spec}: {symbol.detail} -> {ASK_PYTHON}")
                continue
            if symbol.runtime == CANNOT_TELL:  # the probe could not import it: nothing decided
                lines.append(f"{symbol.spec}: {symbol.detail} -> {ASK_THE_RIGHT_PYTHON}")
                continue
            if symbol.patch:
                fix = f"restore it, or re-record: patchguard record {symbol.patch}"
            else:
                fix = f"restore it, or stop guarding it: patchguard drop {symbol.spec}"
            lines.append(f"{symbol.spec}: missing ({symbol.detail}) -> {fix}")
        lines += [f"import {i.module}: {i.detail}" for i in self.imports if not i.ok]
        return lines


# A state in a sentence: "patch eagle3 cannot be applied: the file does not exist ...", never
# "patch eagle3 is missing-file"; the state's name stays in `status` and in the JSON.
_IN_WORDS = {
    State.UNAPPLIED: "is not applied ({})",
    State.DRIFTED: "is not applied to this version of the file ({})",
    State.CONFLICT: "does not merge with this version of the file ({})",
    State.CONFLICTED: "cannot be checked: the file itself is conflicted ({})",
    State.DOUBLED: "is doubled ({})",
    State.MISSING_FILE: "cannot be applied: {}",
    State.OUTSIDE_SPARSE: "cannot be applied: {}",
    State.UNSAFE_PATH: "cannot be applied: {}",
}


def in_words(verdict: FileVerdict) -> str:
    """What a file's state means for its patch, as the predicate of "patch NAME ..."."""
    said = _IN_WORDS.get(verdict.state, f"is {verdict.state} ({{}})")
    return said.format(verdict.detail)


def fix_for(patch_name: str, verdict: FileVerdict) -> str:
    """The next command for a file of a patch in a bad state.

    Never `record` but for an edited definition (the edit may be what the user wants kept):
    recording over a conflict would re-base the patch onto this commit.
    `verdict.stacked_on`: the unapplied patches it was recorded on top of there.
    """
    state = verdict.state
    if state is State.CONFLICT and verdict.stacked_on:
        return f"patchguard apply {' '.join([*verdict.stacked_on, patch_name])}"
    if state in (State.UNAPPLIED, State.DRIFTED):
        return f"patchguard apply {patch_name}"
    if state is State.DOUBLED:
        return f"patchguard apply {patch_name} (takes the patch's copy out; HEAD's stays)"
    if state is State.EDITED:
        keep = (
            "keep your edit for this version of the file"
            if verdict.keep_by_resolving
            else "keep your edit as the patch"
        )
        return (
            f"{keep}: {keep_edit(patch_name, verdict)}; or put the recorded code back: "
            f"patchguard apply {patch_name} (your other edits stay; patchguard undo takes it back)"
        )
    if state is State.CONFLICTED and verdict.conflict == UNMERGED:
        return (
            f"patchguard apply {patch_name} (finishes git's merge for the patch's part, keeps "
            "your other edits)"
        )
    if state is State.CONFLICTED and verdict.conflict == MARKERS:
        return (
            "edit the conflict markers out by hand (keep the side you want), then patchguard status"
        )
    if state is State.CONFLICTED:
        return "fix the syntax error by hand, then patchguard status"
    if state is State.CONFLICT:
        return (
            "the patch does not merge with this version of the file: edit it into the right "
            f"shape here (patchguard apply --merge {patch_name} writes conflict markers to "
            f"start from), then keep that for this version: patchguard resolve {patch_name}; "
            "or go back to a commit where it applies (patchguard git checkout -)"
        )
    if state is State.OUTSIDE_SPARSE:
        directory = verdict.path.rpartition("/")[0] or "."
        return f"bring it into the sparse checkout: git sparse-checkout add {directory}"
    if state is State.UNSAFE_PATH:
        return (
            "nothing was written there; if upstream made the file a link, record the change on "
            f"the file it points to (patchguard record NAME FILE), or: patchguard drop {patch_name}"
        )
    if state is State.MISSING_FILE:
        return (
            "check out a commit that has the file (patchguard git checkout COMMIT); "
            f"only if you no longer want this patch: patchguard drop {patch_name}"
        )
    return "nothing to do"


def keep_edit(patch_name: str, verdict: FileVerdict) -> str:
    """The command that keeps an `edited` file's edit as the patch: a re-record on the patch's
    base, a resolution for this version of upstream's file elsewhere (a re-record there would
    re-base the patch)."""
    verb = "resolve" if verdict.keep_by_resolving else "record"
    return f"patchguard {verb} {patch_name}"


class Worktree:
    """The files patches are assessed against: the worktree, plus edits not yet written."""

    def __init__(self, repo: Repo, facts: Mapping[str, object] | None = None) -> None:
        self.repo = repo
        # The interpreter's facts conditions are decided for (guard.truth.interpreters); None:
        # patchguard's own, the only verdicts the fast path may remember.
        self.facts = facts
        self._content: dict[str, bytes | None] = {}  # as git sees them (`git diff`'s view)
        self._raw: dict[str, bytes | None] = {}  # the bytes on disk, as read or written
        self._unwritten: set[str] = set()  # staged by a dry run: `_content` is not on disk
        self._head: dict[str, bytes | None] = {}
        self._indexes: dict[bytes, SymbolIndex | SourceSyntaxError] = {}
        self._syntax: dict[bytes, ast.Module | None] = {}  # only for comparing bodies
        self._renames: dict[str, str] = {}
        self.unsafe: dict[str, str] = {}  # path -> why patchguard may not read or write it
        self._unmerged: dict[str, dict[int, str]] = {}  # as assessed (see pretend)
        self._unmerged_read: dict[str, dict[int, str]] | None = None  # as git left the index
        self._import_problems: dict[tuple[str, bytes], str | None] = {}
        self._reached: dict[tuple[str, int], Reach] = {}  # see reached_at_import
        # Paths looked up but not read, by whether they existed: a verdict that no file
        # there changes holds only while they stay so (guard.store.fastpath keeps both).
        self.absent: set[str] = set()
        self.present: set[str] = set()
        self._exists: dict[tuple[str, bool], bool] = {}

    def prefetch(self, patches: Iterable[Patch]) -> None:
        """Read every HEAD file and recorded blob the patches' assessment needs in two
        batches, so reading costs the same round trips for 1 patch as for 40; HEAD's first,
        as a recorded base that is HEAD's file is then not read twice."""
        changes = [change for patch in patches for change in patch.files]
        unread = sorted({change.path for change in changes} - self._head.keys())
        if self.head_commit is not None:
            self._head.update(self.repo.files_at(self.head_commit, unread))
        versions: list[FileChange | PatchResolution] = [*changes]
        versions += [r for change in changes for r in change.resolutions]
        self.repo.prefetch(
            oid for v in versions for oid in (v.base_blob, v.patched_blob) if oid is not None
        )

    @cached_property
    def head_commit(self) -> str | None:
        """The commit this view reads HEAD's files from, resolved once: every file, and the
        key the fast path remembers (guard.store.fastpath), come from one commit, even if HEAD
        moves meanwhile. None before the first commit."""
        return self.repo.head_commit()

    def followed_path(self, path: str, base_commit: str, existed_at_base: bool) -> str:
        """Where a recorded file is now: itself, or where git's rename detection says it went."""
        if path in self._renames:
            return self._renames[path]
        followed = path
        if existed_at_base and self.read(path) is None and self.head(path) is None:
            followed = self.repo.follow_rename(path, base_commit) or path
        self._renames[path] = followed
        return followed

    def renamed(self, path: str) -> str:
        """The followed path of a file assessed earlier (symbols move with their file)."""
        return self._renames.get(path, path)

    def read(self, path: str) -> bytes | None:
        """The file as git sees it: what patches are recorded, merged and checked against."""
        if path not in self._content:
            try:
                raw = self.repo.read_raw(path)
            except UnsafePath as refusal:
                self.unsafe[path] = str(refusal)
                raw = None
            self._raw[path] = raw
            self._content[path] = None if raw is None else self.repo.to_git(path, raw)
        return self._content[path]

    def raw(self, path: str) -> bytes | None:
        """The file's bytes on disk (what undo keeps)."""
        self.read(path)
        return self._raw[path]

    def unmerged(self, path: str) -> dict[int, str]:
        """The stage entries git left for `path` (empty when it is merged): every path's are
        read at the first question, with one git call however many files are assessed."""
        if self._unmerged_read is None:
            self._unmerged_read = self.repo.unmerged()
        if path not in self._unmerged:
            self._unmerged[path] = self._unmerged_read.get(path, {})
        return self._unmerged[path]

    def pretend(self, path: str, content: bytes, stages: dict[int, str]) -> None:
        """Assess `path` as if it held `content` with these stage entries, before anything is
        written (guard.tree.unmerged); the bytes on disk, which undo keeps, stay as read."""
        self.raw(path)
        self._content[path] = content
        self._unmerged[path] = stages

    def head(self, path: str) -> bytes | None:
        if path not in self._head:
            commit = self.head_commit
            self._head[path] = None if commit is None else self.repo.file_at(commit, path)
        return self._head[path]

    def exists(self, path: str, *, file: bool = False) -> bool:
        """Is there something at `path` (a file, when `file`)? Remembered either way: a module
        that appears or goes there (a package that shadows one, a base, an `__init__.py`)
        changes what Python imports."""
        if (path, file) not in self._exists:  # each package's __init__.py: once per command
            full = self.repo.workdir / path
            self._exists[path, file] = full.is_file() if file else full.exists()
        found = self._exists[path, file]
        (self.present if found else self.absent).add(path)
        return found

    def bytes_on_disk(self) -> dict[str, bytes] | None:
        """Every file read so far as it is on disk (the fast path hashes those), or None if one
        is missing or not written yet."""
        if self._unwritten or None in self._raw.values():
            return None
        return {path: raw for path, raw in self._raw.items() if raw is not None}

    def stage(self, path: str, content: bytes | None) -> None:
        """A file's new content (as git sees it) that a dry run does not write: the patches
        after it are assessed against it, while the disk keeps its bytes. Several patches on
        one file stage it in turn."""
        self.read(path)
        self._content[path] = content
        self._unwritten.add(path)

    def wrote(self, path: str, content: bytes | None, raw: bytes | None) -> None:
        """A file's new content (as git sees it), now on disk as `raw` (None: deleted)."""
        self._content[path] = content
        self._raw[path] = raw
        self._unwritten.discard(path)
        for file in (True, False):
            self._exists.pop((path, file), None)

    def import_problem(self, path: str, content: bytes) -> str | None:
        """What around the module may stop its import or change its names (its packages'
        `__init__.py`, a relative import the checkout lacks): once per file, not per symbol."""
        if (path, content) not in self._import_problems:
            self._import_problems[path, content] = _package_problem(self, path) or _missing_import(
                self, content, path
            )
        return self._import_problems[path, content]

    def symbols(self, content: bytes, path: str) -> SymbolIndex:
        """Parse once per distinct content; raises SourceSyntaxError."""
        if content not in self._indexes:
            self._indexes[content] = parsed.parse(content, path, self.repo.parse_cache, self.facts)
        cached = self._indexes[content]
        if isinstance(cached, SourceSyntaxError):
            raise cached
        return cached

    def syntax(self, content: bytes, path: str) -> ast.Module | None:
        """The syntax tree itself, once per distinct content (None: it does not parse). Kept
        apart from `symbols`, whose cached index does not hold it: only bodies are compared
        with it, and only where the names are in place but the text is not the recorded one."""
        if content not in self._syntax:
            self._syntax[content] = bodies.parse(content, path)
        return self._syntax[content]

    def resolve(self, index: SymbolIndex, path: str, qualname: str, depth: int = 0) -> Resolution:
        """`index.resolve`, and, for a method its class leaves to a base imported from another
        module of this checkout, that module's answer (as attribute lookup goes on to it)."""
        found = index.resolve(qualname)
        if found.state == PRESENT:
            parts = [unicodedata.normalize("NFKC", part) for part in qualname.split(".")]
            why = self.reached_at_import(index, path).touching(parts) or self._init_changes(
                path, parts
            )
            if why is not None:
                return Resolution(CANNOT_TELL, None, f"code run at import may change it: {why}")
        if found.state != ABSENT or not found.inherit or depth >= _MAX_BASE_FILES:
            return found
        leaf = qualname.rsplit(".", 1)[-1]
        for origin in found.inherit:
            for other, name in _module_files(path, origin):
                if other not in self._content and not self.exists(other, file=True):
                    continue  # not read: a missing file would void the fast path
                content = self.read(other)
                if content is None:
                    continue
                try:
                    inherited = self.resolve(
                        self.symbols(content, other), other, f"{name}.{leaf}", depth + 1
                    )
                except SourceSyntaxError:
                    break
                if inherited.state != ABSENT:
                    return Resolution(
                        inherited.state, None, inherited.reason or f"inherited from {other}::{name}"
                    )
                break
        return found

    def reached_at_import(self, index: SymbolIndex, path: str) -> Reach:
        """What the module's import runs in other modules of the checkout may change (a base
        class's `__init_subclass__` or metaclass, a function it calls: guard.truth.effects), by the
        name it may change. Once per file and command."""
        effects = index.effects
        if effects is None:
            return Reach()
        if (path, id(effects)) not in self._reached:
            changes: dict[str, str] = {}
            seen: set[tuple[str, str, str]] = set()
            for kind, origin in sorted(effects.at_import.needs):
                self._reaches(path, kind, origin, effects, seen, 0, changes)
            self._reached[path, id(effects)] = Reach(changes)
        return self._reached[path, id(effects)]

    def _reaches(
        self,
        path: str,
        kind: str,
        origin: str,
        home: Effects,
        seen: set[tuple[str, str, str]],
        depth: int,
        changes: dict[str, str],
    ) -> None:
        """Add to `changes` what using `origin` (imported by `path`) as `kind` may change,
        followed through the modules of the checkout. A module outside it adds nothing: it
        changes a class only through what it is handed, and that was read where it is handed."""
        if (path, kind, origin) in seen:
            return
        seen.add((path, kind, origin))
        handed = None
        if kind in ("hands", "hands-result"):  # it gets a function or class of the module
            origin, handed = origin.split("\t")
            kind = "call" if kind == "hands" else "result"
        for other, name in self._checkout_modules(path, origin):
            if other not in self._content and not self.exists(other, file=True):
                continue
            content = self.read(other)
            if content is None:
                continue
            if depth >= _MAX_EFFECT_FILES:
                changes.setdefault(ANY, f"{origin} leads through more modules than reading follows")
                return
            try:
                effects = self.symbols(content, other).effects
            except SourceSyntaxError:
                return  # the import fails: said where the module is read
            if effects is None:
                changes.setdefault(ANY, f"{other} nests too deeply for reading")
                return
            first, _, rest = name.partition(".")
            reach = effects.export(kind, name)
            if reach is None and first in effects.imports:  # imported there: follow it
                onward = effects.imports[first] + (f".{rest}" if rest else "")
                self._reaches(other, kind, onward, home, seen, depth + 1, changes)
                return
            reach = reach or effects.value(first)  # a value its import made
            if reach is None:  # not bound there: from one of its star imports, if any
                for star in effects.stars:
                    self._reaches(other, kind, f"{star}.{name}", home, seen, depth + 1, changes)
                return
            if handed is not None:  # what it does with it: only what it is handed may run
                ran = home.reach(handed, home=True) if reach.runs_arguments else None
                for changed, why in (ran.changes if ran else {}).items():
                    changes.setdefault(changed, f"{name} in {other} runs what it is handed: {why}")
                return
            for changed, why in reach.changes.items():
                changes.setdefault(changed, f"{name} in {other} {why}")
            for need in sorted(reach.needs):
                self._reaches(other, *need, home, seen, depth + 1, changes)
            for attribute in sorted(reach.attributes):  # methods of the guarded module, too
                calls = home.reach(f"method:{attribute}", home=True)
                for changed, why in (calls.changes if calls else {}).items():
                    changes.setdefault(
                        changed, f"{name} in {other} calls .{attribute}, which {why}"
                    )
            return

    def _init_changes(self, path: str, parts: list[str]) -> str | None:
        """Why the code of a package's `__init__.py` around the module (run before it, and
        able to reach it: `from . import mod; strip(mod.C)`) may change one of these names."""
        folders = PurePosixPath(path).parent.parts
        for depth in range(len(folders), 0, -1):
            init = "/".join([*folders[:depth], "__init__.py"])
            if not self.exists(init, file=True):
                return None
            content = self.read(init)
            try:
                index = self.symbols(content, init) if content is not None else None
            except SourceSyntaxError:
                return None  # said as the package's import failing
            if index is None or index.effects is None:
                continue
            own = index.effects.at_import.touching(parts)
            why = own or self.reached_at_import(index, init).touching(parts)
            if why is not None:
                return f"{init}: {why}"
        return None

    def _checkout_modules(self, path: str, origin: str) -> Iterator[tuple[str, str]]:
        """`_module_files` of an origin that may be a module of the checkout: a relative one,
        or an absolute one whose top-level package sits at the import root of `path`'s own
        package (`torch.cuda` is looked for once, as `torch` there, not under every folder)."""
        if origin.startswith("."):
            yield from _module_files(path, origin)
            return
        parts = PurePosixPath(path).parent.parts
        top = len(parts)
        while top > 0 and self.exists("/".join([*parts[:top], "__init__.py"]), file=True):
            top -= 1
        root = "/".join([*parts[:top], origin.split(".")[0]])
        if self.exists(root) or self.exists(f"{root}.py", file=True):
            for other, name in _module_files(path, origin):
                if other.startswith((f"{root}/", f"{root}.py")):
                    yield other, name

    def symbol_problems(
        self, content: bytes, path: str, qualnames: Iterable[str], *, decided_only: bool = False
    ) -> dict[str, str]:
        """Why each of `qualnames` is not surely defined exactly once at its place in `content`.

        `decided_only`: leave out the ones reading cannot decide (a merge that keeps them
        breaks nothing that reading could see; `check` then says to ask Python).
        """
        qualnames = list(qualnames)
        if not qualnames:
            return {}
        # A name that appears nowhere in the text is certainly missing: say so without parsing
        # (parsing a large file takes seconds). Presence is decided by parsing only.
        absent = {
            q: f"not defined in {path}" for q in qualnames if not _mentions_definition(content, q)
        }
        if len(absent) == len(qualnames):
            return absent
        try:
            index = self.symbols(content, path)
        except SourceSyntaxError as error:
            reason = f"{error.path}:{error.lineno}: syntax error: {error.message}"
            return dict.fromkeys(qualnames, reason)
        problems = {}
        for qualname in qualnames:
            found = self.resolve(index, path, qualname)
            if found.state == CANNOT_TELL:
                if not decided_only:
                    problems[qualname] = f"{CANNOT_TELL_FROM_READING}: {found.reason}"
            elif found.state == ABSENT:
                problems[qualname] = _why_absent(index, Spec(path, qualname), found.reason)
            elif duplicates := index.duplicates(qualname):
                lines = ", ".join(str(d.lineno) for d in duplicates)
                problems[qualname] = (
                    f"defined {len(duplicates)} times (lines {lines}); the last one silently wins"
                )
        return problems


_MAX_BASE_FILES = 8  # a chain of bases across modules deeper than this is not followed
_MAX_EFFECT_FILES = 12  # modules followed from one import-time use (guard.truth.effects)


def _module_files(path: str, origin: str) -> Iterator[tuple[str, str]]:
    """(file, qualified name in it) that an import origin may name, seen from `path`: for
    `.base.B`, `base.py` or `base/__init__.py` beside it; for `pkg.mod.B`, `pkg/mod.py` under
    any directory above `path` (the checkout's import roots are not known from here)."""
    dotted = origin.lstrip(".")
    level = len(origin) - len(dotted)
    parts = dotted.split(".")
    here = PurePosixPath(path).parent
    if level:
        for _ in range(level - 1):
            here = here.parent
        roots, smallest = [here], 0
    else:
        roots, smallest = [here, *here.parents], 1
    for root in roots:
        for split in range(len(parts) - 1, smallest - 1, -1):
            module = root.joinpath(*parts[:split])
            for candidate in (f"{module}.py", f"{module}/__init__.py"):
                if candidate.startswith("./"):
                    candidate = candidate[2:]
                yield candidate, ".".join(parts[split:])


def _mentions_definition(content: bytes, qualname: str) -> bool:
    """Could `content` bind `qualname`? Only a plain ASCII name can be ruled out as bytes."""
    name = qualname.rsplit(".", 1)[-1]
    mangled = re.fullmatch(r"_[^\W_]\w*?(__\w+)", name)
    name = mangled.group(1) if mangled else name  # `C._C__m` is written `__m` in C
    if hasattr(type, name):
        return True  # every class has it (`__init__`)
    if not name.isascii() or not content.isascii():
        return True  # Python compares identifiers NFKC-normalised: a fullwidth m binds `m`
    return name.encode() in content  # a longer name that contains it only costs a parse


def _why_absent(index: SymbolIndex, spec: Spec, reason: str) -> str:
    """The resolution's reason, or, for a name defined but not where Python looks, which."""
    if not reason.startswith(NOT_DEFINED):
        return reason
    rest = reason[len(NOT_DEFINED) :]  # e.g. what an unread base might still provide
    defined = index.find(spec.qualname)
    if defined:
        return (
            f"defined at line {defined[-1].lineno}, but not where Python finds it at runtime: "
            "a later binding of its class replaces it, or it sits under `if TYPE_CHECKING:` "
            f"or a test that is always false{rest}"
        )
    return describe_miss(index, spec) + rest


def required_in(patch: Patch, path: str) -> list[str]:
    return [spec.qualname for spec in map(parse_spec, patch.requires) if spec.path == path]


def merge_labels(patch: Patch) -> tuple[str, str, str]:
    return ("recorded base", "working tree", f"patch {patch.name}")


def assess_file(repo: Repo, tree: Worktree, patch: Patch, change: FileChange) -> FileVerdict:
    """Decide one file's state by content; see docs/concepts.md for the rules."""
    path = tree.followed_path(change.path, patch.base_commit, change.base_blob is not None)
    verdict = _conflicted(tree, path) or _assess_versions(repo, tree, patch, change, path)
    if verdict.state in GOOD_STATES:  # never green on a file Python cannot even read
        verdict = _unparsable(tree, path) or verdict
    if path != change.path:
        verdict.detail += f" (followed the rename {change.path} -> {path})"
    return verdict


def _assess_versions(
    repo: Repo, tree: Worktree, patch: Patch, change: FileChange, path: str
) -> FileVerdict:
    """The recording, or a resolution of it, nearest first: the first that merges decides.

    Nearest means the version whose base is closest to HEAD's file: on the recorded base that
    is the recording itself (byte for byte as recorded), on a commit resolved by hand that
    resolution, and between them whichever upstream moved least from.
    """
    first = None
    for version, resolution in _nearest_first(repo, tree, change, path):
        verdict = _assess_at(repo, tree, patch, version, path)
        verdict.version = version
        if resolution is not None:
            verdict.detail += f" (from the resolution made at {resolution.commit[:7]})"
        if verdict.state is not State.CONFLICT:  # `edited` too: this version is the reference
            return verdict
        first = first or verdict
    assert first is not None
    return first


def _nearest_first(
    repo: Repo, tree: Worktree, change: FileChange, path: str
) -> list[tuple[FileChange, PatchResolution | None]]:
    """Every version of one file's change, the one whose base is nearest HEAD's file first."""
    versions: list[tuple[FileChange, PatchResolution | None]] = [(change, None)]
    versions += [
        (
            replace(
                change,
                base_blob=r.base_blob,
                patched_blob=r.patched_blob,
                diff=r.diff,
                resolutions=[],
            ),
            r,
        )
        for r in change.resolutions
    ]
    head = tree.head(path)
    if len(versions) == 1 or head is None:
        return versions

    def distance(version: FileChange) -> int:
        base = repo.blob(version.base_blob) if version.base_blob else b""
        if base == head:
            return 0
        text = repo.diff(base, head, path).text
        return 1 + text.count("\n+") + text.count("\n-")

    return sorted(versions, key=lambda item: distance(item[0]))  # stable: a tie keeps order


def _assess_at(
    repo: Repo, tree: Worktree, patch: Patch, change: FileChange, path: str
) -> FileVerdict:
    tree.read(path)
    if path in tree.unsafe:
        return FileVerdict(path, State.UNSAFE_PATH, tree.unsafe[path])
    base = repo.blob(change.base_blob) if change.base_blob else b""
    patched = repo.blob(change.patched_blob)
    head = tree.head(path)
    if head is not None and _contains_change(repo, base, head, patched, merge_labels(patch)):
        return FileVerdict(path, State.UPSTREAM, UPSTREAM_AS_TEXT)
    in_head = (
        tree.symbol_problems(head, path, change.added_symbols)
        if head is not None and change.added_symbols
        else None
    )
    if in_head == {}:  # HEAD surely binds everything the patch adds: upstream has it
        return _assess_absorbed(repo, tree, patch, change, path, base, patched)
    verdict = _assess_change(repo, tree, patch, change, path, base, patched, change.added_symbols)
    if in_head and all(why.startswith(CANNOT_TELL_FROM_READING) for why in in_head.values()):
        names = ", ".join(q.rsplit(".", 1)[-1] for q in in_head)
        verdict.detail += (
            f"; HEAD has a conditional copy of {names}, so the patch's own copy stays "
            f"({next(iter(in_head.values()))})"
        )
    return verdict


def _conflicted(tree: Worktree, path: str) -> FileVerdict | None:
    """The file itself is in conflict: whatever HEAD holds, no patch state is true of it.

    The index's stage entries first (git knows), then markers in the text (a conflict `git add`
    accepted, or `apply --merge` wrote). Whether it parses is asked only of a file that would
    otherwise be green (_unparsable): a large file takes long to parse, and apply checks
    every merge it writes anyway.
    """
    current = tree.read(path)
    markers = marker_lines(current) if current is not None else []
    at = f" at line{'s' if len(markers) > 1 else ''} {', '.join(map(str, markers))}"
    if tree.unmerged(path):
        detail = "git left it unmerged: a stash pop, autostash or checkout -m conflicted here"
        if markers:
            detail += f"; conflict markers{at}"
        return FileVerdict(path, State.CONFLICTED, detail, conflict=UNMERGED)
    if markers:
        return FileVerdict(path, State.CONFLICTED, f"conflict markers{at}", conflict=MARKERS)
    return None


def _unparsable(tree: Worktree, path: str) -> FileVerdict | None:
    """A Python file that does not parse (the parse is kept for the symbol checks)."""
    current = tree.read(path)
    if current is None or not path.endswith(".py"):
        return None
    try:
        tree.symbols(current, path)
    except SourceSyntaxError as error:
        detail = f"does not parse: {error.path}:{error.lineno}: {error.message}"
        return FileVerdict(path, State.CONFLICTED, detail, conflict=SYNTAX)
    return None


def _assess_absorbed(
    repo: Repo,
    tree: Worktree,
    patch: Patch,
    change: FileChange,
    path: str,
    base: bytes,
    patched: bytes,
) -> FileVerdict:
    """HEAD defines every symbol the patch adds: what stands is the rest of the patch, if any.

    The worktree may still carry the patch's own copy of those definitions (a stash or an
    autostash merged back by git): that is `doubled`, and apply takes the copy out.
    """
    labels = merge_labels(patch)
    rest = _without_definitions(repo, tree, change, base, patched)
    current = tree.read(path)
    head = tree.head(path)
    assert head is not None
    names = ", ".join(q.rsplit(".", 1)[-1] for q in change.added_symbols)
    if current is not None and _defines_twice(tree, current, path, change.added_symbols):
        repaired = _take_copy_out(repo, base, patched, rest, current, labels)
        if repaired is None or tree.symbol_problems(
            repaired, path, required_in(patch, change.path)
        ):
            return FileVerdict(
                path,
                State.CONFLICT,
                f"HEAD already defines {names} and the worktree carries the patch's copy too; "
                "the copy cannot be taken out cleanly",
            )
        return FileVerdict(
            path,
            State.DOUBLED,
            f"HEAD already defines {names}, and the worktree carries the patch's own copy too "
            "(git merged a stash back), so each is defined twice",
            repaired,
            rest,
        )
    if _contains_change(repo, base, head, rest, labels):
        detail = "HEAD already defines every symbol this patch adds"
        if rest != base:
            detail += ", and has the rest of the patch"
        return FileVerdict(path, State.UPSTREAM, detail)
    verdict = _assess_change(repo, tree, patch, change, path, base, rest, ())
    verdict.detail = f"HEAD defines {names}; the rest of the patch: {verdict.detail}"
    return verdict


def _take_copy_out(
    repo: Repo,
    base: bytes,
    patched: bytes,
    rest: bytes,
    current: bytes,
    labels: tuple[str, str, str],
) -> bytes | None:
    """`current` without the patch's own definitions but with the rest; None if not clean."""
    cleaned = repo.merge3(patched, current, rest, labels)
    if not cleaned.clean:
        return None
    if _contains_change(repo, base, cleaned.content, rest, labels):
        return cleaned.content
    forward = repo.merge3(base, cleaned.content, rest, labels)
    return forward.content if forward.clean else None


def _assess_change(
    repo: Repo,
    tree: Worktree,
    patch: Patch,
    change: FileChange,
    path: str,
    base: bytes,
    patched: bytes,
    added_symbols: Sequence[str],
) -> FileVerdict:
    """The state of the change base -> patched in the worktree (HEAD does not hold it)."""
    labels = merge_labels(patch)
    current = tree.read(path)
    head = tree.head(path)
    if current is None:
        if change.base_blob is None:
            return FileVerdict(path, State.UNAPPLIED, "the patch creates this file", patched)
        if head is not None and path in repo.outside_sparse_checkout():
            return FileVerdict(
                path, State.OUTSIDE_SPARSE, "the sparse checkout leaves this file out"
            )
        return FileVerdict(path, State.MISSING_FILE, "the file does not exist in the worktree")
    if _contains_change(repo, base, current, patched, labels):
        return FileVerdict(path, State.APPLIED, "the worktree contains the change", None, patched)
    if (
        added_symbols
        and not tree.symbol_problems(current, path, added_symbols)
        and _without_definitions(repo, tree, change, base, patched) == base
    ):
        upgrade = _upgrade_from_earlier(repo, tree, patch, change, path, current, patched)
        if upgrade is not None:
            return upgrade
        edited = _edited(tree, patch, change, path, current, patched, added_symbols)
        if edited is not None:
            return edited
        return FileVerdict(
            path,
            State.APPLIED,
            "every definition the patch adds is in place (text edited since)",
            None,
            patched,
        )
    forward = repo.merge3(base, current, patched, labels)
    if not forward.clean:  # an earlier version the update grew from may merge where this cannot
        upgrade = _upgrade_from_earlier(repo, tree, patch, change, path, current, patched)
        if upgrade is not None:
            return upgrade
        return FileVerdict(
            path,
            State.CONFLICT,
            "the lines it changes were changed here too",
            forward.content,
        )
    required = required_in(patch, change.path)
    problems = tree.symbol_problems(forward.content, path, required, decided_only=True)
    if problems:
        return FileVerdict(
            path,
            State.CONFLICT,
            "a clean text merge would break required symbols: "
            + "; ".join(f"{name}: {why}" for name, why in problems.items()),
        )
    if head == (base if change.base_blob else None):
        return FileVerdict(path, State.UNAPPLIED, "applies cleanly", forward.content, patched)
    return FileVerdict(
        path,
        State.DRIFTED,
        "the file moved on since the patch's base; merges cleanly",
        forward.content,
        patched,
    )


def _edited(
    tree: Worktree,
    patch: Patch,
    change: FileChange,
    path: str,
    current: bytes,
    patched: bytes,
    added_symbols: Sequence[str],
) -> FileVerdict | None:
    """Every added name is in place, the text is not the recorded one: is each definition's
    code the recorded code (guard.truth.bodies)? If not, the file is `edited`, and what `apply`
    would write puts the recorded lines of those definitions back, every other line kept
    (None when that would not parse or not hold the recorded code: then by hand)."""
    found, holds = _body_edits(
        tree, current, patched, path, added_symbols, required_in(patch, change.path)
    )
    if not found:
        return None
    restored = bodies.restored(current, patched, found)
    # A method's edit is said of the method, not again of its class (unless the class differs
    # before it: then both)
    said = [
        edit
        for edit in found
        if not any(
            inner.qualname.startswith(f"{edit.qualname}.")
            and inner.span[0] <= edit.line <= inner.span[1]
            for inner in found
        )
    ]
    detail = "; ".join(edit.describe() for edit in said)
    recording = any(c.patched_blob == change.patched_blob for c in patch.files)
    return FileVerdict(
        path,
        State.EDITED,
        detail,
        restored if holds else None,
        patched,
        keep_by_resolving=not recording or tree.head_commit != patch.base_commit,
    )


def _body_edits(
    tree: Worktree,
    current: bytes,
    patched: bytes,
    path: str,
    qualnames: Sequence[str],
    required: Sequence[str],
) -> tuple[list[bodies.Edit], bool]:
    """The definitions of `current` whose code is not `patched`'s, and whether putting their
    recorded lines back gives a file that parses and holds every required symbol. Kept by the
    contents beside the parses (guard.truth.parsed's cache): a file compared once is not parsed
    again for it, so a red check repeated costs what any other does."""
    inputs = [fastpath.model_namespace(), bodies.rules_id(), objects.blob_id(current)]
    inputs += [objects.blob_id(patched), *qualnames, "", *required]
    key = "bodies-" + objects.digest("\0".join(inputs).encode())
    kept = tree.repo.parse_cache.get(key)
    if kept is not None:
        try:
            found, holds = pickle.loads(kept)
        except Exception:  # what a changed patchguard wrote: a miss
            pass
        else:
            return list(found), bool(holds)
    here, recorded = tree.syntax(current, path), tree.syntax(patched, path)
    if here is None or recorded is None:
        return [], False  # a file that does not parse is `conflicted` (_unparsable)
    recorded_at = _definition_lines(tree, patched, path, qualnames)
    found = bodies.edits(
        current,
        here,
        _definition_lines(tree, current, path, qualnames),
        patched,
        recorded,
        recorded_at,
    )
    holds = False
    if found:
        restored = bodies.restored(current, patched, found)
        again = tree.syntax(restored, path)
        holds = (
            again is not None
            and not bodies.edits(
                restored,
                again,
                _definition_lines(tree, restored, path, qualnames),
                patched,
                recorded,
                recorded_at,
            )
            and not tree.symbol_problems(restored, path, required)
        )
    tree.repo.parse_cache.put(key, pickle.dumps((found, holds), protocol=pickle.HIGHEST_PROTOCOL))
    return found, holds


def _definition_lines(
    tree: Worktree, content: bytes, path: str, qualnames: Sequence[str]
) -> dict[str, int]:
    """Where each of `qualnames` is defined in `content` (the last definition, which Python
    keeps), from its index, parsed once."""
    index = tree.symbols(content, path)
    return {q: index.find(q)[-1].lineno for q in qualnames if index.find(q)}


def _upgrade_from_earlier(
    repo: Repo,
    tree: Worktree,
    patch: Patch,
    change: FileChange,
    path: str,
    current: bytes,
    patched: bytes,
) -> FileVerdict | None:
    """The worktree holds another version of this patch from the history: an earlier one (the
    patch was updated since by a fetch, an import or a re-record elsewhere) or a later one (an
    undo took it back). Its definitions, but not this version's text (the update may change
    one, or add one right beside them, which a merge from the patch's base cannot place). The
    recorded version is merged onto the file from the one it holds, keeping the user's other
    edits. None when no version is what the file holds (the user edited the patch by hand, or
    never had it)."""
    from guard.store import history  # only here: definitions in place, text not the recorded one

    labels = merge_labels(patch)
    for earlier in history.earlier_versions(repo, patch.name, change.path):
        if earlier.patched_blob == change.patched_blob:
            continue
        old_base = repo.blob(earlier.base_blob) if earlier.base_blob else b""
        old_patched = repo.blob(earlier.patched_blob)
        if not _contains_change(repo, old_base, current, old_patched, labels):
            continue
        upgrade = repo.merge3(old_patched, current, patched, labels)
        held = _held_version(repo, change, earlier)
        if upgrade.clean and not tree.symbol_problems(
            upgrade.content, path, required_in(patch, change.path)
        ):
            return FileVerdict(
                path,
                State.DRIFTED,
                f"{held}; the recorded one merges cleanly onto it",
                upgrade.content,
                patched,
                held=earlier,
            )
        return FileVerdict(
            path,
            State.CONFLICT,
            f"{held}, and the recorded one does not merge with your edits there",
            held=earlier,
        )
    return None


def _held_version(repo: Repo, recorded: FileChange, held: FileChange) -> str:
    """What the worktree holds, in words, "earlier" or "later" read from the history."""
    from guard.store.version_order import LATER, order

    found = order(repo, held.patched_blob, recorded.patched_blob)
    if found is None:
        return "the worktree holds another version of this patch"
    made = f"the {found.made_by} one, " if found.made_by else ""
    since = "taken back since" if found.held == LATER else "updated since"
    return f"the worktree holds {found.article()} version of this patch: {made}{since}"


def _contains_change(
    repo: Repo, base: bytes, text: bytes, patched: bytes, labels: tuple[str, str, str]
) -> bool:
    """Does `text` already hold base->patched? Merging it in changes nothing, or it reverses cleanly."""
    if text == patched:
        return True
    if base == patched:
        return True
    forward = repo.merge3(base, text, patched, labels)
    if forward.clean and forward.content == text:
        return True
    backward = repo.merge3(patched, text, base, labels)
    if not backward.clean or backward.content == text:
        return False
    again = repo.merge3(base, backward.content, patched, labels)
    return again.clean and again.content == text


def _without_definitions(
    repo: Repo, tree: Worktree, change: FileChange, base: bytes, patched: bytes
) -> bytes:
    """`patched` less the definitions the patch adds (with their blank and comment lines).

    What remains is the rest of the patch; it equals `base` for a patch that only adds
    definitions. A run of added lines that holds a definition loses its blank and comment-only
    lines too, so a header comment above a method goes with the method.
    """
    if not change.added_symbols:
        return patched
    index = tree.symbols(patched, change.path)
    spans = {
        line
        for qualname in change.added_symbols
        for d in index.find(qualname)
        for line in range(d.start_lineno, d.end_lineno + 1)
    }
    lines = patched.splitlines(keepends=True)
    drop: set[int] = set()
    run: list[int] = []
    for number in [*sorted(repo.diff(base, patched, change.path).added_lines), -1]:
        if run and number != run[-1] + 1:
            if spans.intersection(run):
                drop.update(n for n in run if n in spans or lines[n - 1].strip()[:1] in (b"", b"#"))
            run = []
        run.append(number)
    return b"".join(line for n, line in enumerate(lines, 1) if n not in drop)


def _defines_twice(tree: Worktree, content: bytes, path: str, qualnames: Sequence[str]) -> bool:
    try:
        index = tree.symbols(content, path)
    except SourceSyntaxError:
        return False
    return any(index.duplicates(q) for q in qualnames)


def assess_patch(
    repo: Repo, tree: Worktree, patch: Patch, below: Sequence[Patch] = ()
) -> PatchVerdict:
    """`below`: the patches before it in the manifest, which a conflict may be stacked on."""
    verdict = PatchVerdict(patch.name, [assess_file(repo, tree, patch, c) for c in patch.files])
    for change, file_verdict in zip(patch.files, verdict.files, strict=True):
        if file_verdict.state is not State.CONFLICT:
            continue
        file_verdict.stacked_on = [
            lower.name
            for lower in stacked(repo, [*below, patch], patch, change.path, above=False)
            if not assess_patch(repo, tree, lower).ok
        ]
        if file_verdict.stacked_on:
            file_verdict.detail += (
                f"; it was recorded on top of patch {', '.join(file_verdict.stacked_on)}, "
                "not applied here"
            )
    return verdict


def stacked(
    repo: Repo, patches: Sequence[Patch], patch: Patch, path: str, *, above: bool
) -> list[Patch]:
    """The patches recorded on top of `patch`'s change of `path` (`above`), or those it was
    recorded on top of, directly or through one another; in manifest order."""
    index = patches.index(patch)
    others = patches[index + 1 :] if above else patches[:index][::-1]
    chain = [patch]
    for other in others:
        if any(
            stacks_on(repo, other, p, path) if above else stacks_on(repo, p, other, path)
            for p in chain
        ):
            chain.append(other)
    return chain[1:] if above else chain[:0:-1]


def stacks_on(repo: Repo, upper: Patch, lower: Patch, path: str) -> bool:
    """Was `upper`'s change of `path` recorded on top of `lower`'s (its base holds that change)?

    Then a 3-way merge may take one out or put one on without the other only where their lines
    do not touch, as git's own merge (and a rebase that reorders commits) decides.
    """
    mine = next((c for c in upper.files if c.path == path), None)
    theirs = next((c for c in lower.files if c.path == path), None)
    if mine is None or theirs is None or mine.base_blob is None:
        return False
    return _contains_change(
        repo,
        repo.blob(theirs.base_blob) if theirs.base_blob else b"",
        repo.blob(mine.base_blob),
        repo.blob(theirs.patched_blob),
        merge_labels(lower),
    )


def select_patches(manifest: Manifest, names: Sequence[str]) -> list[Patch]:
    """Patches by name in manifest order; all of them when no names are given."""
    unknown = [n for n in names if manifest.patch(n) is None]
    if unknown:
        known = ", ".join(p.name for p in manifest.patches) or "none"
        raise ConfigError(
            f"no patch named {', '.join(unknown)} (recorded: {known}). See `patchguard list`."
        )
    return [p for p in manifest.patches if not names or p.name in names]


def status(
    repo: Repo, names: Sequence[str] = (), tree: Worktree | None = None
) -> list[PatchVerdict]:
    manifest = repo.load_manifest()
    tree = tree or Worktree(repo)
    tree.prefetch(manifest.patches)
    verdicts = []
    for patch in select_patches(manifest, names):
        below = manifest.patches[: manifest.patches.index(patch)]
        verdict = assess_patch(repo, tree, patch, below)
        verdict.committed_in_head = _committed_in_head(repo, patch, verdict)
        verdicts.append(verdict)
    return verdicts


def status_report(repo: Repo, names: Sequence[str] = ()) -> CheckReport:
    """`status`: the patches' states, and their required symbols (every guard's too when no
    name is given), so that `status` fails exactly when `check` would. Never remembered."""
    tree = Worktree(repo)
    verdicts = status(repo, names, tree)
    manifest = repo.load_manifest()
    patches = select_patches(manifest, names)
    symbols = [check_symbol(tree, spec, owner) for spec, owner in _owners(manifest, patches)]
    if not names:
        symbols += [check_symbol(tree, spec, None) for spec in manifest.guards]
    return CheckReport(
        head=repo.head_commit(),
        patches=verdicts,
        symbols=symbols,
        warnings=stray_copies(tree, patches),
    )


def _owners(manifest: Manifest, patches: Sequence[Patch]) -> list[tuple[str, str | None]]:
    """Each required symbol of `patches` with the patch that requires it."""
    return [(spec, p.name) for p in patches for spec in p.requires]


def _committed_in_head(repo: Repo, patch: Patch, verdict: PatchVerdict) -> CommittedPatch | None:
    """Did HEAD's own commit bring this exact change (a `git commit -a` that swept it in)?

    Only for a change HEAD holds as text; upstream absorbing it with other text is not that.
    Nor is a commit a remote-tracking branch or a tag holds: that is upstream's (a release that
    absorbed the patch as it was), and the advice to amend it would rewrite upstream history.
    """
    if any(f.detail != UPSTREAM_AS_TEXT for f in verdict.files):
        return None
    if repo.head_is_published():
        return None
    parent = repo.head_parent()
    only_the_patch = repo.head_commit_paths() <= {c.path for c in patch.files}
    for change in patch.files:
        before = repo.file_at(parent, change.path) if parent else None
        base = repo.blob(change.base_blob) if change.base_blob else b""
        patched = repo.blob(change.patched_blob)
        labels = merge_labels(patch)
        if before is not None and _contains_change(repo, base, before, patched, labels):
            return None
        after = repo.merge3(base, before or b"", patched, labels)
        only_the_patch = only_the_patch and after.content == repo.head_file(change.path)
    return CommittedPatch(repo.head_summary(), only_the_patch)


def check(repo: Repo, tree: Worktree | None = None) -> CheckReport:
    """Read-only: every patch's state, and every required symbol at its qualified place.

    `tree`: a view already holding the files (patching.apply_then_check), read once.
    """
    with one_walk():  # only git's read-only commands run meanwhile
        return _check(repo, tree)


def _check(repo: Repo, tree: Worktree | None) -> CheckReport:
    manifest = repo.load_manifest()
    tree = tree or Worktree(repo)
    tree.prefetch(manifest.patches)
    verdicts = [
        assess_patch(repo, tree, p, manifest.patches[:i]) for i, p in enumerate(manifest.patches)
    ]
    owners = _owners(manifest, manifest.patches)
    owners += [(spec, None) for spec in manifest.guards]
    symbols = [check_symbol(tree, spec, owner) for spec, owner in owners]
    head = tree.head_commit
    report = CheckReport(
        head=head,
        patches=verdicts,
        symbols=symbols,
        warnings=stray_copies(tree, manifest.patches),
    )
    remembered = not report.checks_nothing and not report.warnings and tree.facts is None
    if report.ok and head is not None and remembered:
        _remember_verified(repo, tree, head)
    return report


def stray_copies(tree: Worktree, patches: Sequence[Patch]) -> list[str]:
    """Module-level functions named as a method a patch adds to that file, whose first
    parameter is `self`: copies of the method typed outside its class (the heredoc's slip),
    left behind when the patch went back in. Python never runs them as the method, and the
    next edit may go to the wrong copy. Read from the index already parsed; the syntax tree
    (for `self`) only where such a name is defined at module level."""
    found = []
    for patch in patches:
        for change in patch.files:
            path = tree.renamed(change.path)
            methods = {q.rsplit(".", 1)[1]: q for q in change.added_symbols if "." in q}
            current = tree.read(path)
            if current is None or not any(_mentions_definition(current, q) for q in methods):
                continue
            try:
                index = tree.symbols(current, path)
            except SourceSyntaxError:
                continue  # said as a syntax error already
            if not any(d.kind == "def" for name in methods for d in index.find(name)):
                continue
            syntax = tree.syntax(current, path)
            for node in slips.module_methods(syntax) if syntax is not None else []:
                if node.name not in methods:
                    continue
                method = index.resolve(methods[node.name])
                runs = (
                    f"the class's own, line {method.lineno}, is the one that runs"
                    if method.state == PRESENT
                    else f"the class has none: patchguard apply {patch.name} puts it back"
                )
                found.append(
                    f"{path}:{node.lineno}: def {node.name}(self, ...) at module level is a "
                    f"stray copy of patch {patch.name}'s method {methods[node.name]}, which "
                    f"Python never runs as the method ({runs}) -> delete lines "
                    f"{node.lineno}-{node.end_lineno} of {path}"
                )
    return found


def _remember_verified(repo: Repo, tree: Worktree, head: str) -> None:
    """Let the fast path skip this exact content next time (see guard.store.fastpath)."""
    contents = tree.bytes_on_disk()
    if contents is not None:
        fastpath.remember(
            str(repo.layout.git_dir),
            str(repo.layout.common_dir),
            str(repo.workdir),
            repo.manifest_bytes,
            head,
            contents,
            (tree.absent - contents.keys(), tree.present - contents.keys()),
            repo.index_file,
        )


def _package_problem(tree: Worktree, path: str) -> str | None:
    """What the packages around a module may do to it: importing `pkg.mod` runs each parent's
    `__init__.py` first (innermost last), and one that may fail, rebinds through reflection,
    or sets or deletes attributes (`mod.C = None`) makes the module's answers cannot tell."""
    parts = path.split("/")[:-1]
    for depth in range(len(parts), 0, -1):
        init = "/".join([*parts[:depth], "__init__.py"])
        if not tree.exists(init, file=True):  # the top of the package (or a namespace)
            return None
        content = tree.read(init)
        if content is None:
            return None
        try:
            index = tree.symbols(content, init)
        except SourceSyntaxError as error:
            return f"importing the package fails: {init}:{error.lineno}: {error.message}"
        model = index.model
        why = model.unreadable or model.fails or model.may_fail
        if why:
            return f"importing the package may fail or be unreadable: {init}: {why}"
        if index.reflection is not None:
            line, what = index.reflection
            return f"{init}:{line} reaches bindings by reflection ({what})"
        if index.attribute_write is not None:
            return f"{init}:{index.attribute_write} sets or deletes an attribute when imported"
    return None


def _missing_import(tree: Worktree, content: bytes, path: str) -> str | None:
    """A relative import, run at the top of the module, of a module the checkout lacks: the
    import of the module itself fails there (a module of the checkout is never installed
    elsewhere)."""
    try:
        index = tree.symbols(content, path)
    except SourceSyntaxError:
        return None  # said as a syntax error already
    for lineno, level, module in index.relative_imports:
        parts = path.split("/")[:-1]
        if level - 1 > len(parts):
            return f"line {lineno} imports from beyond the top of the package"
        base = "/".join([*parts[: len(parts) - (level - 1)], *module.split(".")])
        if not any(tree.exists(c) for c in (f"{base}.py", base, f"{base}.pyi")):
            folder = tree.repo.workdir / base
            compiled = next(folder.parent.glob(f"{folder.name}.*"), None)  # an extension module
            if compiled is None:
                return f"line {lineno} imports .{module}, which the checkout does not have"
            tree.present.add(str(compiled.relative_to(tree.repo.workdir)))
    return None


def check_symbol(tree: Worktree, text: str, owner: str | None) -> SymbolResult:
    spec = parse_spec(text)
    spec = Spec(tree.renamed(spec.path), spec.qualname)
    content = tree.read(spec.path)
    if content is None:
        return SymbolResult(text, False, f"{spec.path} does not exist", owner)
    package = spec.path.removesuffix(".py")
    if tree.exists(f"{package}/__init__.py", file=True):  # found first by the import
        return SymbolResult(
            text,
            False,
            f"the package {package}/ beside {spec.path} shadows it: `import` loads the "
            "package, never this file",
            owner,
            ABSENT,
        )
    problems = tree.symbol_problems(content, spec.path, [spec.qualname])
    around = tree.import_problem(spec.path, content)
    if around is not None and not problems:
        problems = {spec.qualname: f"{CANNOT_TELL_FROM_READING}: {around}"}
    if problems:
        problem = problems[spec.qualname]
        state = CANNOT_TELL if problem.startswith(CANNOT_TELL_FROM_READING) else ABSENT
        return SymbolResult(text, False, problem, owner, state)
    found = tree.resolve(tree.symbols(content, spec.path), spec.path, spec.qualname)
    where = f"{spec.path}:{found.lineno}" if found.lineno else found.reason
    return SymbolResult(text, True, where, owner)
