"""Apply and unapply what guard.tree.assess decided: journaled, a patch whole or not at all."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from guard.git.atomic import new_file_mode
from guard.git.lock import locked
from guard.git.objects import EXECUTABLE_MODE, REGULAR_MODE
from guard.git.repo import Repo
from guard.store.derived import load_manifest
from guard.store.journal import Journal, recover
from guard.store.manifest import Patch, select_patches
from guard.tree import unmerged
from guard.tree.assess import assess_patch, check, merge_labels, stacked, strays_put_back
from guard.tree.verdicts import GOOD_STATES, CheckReport, PatchVerdict, State, fix_for, keep_edit
from guard.tree.worktree import Worktree


class PatchOutcome:
    """What apply/unapply did to one patch; `ok` is False when the patch is left not as asked."""

    def __init__(self, verdict: PatchVerdict, finished: list[unmerged.Finished] | None = None):
        self.verdict = verdict
        self.written: list[str] = []
        self.ok = True
        self.message = ""
        self.finished = finished or []  # git merges finished


@locked("apply")
def apply(
    repo: Repo,
    names: Sequence[str] = (),
    *,
    dry_run: bool = False,
    merge: bool = False,
    allow_mid_operation: bool = False,
    by_hand: bool = False,
    tree: Worktree | None = None,
) -> list[PatchOutcome]:
    """Bring every selected patch to `applied` (or leave it `upstream`), patch by patch.

    One file that cannot merge cleanly leaves all of that patch's files untouched, unless
    `merge` asks for conflict markers. Only the `apply` command (`by_hand`), never a hook,
    finishes git's merges (guard.tree.unmerged) or restores edits (a hook would undo an edit
    made on purpose).
    """
    every, patches, tree, journal = _begin_writing(
        repo, "apply", names, dry_run, allow_mid_operation, tree
    )
    outcomes = []
    for patch in patches:
        verdict = assess_patch(repo, tree, patch, every[: every.index(patch)])
        finished: list[unmerged.Finished] = []
        refusals: list[str] = []
        if by_hand and verdict.state is State.CONFLICTED:
            verdict, finished, refusals = unmerged.finish_patch(repo, tree, patch, verdict)
        outcome = PatchOutcome(verdict, finished=finished)
        state = verdict.state
        modes = {f.path: c.mode for c, f in zip(patch.files, verdict.files, strict=True)}
        writes: dict[str, tuple[bytes | None, str]] = {
            f.path: (f.content, modes.get(f.path, REGULAR_MODE)) for f in finished
        }
        if state in GOOD_STATES:
            outcome.message = "nothing to do"
        elif (
            state in (State.MISSING_FILE, State.OUTSIDE_SPARSE, State.UNSAFE_PATH, State.CONFLICTED)
            or (state is State.CONFLICT and not merge)
            or (state is State.EDITED and not by_hand)
        ):
            worst = next(f for f in verdict.files if f.state is state)
            outcome.ok = False
            edit = " (an edit of the patch's code)" if state is State.EDITED else ""
            outcome.message = f"left untouched{edit} -> {fix_for(patch.name, worst)}"
        elif state is State.EDITED and (
            lost := [f for f in verdict.files if f.state is state and f.merged is None]
        ):
            outcome.ok = False
            outcome.message = (
                "left untouched: the recorded code cannot be put back cleanly here (the edit "
                f"changed what stands around it); put it back by hand (patchguard show "
                f"{patch.name} has it), or keep yours: {keep_edit(patch.name, lost[0])}"
            )
        elif strays := strays_put_back(tree, patch, verdict):
            outcome.ok = False
            outcome.message = f"left untouched: {strays} -> keep the file as it is: " + keep_edit(
                patch.name, next(f for f in verdict.files if f.merged is not None)
            )
        else:
            writes |= {
                f.path: (f.merged, modes[f.path]) for f in verdict.files if f.merged is not None
            }
            if state is State.CONFLICT:
                outcome.ok = False
                outcome.message = (
                    "conflict markers written; edit them into the right shape, then keep that "
                    f"for this version: patchguard resolve {patch.name}"
                )
            elif state is State.EDITED:
                outcome.message = (
                    "would put the recorded code back" if dry_run else "put the recorded code back"
                ) + " (your other edits stay; patchguard undo takes it back)"
            elif state is State.DOUBLED:
                outcome.message = (
                    "would take the patch's copy out" if dry_run else "took the patch's copy out"
                ) + " (HEAD's definitions stay)"
            else:
                outcome.message = "would apply" if dry_run else "applied"
        if finished or refusals:
            outcome.ok = outcome.ok and not refusals
            outcome.message = _finished_message(outcome, refusals, dry_run)
        outcome.written = _write(repo, tree, writes, journal, patch.name)
        outcomes.append(outcome)
    if journal is not None:
        journal.write(repo)
        unmerged.clear_stage_entries(
            repo, [f.path for o in outcomes for f in o.finished if not f.left]
        )
    if not dry_run and any(o.finished for o in outcomes):
        note = unmerged.stash_note(repo, tree, patches, [f for o in outcomes for f in o.finished])
        if note:
            outcomes[-1].message += f"; {note}"
    return outcomes


def _finished_message(outcome: PatchOutcome, refusals: Sequence[str], dry_run: bool) -> str:
    """What finishing git's merge did: which side it took, what it left marked, and why not."""
    parts = []
    resolved = [f.path for f in outcome.finished if not f.left]
    if resolved:
        side = (
            "HEAD already defines what the patch adds: HEAD's copy kept"
            if outcome.verdict.state is State.UPSTREAM
            else "the patch's own text put back"
        )
        verb = "would finish" if dry_run else "finished"
        parts.append(f"{verb} git's conflicted merge in {', '.join(resolved)} ({side})")
    for f in outcome.finished:
        if f.left:
            lines = ", ".join(map(str, f.left))
            parts.append(
                f"{f.path}: the patch's part of git's conflict is resolved; conflicts that are not "
                f"the patch's stay marked (lines {lines}): edit them out by hand, then "
                f"git reset -q -- {f.path}"
            )
    parts += [f"not finished: {reason}" for reason in refusals]
    return "; ".join(parts)


@locked("unapply")
def unapply(
    repo: Repo,
    names: Sequence[str] = (),
    *,
    dry_run: bool = False,
    allow_mid_operation: bool = False,
    whole: bool = False,
) -> list[PatchOutcome]:
    """Take applied patches out of the worktree (last first), keeping every other edit.
    `whole`: every patch comes out, or none does."""
    every, patches, tree, journal = _begin_writing(
        repo, "unapply", names, dry_run, allow_mid_operation, None
    )
    outcomes = []
    for patch in reversed(patches):
        verdict = assess_patch(repo, tree, patch)
        outcome = PatchOutcome(verdict)
        writes: dict[str, tuple[bytes | None, str]] = {}
        for recorded, file_verdict in zip(patch.files, verdict.files, strict=True):
            if file_verdict.state is State.EDITED:
                outcome.ok = False
                outcome.message = (
                    f"{file_verdict.path}: the patch's code there is edited, so taking the "
                    f"recorded change out would take your edit too: keep the edit first "
                    f"({keep_edit(patch.name, file_verdict)}) or put the recorded code back "
                    f"(patchguard apply {patch.name}), then unapply"
                )
                break
            if file_verdict.state is not State.APPLIED:
                continue
            change = file_verdict.version or recorded  # a resolution, where one decided
            path = file_verdict.path  # where the file is now, renames followed
            current = tree.read(path)
            assert current is not None
            base = repo.blob(change.base_blob) if change.base_blob else b""
            assert file_verdict.patched is not None
            reverse = repo.merge3(file_verdict.patched, current, base, merge_labels(patch))
            if not reverse.clean:
                outcome.ok = False
                outcome.message = f"{path}: the change cannot be taken out cleanly"
                # git takes it out only with later patches stacked on it where their lines touch
                above = [
                    upper.name
                    for upper in stacked(repo, every, patch, change.path, above=True)
                    if assess_patch(repo, tree, upper).ok
                ]
                if above:
                    together = " ".join([patch.name, *above])
                    outcome.message += (
                        f": patch {', '.join(above)} was recorded on top of it there; take "
                        f"them out together -> patchguard unapply {together}"
                    )
                break
            created_by_patch = change.base_blob is None and reverse.content == b""
            writes[path] = (None if created_by_patch else reverse.content, change.mode)
        if outcome.ok:
            outcome.written = _write(repo, tree, writes, journal, patch.name)
            if verdict.state is State.UPSTREAM:
                outcome.message = "absorbed upstream; nothing to take out"
            elif outcome.written:
                outcome.message = "would unapply" if dry_run else "unapplied"
            else:
                outcome.message = "not applied; nothing to take out"
        outcomes.append(outcome)
    if journal is not None:
        if whole and not all(o.ok for o in outcomes):
            journal.discard()
        else:
            journal.write(repo)
    return list(reversed(outcomes))


def _begin_writing(
    repo: Repo,
    operation: str,
    names: Sequence[str],
    dry_run: bool,
    allow_mid_operation: bool,
    tree: Worktree | None,
) -> tuple[list[Patch], list[Patch], Worktree, Journal | None]:
    """Every patch in manifest order, the selected ones, the view and the journal (none for a
    dry run), a killed writer's half-written files put back first."""
    if not (dry_run or allow_mid_operation):
        repo.refuse_mid_operation(operation)
    manifest = load_manifest(repo)
    journal = None
    if not dry_run:
        recover(repo)
        journal = Journal(repo.layout.git_dir, operation)
    tree = tree or Worktree(repo)
    tree.prefetch(manifest.patches)
    return manifest.patches, select_patches(manifest, names), tree, journal


def apply_then_check(
    repo: Repo, *, allow_mid_operation: bool = False, tree: Worktree | None = None
) -> tuple[list[PatchOutcome], CheckReport]:
    """Apply every patch, then check the result from the same view of the files, so each is
    read and parsed once. `tree`: a view for another interpreter's facts (`run --apply`)."""
    tree = tree or Worktree(repo)
    outcomes = apply(repo, allow_mid_operation=allow_mid_operation, tree=tree)
    return outcomes, check(repo, tree)


def _write(
    repo: Repo,
    tree: Worktree,
    writes: Mapping[str, tuple[bytes | None, str]],
    journal: Journal | None,
    patch: str,
) -> list[str]:
    """Stage `writes` (content, git mode) for later patches; with a journal, for its write of
    every file at once. The git mode matters only to a file the patch creates."""
    for path, (content, git_mode) in writes.items():
        if journal is None:
            tree.stage(path, content)
            continue
        before = tree.raw(path)
        raw = None if content is None else repo.to_worktree(path, content, before)
        created = new_file_mode(git_mode == EXECUTABLE_MODE) if before is None else None
        journal.before_write(path, before, raw, patch, (repo.permissions(path), created))
        tree.wrote(path, content, raw)
    return sorted(writes)
