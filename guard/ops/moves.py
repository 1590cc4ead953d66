"""Moves between commits with the patches lifted: `patchguard git ARGS` and `patchguard bisect run`.

git refuses to move when a patched file differs between commits, and a stash of the patch merges
back as a second copy. So, like StGit's pop-move-push: take every applied patch out (journaled,
as `unapply`), let git move over a clean file, and put the patches back by the usual 3-way apply.
The worktree's lock is held across all three; the hooks git fires in that worktree meanwhile
see HELD_VARIABLE and stand aside. Other worktrees (and a worktree git creates) are not held:
their hooks do their own work.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from guard.errors import EXIT_INTERRUPTED, ConfigError, GuardFailure, one_line
from guard.git.atomic import atomic_write, forget_stale_listings
from guard.git.lock import HELD_VARIABLE, exclusive
from guard.git.process import run_git
from guard.git.repo import Repo
from guard.ops.install import launcher
from guard.ops.provenance import stamp
from guard.store import journal
from guard.tree import replay

# A move seen before is replayed (guard.tree.replay): guard.tree.patching, stashes and the
# assessment they import (with the model's modules) load only for a move that is not.
if TYPE_CHECKING:
    from guard.tree import patching
    from guard.tree.verdicts import CheckReport

# What a step of `patchguard bisect run` tells git bisect: its exit statuses and the result.
BISECT_SKIP = 125
BISECT_ABORT = 128  # `git bisect run` aborts on any status above 127
INTERRUPTED = 130  # a step's command ended by Ctrl-C (or a shell's report of that)
# `patchguard bisect run`'s exit when git stopped the run at a commit without a verdict (a
# step's command died from a signal or exited above 127, or patchguard's part failed): git's
# own status then is 256 minus the step's, which no script can read.
EXIT_BISECT_STOPPED = 4


@dataclass(slots=True)
class StepResult:
    """One step's status for git and what it says."""

    status: int
    head: str
    skipped: str | None = None
    problems: list[str] = field(default_factory=list)
    signal: int | None = None  # the signal that ended the command, when one did

    @property
    def stops_git(self) -> bool:
        """git bisect run aborts on a status above 127: this step marks nothing."""
        return self.status > 127


# What a step that aborts says after its reason: the bisect is intact, and how to go on.
GO_ON = (
    "Nothing is marked and the bisect stays where it is: fix the cause, then run patchguard "
    "bisect run again to go on (or mark this commit yourself: patchguard git bisect skip)"
)
# ... and after a command that was interrupted or died: nothing to fix in patchguard.
STOPPED_GO_ON = (
    "git bisect run stops on a status above 127, so nothing is marked and the bisect stays "
    "at this commit: run patchguard bisect run again to go on (patchguard git bisect skip "
    "first to pass over this commit), or end it: patchguard bisect reset"
)


STEP_DECIDED = "patchguard-bisect-step"  # in the worktree's git dir: the status a step decided
STEP_LOCK = "patchguard-bisect-step.lock"  # beside it: per worktree, as the bisect is
# What git bisect runs at each commit. Only a status the step decided and wrote down reaches git:
# a step killed by a signal, or a Python that cannot start patchguard, ends with a status of its
# own (1 for a traceback) that git would read as "bad". $1: the file, then the step's argv. A
# step that stops git without deciding writes down why in that file itself, for `bisect run`'s
# own exit status.
STEP_WRAPPER = (
    'decided=$1; shift; rm -f "$decided"; "$@"; status=$?\n'
    'if [ "$(cat "$decided" 2>/dev/null)" = "$status" ]; then exit "$status"; fi\n'
    f'if [ "$status" = {INTERRUPTED} ]; then echo {INTERRUPTED} >"$decided"; '
    'why="was interrupted (Ctrl-C) before patchguard decided anything"\n'
    f'else echo {BISECT_ABORT} >"$decided"; why="ended with status $status before patchguard '
    'decided anything (killed by a signal, or patchguard could not start)"; fi\n'
    'echo "patchguard: bisect step at $(git rev-parse --short HEAD) $why, aborting the bisect. '
    f'{GO_ON}" >&2\n'
    "exit 128\n"
)


@dataclass
class Lift:
    """What happened to the patches around one git command."""

    lifted: list[str] = field(default_factory=list)
    entry: Path | None = None  # the lift's undo entry
    stopped: str | None = None
    put_back: Sequence[patching.PatchOutcome | replay.ReplayedOutcome] = ()
    report: CheckReport | None = None
    skipped: list[str] = field(default_factory=list)  # commits bisect skipped: "abbrev subject"
    hint: str | None = None  # what to run instead, when git refused
    stash_held: list[str] = field(default_factory=list)  # patches a popped stash held

    @property
    def ok(self) -> bool:
        """No red check afterwards (none runs when nothing is recorded or git stopped halfway;
        nor where the put-back's result was verified before: guard.tree.replay.reapply)."""
        return self.report is None or self.report.ok


@contextmanager
def lifted(repo: Repo, operation: str, *, hunt: bool = False) -> Iterator[Lift]:
    """Hold the worktree's lock, take the applied patches out, yield, put them back, check; an
    exception on the way still puts them back. When git stops mid-operation they stay out: the
    pending marker lets the hook that fires when it concludes put them back. `hunt`: a
    regression hunt's applies, lifts and put-back are its own moves, not the user's: they leave
    nothing for `undo`, the lift's own entry included."""
    lift = Lift()
    if not repo.layout.has_patches():  # nothing recorded: plain git, nothing written
        yield lift
        return
    with repo.lock(operation):
        journal.recover(repo)  # a killed writer's files first, before the key is read
        lift.lifted, lift.entry = replay.lift(repo)
        with journal.passing() if hunt else nullcontext():
            try:
                yield lift
            finally:
                # git's children inherited the hold (HELD_VARIABLE): one killed mid-write may
                # have left a temp file in a directory this process listed at the lift
                forget_stale_listings()
                _put_back(repo, lift)
                if hunt and lift.entry is not None and lift.stopped is None:
                    journal.forget(lift.entry)  # the hunt's own, even where not taken back


def _put_back(repo: Repo, lift: Lift) -> None:
    lift.stopped = repo.operation_in_progress() or (
        "conflicted stash pop" if repo.unmerged() else None
    )
    if lift.stopped:
        if lift.lifted:
            repo.layout.pending_path.write_text(" ".join(lift.lifted) + "\n")
        return
    if lift.entry is not None:
        # Byte for byte when git left the lifted files alone; otherwise (or when the entry was
        # pruned by a long bisect) the 3-way re-apply below decides.
        with suppress(GuardFailure):
            journal.undo(repo, lift.entry)
    lift.put_back, lift.report = replay.reapply(repo)
    repo.layout.pending_path.unlink(missing_ok=True)


def run_git_lifted(repo: Repo, args: Sequence[str], cwd: Path) -> tuple[int, Lift]:
    """`git ARGS` with the patches lifted. A stash pop or apply of a stash that holds a patch
    applies the stash without it (guard.tree.stashes); the patch comes back with the others."""
    with lifted(repo, "git " + " ".join(args[:2])) as lift:
        commands: list[Sequence[str]] = [args]
        if args and args[0] == "stash" and repo.layout.has_patches():
            from guard.tree import stashes  # only a stash command loads it (and the assessment)

            stash = stashes.plan(repo, args)
            if stash is not None:  # a stash of nothing but the patches has nothing to apply
                lift.stash_held = stash.patches
                commands = [c for c in (stash.apply, stash.drop) if c is not None]
        held = {HELD_VARIABLE: str(repo.layout.worktree_lock_path)}
        status = 0
        for command in commands:
            status = run_git(command, cwd, passthrough=True, env=held).returncode
            if status != 0:
                lift.hint = _carry_edits_hint(repo, args)
                break
    return status, lift


def _carry_edits_hint(repo: Repo, args: Sequence[str]) -> str | None:
    """A checkout git refused: with the patches out, what stops it is the user's other edits in
    a patched file (a debug line). `-m` carries them, as git checkout -m does; say so."""
    if not args or args[0] not in ("checkout", "switch") or {"-m", "--merge"} & set(args):
        return None
    from guard.store.derived import load_manifest

    edited = sorted(
        {
            change.path
            for patch in load_manifest(repo).patches
            for change in patch.files
            if repo.read_file(change.path) not in (None, repo.file_at("HEAD", change.path))
        }
    )
    if not edited:
        return None
    command = shlex.join(["patchguard", "git", args[0], "-m", *args[1:]])
    return (
        f"your other edits in {', '.join(edited)} are still in the tree (the patches were "
        f"lifted); to carry them along, as git checkout -m does: {command}"
    )


# --- bisect ------------------------------------------------------------------------------------


def bisect_run(repo: Repo, command: Sequence[str], log: Path | None) -> tuple[int, Lift]:
    """`git bisect run` where each step applies the patches, runs COMMAND, and lifts them again.
    The status is git's, except where git stopped the run without a verdict: 130 when a step
    was interrupted (or git itself was, by Ctrl-C), else EXIT_BISECT_STOPPED."""
    if not repo.layout.bisect_start.exists():
        raise GuardFailure(
            "no bisect is in progress; start one first: patchguard git bisect start BAD GOOD"
        )
    if log is not None:
        try:  # before the first step: a log that cannot be written would abort it after measuring
            log.open("a").close()
        except OSError as error:
            raise ConfigError(
                f"cannot write the bisect log {log}: {error.strerror}; name a file in a "
                "directory that exists and that you can write"
            ) from None
    decided = repo.layout.git_dir / STEP_DECIDED
    # -I: this patchguard, whatever PYTHONPATH, the user's site or the current directory hold
    step = [str(decided), sys.executable, "-I", launcher(), "bisect", "step"]
    step += ["--decided", str(decided)]
    if log is not None:
        step += ["--log", str(log.resolve())]
    bin_dir = _step_command(repo, step)
    with lifted(repo, "bisect run", hunt=True) as lift:
        status = run_git(
            ["bisect", "run", STEP_NAME, *command],
            repo.workdir,
            passthrough=True,
            env={
                HELD_VARIABLE: str(repo.layout.worktree_lock_path),
                "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            },
        ).returncode
        with exclusive(repo.layout.git_dir / STEP_LOCK, "bisect run"):
            pass  # after a Ctrl-C git is gone at once; a step may still be lifting: wait for it
        lift.skipped = _skipped_by_bisect(repo)
        last = decided.read_text().strip() if decided.exists() else ""  # the last step's status
        decided.unlink(missing_ok=True)
    if status == EXIT_INTERRUPTED or last == str(INTERRUPTED):
        return EXIT_INTERRUPTED, lift
    stopped = last.isdigit() and int(last) > 127  # as StepResult.stops_git: git stopped there
    return (EXIT_BISECT_STOPPED if stopped else status), lift


STEP_NAME = "patchguard-step"  # what git's "running ..." line shows before COMMAND


def _step_command(repo: Repo, step: Sequence[str]) -> Path:
    """A command named STEP_NAME, in a directory of the git dir put first on git's PATH: git
    prints each step as `running 'patchguard-step' COMMAND...`, not patchguard's command line."""
    bin_dir = repo.layout.git_dir / "patchguard-bin"
    bin_dir.mkdir(exist_ok=True)
    script = "#!/bin/sh\n# patchguard bisect run's step (guard/ops/moves.py)\n"
    script += f'set -- {shlex.join(step)} -- "$@"\n{STEP_WRAPPER}'
    atomic_write(bin_dir / STEP_NAME, script.encode(), mode=0o755)
    return bin_dir


def _skipped_by_bisect(repo: Repo) -> list[str]:
    """The commits this bisect skipped, as `git bisect log` lists them ("abbrev subject")."""
    if not repo.layout.bisect_start.exists():
        return []  # it ended (git bisect run --no-reset or a reset from the command)
    said = run_git(["bisect", "log"], repo.workdir).stdout.splitlines()
    skips = [
        line[len("# skip: [") :].split("] ", 1) for line in said if line.startswith("# skip: [")
    ]
    return [f"{commit[:10]} {subject}" for commit, subject in skips]


def bisect_step(repo: Repo, command: Sequence[str], log: Path | None) -> StepResult:
    """One commit of `patchguard bisect run`: apply, check, run, lift; a status for git. A
    commit where the patches cannot be applied, or the guard is red, is skipped (125): it says
    nothing about the regression. A failure of patchguard itself aborts the bisect (128),
    whatever it is (a bug included), and never marks a commit: only COMMAND's status does."""
    head = repo.head_commit_id()
    try:  # the hunt's own moves (under bisect run's lift): nothing for `undo`
        with exclusive(repo.layout.git_dir / STEP_LOCK, "bisect step"), journal.passing():
            return _step(repo, head, command, log)
    except Exception as error:  # patchguard's own part failed: the commit was not measured
        return StepResult(
            BISECT_ABORT, head, None, [one_line(error, lambda: str(repo.layout.git_dir))]
        )


def _step(repo: Repo, head: str, command: Sequence[str], log: Path | None) -> StepResult:
    from guard.ops.attest import run_attested
    from guard.tree import patching

    _, report = patching.apply_then_check(repo, allow_mid_operation=True)
    if report.ok:
        status, ended_by, verdict = run_attested(repo, report, command, cwd=repo.workdir)
        if verdict.wrong:  # the command ran other code: its status says nothing of this commit
            why = "the command's processes did not run the patched code"
            result = StepResult(BISECT_SKIP, head, why, verdict.problems)
        else:
            result = StepResult(status, head, signal=ended_by)
    else:
        result = StepResult(BISECT_SKIP, head, "the patches do not hold here", report.problems())
    if log is not None:
        line = {**stamp(repo), "exit": result.status, "skipped": result.skipped}
        with log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, separators=(",", ":")) + "\n")
    leftover = [o for o in patching.unapply(repo, allow_mid_operation=True) if not o.ok]
    if leftover:
        result.problems += [f"patch {o.verdict.name}: {o.message}" for o in leftover]
        result.status = BISECT_ABORT
    return result
