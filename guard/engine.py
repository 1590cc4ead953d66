"""The apply engine: decide each patch's state by content, and apply, unapply, record and check.

A state is never decided by searching for a string. Text is compared by 3-way merges
(libgit2), symbols by parsing (guard.symbols). A merge is only written when it is clean
*and* every required symbol sits exactly once at its qualified place in the result.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from guard import fastpath
from guard.errors import ConfigError, GuardFailure
from guard.journal import Journal
from guard.manifest import FileChange, Manifest, Patch, describe_validation
from guard.repo import Repo, is_binary
from guard.symbols import SourceSyntaxError, Spec, SymbolIndex, describe_miss, parse_spec

_Operation = TypeVar("_Operation", bound=Callable[..., Any])


def _locked(operation: str) -> Callable[[_Operation], _Operation]:
    """Run an operation that writes under the repository's lock (see guard.lock)."""

    def decorate(function: _Operation) -> _Operation:
        @functools.wraps(function)
        def locked(repo: Repo, *args: Any, **kwargs: Any) -> Any:
            with repo.lock(operation):
                return function(repo, *args, **kwargs)

        return cast(_Operation, locked)

    return decorate


class State(StrEnum):
    APPLIED = "applied"
    UNAPPLIED = "unapplied"
    DRIFTED = "drifted"
    UPSTREAM = "upstream"
    CONFLICT = "conflict"
    DOUBLED = "doubled"
    MISSING_FILE = "missing-file"


GOOD_STATES = frozenset({State.APPLIED, State.UPSTREAM})
# A patch is as bad as its worst file; mixed applied/upstream files make it "applied".
_SEVERITY = [
    State.MISSING_FILE,
    State.CONFLICT,
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


@dataclass
class PatchVerdict:
    name: str
    files: list[FileVerdict]

    @property
    def state(self) -> State:
        states = {f.state for f in self.files}
        return next(s for s in _SEVERITY if s in states)

    @property
    def ok(self) -> bool:
        return self.state in GOOD_STATES


@dataclass
class SymbolResult:
    spec: str
    ok: bool
    detail: str
    patch: str | None


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

    @property
    def ok(self) -> bool:
        parts = (*self.patches, *self.symbols, *self.imports)
        return all(part.ok for part in parts)

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
                    f"{verdict.path}: patch {patch.name} is {verdict.state} ({verdict.detail})"
                    f"{symbols} -> {fix_for(patch.name, verdict.state)}"
                )
        for symbol in self.symbols:
            spec = parse_spec(symbol.spec)
            if symbol.ok or (symbol.patch, spec.path) not in broken:
                continue
            if symbol.patch:
                fix = f"restore it, or re-record: patchguard record {symbol.patch}"
            else:
                fix = f"restore it, or stop guarding it: patchguard drop {symbol.spec}"
            lines.append(f"{symbol.spec}: missing ({symbol.detail}) -> {fix}")
        lines += [f"import {i.module}: {i.detail}" for i in self.imports if not i.ok]
        return lines


def fix_for(patch_name: str, state: State) -> str:
    """The next command for a patch in a bad state."""
    if state in (State.UNAPPLIED, State.DRIFTED):
        return f"patchguard apply {patch_name}"
    if state is State.DOUBLED:
        return f"patchguard apply {patch_name} (takes the patch's copy out; HEAD's stays)"
    if state is State.CONFLICT:
        return (
            f"resolve by hand (patchguard apply --merge {patch_name} writes conflict markers), "
            f"then patchguard record {patch_name}"
        )
    if state is State.MISSING_FILE:
        return f"check out a commit that has the file, or patchguard drop {patch_name}"
    return "nothing to do"


class Worktree:
    """The files patches are assessed against: the worktree, plus edits not yet written."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self._content: dict[str, bytes | None] = {}
        self._head: dict[str, bytes | None] = {}
        self._indexes: dict[bytes, SymbolIndex | SourceSyntaxError] = {}
        self._renames: dict[str, str] = {}

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
        if path not in self._content:
            self._content[path] = self.repo.read_file(path)
        return self._content[path]

    def head(self, path: str) -> bytes | None:
        if path not in self._head:
            self._head[path] = self.repo.head_file(path)
        return self._head[path]

    def contents_read(self) -> dict[str, bytes] | None:
        """Every file read so far, or None if one of them was missing."""
        if any(content is None for content in self._content.values()):
            return None
        return {path: content for path, content in self._content.items() if content is not None}

    def stage(self, path: str, content: bytes | None) -> None:
        self._content[path] = content

    def symbols(self, content: bytes, path: str) -> SymbolIndex:
        """Parse once per distinct content; raises SourceSyntaxError."""
        if content not in self._indexes:
            try:
                self._indexes[content] = SymbolIndex.parse(content, path)
            except SourceSyntaxError as error:
                self._indexes[content] = error
        cached = self._indexes[content]
        if isinstance(cached, SourceSyntaxError):
            raise cached
        return cached

    def symbol_problems(
        self, content: bytes, path: str, qualnames: Iterable[str]
    ) -> dict[str, str]:
        """Why each of `qualnames` is not defined exactly once at its place in `content`."""
        qualnames = list(qualnames)
        if not qualnames:
            return {}
        # A name with no `def NAME`/`class NAME` anywhere in the text is certainly missing:
        # say so without parsing (parsing a large file takes seconds). Presence is decided
        # by parsing only.
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
            if not index.find(qualname):
                problems[qualname] = describe_miss(index, Spec(path, qualname))
            elif duplicates := index.duplicates(qualname):
                lines = ", ".join(str(d.lineno) for d in duplicates)
                problems[qualname] = (
                    f"defined {len(duplicates)} times (lines {lines}); the last one silently wins"
                )
        return problems


def _mentions_definition(content: bytes, qualname: str) -> bool:
    """Could `content` define `qualname`? Only a plain ASCII name can be ruled out as bytes."""
    name = qualname.rsplit(".", 1)[-1]
    if not name.isascii():
        return True
    leaf = re.escape(name.encode())
    return re.search(rb"\b(?:def|class)\s+" + leaf + rb"\b", content) is not None


def _required_in(patch: Patch, path: str) -> list[str]:
    return [spec.qualname for spec in map(parse_spec, patch.requires) if spec.path == path]


def _labels(patch: Patch) -> tuple[str, str, str]:
    return ("recorded base", "working tree", f"patch {patch.name}")


def assess_file(repo: Repo, tree: Worktree, patch: Patch, change: FileChange) -> FileVerdict:
    """Decide one file's state by content; see docs/concepts.md for the rules."""
    path = tree.followed_path(change.path, patch.base_commit, change.base_blob is not None)
    verdict = _assess_at(repo, tree, patch, change, path)
    if path != change.path:
        verdict.detail += f" (followed the rename {change.path} -> {path})"
    return verdict


def _assess_at(
    repo: Repo, tree: Worktree, patch: Patch, change: FileChange, path: str
) -> FileVerdict:
    base = repo.blob(change.base_blob) if change.base_blob else b""
    patched = repo.blob(change.patched_blob)
    head = tree.head(path)
    if head is not None and _contains_change(repo, base, head, patched, _labels(patch)):
        return FileVerdict(path, State.UPSTREAM, "HEAD already contains this change")
    if (
        head is not None
        and change.added_symbols
        and not tree.symbol_problems(head, path, change.added_symbols)
    ):
        return _assess_absorbed(repo, tree, patch, change, path, base, patched)
    return _assess_change(repo, tree, patch, change, path, base, patched, change.added_symbols)


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
    labels = _labels(patch)
    rest = _without_definitions(repo, tree, change, base, patched)
    current = tree.read(path)
    head = tree.head(path)
    assert head is not None
    names = ", ".join(q.rsplit(".", 1)[-1] for q in change.added_symbols)
    if current is not None and _defines_twice(tree, current, path, change.added_symbols):
        repaired = _take_copy_out(repo, base, patched, rest, current, labels)
        if repaired is None or tree.symbol_problems(
            repaired, path, _required_in(patch, change.path)
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
    labels = _labels(patch)
    current = tree.read(path)
    head = tree.head(path)
    if current is None:
        if change.base_blob is None:
            return FileVerdict(path, State.UNAPPLIED, "the patch creates this file", patched)
        return FileVerdict(path, State.MISSING_FILE, "the file does not exist in the worktree")
    if _contains_change(repo, base, current, patched, labels):
        return FileVerdict(path, State.APPLIED, "the worktree contains the change", None, patched)
    if (
        added_symbols
        and not tree.symbol_problems(current, path, added_symbols)
        and _without_definitions(repo, tree, change, base, patched) == base
    ):
        return FileVerdict(
            path,
            State.APPLIED,
            "every definition the patch adds is in place (text edited since)",
            None,
            patched,
        )
    forward = repo.merge3(base, current, patched, labels)
    if not forward.clean:
        return FileVerdict(
            path,
            State.CONFLICT,
            "the change does not merge cleanly with this file",
            forward.content,
        )
    problems = tree.symbol_problems(forward.content, path, _required_in(patch, change.path))
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


def assess_patch(repo: Repo, tree: Worktree, patch: Patch) -> PatchVerdict:
    return PatchVerdict(patch.name, [assess_file(repo, tree, patch, c) for c in patch.files])


def select_patches(manifest: Manifest, names: Sequence[str]) -> list[Patch]:
    """Patches by name in manifest order; all of them when no names are given."""
    unknown = [n for n in names if manifest.patch(n) is None]
    if unknown:
        known = ", ".join(p.name for p in manifest.patches) or "none"
        raise ConfigError(
            f"no patch named {', '.join(unknown)} (recorded: {known}). See `patchguard list`."
        )
    return [p for p in manifest.patches if not names or p.name in names]


# --- status and check --------------------------------------------------------------------------


def status(repo: Repo, names: Sequence[str] = ()) -> list[PatchVerdict]:
    manifest = repo.load_manifest()
    tree = Worktree(repo)
    return [assess_patch(repo, tree, p) for p in select_patches(manifest, names)]


def check(repo: Repo) -> CheckReport:
    """Read-only: every patch's state, and every required symbol at its qualified place."""
    manifest = repo.load_manifest()
    tree = Worktree(repo)
    verdicts = [assess_patch(repo, tree, p) for p in manifest.patches]
    owners = [(spec, p.name) for p in manifest.patches for spec in p.requires]
    owners += [(spec, None) for spec in manifest.guards]
    symbols = [_check_symbol(tree, spec, owner) for spec, owner in owners]
    head = None if repo.git.head_is_unborn else repo.head_commit_id()
    report = CheckReport(head=head, patches=verdicts, symbols=symbols)
    if report.ok and head is not None:
        _remember_verified(repo, tree, head)
    return report


def _remember_verified(repo: Repo, tree: Worktree, head: str) -> None:
    """Let the fast path skip this exact content next time (see guard.fastpath)."""
    contents = tree.contents_read()
    if contents is not None:
        fastpath.remember(
            str(repo.layout.git_dir),
            str(repo.layout.manifest_path),
            repo.manifest_bytes,
            head,
            contents,
        )


def _check_symbol(tree: Worktree, text: str, owner: str | None) -> SymbolResult:
    spec = parse_spec(text)
    spec = Spec(tree.renamed(spec.path), spec.qualname)
    content = tree.read(spec.path)
    if content is None:
        return SymbolResult(text, False, f"{spec.path} does not exist", owner)
    problems = tree.symbol_problems(content, spec.path, [spec.qualname])
    if problems:
        return SymbolResult(text, False, problems[spec.qualname], owner)
    line = tree.symbols(content, spec.path).find(spec.qualname)[0].lineno
    return SymbolResult(text, True, f"{spec.path}:{line}", owner)


# --- apply and unapply -------------------------------------------------------------------------


@dataclass
class PatchOutcome:
    """What apply/unapply did to one patch; `ok` is False when the patch is left not as asked."""

    verdict: PatchVerdict
    written: list[str] = field(default_factory=list)
    ok: bool = True
    message: str = ""


@_locked("apply")
def apply(
    repo: Repo,
    names: Sequence[str] = (),
    *,
    dry_run: bool = False,
    merge: bool = False,
    allow_mid_operation: bool = False,
) -> list[PatchOutcome]:
    """Bring every selected patch to `applied` (or leave it `upstream`), patch by patch.

    A patch is written whole or not at all: one file that cannot merge cleanly leaves all
    of that patch's files untouched, unless `merge` asks for conflict markers.
    """
    patches, tree, journal = _begin_writing(repo, "apply", names, dry_run, allow_mid_operation)
    outcomes = []
    for patch in patches:
        verdict = assess_patch(repo, tree, patch)
        outcome = PatchOutcome(verdict)
        state = verdict.state
        if state in GOOD_STATES:
            outcome.message = "nothing to do"
        elif state is State.MISSING_FILE or (state is State.CONFLICT and not merge):
            outcome.ok = False
            outcome.message = "left untouched -> " + fix_for(patch.name, state)
        else:
            writes = {f.path: f.merged for f in verdict.files if f.merged is not None}
            if state is State.CONFLICT:
                outcome.ok = False
                outcome.message = "conflict markers written; resolve them, then patchguard record"
            elif state is State.DOUBLED:
                outcome.message = (
                    "would take the patch's copy out" if dry_run else "took the patch's copy out"
                ) + " (HEAD's definitions stay)"
            else:
                outcome.message = "would apply" if dry_run else "applied"
            outcome.written = _write(repo, tree, writes, journal)
        outcomes.append(outcome)
    return outcomes


@_locked("unapply")
def unapply(
    repo: Repo,
    names: Sequence[str] = (),
    *,
    dry_run: bool = False,
    allow_mid_operation: bool = False,
) -> list[PatchOutcome]:
    """Take applied patches out of the worktree (last first), keeping every other edit."""
    patches, tree, journal = _begin_writing(repo, "unapply", names, dry_run, allow_mid_operation)
    outcomes = []
    for patch in reversed(patches):
        verdict = assess_patch(repo, tree, patch)
        outcome = PatchOutcome(verdict)
        writes: dict[str, bytes | None] = {}
        for change, file_verdict in zip(patch.files, verdict.files, strict=True):
            if file_verdict.state is not State.APPLIED:
                continue
            path = file_verdict.path  # where the file is now, renames followed
            current = tree.read(path)
            assert current is not None
            base = repo.blob(change.base_blob) if change.base_blob else b""
            assert file_verdict.patched is not None
            reverse = repo.merge3(file_verdict.patched, current, base, _labels(patch))
            if not reverse.clean:
                outcome.ok = False
                outcome.message = f"{path}: the change cannot be taken out cleanly"
                break
            created_by_patch = change.base_blob is None and reverse.content == b""
            writes[path] = None if created_by_patch else reverse.content
        if outcome.ok:
            outcome.written = _write(repo, tree, writes, journal)
            if verdict.state is State.UPSTREAM:
                outcome.message = "absorbed upstream; nothing to take out"
            elif outcome.written:
                outcome.message = "would unapply" if dry_run else "unapplied"
            else:
                outcome.message = "not applied; nothing to take out"
        outcomes.append(outcome)
    return list(reversed(outcomes))


def _begin_writing(
    repo: Repo, operation: str, names: Sequence[str], dry_run: bool, allow_mid_operation: bool
) -> tuple[list[Patch], Worktree, Journal | None]:
    """What apply and unapply share before their first write (no journal for a dry run)."""
    if not (dry_run or allow_mid_operation):
        repo.refuse_mid_operation(operation)
    patches = select_patches(repo.load_manifest(), names)
    journal = None if dry_run else Journal(repo.layout.git_dir, operation)
    return patches, Worktree(repo), journal


def _write(
    repo: Repo, tree: Worktree, writes: dict[str, bytes | None], journal: Journal | None
) -> list[str]:
    """Stage `writes` for later patches; with a journal, keep old bytes, then replace each file."""
    for path, content in writes.items():
        before = tree.read(path)
        tree.stage(path, content)
        if journal is None:
            continue
        journal.before_write(path, before, content)
        if content is None:
            repo.delete_file(path)
        else:
            repo.write_file(path, content)
    return sorted(writes)


# --- record and require ------------------------------------------------------------------------


@dataclass
class RecordOutcome:
    patch: Patch
    replaced: bool
    skipped: list[str]


@_locked("record")
def record(
    repo: Repo,
    name: str,
    paths: Sequence[str],
    *,
    requires: Sequence[str] = (),
    description: str = "",
    cwd: Path,
) -> RecordOutcome:
    """Record the uncommitted changes of `paths` (default: every changed tracked file) as NAME."""
    head_commit = repo.head_commit_id()
    manifest = repo.load_manifest(missing_ok=True)
    previous = manifest.patch(name)
    skipped: list[str] = []
    if paths:
        repo_paths = sorted({repo.relpath(p, cwd) for p in paths})
    else:
        owned = {c.path for p in manifest.patches if p.name != name for c in p.files}
        changed = repo.changed_tracked_files()
        skipped = [p for p in changed if p in owned]
        repo_paths = [p for p in changed if p not in owned]
        if not repo_paths:
            raise ConfigError(
                "no tracked file has uncommitted changes"
                + (f" outside other patches ({', '.join(skipped)})" if skipped else "")
                + "; edit files first, or name the paths: patchguard record NAME PATH..."
            )
    tree = Worktree(repo)
    files = [_record_file(repo, tree, path) for path in repo_paths]
    specs = {f"{c.path}::{q}" for c in files for q in c.added_symbols}
    for text in requires:
        specs.add(str(_resolve_spec(repo, text, cwd)))
    for text in sorted(specs):
        result = _check_symbol(tree, text, name)
        if not result.ok:
            raise GuardFailure(
                f"cannot record {name}: {text}: {result.detail}. Fix the file or the --require "
                "SPEC, then record again."
            )
    try:
        patch = Patch(
            name=name,
            description=description,
            created_at=datetime.now(UTC),
            base_commit=head_commit,
            files=files,
            requires=sorted(specs),
        )
    except ValidationError as error:
        raise ConfigError(f"cannot record {name!r}: {describe_validation(error)}") from None
    patches = [patch if p.name == name else p for p in manifest.patches]
    if previous is None:
        patches.append(patch)
    repo.save_manifest(manifest.model_copy(update={"patches": patches}))
    return RecordOutcome(patch=patch, replaced=previous is not None, skipped=skipped)


def _record_file(repo: Repo, tree: Worktree, path: str) -> FileChange:
    current = tree.read(path)
    head = tree.head(path)
    if current is None:
        if head is None:
            raise ConfigError(f"{path} does not exist; name files that the patch edits or adds")
        raise ConfigError(
            f"{path} is deleted in the worktree; patchguard records edits and new files, "
            "not deletions. Restore it (git restore) or leave it out."
        )
    if current == head:
        raise ConfigError(
            f"{path} has no changes against HEAD; nothing to record for it. Leave it out, or "
            "edit it first."
        )
    if is_binary(current) or (head is not None and is_binary(head)):
        raise ConfigError(
            f"{path} is a binary file; patchguard records text patches only. Leave it out of "
            "the patch."
        )
    base = head or b""
    added_symbols: list[str] = []
    diff = repo.diff(base, current, path)
    if path.endswith(".py"):
        try:
            index = tree.symbols(current, path)
        except SourceSyntaxError as error:
            raise GuardFailure(
                f"cannot record: {error.path}:{error.lineno}: syntax error: {error.message}. "
                "Fix the file, then record again."
            ) from None
        added_symbols = index.defined_on_lines(diff.added_lines)
    return FileChange(
        path=path,
        base_blob=repo.store_blob(head) if head is not None else None,
        patched_blob=repo.store_blob(current),
        diff=diff.text,
        added_symbols=added_symbols,
    )


def _resolve_spec(repo: Repo, text: str, cwd: Path) -> Spec:
    """A SPEC from the command line; its path is relative to cwd, as git paths are."""
    try:
        spec = parse_spec(text)
    except ValueError as error:
        raise ConfigError(f"bad symbol spec: {error}") from None
    return Spec(repo.relpath(spec.path, cwd), spec.qualname)


@_locked("require")
def require(repo: Repo, specs: Sequence[str], *, cwd: Path) -> list[str]:
    """Guard symbols that are already committed; each must exist now. Returns the new guards."""
    manifest = repo.load_manifest(missing_ok=True)
    resolved = [str(_resolve_spec(repo, text, cwd)) for text in specs]
    tree = Worktree(repo)
    for text in resolved:
        result = _check_symbol(tree, text, None)
        if not result.ok:
            raise GuardFailure(
                f"cannot guard {text}: {result.detail}. A guard must exist when you add it; "
                "check the file and the SPEC."
            )
    added = [text for text in dict.fromkeys(resolved) if text not in manifest.guards]
    repo.save_manifest(manifest.model_copy(update={"guards": [*manifest.guards, *added]}))
    return added


@_locked("drop")
def drop(repo: Repo, target: str, *, cwd: Path) -> str:
    """Forget a patch (by name) or a guard (by SPEC); the worktree is not touched."""
    manifest = repo.load_manifest()
    if "::" in target:
        spec = str(_resolve_spec(repo, target, cwd))
        if spec not in manifest.guards:
            raise ConfigError(f"{spec} is not a guard; see `patchguard list`")
        repo.save_manifest(
            manifest.model_copy(update={"guards": [g for g in manifest.guards if g != spec]})
        )
        return f"guard {spec}"
    select_patches(manifest, [target])
    patches = [p for p in manifest.patches if p.name != target]
    repo.save_manifest(manifest.model_copy(update={"patches": patches}))
    return f"patch {target}"
