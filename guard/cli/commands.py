"""The `patchguard` command: each command parses, calls one library function, maps the result.

Exit codes: 0 all good, 1 a guard failed, 2 usage or configuration error, 3 a bug in
patchguard (guard.errors.handled), 130 interrupted.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from guard.cli import preflight, render
from guard.errors import EXIT_GUARD_FAILED, EXIT_OK, PatchguardError, one_line, silence_stdout
from guard.git.gitdir import locate
from guard.git.repo import Repo
from guard.ops import install, provenance
from guard.store.derived import load_manifest
from guard.store.manifest import select_patches
from guard.tree import assess

if TYPE_CHECKING:
    from guard.ops import moves
    from guard.tree import patching

EXIT_CODES_EPILOG = (
    "Exit codes: 0 all good, 1 a guard failed, 2 usage or configuration error, "
    "3 internal error (a bug; the message names its log), 130 interrupted."
)


def _epilog(*examples: str, exit_codes: str = EXIT_CODES_EPILOG) -> str:
    lines = ["\b", "Examples:", *(f"  {e}" for e in examples), "", exit_codes]
    return "\n".join(lines)


class _Group(click.Group):
    """Turns library errors into one clear line on stderr and the contract's exit code.

    A closed stdout ends the command with exit 0: click's own handler would exit 1, which the
    contract reserves for a failed guard (`patchguard list | head -c0` under pipefail).
    """

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:  # --help and --version print here
            return super().make_context(*args, **kwargs)
        except BrokenPipeError:
            silence_stdout()
            raise click.exceptions.Exit(EXIT_OK) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PatchguardError as error:
            click.echo(f"patchguard: {error}", err=True)
            ctx.exit(error.exit_code)
        except BrokenPipeError:
            silence_stdout()
            ctx.exit(EXIT_OK)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """A git command typed where a patchguard one goes gets the command that works."""
        if args and args[0] in _GIT_MOVES and self.get_command(ctx, args[0]) is None:
            ctx.fail(
                f"'{args[0]}' is a git command: run it with the patches carried as "
                f"`patchguard git {shlex.join(args)}`"
            )
        return super().resolve_command(ctx, args)


# git commands users type after `patchguard` (issue 21): each is `patchguard git COMMAND`.
_GIT_MOVES = frozenset(
    {"checkout", "switch", "pull", "stash", "rebase", "merge", "cherry-pick", "reset", "restore"}
)


# Everything from the first word of a command on belongs to that command (git's, or the user's).
_PASS_THROUGH = {"ignore_unknown_options": True, "allow_interspersed_args": False}

_json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the machine-readable report (docs/json.md)."
)


def _directory_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """`-C DIR` on a command, relative to the group's `-C`, as git resolves repeated -C."""

    def wrapper(ctx: click.Context, /, directory: Path | None, **kwargs: Any) -> Any:
        base: Path = ctx.obj or Path.cwd()
        cwd = base / directory if directory else base
        return ctx.invoke(func, cwd=cwd, **kwargs)

    functools.update_wrapper(wrapper, func)  # the command's name, help and options
    return click.option(
        "-C",
        "directory",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="Run as if started in DIR.",
    )(click.pass_context(wrapper))


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=_epilog(
        "patchguard record eagle3 python/sglang/srt/models/kimi_k25.py",
        "patchguard check --quiet || exit 1",
    ),
)
@click.option(
    "-C",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Run as if started in DIR (like git -C).",
)
@click.version_option(package_name="git-patchguard", prog_name="patchguard")
@click.pass_context
def cli(ctx: click.Context, directory: Path | None) -> None:
    """Keep local patches in a git checkout, and fail loudly when they are gone."""
    ctx.obj = Path.cwd() / directory if directory else Path.cwd()


@cli.command(
    epilog=_epilog(
        "patchguard record eagle3 python/sglang/srt/models/kimi_k25.py -m 'EAGLE-3 delegation'",
        "patchguard record eagle3 python/sglang/srt/models/kimi_k25.py "
        "--require python/sglang/srt/models/kimi_k25.py::KimiK25ForConditionalGeneration.forward",
    )
)
@click.argument("name")
@click.argument("paths", nargs=-1)
@click.option(
    "--require",
    "requires",
    multiple=True,
    metavar="SPEC",
    help="Also require this symbol (file.py::Class.method). Repeatable.",
)
@click.option("-m", "--message", default=None, help="What the patch is for (kept on a re-record).")
@click.option(
    "--rebase",
    is_flag=True,
    help="Re-record NAME here although HEAD is not its base (or a bisect, merge, rebase or "
    "cherry-pick is in progress): the patch's base moves to this commit.",
)
@click.option(
    "-p",
    "--patch",
    "choose_hunks",
    is_flag=True,
    help="Choose the hunks to record, as git add -p does (git's own prompts); the rest stays "
    "in the file as your own edit.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse (exit 1, nothing recorded) what looks like a slip: a function at module level "
    "whose first parameter is self (a method typed outside its class, wherever it stands), a "
    "name one letter off the one it delegates to.",
)
@_directory_option
def record(
    cwd: Path,
    name: str,
    paths: tuple[str, ...],
    requires: tuple[str, ...],
    message: str | None,
    rebase: bool,
    strict: bool,
    choose_hunks: bool,
) -> None:
    """Record uncommitted changes (against HEAD) as patch NAME.

    Without PATHS, every tracked file with changes is taken (files already in another
    patch are skipped). Symbols whose def/class line the patch adds are required
    automatically. Recording NAME again replaces it and keeps its description unless -m
    is given; away from the patch's base commit, or mid-bisect, merge, rebase or
    cherry-pick, that needs --rebase (exit 2 otherwise, nothing changed).
    """
    repo = Repo.discover(cwd)
    from guard.tree import recording

    outcome = recording.record(
        repo,
        name,
        paths,
        requires=requires,
        description=message,
        rebase=rebase,
        strict=strict,
        choose_hunks=choose_hunks,
        cwd=cwd,
    )
    verb = "replaced" if outcome.replaced else "recorded"
    patch = outcome.patch
    click.echo(f"{verb} patch {patch.name}: {len(patch.files)} file(s)")
    for change in patch.files:
        click.echo(f"  {change.path}")
    for spec in patch.requires:
        click.echo(f"  requires {spec}")
    for path in outcome.skipped:
        click.echo(f"  skipped {path}: it belongs to another patch (name it to include it)")
    for slip in outcome.slips:
        click.echo(f"patchguard: warning: {slip} (recorded as typed; --strict refuses)", err=True)
    if outcome.grown:
        click.echo(
            f"patchguard: the re-record adds {len(outcome.grown)} line(s) that patch {patch.name} "
            "did not have before; if one is not part of it (a debug line), take it out and "
            "record again (patchguard undo brings the previous version back):",
            err=True,
        )
        for line in outcome.grown:
            click.echo(f"  + {line}", err=True)
    _advise_hooks(repo, "it", install_now=False)


def _advise_hooks(repo: Repo, what: str, *, install_now: bool) -> None:
    """Patches without hooks vanish on the next checkout: install them, or say how."""
    if install.hooks_installed(repo.layout):
        return
    if install_now:
        click.echo("\n".join(install.install(repo.layout, install.HOOK_TYPES, False)))
        return
    click.echo(
        f"patchguard: hooks are not installed, so a checkout will not re-apply {what}; "
        "run: patchguard install",
        err=True,
    )


_install_option = click.option(
    "--install",
    "install_now",
    is_flag=True,
    help="Also install the hooks (patchguard install) when they are not installed.",
)


@cli.command(
    epilog=_epilog(
        "patchguard require "
        "python/sglang/srt/models/kimi_k25.py::KimiK25ForConditionalGeneration.load_weights"
    )
)
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
@_directory_option
def require(cwd: Path, specs: tuple[str, ...]) -> None:
    """Guard committed symbols that must never disappear.

    SPEC is written like a pytest node id: path/to/file.py::Class.method. It must exist now.
    """
    from guard.tree import recording

    added = recording.require(Repo.discover(cwd), specs, cwd=cwd)
    for spec in added:
        click.echo(f"guarding {spec}")
    if not added:
        click.echo("already guarded; nothing changed")


def _same_as_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """--same-as STAMP, shared by check and run: the multi-node gate."""
    return click.option(
        "--same-as",
        "same_as",
        type=click.File("rb"),
        default=None,
        metavar="STAMP",
        help="Also fail unless this node runs the same code as the node that wrote STAMP "
        "(patchguard stamp): HEAD, the patches and their states, the guarded files, and every "
        "other edit (tracked files not as HEAD has them, untracked .py files in guarded "
        "packages), each difference named by path.",
    )(func)


def _stamp_file(file: Any) -> tuple[str, dict[str, Any]] | None:
    return None if file is None else (file.name, provenance.load_stamp(file.name, file.read()))


def _with_import_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--import MODULE, --runtime and --python PATH, shared by check and run."""
    func = click.option(
        "--runtime-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help="How long --runtime may take to import the guarded modules (default: 600).",
    )(func)
    func = click.option(
        "--runtime",
        is_flag=True,
        help="Ask Python: import each guarded module in a fresh process of the interpreter "
        "(see --python), with COMMAND's environment (env VAR=1, env -u VAR, env -i), confirm "
        "it is this checkout's file, and look each symbol up. Python decides every symbol, "
        "including those reading cannot tell. Writes nothing.",
    )(func)
    func = click.option(
        "--python",
        default=None,
        metavar="PATH",
        help="The interpreter for --import, --runtime and the conditions reading decides "
        "(sys.version_info, sys.platform...) (default: for run, the one COMMAND runs: itself, "
        "its script's #! line, or python3 on PATH; for check, python3 on PATH for --import and "
        "--runtime, patchguard's own for reading).",
    )(func)
    return click.option(
        "--import",
        "import_names",
        multiple=True,
        metavar="MODULE",
        help="Also verify that the interpreter imports MODULE from this checkout (repeatable).",
    )(func)


@cli.command(
    epilog=_epilog(
        "patchguard check",
        "patchguard check -C ~/sglang --quiet || exit 1",
        "patchguard check --import sglang --python ~/venvs/serve/bin/python",
        "patchguard check --json",
        "patchguard check --runtime --python ~/venvs/serve/bin/python",
        "patchguard stamp > ~/node0.stamp && patchguard check --same-as ~/node0.stamp",
    )
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when everything holds.")
@click.option(
    "--strict",
    is_flag=True,
    hidden=True,
    help="Accepted for old scripts: a symbol reading cannot decide always fails now.",
)
@_json_option
@_with_import_options
@_same_as_option
@_directory_option
def check(
    cwd: Path,
    quiet: bool,
    strict: bool,
    as_json: bool,
    import_names: tuple[str, ...],
    python: str | None,
    same_as: Any,
    runtime: bool,
    runtime_timeout: float | None,
) -> None:
    """Verify patches and required symbols (read-only).

    Each file is parsed, and each symbol gets one of three answers: present (importing the
    module surely binds it at its qualified place, by the last binding of its name), absent
    (it surely does not: a later `name = None`, `del`, `delattr`, a second `class`, code under
    `if TYPE_CHECKING:` or a test Python decides false), or cannot tell (a runtime condition
    such as `if _is_npu:`, a try body that may fail first, a decorator or metaclass reading
    cannot follow). Only present is green. Prints one line per problem with the command that
    fixes it.
    """
    del strict  # nothing left to be strict about: cannot tell already fails
    sys.exit(
        preflight.report_check(
            cwd,
            quiet=quiet,
            as_json=as_json,
            import_names=import_names,
            python=python,
            same_as=_stamp_file(same_as),
            runtime=runtime,
            runtime_timeout=runtime_timeout,
        )
    )


@cli.command(
    context_settings=_PASS_THROUGH,
    epilog=_epilog(
        "patchguard run -- python ~/bench.py --model-path /models/kimi-k2.5",
        "patchguard run --apply --import sglang python ~/bench.py --apply x",
        "patchguard run --import sglang -- ~/venvs/serve/bin/python ~/bench.py",
        "patchguard run --same-as ~/node0.stamp -- python ~/bench.py",
    ),
)
@click.option("--apply", "apply_first", is_flag=True, help="Re-apply patches before checking.")
@_with_import_options
@_same_as_option
@_directory_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    cwd: Path,
    apply_first: bool,
    import_names: tuple[str, ...],
    python: str | None,
    same_as: Any,
    runtime: bool,
    runtime_timeout: float | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND only if every guard holds.

    Otherwise exit 1 without running it, and say why.

    COMMAND replaces patchguard (exec): its exit status, signals, stdin and stdout pass
    through untouched. patchguard's options end at COMMAND's first word: everything after
    it is COMMAND's (`--` before COMMAND works too). --import, --runtime and the conditions
    reading decides (sys.version_info, sys.platform) are for the interpreter COMMAND runs (see
    --python) and, for --runtime, with COMMAND's environment (`env VAR=1 python ...`);
    --runtime probes before COMMAND starts.
    """
    if command[:1] == ("--",):
        command = command[1:]
    repo = Repo.discover(cwd)
    report = preflight.verify(
        repo,
        apply=apply_first,
        import_names=import_names,
        python=python,
        command=command,
        runtime=runtime,
        runtime_timeout=runtime_timeout,
        cwd=cwd,
    )
    other = _stamp_file(same_as)
    problems: list[str] = []
    if not report.ok:
        problems = preflight.with_hook_advice(repo, report)
    elif other is not None:
        differs = provenance.differences_from(repo, other[1])
        problems = [f"code differs from {other[0]}: {line}" for line in differs]
    if not report.ok or problems:
        problems = [*problems, f"not started: {' '.join(command)}"]
        click.echo(render.banner("guard FAILED, command NOT run", problems), err=True)
        sys.exit(EXIT_GUARD_FAILED)
    for line in render.warning_lines(report):
        click.echo(line, err=True)
    preflight.execute(command)


@cli.command(
    epilog=_epilog(
        "patchguard stamp >> results.jsonl",
        "patchguard stamp | patchguard stamp --diff results.jsonl -",
        "patchguard stamp --diff results.jsonl results.jsonl",
    )
)
@_json_option
@click.option(
    "--diff",
    "diff_files",
    nargs=2,
    type=click.File("rb"),
    default=None,
    metavar="A B",
    help="Say in words what changed between two stamps (files, or - for stdin).",
)
@_directory_option
def stamp(cwd: Path, as_json: bool, diff_files: tuple[Any, Any] | None) -> None:
    """Print a JSON line describing the code about to run.

    Append it to a results JSONL.

    The line is JSON with or without --json. Keys are documented in docs/benchmarks.md.
    With --diff, the last stamp of each file is compared.
    """
    if diff_files is None:
        click.echo(json.dumps(provenance.stamp(Repo.discover(cwd)), separators=(",", ":")))
        return
    old, new = (provenance.load_stamp(f.name, f.read()) for f in diff_files)
    lines = provenance.diff_stamps(_repo_or_none(cwd), old, new)
    click.echo(json.dumps({"changes": lines}) if as_json else "\n".join(lines))


def _repo_or_none(cwd: Path) -> Repo | None:
    try:
        return Repo.discover(cwd)
    except PatchguardError:
        return None


@cli.command(epilog=_epilog("patchguard status", "patchguard status eagle3"))
@click.argument("names", nargs=-1)
@_json_option
@_directory_option
def status(cwd: Path, names: tuple[str, ...], as_json: bool) -> None:
    """Show each patch's state, file by file.

    States: applied, edited (a definition the patch adds is there, but not its recorded
    code), unapplied, drifted, upstream, doubled, does-not-merge (the patch does not merge
    with this version of the file; `patchguard resolve` keeps it as you shape it), conflicted
    (the file itself is: unmerged, conflict markers, or it does not parse), missing-file,
    outside-sparse, unsafe-path (a link, or a path into a git directory). Exits 1 whenever
    `check` would.
    """
    repo = Repo.discover(cwd)
    report = assess.status_report(repo, names)
    from guard.store import journal

    for entry in journal.interrupted(repo):  # the files below are half written: say so
        click.echo(
            f"patchguard: {entry.describe()}: the next apply, unapply or undo puts its files "
            "back as they were (a file edited since stays as it is)",
            err=True,
        )
    if as_json:
        click.echo(render.status_json(report.patches))
    else:
        lines = render.status_lines(report.patches, report.symbols)
        click.echo("\n".join(lines) or "no patches recorded")
    for line in render.warning_lines(report):
        click.echo(line, err=True)
    sys.exit(EXIT_OK if report.ok else EXIT_GUARD_FAILED)


@cli.command(epilog=_epilog("patchguard apply", "patchguard apply eagle3 --dry-run"))
@click.argument("names", nargs=-1)
@click.option("-n", "--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option(
    "--merge", is_flag=True, help="On conflict, write git-style conflict markers into the file."
)
@_json_option
@_directory_option
def apply(cwd: Path, names: tuple[str, ...], dry_run: bool, merge: bool, as_json: bool) -> None:
    """Re-apply patches (all, or NAMES) by 3-way merge.

    A patch whose file cannot be merged cleanly, or whose merge would leave a required
    symbol missing or defined twice, is left untouched (exit 1), unless --merge asks for
    conflict markers. Running it again changes nothing.

    After a `git stash pop`, autostash or `git checkout -m` that conflicted in a patched
    file, it finishes git's merge there: HEAD's copy where HEAD already defines what the
    patch adds, the patch's otherwise, every other edit kept, the change left unstaged.
    Conflicts that are not the patch's stay marked.
    """
    from guard.tree import patching

    outcomes = patching.apply(
        Repo.discover(cwd),
        names,
        dry_run=dry_run,
        merge=merge,
        finish_git_merges=True,
        restore_edits=True,
    )
    _finish(outcomes, as_json)


@cli.command(epilog=_epilog("patchguard unapply --dry-run", "patchguard unapply eagle3"))
@click.argument("names", nargs=-1)
@click.option("-n", "--dry-run", is_flag=True, help="Show what would change; write nothing.")
@_json_option
@_directory_option
def unapply(cwd: Path, names: tuple[str, ...], dry_run: bool, as_json: bool) -> None:
    """Take patches out of the worktree, keeping other edits.

    Use it before `git stash pop` of a stash that holds the same change.
    """
    from guard.tree import patching

    outcomes = patching.unapply(Repo.discover(cwd), names, dry_run=dry_run)
    _finish(outcomes, as_json)


@cli.command(
    epilog=_epilog("patchguard undo", "patchguard undo --list", "patchguard undo --list --json")
)
@click.argument("number", type=click.IntRange(min=0), required=False, metavar="[N]")
@click.option("--list", "as_list", is_flag=True, help="List what can be undone, newest first.")
@_json_option
@_directory_option
def undo(cwd: Path, number: int | None, as_list: bool, as_json: bool) -> None:
    """Undo the last change: an apply or unapply, or any change to the patches.

    An apply or unapply (patchguard git lifts count as unapply) puts the files back exactly
    as they were before it; the last 10 are kept. A change to the patches (record, re-record,
    require, drop, import, resolve, fetch) is taken back by a new change that restores the
    patches as they were, so `patchguard log` keeps both. Says which one it undid, and what
    the worktree holds now with the command that brings it in line; run it again to step
    further back. `undo N` takes back entries 0 to N of `undo --list` (numbered from 0 as
    `patchguard log` numbers its changes: 0 is the newest, what `undo` takes back).

    Refuses (exit 1) if a file was edited since, rather than lose that edit.
    """
    from guard.store import undoing

    repo = Repo.discover(cwd)
    if as_list or as_json:
        if not as_list or number is not None:
            raise click.UsageError("--json goes with --list, which takes no N")
        entries = undoing.undo_entries(repo)
        if as_json:
            payload = {"format": undoing.UNDO_LIST_JSON_FORMAT, "entries": entries}
            click.echo(json.dumps(payload, indent=2))
        else:
            click.echo("\n".join(undoing.undo_list(repo)) or "nothing to undo")
        return
    done = [undoing.undo(repo)] if number is None else undoing.undo_through(repo, number)
    for undone in done:
        click.echo(f"undid {undone.what}")
    _say_worktree(repo, [name for undone in done for name in undone.patches])


def _say_worktree(repo: Repo, names: list[str]) -> None:
    """After the patches changed under the worktree: what it holds, and the next command."""
    if not names:
        return
    from guard.tree import next_step

    for line in next_step.worktree_lines(repo, names):
        click.echo(f"patchguard: {line}", err=True)


@cli.command(
    epilog=_epilog(
        "patchguard log",
        "patchguard log eagle3",
        "patchguard show eagle3@{1}",
        "patchguard log --json",
    )
)
@click.argument("name", required=False)
@_json_option
@_directory_option
def log(cwd: Path, name: str | None, as_json: bool) -> None:
    """Show the history of the patches (or of patch NAME), newest first.

    Each change says what changed (recorded, re-recorded with which files, resolved,
    dropped, imported, fetched from where, undone), when, at which HEAD, and the
    description. Changes are numbered from 0, the newest: `patchguard show NAME@{N}` shows
    the version N of `log NAME`, and `undo --list` numbers the same way.
    """
    from guard.store import history

    repo = Repo.discover(cwd)
    if as_json:
        payload = {
            "format": history.LOG_JSON_FORMAT,
            "patch": name,
            "changes": history.log_entries(repo, name),
        }
        click.echo(json.dumps(payload, indent=2))
        return
    click.echo("\n".join(history.log_lines(repo, name)) or "no history yet")


@cli.command(
    name="git",
    context_settings=_PASS_THROUGH,
    epilog=_epilog(
        "patchguard git pull",
        "patchguard git rebase origin/main",
        "patchguard git checkout v0.5.9",
        "patchguard git stash pop",
        "patchguard git bisect start v0.5.10 v0.5.9",
        "patchguard git bisect good",
        exit_codes="Exit codes: git's own when git fails; otherwise 0, or 1 when a guard fails "
        "afterwards; 2 usage or configuration error.",
    ),
)
@click.argument("args", nargs=-1, required=True, type=click.UNPROCESSED, metavar="GIT_ARGS...")
@click.pass_context
def git_(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Run any git command with the patches lifted out of the tree, then put them back.

    Every applied patch is taken out (as `unapply`, undoable), git runs with your terminal
    and with patchguard's hooks quiet, then every patch is re-applied by 3-way merge and
    checked. So git never refuses to move over a patched file, and a stash pop never
    doubles a method. Every word after `git` goes to git (`patchguard git checkout --help`
    is git's help). The patches lifted are those of the worktree git works in: `patchguard
    git -C DIR ...` lifts DIR's (git's --git-dir, --work-tree and --bare are refused). A
    worktree git creates (`patchguard git worktree add PATH`) gets the patches from its
    post-checkout hook, as with plain git.

    Exit status: git's own when git fails (the tree is put back as it was); otherwise 0,
    or 1 when a guard fails afterwards. When git stops halfway (a conflicted merge, rebase,
    cherry-pick or stash pop), the patches stay out until it is finished.
    """
    _git_lifted(ctx.obj, args)


def _git_lifted(cwd: Path, args: tuple[str, ...]) -> None:
    from guard.git.gitpaths import git_start_directory
    from guard.ops import moves

    repo = Repo.discover(Path(git_start_directory(args, str(cwd))))  # git's own -C DIR
    status, lift = moves.run_git_lifted(repo, args, cwd)
    _report_lift(lift, "git " + " ".join(args))
    if status == _SIGPIPE_STATUS:  # `patchguard git log | head`: the reader had enough
        status = EXIT_OK
    sys.exit(status or (EXIT_OK if lift.ok else EXIT_GUARD_FAILED))


_SIGPIPE_STATUS = 128 + 13  # git ended by SIGPIPE, as a shell reports it


def _report_lift(lift: moves.Lift, what: str) -> None:
    for line in render.lift_lines(lift):
        click.echo(f"patchguard: {line}", err=True)
    if lift.report is not None and not lift.report.ok:
        click.echo(render.banner(f"guard FAILED after {what}", lift.report.problems()), err=True)


def _measure_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """What `compare` and `bisect run --metric` share: the metric, the runs, the smallest effect."""
    options = [
        click.option(
            "--metric-file",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            metavar="FILE",
            help="Read the metric from what each run appends to FILE (sglang's --output-file "
            "JSONL), not from its output; relative to the top of the checkout, where COMMAND "
            "runs.",
        ),
        click.option(
            "--higher-is-better/--lower-is-better",
            "higher_is_better",
            default=None,
            help="Which way is better, for a metric whose name does not say (sglang's do: "
            "throughput up, latency down).",
        ),
        click.option(
            "--warmups",
            type=click.IntRange(min=0),
            default=1,
            show_default=True,
            help="Uncounted runs at each commit before the counted ones.",
        ),
        click.option(
            "--max-repeats",
            type=click.IntRange(min=2),
            default=None,
            metavar="K",
            help="The cap: while the answer is unknown the runs are doubled up to K per side "
            "(default: 4 x N).",
        ),
        click.option(
            "--repeats",
            type=click.IntRange(min=2),
            default=None,
            metavar="N",
            help="Counted runs per side to begin with (default: 8; bisect steps start at N/2, at "
            "least 3).",
        ),
        click.option(
            "--min-effect",
            type=click.FloatRange(min=0),
            default=None,
            metavar="PCT",
            help="The smallest change that counts, in percent (default: 5): `different` needs "
            "at least this, `same` means the whole interval is within it.",
        ),
    ]
    for option in options:
        func = option(func)
    return func


def _progress(line: str) -> None:
    click.echo(f"patchguard: {line}", err=True)


def _hunt_options(
    command: tuple[str, ...],
    metric: str,
    higher_is_better: bool | None,
    metric_file: Path | None,
    **counts: Any,
) -> Any:
    """hunt.Options from the command line (guard.hunt.hunt, and with it scipy, loads only here)."""
    from guard.hunt import hunt, stats
    from guard.hunt.metrics import HIGHER, LOWER, parse_metric

    if command[:1] == ("--",):
        command = command[1:]
    repeats = counts["repeats"] or hunt.DEFAULT_REPEATS
    cap = counts["max_repeats"] or 4 * repeats
    if cap < repeats:
        raise click.UsageError(f"--max-repeats {cap} is below --repeats {repeats}")
    if not stats.Plan(repeats, cap).can_differ:
        raise click.UsageError(
            f"with at most {cap} runs per side no change can be shown (the test cannot reach "
            "significance); raise --max-repeats to 8 or more"
        )
    direction = None if higher_is_better is None else HIGHER if higher_is_better else LOWER
    effect = counts["min_effect"]
    return hunt.Options(
        command=command,
        metric=parse_metric(metric, direction),
        min_effect_pct=hunt.DEFAULT_MIN_EFFECT_PCT if effect is None else effect,
        repeats=repeats,
        max_repeats=cap,
        warmups=counts["warmups"],
        metric_file=metric_file,
    )


_DEFAULT_METRIC = "Output token throughput (tok/s)"


@cli.command(
    epilog=_epilog(
        "patchguard compare v0.5.9 v0.5.10 -- python ~/throughput.py",
        "patchguard compare c1 c2 --metric 'Median TTFT (ms)' --json -- python ~/throughput.py",
    )
)
@click.argument("a")
@click.argument("b")
@click.option(
    "--metric",
    default=_DEFAULT_METRIC,
    show_default=True,
    metavar="M",
    help="A line's label as printed (with or without its colon and its unit), json:KEY or "
    "re:PATTERN.",
)
@_measure_options
@_json_option
@click.option(
    "--plot",
    "plot_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Draw each side's runs into FILE (.png or .svg; needs git-patchguard[plot]).",
)
@_directory_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def compare(
    cwd: Path,
    a: str,
    b: str,
    metric: str,
    as_json: bool,
    plot_file: Path | None,
    command: tuple[str, ...],
    higher_is_better: bool | None,
    metric_file: Path | None,
    **counts: Any,
) -> None:
    """Run COMMAND at commits A and B with the patches carried, and say whether it changed.

    A warm-up run at each side, then A and B in order-balanced pairs; the metric of each run
    is read from its output. The answer is `different` (significant, and at least
    --min-effect), `same` (the whole 95% interval within --min-effect) or `unknown`; while
    unknown the runs are doubled, up to --max-repeats. Every sample is stamped with the code
    it ran on, and only runs with the patches in place count. Afterwards (and after Ctrl-C,
    exit 130) your branch, tree and patches are as they were. Put COMMAND after `--`.
    """
    from guard.hunt import hunt

    options = _hunt_options(command, metric, higher_is_better, metric_file, **counts)
    if plot_file is not None:
        plot_file = cwd / plot_file
        hunt.require_plotting(plot_file)
    comparison = hunt.compare(Repo.discover(cwd), a, b, options, _progress)
    if plot_file is not None:
        hunt.plot(comparison, plot_file)
    if as_json:
        click.echo(render.compare_json(comparison))
    else:
        click.echo("\n".join(render.compare_lines(comparison)))


@cli.group(epilog=_epilog("patchguard bisect run --log hunt.jsonl python ~/bench.py"))
def bisect() -> None:
    """Bisect a regression with the patches in place at every commit."""


@bisect.command(
    name="run",
    context_settings=_PASS_THROUGH,
    epilog=_epilog(
        "patchguard git bisect start v0.5.10 v0.5.9",
        "patchguard bisect run --log hunt.jsonl python ~/bench.py --quick",
        "patchguard git bisect reset",
        exit_codes="Exit codes: 0 when git bisect run found the commit; 1 when no bisect is in "
        "progress or a guard fails afterwards (with --metric: when no commit is named); 2 usage "
        "or configuration error; 4 when the bisect stopped at a commit with nothing marked (the "
        "command died from a signal or exited above 127, or patchguard's part of the step "
        "failed: run it again to go on); 130 interrupted; otherwise git bisect run's own.",
    ),
)
@click.option(
    "--log",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Append one JSON line per step: the stamp of the tree measured and COMMAND's exit.",
)
@click.option(
    "--metric",
    default=None,
    metavar="M",
    help="Bisect on a measured metric instead of COMMAND's status (a label as printed, "
    "json:KEY or re:PATTERN): GOOD and BAD are measured, then each commit is marked like the "
    "one it does not differ from (see compare).",
)
@_measure_options
@_json_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def bisect_run(
    ctx: click.Context,
    /,
    log: Path | None,
    command: tuple[str, ...],
    metric: str | None,
    as_json: bool,
    higher_is_better: bool | None,
    metric_file: Path | None,
    **counts: Any,
) -> None:
    """Drive `git bisect run COMMAND` with the patches applied at each commit.

    At each commit the patches are applied and checked; where they cannot be applied or
    a guard fails, the commit is skipped (exit 125) and the reason printed. Otherwise
    COMMAND runs with the patches in place, and they are lifted again before git moves
    on. COMMAND's status means what it means to git bisect: 0 good, 1-127 bad, 125 skip;
    a command that was interrupted, died from a signal or exited above 127 stops the bisect
    there with nothing marked, and says so. A failure of patchguard itself aborts the bisect
    rather than mark a commit bad.
    Options end at COMMAND: everything after its first word is COMMAND's.

    With --metric M, COMMAND is a benchmark and its status does not decide: GOOD and BAD are
    measured as `patchguard compare` measures them, then each commit git offers is run
    (--repeats/2 runs to begin with, doubled while undecided) and marked like the one of
    GOOD and BAD it does not differ from; a commit that stays undecided, or where the patches
    do not hold, is skipped. It ends on the first changed commit, with its change against
    GOOD (exit 0; 1 when no commit is named). Put COMMAND after `--`.
    """
    cwd: Path = ctx.obj
    if metric is not None:
        if log is not None:
            raise click.UsageError(
                "--log goes with a pass/fail COMMAND; with --metric, --json holds every sample "
                "and the stamp of the code it ran on"
            )
        _bisect_metric(cwd, command, metric, as_json, higher_is_better, metric_file, counts)
    measuring = [counts[k] for k in ("repeats", "max_repeats", "min_effect")]
    if as_json or metric_file or higher_is_better is not None or counts["warmups"] != 1:
        measuring.append(True)
    if any(value is not None for value in measuring):
        raise click.UsageError("--json and the measuring options go with --metric M")
    from guard.ops import moves

    status, lift = moves.bisect_run(Repo.discover(cwd), command, log)
    if status == EXIT_OK:  # git ends "bisect found first bad commit" without a newline
        sys.stdout.write("\n")
        sys.stdout.flush()
    _report_lift(lift, "bisect run")
    sys.exit(status or (EXIT_OK if lift.ok else EXIT_GUARD_FAILED))


def _bisect_metric(
    cwd: Path,
    command: tuple[str, ...],
    metric: str,
    as_json: bool,
    higher_is_better: bool | None,
    metric_file: Path | None,
    counts: dict[str, Any],
) -> None:
    from guard.hunt import hunt

    options = _hunt_options(command, metric, higher_is_better, metric_file, **counts)
    found = hunt.bisect(Repo.discover(cwd), options, _progress)
    click.echo(render.hunt_json(found) if as_json else "\n".join(render.hunt_lines(found)))
    sys.exit(EXIT_OK if found.verdict == hunt.FOUND else EXIT_GUARD_FAILED)


def _bisect_shorthand(word: str) -> None:
    """`patchguard bisect WORD ...` is `patchguard git bisect WORD ...`: the words users try."""

    @bisect.command(
        name=word,
        context_settings=_PASS_THROUGH,
        short_help=f"patchguard git bisect {word}, the patches carried.",
        help=f"Same as `patchguard git bisect {word} ...`: git moves with the patches lifted, "
        "then puts them back and checks.",
    )
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    @click.pass_context
    def shorthand(ctx: click.Context, args: tuple[str, ...]) -> None:
        _git_lifted(ctx.obj, ("bisect", word, *args))


for _word in ("start", "good", "bad", "skip", "reset", "log"):
    _bisect_shorthand(_word)


@bisect.command(name="step", hidden=True, context_settings=_PASS_THROUGH)
@click.option("--log", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--decided", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def bisect_step(log: Path | None, decided: Path | None, command: tuple[str, ...]) -> None:
    """One step of `patchguard bisect run` (run by git bisect, not by hand).

    `--decided FILE` receives the status before the step exits: moves.STEP_WRAPPER passes on
    only that one, so a step that dies on the way cannot mark a commit.
    """
    from guard.ops import moves
    from guard.ops.bisect_status import BISECT_ABORT, StepResult

    if command[:1] == ("--",):
        command = command[1:]
    try:
        result = moves.bisect_step(Repo.discover(Path.cwd()), command, log)
    except Exception as error:  # no repository to step in: abort, never a mark for git
        result = StepResult(BISECT_ABORT, "", None, [one_line(error, _git_dir_of_cwd)])
    for line in render.step_lines(result):
        click.echo(f"patchguard: {line}", err=True)
    if decided is not None:
        with contextlib.suppress(OSError):  # not written: the wrapper aborts the bisect
            moves.decide(decided, result)
    sys.exit(result.status)


def _git_dir_of_cwd() -> str:
    """Where a crash log goes when a step fails before it found its repository."""
    from guard.git.gitpaths import find_repository

    return find_repository(os.getcwd())[1]


def _finish(outcomes: list[patching.PatchOutcome], as_json: bool) -> None:
    if as_json:
        click.echo(render.outcomes_json(outcomes))
    else:
        click.echo("\n".join(render.outcome_lines(outcomes)) or "no patches recorded")
    sys.exit(EXIT_OK if all(o.ok for o in outcomes) else EXIT_GUARD_FAILED)


@cli.command(name="list", epilog=_epilog("patchguard list", "patchguard list --json"))
@_json_option
@_directory_option
def list_(cwd: Path, as_json: bool) -> None:
    """List recorded patches and guards (without computing states)."""
    manifest = load_manifest(Repo.discover(cwd), missing_ok=True)
    if as_json:
        click.echo(json.dumps({"format": render.LIST_JSON_FORMAT, **manifest.to_dict()}, indent=2))
        return
    if not manifest.patches and not manifest.guards:
        click.echo("nothing recorded: no patches and no guards (patchguard record NAME)")
    for patch in manifest.patches:
        summary = f" - {patch.description}" if patch.description else ""
        click.echo(f"patch {patch.name}{summary} (base {patch.base_commit[:10]})")
        for change in patch.files:
            click.echo(f"  {change.path}")
    for spec in manifest.guards:
        click.echo(f"guard {spec}")


@cli.command(
    epilog=_epilog("patchguard show", "patchguard show eagle3", "patchguard show eagle3@{1}")
)
@click.argument("names", nargs=-1)
@_directory_option
def show(cwd: Path, names: tuple[str, ...]) -> None:
    """Show recorded patches: description, base commit, files, required symbols and diff.

    NAME@{N} shows an earlier version: N as `patchguard log NAME` numbers them.
    Coloured and paged (like git show) on a terminal; plain text otherwise.
    """
    repo = Repo.discover(cwd)
    if any("@{" in name for name in names):
        from guard.store import history

        patches = [
            history.patch_version(repo, name)
            if "@{" in name
            else select_patches(load_manifest(repo), [name])[0]
            for name in names
        ]
    else:
        patches = select_patches(load_manifest(repo), names)
    on_terminal = sys.stdout.isatty()
    color = on_terminal and "NO_COLOR" not in os.environ
    text = "\n".join(render.show_lines(patches, color=color))
    if on_terminal:
        os.environ.setdefault("LESS", "FRX")  # as git does: quit if one screen, keep colours
        click.echo_via_pager(text + "\n", color=color)
    else:
        click.echo(text or "no patches recorded")


@cli.command(
    epilog=_epilog(
        "patchguard resolve eagle3",
    )
)
@click.argument("name")
@click.option(
    "--drop",
    "forget",
    type=int,
    metavar="N",
    default=None,
    help="Forget resolution N of the patch (as `patchguard show NAME` numbers them).",
)
@click.option(
    "--keep-extra",
    is_flag=True,
    help="Keep lines the resolution adds that are neither the patch's nor upstream's, without "
    "asking (a debug line left in the file would ride along in every move).",
)
@_directory_option
def resolve(cwd: Path, name: str, forget: int | None, keep_extra: bool) -> None:
    """Keep the patch as you shaped it by hand at this commit, for this version of upstream.

    Where patch NAME does not merge (upstream changed the lines it touches), edit the file
    into the right shape here and run this. The recording stays as it was (base, diff,
    description, required symbols); the file as it is now is kept beside it as a resolution
    for this version of upstream's file. From then on every move (hooks, `patchguard git`,
    bisect steps, apply) merges from the version whose base is nearest to the file at hand,
    so the commits around this one are carried too, and the recorded base gets the recorded
    file back byte for byte. `patchguard undo` takes a resolution back.

    Lines the resolution adds that are neither the patch's nor upstream's are listed, and kept
    only when you confirm (on a terminal) or pass --keep-extra; otherwise nothing is kept
    (exit 1). Where the patch merges here as it is, nothing conflicts and nothing is kept.
    """
    from guard.tree import recording

    repo = Repo.discover(cwd)
    try:
        outcome = recording.resolve(repo, name, forget=forget, keep_extra=keep_extra)
    except recording.ExtraLines as extra:
        click.echo(
            f"patchguard: the resolution of {name} adds {len(extra.lines)} line(s) that are "
            "neither the patch's nor upstream's:",
            err=True,
        )
        for line in extra.lines:
            click.echo(f"  + {line}", err=True)
        if not sys.stdin.isatty() or not click.confirm("Keep them in the resolution?", err=True):
            raise
        outcome = recording.resolve(repo, name, keep_extra=extra.lines)
    if forget is not None:
        click.echo(f"forgot resolution {forget} of patch {name}")
    elif outcome.resolved:
        for path in outcome.resolved:
            click.echo(f"resolved patch {name}: {path} kept as it is for this version of upstream")
        if outcome.extra:
            click.echo(
                f"  with {len(outcome.extra)} line(s) neither the patch's nor upstream's, as "
                "you asked (patchguard undo takes the resolution back)"
            )
    else:
        click.echo(
            f"nothing to resolve: nothing conflicts, patch {name} merges with this version of "
            f"the file as it is; nothing was kept (patchguard status {name})"
        )


@cli.command(
    epilog=_epilog(
        "patchguard drop eagle3",
        "patchguard drop "
        "python/sglang/srt/models/kimi_k25.py::KimiK25ForConditionalGeneration.load_weights",
    )
)
@click.argument("target", metavar="NAME|SPEC")
@_directory_option
def drop(cwd: Path, target: str) -> None:
    """Forget a patch or a guard. The working tree is not touched.

    `patchguard undo` brings a dropped patch back.
    """
    from guard.tree import recording

    dropped = recording.drop(Repo.discover(cwd), target, cwd=cwd)
    click.echo(f"dropped {dropped}")


@cli.command(
    name="export",
    epilog=_epilog(
        "patchguard export -o eagle3.bundle.json",
        "patchguard export eagle3 > eagle3-only.bundle.json",
        "patchguard export | patchguard -C ~/sglang-gpu2 import -",
    ),
)
@click.argument("names", nargs=-1)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Write the bundle to FILE (relative to -C DIR, as git's paths are), not stdout.",
)
@_directory_option
def export_(cwd: Path, names: tuple[str, ...], output: Path | None) -> None:
    """Write patches NAME... (default: all patches and guards), with their content, to a bundle.

    The bundle is one self-contained, schema-validated JSON file, on stdout unless -o FILE.
    """
    from guard.store import bundle  # pydantic: only for bundles

    text = bundle.export_bundle(Repo.discover(cwd), names)
    if output is None:
        click.echo(text, nl=False)
    else:
        bundle.write_bundle(cwd / output, text)


@cli.command(
    name="import",
    epilog=_epilog(
        "patchguard import eagle3.bundle.json && patchguard apply",
        "patchguard import --install eagle3.bundle.json",
    ),
)
@click.argument("file")
@_install_option
@_directory_option
def import_(cwd: Path, file: str, install_now: bool) -> None:
    """Add the patches and guards of a bundle.

    FILE comes from `patchguard export` (- for stdin); a relative FILE is read from -C DIR,
    as git reads its paths.

    The bundle is validated first; a path that would land outside the repository, or an
    unknown schema version, is refused and nothing is written. `patchguard undo` takes an
    import back.
    """
    from guard.store import bundle  # pydantic: only for bundles

    repo = Repo.discover(cwd)
    raw = sys.stdin.buffer.read() if file == "-" else bundle.read_bundle(cwd / file)
    lines, changed = bundle.import_bundle(repo, file, raw)
    click.echo("\n".join(lines) or "the bundle holds nothing")
    _say_worktree(repo, changed)
    _advise_hooks(repo, "them", install_now=install_now)


@cli.command(epilog=_epilog("patchguard push origin", "patchguard push --take-back origin"))
@click.argument("remote")
@click.option(
    "--take-back",
    is_flag=True,
    help="Push even where this clone undid a change fetched from REMOTE: that change is then "
    "taken back for everyone (the history records the choice).",
)
@_directory_option
def push(cwd: Path, remote: str, take_back: bool) -> None:
    """Push the patches (their history, refs/patchguard/history) to REMOTE.

    REMOTE is what `git push` takes: a remote's name, a path, an ssh or https URL. Refused
    when REMOTE has changes to the patches this clone has not fetched, and (exit 1) when the
    push would take back a change of REMOTE's that this clone undid, unless --take-back.
    """
    from guard.store import sharing

    click.echo(sharing.push(Repo.discover(cwd), remote, take_back=take_back))


@cli.command(
    epilog=_epilog(
        "patchguard -C ~/sglang-gpu2 fetch origin && patchguard -C ~/sglang-gpu2 apply",
        "patchguard -C ~/sglang-gpu2 fetch --install origin",
        "patchguard fetch origin --theirs",
    )
)
@click.argument("remote")
@click.option(
    "--theirs",
    is_flag=True,
    help="Where a patch changed on both sides, take REMOTE's (yours stays in patchguard log).",
)
@click.option("--ours", is_flag=True, help="Where a patch changed on both sides, keep yours.")
@_install_option
@_json_option
@_directory_option
def fetch(
    cwd: Path, remote: str, theirs: bool, ours: bool, install_now: bool, as_json: bool
) -> None:
    """Bring in the patches pushed to REMOTE: new and updated ones, patch by patch.

    A patch changed both here and on REMOTE since the last version both had is refused by
    name (exit 1) and nothing changes, unless --theirs or --ours says which to keep. The
    working tree is not touched: a line for each patch fetched says what the worktree holds
    and the command that brings it in line (`patchguard apply NAME`). `patchguard undo`
    takes a fetch back.
    """
    from guard.store import sharing

    if theirs and ours:
        raise click.UsageError("--theirs and --ours ask for opposite things; give one of them")
    repo = Repo.discover(cwd)
    keep = sharing.THEIRS if theirs else sharing.OURS if ours else None
    fetched = sharing.fetch(repo, remote, keep)
    if as_json:
        from guard.tree import next_step

        payload = {
            "format": sharing.FETCH_JSON_FORMAT,
            "remote": remote,
            "up_to_date": fetched.up_to_date,
            "changes": [{"kind": c.kind, "name": c.name} for c in fetched.changes],
            "worktree": next_step.worktree_lines(repo, fetched.patches),
            "installed_hooks": (
                install.install(repo.layout, install.HOOK_TYPES, False)
                if install_now and not install.hooks_installed(repo.layout)
                else []
            ),
        }
        click.echo(json.dumps(payload, indent=2))
        _advise_hooks(repo, "them", install_now=False)  # on stderr, when still not installed
        return
    click.echo("\n".join(fetched.lines()))
    _say_worktree(repo, fetched.patches)
    _advise_hooks(repo, "them", install_now=install_now)


_HOOK_CHOICE = click.Choice(install.HOOK_TYPES)


@cli.command(
    name="install",
    epilog=_epilog(
        "patchguard install",
        "patchguard install -C ~/sglang --hook post-checkout",
    ),
)
@click.option(
    "--hook",
    "hook_types",
    multiple=True,
    type=_HOOK_CHOICE,
    help="Install only this hook (repeatable). Default: all four.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Create the hooks directory if core.hooksPath names a missing one.",
)
@_directory_option
def install_(cwd: Path, hook_types: tuple[str, ...], force: bool) -> None:
    """Install the git hooks that re-apply patches.

    post-checkout, post-merge and post-rewrite re-apply after checkout, merge, pull and
    rebase; reference-transaction reports `git stash`.

    A hook already in place is kept as NAME.patchguard-legacy and runs first, with the
    same arguments and stdin. Safe to run again.
    """
    lines = install.install(locate(cwd), hook_types or install.HOOK_TYPES, force)
    click.echo("\n".join(lines))


@cli.command(epilog=_epilog("patchguard uninstall"))
@click.option("--hook", "hook_types", multiple=True, type=_HOOK_CHOICE, help="Only this hook.")
@_directory_option
def uninstall(cwd: Path, hook_types: tuple[str, ...]) -> None:
    """Remove the hooks and restore the ones that were there before."""
    lines = install.uninstall(locate(cwd), hook_types or install.HOOK_TYPES)
    click.echo("\n".join(lines))


@cli.command(epilog=_epilog("patchguard doctor", "patchguard doctor --json"))
@_json_option
@_directory_option
def doctor(cwd: Path, as_json: bool) -> None:
    """Check that the hooks are installed and that git will run them.

    Says where git looks for hooks (core.hooksPath included), which interpreter each hook
    calls, and catches non-executable hooks and missing interpreters.
    """
    diagnosis = install.doctor(locate(cwd))
    if as_json:
        payload = {
            "format": render.DOCTOR_JSON_FORMAT,
            "ok": diagnosis.ok,
            "lines": diagnosis.lines,
            "problems": diagnosis.problems,
        }
        click.echo(json.dumps(payload, indent=2))
        sys.exit(EXIT_OK if diagnosis.ok else EXIT_GUARD_FAILED)
    click.echo("\n".join(diagnosis.lines))
    for problem in diagnosis.problems:
        click.echo(f"problem: {problem}", err=True)
    if diagnosis.ok:
        click.echo("patchguard: hooks are in place and git will run them")
    sys.exit(EXIT_OK if diagnosis.ok else EXIT_GUARD_FAILED)


def main() -> int:
    """The click command line, with its exit code returned (errors: guard.errors.handled)."""
    try:
        result = cli.main(prog_name="patchguard", standalone_mode=False)
    except click.ClickException as error:  # usage errors: click's own message, exit 2
        error.show()
        return error.exit_code
    except click.Abort:  # click turns Ctrl-C into Abort
        raise KeyboardInterrupt from None
    return result if isinstance(result, int) else EXIT_OK
