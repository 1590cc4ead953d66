"""Apply and unapply: write what guard.assess decided, journaled, a patch whole or not at all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from guard.assess import (
    GOOD_STATES,
    CheckReport,
    PatchVerdict,
    State,
    Worktree,
    assess_patch,
    check,
    fix_for,
    merge_labels,
    select_patches,
    stacked,
)
from guard.errors import ConfigError
from guard.journal import Journal
from guard.lock import locked
from guard.manifest import Patch
from guard.repo import Repo


@dataclass
class PatchOutcome:
    """What apply/unapply did to one patch; `ok` is False when the patch is left not as asked."""

    verdict: PatchVerdict
    written: list[str] = field(default_factory=list)
    ok: bool = True
    message: str = ""


@locked("apply")
def apply(
    repo: Repo,
    names: Sequence[str] = (),
    *,
    dry_run: bool = False,
    merge: bool = False,
    allow_mid_operation: bool = False,
    tree: Worktree | None = None,
) -> list[PatchOutcome]:
    """Bring every selected patch to `applied` (or leave it `upstream`), patch by patch.

    A patch is written whole or not at all: one file that cannot merge cleanly leaves all
    of that patch's files untouched, unless `merge` asks for conflict markers.
    """
    every, patches, tree, journal = _begin_writing(
        repo, "apply", names, dry_run, allow_mid_operation, tree
    )
    outcomes = []
    for patch in patches:
        verdict = assess_patch(repo, tree, patch, every[: every.index(patch)])
        outcome = PatchOutcome(verdict)
        state = verdict.state
        if state in GOOD_STATES:
            outcome.message = "nothing to do"
        elif state in (State.MISSING_FILE, State.OUTSIDE_SPARSE) or (
            state is State.CONFLICT and not merge
        ):
            worst = next(f for f in verdict.files if f.state is state)
            outcome.ok = False
            outcome.message = "left untouched -> " + fix_for(
                patch.name, state, worst.path, worst.stacked_on
            )
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
            outcome.written = _write(repo, tree, writes, journal, patch.name)
        outcomes.append(outcome)
    return outcomes


@locked("unapply")
def unapply(
    repo: Repo,
    names: Sequence[str] = (),
    *,
    dry_run: bool = False,
    allow_mid_operation: bool = False,
) -> list[PatchOutcome]:
    """Take applied patches out of the worktree (last first), keeping every other edit."""
    every, patches, tree, journal = _begin_writing(
        repo, "unapply", names, dry_run, allow_mid_operation, None
    )
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
            reverse = repo.merge3(file_verdict.patched, current, base, merge_labels(patch))
            if not reverse.clean:
                outcome.ok = False
                outcome.message = f"{path}: the change cannot be taken out cleanly"
                above = _applied_on_top(repo, tree, every, patch, change.path)
                if above:
                    together = " ".join([patch.name, *above])
                    outcome.message += (
                        f": patch {', '.join(above)} was recorded on top of it there; take "
                        f"them out together -> patchguard unapply {together}"
                    )
                break
            created_by_patch = change.base_blob is None and reverse.content == b""
            writes[path] = None if created_by_patch else reverse.content
        if outcome.ok:
            outcome.written = _write(repo, tree, writes, journal, patch.name)
            if verdict.state is State.UPSTREAM:
                outcome.message = "absorbed upstream; nothing to take out"
            elif outcome.written:
                outcome.message = "would unapply" if dry_run else "unapplied"
            else:
                outcome.message = "not applied; nothing to take out"
        outcomes.append(outcome)
    return list(reversed(outcomes))


def _applied_on_top(
    repo: Repo, tree: Worktree, every: Sequence[Patch], patch: Patch, path: str
) -> list[str]:
    """The later patches, applied in `tree`, whose change of `path` was recorded on top of
    `patch`'s: where their lines touch, git's merge takes `patch` out only with them."""
    return [
        upper.name
        for upper in stacked(repo, every, patch, path, above=True)
        if assess_patch(repo, tree, upper).ok
    ]


def _begin_writing(
    repo: Repo,
    operation: str,
    names: Sequence[str],
    dry_run: bool,
    allow_mid_operation: bool,
    tree: Worktree | None,
) -> tuple[list[Patch], list[Patch], Worktree, Journal | None]:
    """What apply and unapply share before their first write (no journal for a dry run):
    every patch in manifest order, and the selected ones."""
    if not (dry_run or allow_mid_operation):
        repo.refuse_mid_operation(operation)
    manifest = repo.load_manifest()
    journal = None if dry_run else Journal(repo.layout.git_dir, operation)
    return manifest.patches, select_patches(manifest, names), tree or Worktree(repo), journal


def apply_then_check(
    repo: Repo, *, allow_mid_operation: bool = False
) -> tuple[list[PatchOutcome], CheckReport]:
    """Apply every patch, then check the result from the same view of the files, so each is
    read and parsed once (hooks, `patchguard git`, bisect steps, `run --apply`)."""
    tree = Worktree(repo)
    outcomes = apply(repo, allow_mid_operation=allow_mid_operation, tree=tree)
    return outcomes, check(repo, tree)


def _write(
    repo: Repo,
    tree: Worktree,
    writes: Mapping[str, bytes | None],
    journal: Journal | None,
    patch: str,
) -> list[str]:
    """Stage `writes` for later patches; with a journal, keep old bytes, then replace each file."""
    for path, content in writes.items():
        if journal is None:
            tree.stage(path, content)
            continue
        before = tree.raw(path)
        raw = None if content is None else repo.to_worktree(path, content, before)
        try:
            journal.before_write(path, before, raw, patch)
        except OSError as error:
            raise ConfigError(
                f"cannot keep the undo copy of {path} in {journal.root}: {error.strerror}; "
                f"{path} was not touched (free space, or make the git dir writable)"
            ) from None
        try:
            if raw is None:
                repo.delete_file(path)
            else:
                repo.write_raw(path, raw)
        except OSError as error:
            raise ConfigError(
                f"cannot write {path}: {error.strerror}; it is as it was (writes are atomic). "
                "Free space or make it writable, then run the command again; anything written "
                "before it can be taken back with patchguard undo"
            ) from None
        tree.wrote(path, content, raw)
    return sorted(writes)
