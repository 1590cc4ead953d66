"""Decide each patch's state by content, and check required symbols: the read-only half.

A state is never decided by searching for a string: text is compared by 3-way merges, symbols
by parsing. guard.tree.patching writes only what this module decided, so a merge is written
only when it is clean *and* every required symbol sits exactly once at its qualified place.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from collections.abc import Sequence
from functools import cached_property

from guard.git.markers import marker_lines
from guard.git.repo import Repo
from guard.git.worktree_paths import one_walk
from guard.store import fastpath
from guard.store.derived import load_manifest
from guard.store.manifest import FileChange, Manifest, Patch, select_patches
from guard.store.manifest import Resolution as PatchResolution
from guard.store.spec import parse_spec
from guard.tree.verdicts import (
    GOOD_STATES,
    MARKERS,
    SYNTAX,
    UNMERGED,
    CheckReport,
    CommittedPatch,
    FileVerdict,
    PatchVerdict,
    State,
    SymbolResult,
    fix_for,
    in_words,
)
from guard.tree.worktree import CANNOT_TELL_FROM_READING, Worktree, _mentions_definition
from guard.truth import bodies, slips
from guard.truth.model_names import ABSENT, CANNOT_TELL, PRESENT
from guard.truth.symbols import SourceSyntaxError

UPSTREAM_AS_TEXT = "HEAD already contains this change"


def required_in(patch: Patch, path: str) -> list[str]:
    return [spec.qualname for spec in map(parse_spec, patch.requires) if spec.path == path]


def merge_labels(patch: Patch) -> tuple[str, str, str]:
    return ("recorded base", "working tree", f"patch {patch.name}")


def texts(repo: Repo, change: FileChange) -> tuple[bytes, bytes]:
    """A recorded version's base (empty for a file it creates) and patched text."""
    base = repo.blob(change.base_blob) if change.base_blob else b""
    return base, repo.blob(change.patched_blob)


def assess_file(repo: Repo, tree: Worktree, patch: Patch, change: FileChange) -> FileVerdict:
    """Decide one file's state by content; see docs/concepts.md for the rules."""
    path = tree.followed_path(change.path, patch.base_commit, change.base_blob is not None)
    verdict = _conflicted(tree, path) or _assess_versions(repo, tree, patch, change, path)
    # never green on a file Python cannot read; parsed only here, as a large file parses slowly
    # and apply checks every merge it writes anyway
    if verdict.state in GOOD_STATES:
        verdict = _unparsable(tree, path) or verdict
    if path != change.path:
        verdict.detail += f" (followed the rename {change.path} -> {path})"
    return verdict


def _assess_versions(
    repo: Repo, tree: Worktree, patch: Patch, change: FileChange, path: str
) -> FileVerdict:
    """The recording, or a resolution of it, nearest first: the first that merges decides.
    Nearest: whose base upstream moved least from (so the recorded base gets the recording
    byte for byte, and a commit resolved by hand its resolution)."""
    found, head = versions(change), tree.head(path)
    if len(found) > 1 and head is not None:

        def distance(version: FileChange) -> int:
            base, _ = texts(repo, version)
            if base == head:
                return 0
            text = repo.diff(base, head, path).text
            return 1 + text.count("\n+") + text.count("\n-")

        found.sort(key=lambda item: distance(item[0]))  # stable: a tie keeps order
    conflicts = []
    for version, resolution in found:
        verdict = _Version(repo, tree, patch, version, path).assess()
        verdict.version = version
        if resolution is not None:
            verdict.detail += f" (from the resolution made at {resolution.commit[:7]})"
        if verdict.state is not State.CONFLICT:  # `edited` too: this version is the reference
            return verdict
        conflicts.append(verdict)
    return conflicts[0]


def versions(change: FileChange) -> list[tuple[FileChange, PatchResolution | None]]:
    """The recording of one file, then each resolution of it as a change of its own."""
    return [(change, None)] + [
        (
            change._replace(
                base_blob=r.base_blob, patched_blob=r.patched_blob, diff=r.diff, resolutions=[]
            ),
            r,
        )
        for r in change.resolutions
    ]


def _conflicted(tree: Worktree, path: str) -> FileVerdict | None:
    """The file itself is in conflict: whatever HEAD holds, no patch state is true of it.
    Markers count too (a conflict `git add` accepted, or `apply --merge` wrote)."""
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


class _Version:
    """One version of a file's change against the file at `path`, its texts read once."""

    def __init__(
        self, repo: Repo, tree: Worktree, patch: Patch, change: FileChange, path: str
    ) -> None:
        self.repo, self.tree, self.patch, self.change, self.path = repo, tree, patch, change, path
        self.current, self.head = tree.read(path), tree.head(path)
        self.base, self.patched = texts(repo, change)
        self.labels = merge_labels(patch)
        self.required = required_in(patch, change.path)

    def holds(self, text: bytes, patched: bytes) -> bool:
        return _contains_change(self.repo, self.base, text, patched, self.labels)

    @cached_property
    def rest(self) -> bytes:
        """`patched` less the definitions the patch adds: the rest of the patch (`base` for a
        patch that only adds definitions). A run of added lines that holds a definition loses its
        blank and comment-only lines too, so a header comment above a method goes with it."""
        change, patched = self.change, self.patched
        index = self.tree.symbols(patched, change.path)
        spans = {
            line
            for qualname in change.added_symbols
            for d in index.find(qualname)
            for line in range(d.start_lineno, d.end_lineno + 1)
        }
        lines = patched.splitlines(keepends=True)
        drop: set[int] = set()
        run: list[int] = []
        for number in [*sorted(self.repo.diff(self.base, patched, change.path).added_lines), -1]:
            if run and number != run[-1] + 1:
                if spans.intersection(run):
                    drop.update(
                        n for n in run if n in spans or lines[n - 1].strip()[:1] in (b"", b"#")
                    )
                run = []
            run.append(number)
        return b"".join(line for n, line in enumerate(lines, 1) if n not in drop)

    def assess(self) -> FileVerdict:
        path, head, added = self.path, self.head, self.change.added_symbols
        if path in self.tree.unsafe:
            return FileVerdict(path, State.UNSAFE_PATH, self.tree.unsafe[path])
        if head is not None and self.holds(head, self.patched):
            return FileVerdict(path, State.UPSTREAM, UPSTREAM_AS_TEXT)
        in_head = (
            self.tree.symbol_problems(head, path, added, suggest=False)
            if head is not None and added
            else None
        )
        if in_head == {}:  # HEAD surely binds everything the patch adds
            return self.absorbed()
        verdict = self.change_state(self.patched, added)
        if in_head and all(why.startswith(CANNOT_TELL_FROM_READING) for why in in_head.values()):
            names = ", ".join(q.rsplit(".", 1)[-1] for q in in_head)
            verdict.detail += (
                f"; HEAD has a conditional copy of {names}, so the patch's own copy stays "
                f"({next(iter(in_head.values()))})"
            )
        return verdict

    def absorbed(self) -> FileVerdict:
        """HEAD defines all the patch adds: what stands is the rest of the patch, if any."""
        path, current, rest, added = self.path, self.current, self.rest, self.change.added_symbols
        assert self.head is not None
        names = ", ".join(q.rsplit(".", 1)[-1] for q in added)
        if current is not None and _defines_twice(self.tree, current, path, added):
            repaired = self.take_copy_out(current)
            if repaired is None or self.tree.symbol_problems(repaired, path, self.required):
                return FileVerdict(
                    path,
                    State.CONFLICT,
                    f"HEAD already defines {names} and the worktree carries the patch's copy "
                    "too; the copy cannot be taken out cleanly",
                )
            return FileVerdict(
                path,
                State.DOUBLED,
                f"HEAD already defines {names}, and the worktree carries the patch's own copy "
                "too (git merged a stash back), so each is defined twice",
                repaired,
                rest,
            )
        if self.holds(self.head, rest):
            detail = "HEAD already defines every symbol this patch adds"
            if rest != self.base:
                detail += ", and has the rest of the patch"
            return FileVerdict(path, State.UPSTREAM, detail)
        verdict = self.change_state(rest, ())
        verdict.detail = f"HEAD defines {names}; the rest of the patch: {verdict.detail}"
        return verdict

    def take_copy_out(self, current: bytes) -> bytes | None:
        """`current` without the patch's own definitions but with the rest; None if not clean."""
        cleaned = self.repo.merge3(self.patched, current, self.rest, self.labels)
        if not cleaned.clean:
            return None
        if self.holds(cleaned.content, self.rest):
            return cleaned.content
        forward = self.repo.merge3(self.base, cleaned.content, self.rest, self.labels)
        return forward.content if forward.clean else None

    def change_state(self, patched: bytes, added_symbols: Sequence[str]) -> FileVerdict:
        """The state of the change base -> patched in the worktree (HEAD does not hold it)."""
        path, current, tree = self.path, self.current, self.tree
        if current is None:
            if self.change.base_blob is None:
                return FileVerdict(path, State.UNAPPLIED, "the patch creates this file", patched)
            if self.head is not None and path in self.repo.outside_sparse_checkout():
                return FileVerdict(
                    path, State.OUTSIDE_SPARSE, "the sparse checkout leaves this file out"
                )
            return FileVerdict(path, State.MISSING_FILE, "the file does not exist in the worktree")
        if self.holds(current, patched):
            return FileVerdict(
                path, State.APPLIED, "the worktree contains the change", None, patched
            )
        if (
            added_symbols
            and not tree.symbol_problems(current, path, added_symbols, suggest=False)
            and self.rest == self.base
        ):
            return (
                self.upgrade(current, patched)
                or self.edited(current)
                or FileVerdict(
                    path,
                    State.APPLIED,
                    "every definition the patch adds is in place (text edited since)",
                    None,
                    patched,
                )
            )
        forward = self.repo.merge3(self.base, current, patched, self.labels)
        if not forward.clean:  # an earlier version the update grew from may merge where this cannot
            return self.upgrade(current, patched) or FileVerdict(
                path,
                State.CONFLICT,
                "the lines it changes were changed here too",
                forward.content,
            )
        problems = tree.symbol_problems(forward.content, path, self.required, decided_only=True)
        if problems:
            return FileVerdict(
                path,
                State.CONFLICT,
                "a clean text merge would break required symbols: "
                + "; ".join(f"{name}: {why}" for name, why in problems.items()),
            )
        if self.head == (self.base if self.change.base_blob else None):
            return FileVerdict(path, State.UNAPPLIED, "applies cleanly", forward.content, patched)
        return FileVerdict(
            path,
            State.DRIFTED,
            "the file moved on since the patch's base; merges cleanly",
            forward.content,
            patched,
        )

    def edited(self, current: bytes) -> FileVerdict | None:
        """`edited` where an added definition's code is not the recorded one. `merged` puts those
        definitions' recorded lines back, every other line kept; None where that would not parse,
        still differ or miss a required symbol (then by hand)."""
        tree, path, patched = self.tree, self.path, self.patched
        here, recorded = tree.syntax(current, path), tree.syntax(patched, path)
        if here is None or recorded is None:
            return None  # a file that does not parse is `conflicted` (_unparsable)
        recorded_at = self.defined_at(patched)
        found = bodies.edits(
            current, here, self.defined_at(current), patched, recorded, recorded_at
        )
        if not found:
            return None
        restored = bodies.restored(current, patched, found)
        again = tree.syntax(restored, path)
        holds = (
            again is not None
            and not bodies.edits(
                restored, again, self.defined_at(restored), patched, recorded, recorded_at
            )
            and not tree.symbol_problems(restored, path, self.required)
        )
        # A method's edit is said of the method, not again of its class (unless the class
        # differs before it: then both)
        said = [
            edit
            for edit in found
            if not any(
                inner.qualname.startswith(f"{edit.qualname}.")
                and inner.span[0] <= edit.line <= inner.span[1]
                for inner in found
            )
        ]
        recording = any(c.patched_blob == self.change.patched_blob for c in self.patch.files)
        return FileVerdict(
            path,
            State.EDITED,
            "; ".join(edit.describe() for edit in said),
            restored if holds else None,
            patched,
            keep_by_resolving=not recording or tree.head_commit != self.patch.base_commit,
        )

    def defined_at(self, content: bytes) -> dict[str, int]:
        """Where each added symbol is defined (the last definition: the one Python keeps)."""
        index = self.tree.symbols(content, self.path)
        return {q: index.find(q)[-1].lineno for q in self.change.added_symbols if index.find(q)}

    def upgrade(self, current: bytes, patched: bytes) -> FileVerdict | None:
        """The worktree holds another version of this patch from the history (an earlier one,
        updated since by a fetch, an import or a re-record; or a later one an undo took back):
        the recorded one is merged onto it from that version, not from the patch's base, which
        cannot place a change right beside the definitions. None when the file holds none."""
        from guard.store import history  # only where the worktree does not hold the recorded text

        repo, labels = self.repo, self.labels
        for earlier in history.earlier_versions(repo, self.patch.name, self.change.path):
            if earlier.patched_blob == self.change.patched_blob:
                continue
            old_base, old_patched = texts(repo, earlier)
            if not _contains_change(repo, old_base, current, old_patched, labels):
                continue
            upgrade = repo.merge3(old_patched, current, patched, labels)
            held = _held_version(repo, self.change, earlier)
            if upgrade.clean and not self.tree.symbol_problems(
                upgrade.content, self.path, self.required
            ):
                return FileVerdict(
                    self.path,
                    State.DRIFTED,
                    f"{held}; the recorded one merges cleanly onto it",
                    upgrade.content,
                    patched,
                    held=earlier,
                )
            return FileVerdict(
                self.path,
                State.CONFLICT,
                f"{held}, and the recorded one does not merge with your edits there",
                held=earlier,
            )
        return None


def _held_version(repo: Repo, recorded: FileChange, held: FileChange) -> str:
    """What the worktree holds, in words."""
    from guard.store.history import LATER, order

    found = order(repo, held.patched_blob, recorded.patched_blob)
    if found is None:
        return "the worktree holds another version of this patch"
    made = f"the {found.made_by} one, " if found.made_by else ""
    which, since = ("a later", "taken back") if found.held == LATER else ("an earlier", "updated")
    return f"the worktree holds {which} version of this patch: {made}{since} since"


def _contains_change(
    repo: Repo, base: bytes, text: bytes, patched: bytes, labels: tuple[str, str, str]
) -> bool:
    """Does `text` already hold base->patched? Merging it in changes nothing, or it reverses
    cleanly (and merging it in again gives `text` back)."""
    if text == patched or base == patched:
        return True
    forward = repo.merge3(base, text, patched, labels)
    if forward.clean and forward.content == text:
        return True
    backward = repo.merge3(patched, text, base, labels)
    if not backward.clean or backward.content == text:
        return False
    again = repo.merge3(base, backward.content, patched, labels)
    return again.clean and again.content == text


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
    Then a 3-way merge separates them only where their lines do not touch."""
    mine = next((c for c in upper.files if c.path == path), None)
    theirs = next((c for c in lower.files if c.path == path), None)
    if mine is None or theirs is None or mine.base_blob is None:
        return False
    base, patched = texts(repo, theirs)
    return _contains_change(repo, base, repo.blob(mine.base_blob), patched, merge_labels(lower))


def status(
    repo: Repo,
    names: Sequence[str] = (),
    tree: Worktree | None = None,
    manifest: Manifest | None = None,
) -> list[PatchVerdict]:
    """Each patch of `names` (every one when none), assessed on the patches below it."""
    manifest = manifest or load_manifest(repo)
    tree = tree or Worktree(repo)
    tree.prefetch(manifest.patches)
    every = manifest.patches
    return [
        assess_patch(repo, tree, p, every[: every.index(p)])
        for p in select_patches(manifest, names)
    ]


def status_report(repo: Repo, names: Sequence[str] = ()) -> CheckReport:
    """The patches' states and required symbols, so that `status` fails exactly when `check`
    would. Never remembered."""
    manifest = load_manifest(repo)
    report = _report(repo, Worktree(repo), manifest, names)
    for patch, verdict in zip(select_patches(manifest, names), report.patches, strict=True):
        verdict.committed_in_head = _committed_in_head(repo, patch, verdict)
    return report


def _report(
    repo: Repo, tree: Worktree, manifest: Manifest, names: Sequence[str] = ()
) -> CheckReport:
    """The verdicts, each required symbol with the patch that requires it (then each guard's,
    when no name is given), and the stray copies of the patches' methods."""
    patches = select_patches(manifest, names)
    owners: list[tuple[str, str | None]] = [(spec, p.name) for p in patches for spec in p.requires]
    owners += [(spec, None) for spec in ([] if names else manifest.guards)]
    return CheckReport(
        head=tree.head_commit,
        patches=status(repo, names, tree, manifest),
        symbols=[check_symbol(tree, spec, owner) for spec, owner in owners],
        warnings=stray_copies(tree, patches),
    )


def _committed_in_head(repo: Repo, patch: Patch, verdict: PatchVerdict) -> CommittedPatch | None:
    """Did HEAD's own commit bring this exact change (a `git commit -a` that swept it in)?
    Not where upstream absorbed it in other text, nor in a commit a remote-tracking branch or
    a tag holds: the advice to amend that would rewrite upstream history."""
    if any(f.detail != UPSTREAM_AS_TEXT for f in verdict.files) or repo.head_is_published():
        return None
    parent = repo.commit_id("HEAD^")  # None for a root commit
    only_the_patch = repo.head_commit_paths() <= {c.path for c in patch.files}
    for change in patch.files:
        before = repo.file_at(parent, change.path) if parent else None
        base, patched = texts(repo, change)
        labels = merge_labels(patch)
        if before is not None and _contains_change(repo, base, before, patched, labels):
            return None
        after = repo.merge3(base, before or b"", patched, labels)
        only_the_patch = only_the_patch and after.content == repo.file_at("HEAD", change.path)
    return CommittedPatch(repo.head_summary(), only_the_patch)


def check(repo: Repo, tree: Worktree | None = None) -> CheckReport:
    """Read-only: every patch's state, and every required symbol at its qualified place."""
    with one_walk():  # only git's read-only commands run meanwhile
        manifest = load_manifest(repo)
        tree = tree or Worktree(repo)
        report = _report(repo, tree, manifest)
        for patch, verdict in zip(manifest.patches, report.patches, strict=True):
            if verdict.state in (State.UNAPPLIED, State.DRIFTED) and strays_put_back(
                tree, patch, verdict
            ):
                for file in verdict.files:  # the slip fixed by hand: `apply` refuses, say so
                    file.strays = True
        trusted = not report.checks_nothing and not report.warnings and tree.facts is None
        contents = tree.bytes_on_disk()
        if report.ok and report.head is not None and trusted and contents is not None:
            fastpath.remember(  # the fast path skips this exact content next time
                repo,
                report.head,
                contents,
                (tree.absent - contents.keys(), tree.present - contents.keys()),
            )
        return report


def strays_put_back(tree: Worktree, patch: Patch, verdict: PatchVerdict) -> str:
    """What writing the patch would put back at module level that the file now has as a
    method of a class ("" where nothing): a patch recorded with the slip (`--as-typed`) whose
    methods the user has indented since."""
    said = []
    for change, verdict_file in zip(patch.files, verdict.files, strict=True):
        if verdict_file.merged is None or all("." in q for q in change.added_symbols):
            continue
        current = tree.read(verdict_file.path)
        now = None if current is None else tree.syntax(current, verdict_file.path)
        then = tree.syntax(verdict_file.merged, verdict_file.path)
        if now is None or then is None:
            continue
        put_back = slips.strays_put_back(now, then)
        if put_back:
            names = ", ".join(name for name, _, _ in put_back)
            classes: dict[str, list[str]] = {}
            for _, owner, line in put_back:
                classes.setdefault(owner, []).append(str(line))
            where = "; ".join(f"class {c} lines {', '.join(n)}" for c, n in classes.items())
            said.append(
                f"{verdict_file.path}: patch {patch.name} would put {names} back at module "
                f"level, and the file has them as methods now ({where}): stray copies Python "
                "never runs as the methods"
            )
    return "; ".join(said)


def stray_copies(tree: Worktree, patches: Sequence[Patch]) -> list[str]:
    """Module-level `def m(self, ...)` named as a method a patch adds to that file: a copy
    typed outside its class (the heredoc's slip), left behind when the patch went back in.
    Python never runs it as the method, and the next edit may go to the wrong copy. The syntax
    tree is read only where the parsed index has such a name at module level."""
    found = []
    for patch in patches:
        for change in patch.files:
            path = tree.renamed(change.path)
            methods = {q.rsplit(".", 1)[1]: q for q in change.added_symbols if "." in q}
            current = tree.read(path)
            functions = [q for q in change.added_symbols if "." not in q]
            if current is not None and slips.may_slip(current, functions):
                syntax = tree.syntax(current, path)
                found += slips.module_level_warnings(syntax, path, patch.name, functions)
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


def check_symbol(tree: Worktree, text: str, owner: str | None) -> SymbolResult:
    spec = parse_spec(text)
    spec = spec._replace(path=tree.renamed(spec.path))
    content = tree.read(spec.path)
    if content is None:
        return SymbolResult(text, ABSENT, f"{spec.path} does not exist", owner)
    shadow = _shadowed(tree, spec.path, content)
    if shadow is not None:
        return SymbolResult(text, ABSENT, shadow, owner)
    problem = tree.symbol_problems(content, spec.path, [spec.qualname]).get(spec.qualname)
    around = tree.import_problem(spec.path, content)
    if around is not None and problem is None:
        problem = f"{CANNOT_TELL_FROM_READING}: {around}"
    if problem is not None:
        state = CANNOT_TELL if problem.startswith(CANNOT_TELL_FROM_READING) else ABSENT
        return SymbolResult(text, state, problem, owner)
    found = tree.resolve(tree.symbols(content, spec.path), spec.path, spec.qualname)
    where = f"{spec.path}:{found.lineno}" if found.lineno else found.reason
    return SymbolResult(text, PRESENT, where, owner)


def _shadowed(tree: Worktree, path: str, content: bytes) -> str | None:
    """What `import` loads instead of the file: a package of its name (found first), an
    extension module (tried before `.py`), or a stale hash-based `.pyc`. Looked at through the
    view, so one that appears later voids a remembered verdict."""
    stem = path.removesuffix(".py")
    if tree.exists(f"{stem}/__init__.py", file=True):
        return (
            f"the package {stem}/ beside {path} shadows it: `import` loads the package, "
            "never this file"
        )
    if not path.endswith(".py"):
        return None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if tree.exists(stem + suffix, file=True):
            return (
                f"the extension module {stem}{suffix} beside {path} is what `import` loads, "
                f"never this file -> delete {stem}{suffix}"
            )
    for level in ("", 1, 2):  # plain, `python -O`, `python -OO`: each reads its own .pyc
        stale = _stale_pyc(tree, path, content, level)
        if stale is not None:
            return stale
    return None


def _stale_pyc(tree: Worktree, path: str, content: bytes, level: str | int) -> str | None:
    """The hash-based `.pyc` of optimization `level` beside `path`, when it holds other code:
    Python never compares an unchecked one with the file, nor a checked one under
    `--check-hash-based-pycs never`."""
    relative = importlib.util.cache_from_source(path, optimization=level)  # relative as `path`
    if not tree.exists(relative, file=True):
        return None
    try:
        with open(tree.repo.workdir / relative, "rb") as compiled:
            header = compiled.read(16)
    except OSError:
        return None
    flags = int.from_bytes(header[4:8], "little") if len(header) == 16 else 0
    if header[:4] != importlib.util.MAGIC_NUMBER or not flags & 0b1:
        return None  # another Python's, or timestamp-based: compared with the file
    if header[8:16] == importlib.util.source_hash(content):
        return None
    checked = "checked only when Python is told to" if flags & 0b10 else "never checked"
    return (
        f"{relative} holds code compiled from another {path} (a hash-based .pyc, {checked}): "
        f"Python may run it instead of this file -> delete {relative}"
    )


# --- after a command changed the recording (undo, fetch, import), never the files ------------
# The worktree may hold another version than the one now recorded: which one, earlier or later,
# is read from the history, never guessed.


def worktree_lines(repo: Repo, names: Sequence[str]) -> list[str]:
    """For each patch in `names`: what the worktree holds now, and the command that brings the
    file in line."""
    manifest = load_manifest(repo, missing_ok=True)
    recorded = [name for name in names if manifest.patch(name) is not None]
    verdicts = {v.name: v for v in status(repo, recorded, manifest=manifest)} if recorded else {}
    return [
        _next_step(repo, verdicts[name])
        if name in verdicts
        else f"patch {name} is no longer recorded; the worktree's files are as they were (git "
        "diff shows what of it they still hold)"
        for name in dict.fromkeys(names)
    ]


def _next_step(repo: Repo, verdict: PatchVerdict) -> str:
    name = verdict.name
    if verdict.ok:
        return f"the worktree holds patch {name} as it is recorded now; nothing to do"
    worst = next(f for f in verdict.files if f.state is verdict.state)
    held = next((f for f in verdict.files if f.held is not None), None)
    if held is not None and worst.state is State.DRIFTED:
        return (
            f"the worktree still holds {_held(repo, name, held)}: patchguard apply {name} puts "
            "the recorded one in"
        )
    if held is not None:
        return (
            f"the worktree still holds {_held(repo, name, held)}, and the recorded one does not "
            f"merge with your edits there: {fix_for(name, worst)}"
        )
    if worst.state is State.UNAPPLIED:
        return f"the worktree does not hold patch {name} yet: patchguard apply {name} puts it in"
    if worst.state is State.DRIFTED:
        return (
            f"the worktree does not hold patch {name} yet (the file moved on since its base): "
            f"patchguard apply {name} merges it in"
        )
    return f"{worst.path}: patch {name} {in_words(worst)} -> {fix_for(name, worst)}"


def _held(repo: Repo, name: str, verdict: FileVerdict) -> str:
    """ "the re-recorded version of patch eagle3 (later than the one now recorded)"."""
    from guard.store.history import order

    assert verdict.held is not None and verdict.version is not None
    found = order(repo, verdict.held.patched_blob, verdict.version.patched_blob)
    if found is None:
        return f"another version of patch {name} than the one now recorded"
    made = f"the {found.made_by}" if found.made_by else "a"
    return f"{made} version of patch {name} ({found.held} than the one now recorded)"
