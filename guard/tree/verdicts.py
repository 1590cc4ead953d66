"""What an assessment decides, and how it is said: the states, the verdicts, the check report,
and one line per problem with the command that fixes it.

Apart from the deciding (guard.tree.assess), so that what only says a verdict needs these alone;
`ok` (what counts as green) decides too, so guard.store.fastpath hashes this into the model.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple, assert_never

from guard.store.manifest import FileChange
from guard.store.spec import parse_spec
from guard.truth.model_names import CANNOT_TELL, PRESENT


class State(StrEnum):
    """Worst first: a patch is as bad as its worst file (mixed applied/upstream: "applied")."""

    UNSAFE_PATH = "unsafe-path"
    CONFLICTED = "conflicted"  # the file itself is in conflict: unmerged, markers, no parse
    OUTSIDE_SPARSE = "outside-sparse"
    MISSING_FILE = "missing-file"
    CONFLICT = "does-not-merge"  # the patch does not merge with a fine file
    EDITED = "edited"  # every added name is in place, but a definition's code is not recorded
    DOUBLED = "doubled"
    DRIFTED = "drifted"
    UNAPPLIED = "unapplied"
    APPLIED = "applied"
    UPSTREAM = "upstream"


GOOD_STATES = frozenset({State.APPLIED, State.UPSTREAM})
ASK_PYTHON = "ask Python: patchguard check --runtime (or define it unconditionally)"
ASK_THE_RIGHT_PYTHON = (
    "probe with the interpreter that has the module's dependencies: --python PATH (or give "
    "the probe the environment they need, e.g. run --runtime -- env VAR=... python ...)"
)


class FileVerdict:
    """One file of one patch: its state, why, and what `apply` would write (`merged`).

    `patched`: the change that still stands, as the patched text (only its rest when HEAD
    already defines everything the patch adds: unapply reverses exactly that). Plain classes
    here: a dataclass is built when its module loads, and every status and check would pay.
    """

    def __init__(
        self,
        path: str,
        state: State,
        detail: str,
        merged: bytes | None = None,
        patched: bytes | None = None,
        *,
        conflict: str | None = None,  # for CONFLICTED: UNMERGED, MARKERS or SYNTAX
        # for EDITED: the edit is kept by a resolution for this version of upstream's file, as
        # re-recording away from the patch's base would re-base it (or a resolution decided)
        keep_by_resolving: bool = False,
        held: FileChange | None = None,  # another version of the patch, which the worktree holds
    ) -> None:
        self.path, self.state, self.detail = path, state, detail
        self.merged, self.patched = merged, patched
        self.conflict, self.keep_by_resolving, self.held = conflict, keep_by_resolving, held
        self.version: FileChange | None = None  # decided from: the recording or a resolution
        self.stacked_on: list[str] = []  # a conflict: patches to apply first
        self.strays = False  # writing it would put back methods indented since: apply refuses


UNMERGED = "unmerged"  # git left stage entries in the index: `patchguard apply` can finish it
MARKERS = "markers"  # conflict markers in the text, nothing in the index to merge from
SYNTAX = "syntax"  # no marker, but the file does not parse


class CommittedPatch(NamedTuple):
    """HEAD's own commit brought the patch (a `git commit -a` that swept it in)."""

    summary: str  # "abc1234 subject"
    only_the_patch: bool  # the commit changed nothing else


class PatchVerdict:
    def __init__(self, name: str, files: list[FileVerdict]) -> None:
        self.name, self.files = name, files
        self.committed_in_head: CommittedPatch | None = None

    @property
    def state(self) -> State:
        states = {f.state for f in self.files}
        return next(s for s in State if s in states)

    @property
    def ok(self) -> bool:
        return self.state in GOOD_STATES


class SymbolResult:
    """One required symbol: present, absent, or cannot tell from reading (never green)."""

    def __init__(self, spec: str, state: str, detail: str, patch: str | None) -> None:
        self.spec, self.state, self.detail, self.patch = spec, state, detail, patch  # reading's
        self.runtime: str | None = None  # the runtime probe's answer (guard.truth.probe): decides

    @property
    def ok(self) -> bool:
        return (self.runtime or self.state) == PRESENT


class ImportResult(NamedTuple):
    """Where an interpreter imports a module from, and whether that is this checkout."""

    module: str
    python: str
    location: str | None
    ok: bool
    detail: str


class CheckReport:
    """What `check` and the hooks report: patch states, required symbols, import locations."""

    def __init__(
        self,
        head: str | None,
        patches: list[PatchVerdict],
        symbols: list[SymbolResult],
        warnings: list[str],
    ) -> None:
        self.head, self.patches, self.symbols = head, patches, symbols
        self.imports: list[ImportResult] = []
        self.runtime_seconds: float | None = None  # what the runtime probe cost, when it ran
        # What holds but should not stay (stray copies of a patch's methods): said on every
        # check, which is why a report with warnings is never remembered as verified
        self.warnings = warnings

    @property
    def ok(self) -> bool:
        return (
            all(p.ok for p in self.patches)
            and all(s.ok for s in self.symbols)
            and all(i.ok for i in self.imports)
        )

    @property
    def checks_nothing(self) -> bool:
        """No patch and no guard: `ok` would be vacuous, so it is never remembered or trusted."""
        return not self.patches and not self.symbols

    def problems(self) -> list[str]:
        """One line per problem: the file, the patch or symbol, and the command that fixes it."""
        failed = [(symbol, parse_spec(symbol.spec)) for symbol in self.symbols if not symbol.ok]
        broken: dict[tuple[str | None, str], list[str]] = {}
        for symbol, spec in failed:
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
        for symbol, spec in failed:
            if (symbol.patch, spec.path) not in broken:
                continue
            if symbol.state == CANNOT_TELL and symbol.runtime is None:
                lines.append(f"{symbol.spec}: {symbol.detail} -> {ASK_PYTHON}")
            elif symbol.runtime == CANNOT_TELL:  # the probe could not import it: nothing decided
                lines.append(f"{symbol.spec}: {symbol.detail} -> {ASK_THE_RIGHT_PYTHON}")
            elif " -> " in symbol.detail:  # it names its own way out (delete a stale .pyc)
                lines.append(f"{symbol.spec}: {symbol.detail}")
            else:
                fix = (
                    f"re-record: patchguard record {symbol.patch}"
                    if symbol.patch
                    else f"stop guarding it: patchguard drop {symbol.spec}"
                )
                lines.append(f"{symbol.spec}: missing ({symbol.detail}) -> restore it, or {fix}")
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
    """The next command for a file of a patch in a bad state. Never `record` but for an
    edited definition: recording over a conflict would re-base the patch onto this commit."""
    match verdict.state:
        case State.CONFLICT if verdict.stacked_on:
            return f"patchguard apply {' '.join([*verdict.stacked_on, patch_name])}"
        case State.UNAPPLIED | State.DRIFTED if verdict.strays:
            return f"{keep_edit(patch_name, verdict)} (keeps the methods in their class)"
        case State.UNAPPLIED | State.DRIFTED:
            return f"patchguard apply {patch_name}"
        case State.DOUBLED:
            return f"patchguard apply {patch_name} (takes the patch's copy out; HEAD's stays)"
        case State.EDITED:
            keep = (
                "keep your edit for this version of the file"
                if verdict.keep_by_resolving
                else "keep your edit as the patch"
            )
            return (
                f"{keep}: {keep_edit(patch_name, verdict)}; or put the recorded code back: "
                f"patchguard apply {patch_name} (your other edits stay; patchguard undo takes it "
                "back)"
            )
        case State.CONFLICTED if verdict.conflict == UNMERGED:
            return (
                f"patchguard apply {patch_name} (finishes git's merge for the patch's part, keeps "
                "your other edits)"
            )
        case State.CONFLICTED if verdict.conflict == MARKERS:
            return (
                "edit the conflict markers out by hand (keep the side you want), then patchguard "
                "status"
            )
        case State.CONFLICTED:
            return "fix the syntax error by hand, then patchguard status"
        case State.CONFLICT:
            return (
                "the patch does not merge with this version of the file: edit it into the right "
                f"shape here (patchguard apply --merge {patch_name} writes conflict markers to "
                f"start from), then keep that for this version: patchguard resolve {patch_name}; "
                "or go back to a commit where it applies (patchguard git checkout -)"
            )
        case State.OUTSIDE_SPARSE:
            directory = verdict.path.rpartition("/")[0] or "."
            return f"bring it into the sparse checkout: git sparse-checkout add {directory}"
        case State.UNSAFE_PATH:
            return (
                "nothing was written there; if upstream made the file a link, record the change "
                "on the file it points to (patchguard record NAME FILE), or: patchguard drop "
                f"{patch_name}"
            )
        case State.MISSING_FILE:
            return (
                "check out a commit that has the file (patchguard git checkout COMMIT); "
                f"only if you no longer want this patch: patchguard drop {patch_name}"
            )
        case State.APPLIED | State.UPSTREAM:
            return "nothing to do"
        case _:
            assert_never(verdict.state)


def keep_edit(patch_name: str, verdict: FileVerdict) -> str:
    verb = "resolve" if verdict.keep_by_resolving else "record"
    return f"patchguard {verb} {patch_name}"
