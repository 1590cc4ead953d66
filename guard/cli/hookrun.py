"""What the git hooks do: re-apply after checkout/merge/rewrite, report stashes, fail loudly.

On the hooks' light path: the verified key (guard.store.fastpath) decides first, and content
as it was last verified imports nothing more.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from guard.errors import ConfigError, PatchguardError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from guard.git.repo import Repo

NULL_OID_CHARS = {"0"}
PRE_COMMIT_FLAG = "--pre-commit"
STDIN_HOOKS = frozenset({"post-rewrite", "reference-transaction"})
NEW_WORKTREE_SWITCH = "patchguard.applyOnNewWorktree"
_AUTOSTASH_FILES = ("rebase-merge/autostash", "rebase-apply/autostash", "MERGE_AUTOSTASH")


def say(message: str) -> None:
    print(f"patchguard: {message}", file=sys.stderr)


def run_hook(argv: Sequence[str]) -> int:
    """`patchguard hook NAME ARGS...`, or `--pre-commit NAME` as the pre-commit framework runs it
    (guard.entry says why this runs without click)."""
    if argv[0] == PRE_COMMIT_FLAG:
        name = argv[1] if len(argv) > 1 else ""
        args = _args_from_pre_commit(name)
    else:
        name, args = argv[0], list(argv[1:])
    stdin = sys.stdin.read() if name in STDIN_HOOKS else ""
    if os.environ.get("PATCHGUARD_SKIP") == "1":
        say(f"PATCHGUARD_SKIP=1, {name} hook did nothing")
        return 0
    try:
        return run(name, args, stdin, Path.cwd())
    except PatchguardError as error:  # said with what was running: `post-checkout hook: ...`
        error.args = (f"{name} hook: {error}", *error.args[1:])
        raise error from None


def _args_from_pre_commit(name: str) -> list[str]:
    """The pre-commit framework passes git's hook arguments as environment variables."""
    names = {
        "post-checkout": ("PRE_COMMIT_FROM_REF", "PRE_COMMIT_TO_REF", "PRE_COMMIT_CHECKOUT_TYPE"),
        "post-merge": ("PRE_COMMIT_IS_SQUASH_MERGE",),
        "post-rewrite": ("PRE_COMMIT_REWRITE_COMMAND",),
    }.get(name, ())
    return [os.environ.get(variable, "") for variable in names]


BISECT_ADVICE = (
    "a bisect is in progress: plain git bisect cannot move over the patched file; move with "
    "patchguard bisect good|bad|skip, or let patchguard bisect run COMMAND drive it"
)


def run(name: str, args: list[str], stdin: str, cwd: Path) -> int:
    from guard.git.gitdir import locate
    from guard.git.lock import held_by_parent

    layout = locate(cwd)
    if held_by_parent(layout.worktree_lock_path):  # under `patchguard git`, which puts back
        return 0  # this worktree's patches itself (another worktree's hook does its own work)
    if not layout.has_patches():
        return 0  # nothing recorded (with a history ref, Python derives manifest.json again)
    # Entry-point plugins of pydantic are never needed here, and looking for them scans every
    # installed distribution.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from guard.git.repo import Repo

    repo = Repo(layout)
    if name == "reference-transaction":
        return _report_stash(repo, args, stdin)
    if name == "post-checkout" and args[2:3] == ["0"]:
        return _report_restored(repo)
    if name not in ("post-checkout", "post-merge", "post-rewrite", "post-commit"):
        say(f"unknown hook {name!r}; nothing done")
        return 0
    if name == "post-commit" and not repo.layout.pending_path.exists():
        return 0
    if reason := _busy(repo, name, args):
        say(reason)
        return 0
    new_worktree = name == "post-checkout" and set(args[0] if args else "x") <= NULL_OID_CHARS
    switch = NEW_WORKTREE_SWITCH
    if new_worktree and switch in repo.git.config:
        try:
            apply_here = repo.git.config.get_bool(switch)
        except ValueError:  # git's own words for it: "bad boolean config value"
            raise ConfigError(
                f"new worktree: patches not applied: {switch} is "
                f"{repo.git.config[switch]!r}, not true or false (git config {switch} false)"
            ) from None
        if not apply_here:
            say(f"new worktree: patches not applied ({NEW_WORKTREE_SWITCH} is false)")
            return 0
    return _apply_and_check(repo, name)


def _busy(repo: Repo, hook: str, args: list[str]) -> str | None:
    """Why patches must stay out of the tree now: a pick or an autostash would trip on them.
    They come back with the hook that fires when the operation concludes (post-commit for
    `git commit` or `merge --continue`, post-rewrite for a rebase)."""
    for relative in _AUTOSTASH_FILES:
        if (repo.layout.git_dir / relative).exists():
            return "an autostash is pending and brings your changes back; patches not re-applied"
    operation = repo.operation_in_progress()
    # git removes MERGE_HEAD only after post-merge: there it means the merge just finished.
    finished = {
        "rebase": hook == "post-rewrite" and args[:1] == ["rebase"],
        "merge": hook == "post-merge",
    }
    if not operation or finished.get(operation):
        return None
    repo.layout.pending_path.touch()
    return f"{operation} in progress: patches are left out until it finishes"


def _apply_and_check(repo: Repo, hook: str) -> int:
    from guard.collector import without_collector
    from guard.store import journal
    from guard.tree import replay

    with without_collector(), repo.lock("apply"):
        journal.recover(repo)  # a killed writer's files first, as every writer does
        outcomes, report = replay.reapply(repo)
        written = [o for o in outcomes if o.written]
        for outcome in written:
            say(f"re-applied {outcome.verdict.name} ({', '.join(outcome.written)})")
        if written and repo.layout.bisect_start.exists():
            say(BISECT_ADVICE)
        repo.layout.pending_path.unlink(missing_ok=True)
        if report is None:
            return 0
        from guard.cli import render

        for line in render.warning_lines(report):
            print(line, file=sys.stderr)
        if report.ok:
            return 0
        print(render.banner(f"guard FAILED after {hook}", report.problems()), file=sys.stderr)
        return 1


def _report_restored(repo: Repo) -> int:
    """A file checkout is an explicit request to restore a file: respect it, and say what it cost."""
    from guard.tree import assess, verdicts

    report = assess.check(repo)
    for verdict in report.patches:
        if not verdict.ok:
            files = ", ".join(f.path for f in verdict.files if f.state != verdicts.State.APPLIED)
            say(
                f"patch {verdict.name} is no longer in {files}; "
                f"bring it back with: patchguard apply {verdict.name}"
            )
    return 0


def _report_stash(repo: Repo, args: list[str], stdin: str) -> int:
    """At `git stash` push (only a push creates a stash commit here): say which patches it
    took. Only a file the stash holds changed against HEAD counts, so `git stash push --
    OTHER_FILE` says nothing."""
    if args[:1] != ["committed"]:
        return 0
    stashes = [
        fields[1]
        for fields in (line.split() for line in stdin.splitlines())
        if len(fields) == 3 and fields[2] == "refs/stash" and set(fields[1]) - NULL_OID_CHARS
    ]
    if not stashes:
        return 0
    from guard.tree import assess, verdicts

    taken = []
    for verdict in assess.status(repo):
        paths = [f.path for f in verdict.files if f.state is verdicts.State.APPLIED]
        if any(repo.file_at(stashes[-1], p) != repo.file_at("HEAD", p) for p in paths):
            taken.append(verdict.name)
    if taken:
        say(
            f"git stash took patch {', '.join(taken)} into refs/stash; patchguard keeps its own "
            "copy and the next checkout re-applies it. To get this exact tree back later: "
            "patchguard git stash pop"
        )
    return 0
