"""The commands people type most, without click (issue 30): status, list, show, log, stamp and
apply, each a function that prints what the command prints and returns its exit code.

The click commands (guard.cli.worktree, patches, changes, checking) call these same functions,
so both ways print the same bytes and exit alike. guard.entry sends the plain forms here
(`run_plain`: the command's names and --json, nothing else), so that they skip click's import
(18-27 ms); click keeps --help, usage errors and every other form. Nothing this module imports
imports click (tests/test_plain_commands.py counts).

`status` and `apply` with nothing to do answer from the record of their last full answer for
the same content (guard.store.fastpath.recall), when the worktree's key is one `check` verified
and git left none of it unmerged, before anything heavy is imported. The question names the
command and its words, the code that words the answer (_wording; model_namespace() is in the
record), and the undo journal as it is (a killed writer's entry is said, and recovered, in
full). What the key does not cover is never recorded: a patch committed in HEAD (HEAD's own
commit says that), warnings, an answer that wrote or failed.
"""

from __future__ import annotations

import os
import sys

from guard.errors import EXIT_GUARD_FAILED, EXIT_OK, PatchguardError
from guard.store import fastpath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from guard.git.repo import Repo

# click.echo's own: an ANSI style sequence, stripped where the stream is no terminal.
_ANSI = r"\033\[[;?0-9]*[a-zA-Z]"


def echo(message: str, *, err: bool = False) -> None:
    """One message and a newline, as click.echo prints it (styles stripped off a terminal)."""
    stream = sys.stderr if err else sys.stdout
    text = message + "\n"
    if "\033" in text and not stream.isatty():
        import re

        text = re.sub(_ANSI, "", text)
    stream.write(text)
    stream.flush()


def _repo(cwd: Path | str) -> Repo:
    from pathlib import Path

    from guard.git.repo import Repo

    return Repo.discover(Path(cwd))


# --- the commands ----------------------------------------------------------------------------


def status(cwd: Path | str, names: Sequence[str], as_json: bool) -> int:
    """`patchguard status [NAMES] [--json]`: each patch's state, file by file; then, as text,
    the stash entries that hold a recorded patch (the answer is kept by the stash's reflog)."""
    stash_log = _stash_log(cwd)
    trusted, answer = _recalled("status", names, as_json, cwd, stash_log)
    if answer is not None:
        echo(answer)
        return EXIT_OK
    from guard.cli import render
    from guard.store import journal
    from guard.tree import assess

    repo = _repo(cwd)
    report = assess.status_report(repo, names)
    interrupted = journal.interrupted(repo)
    for entry in interrupted:  # the files below are half written: say so
        echo(
            f"patchguard: {entry.describe()}: the next apply, unapply or undo puts its files "
            "back as they were (a file edited since stays as it is)",
            err=True,
        )
    if as_json:
        answer = render.status_json(report.patches)
    else:
        lines = render.status_lines(report.patches, report.symbols)
        if stash_log:
            from guard.tree import stashes

            lines += render.stash_lines(stashes.holding(repo, stash_log))
        answer = "\n".join(lines) or "no patches recorded"
    echo(answer)
    warnings = render.warning_lines(report)
    for line in warnings:
        echo(line, err=True)
    # What status prints is what the verified content decides, but for a patch committed in
    # HEAD (HEAD's own commit and the refs that hold it say that): not kept then.
    pure = not any(v.committed_in_head for v in report.patches)
    if trusted is not None and report.ok and not warnings and not interrupted and pure:
        _keep(cwd, trusted, _question("status", names, as_json, trusted, stash_log), answer)
    return EXIT_OK if report.ok else EXIT_GUARD_FAILED


def _stash_log(cwd: Path | str) -> str:
    """The stash's reflog (stash@{0} last), "" without a stash: one failed open, no git."""
    from guard.git.gitpaths import find_repository

    try:
        common_dir = find_repository(str(cwd))[2]
        with open(os.path.join(common_dir, "logs", "refs", "stash"), "rb") as log:
            return log.read().decode(errors="replace")
    except (OSError, PatchguardError):
        return ""


def apply(
    cwd: Path | str,
    names: Sequence[str],
    as_json: bool,
    *,
    dry_run: bool = False,
    merge: bool = False,
) -> int:
    """`patchguard apply [NAMES] [--json]`: re-apply patches by 3-way merge."""
    repo = _repo(cwd)
    trusted = None
    if not (dry_run or merge):
        with repo.lock("apply"):  # as apply itself starts: its lock, no apply mid-rebase
            repo.refuse_mid_operation("apply")
            trusted, answer = _recalled("apply", names, as_json, cwd)
        if answer is not None:
            echo(answer)
            return EXIT_OK
    from guard.cli import render
    from guard.tree import patching

    outcomes = patching.apply(
        repo, names, dry_run=dry_run, merge=merge, finish_git_merges=True, restore_edits=True
    )
    if as_json:
        answer = render.outcomes_json(outcomes)
    else:
        answer = "\n".join(render.outcome_lines(outcomes)) or "no patches recorded"
    echo(answer)
    ok = all(o.ok for o in outcomes)
    if trusted is not None and ok and not any(o.written or o.finished for o in outcomes):
        # After apply's own recovery of a killed writer: the undo journal as it is now.
        _keep(cwd, trusted, _question("apply", names, as_json, trusted), answer)
    return EXIT_OK if ok else EXIT_GUARD_FAILED


def list_(cwd: Path | str, as_json: bool) -> None:
    """`patchguard list [--json]`: the recorded patches and guards, without states."""
    echo(_listed("list", (), as_json, lambda: _list_text(cwd, as_json), cwd))


def _list_text(cwd: Path | str, as_json: bool) -> str:
    from guard.store.derived import load_manifest

    manifest = load_manifest(_repo(cwd), missing_ok=True)
    if as_json:
        import json

        from guard.cli.render import LIST_JSON_FORMAT

        return json.dumps({"format": LIST_JSON_FORMAT, **manifest.to_dict()}, indent=2)
    lines = []
    if not manifest.patches and not manifest.guards:
        lines.append("nothing recorded: no patches and no guards (patchguard record NAME)")
    for patch in manifest.patches:
        summary = f" - {patch.description}" if patch.description else ""
        lines.append(f"patch {patch.name}{summary} (base {patch.base_commit[:10]})")
        lines += [f"  {change.path}" for change in patch.files]
    lines += [f"guard {spec}" for spec in manifest.guards]
    return "\n".join(lines)


def show_text(cwd: Path | str, names: Sequence[str], *, color: bool) -> str:
    """`patchguard show [NAMES]`: the patches as recorded (NAME@{N}: an earlier version)."""
    from guard.cli.render import show_lines
    from guard.store.derived import load_manifest
    from guard.store.manifest import select_patches

    repo = _repo(cwd)
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
    return "\n".join(show_lines(patches, color=color))


def show(cwd: Path | str, names: Sequence[str]) -> None:
    """`show` off a terminal: plain text, no pager (on a terminal the click command pages)."""

    def full() -> str:
        return show_text(cwd, names, color=False) or "no patches recorded"

    if any("@{" in name for name in names):  # the history's, not the manifest's alone
        echo(full())
        return
    echo(_listed("show", names, False, full, cwd))


def _listed(
    command: str, names: Sequence[str], as_json: bool, full: Callable[[], str], cwd: Path | str
) -> str:
    """What list and show print, a function of the manifest's bytes alone when manifest.json is
    derived from the history ref with no change under way: answered as before for the same
    bytes (fastpath.recall_by), else in full by `full` and kept."""
    question = "\0".join([command, str(as_json), fastpath.source_digest(_LISTING), *names])
    before = _manifest_key(cwd)
    if before is not None:
        answer = fastpath.recall_by(before[0], fastpath.LISTED_FILE, before[1], question)
        if answer is not None:
            return answer
    answer = full()
    if before is not None and _manifest_key(cwd) == before:
        fastpath.keep_by(before[0], fastpath.LISTED_FILE, before[1], question, answer)
    return answer


# The code that words list and show from the manifest's bytes.
_LISTING = ("cli/plain.py", "cli/render.py", "store/manifest.py", "store/derived.py")


def _manifest_key(cwd: Path | str) -> tuple[str, str] | None:
    """(the worktree's git dir, the digest of the manifest) when the manifest is derived from
    the history as it is, else None."""
    from guard.errors import PatchguardError
    from guard.git.gitpaths import find_repository
    from guard.git.objects import digest

    try:
        _, git_dir, common_dir = find_repository(str(cwd))
        if not fastpath.derived_from_history(common_dir):
            return None
        with open(fastpath.manifest_path(common_dir), "rb") as handle:
            return git_dir, digest(handle.read())
    except (OSError, PatchguardError):
        return None


def log(cwd: Path | str, name: str | None, as_json: bool) -> None:
    """`patchguard log [NAME] [--json]`: the history of the patches, newest first."""
    import json

    from guard.cli import render

    changes = json.loads(_logged(cwd, name))
    if as_json:
        payload = {"format": render.LOG_JSON_FORMAT, "patch": name}
        echo(json.dumps({**payload, "changes": render.log_entries(changes)}, indent=2))
        return
    echo("\n".join(render.log_lines(changes, name)) or "no history yet")


def _logged(cwd: Path | str, name: str | None) -> str:
    """guard.store.history.log_changes as JSON: a function of the history's tip (its commits
    never change), so answered as before for the same tip (fastpath.recall_by), else read."""
    import json

    from guard.errors import PatchguardError
    from guard.git.gitpaths import HISTORY_REF, find_repository, read_ref

    try:
        _, git_dir, common_dir = find_repository(str(cwd))
        tip = read_ref(HISTORY_REF, (common_dir,))
    except (OSError, PatchguardError):
        tip = None
    if tip is not None:  # an invalid state's message names the manifest's path: common_dir
        question = "\0".join(["log", fastpath.source_digest(_LOGGING), common_dir, name or ""])
        answer = fastpath.recall_by(git_dir, fastpath.LOGGED_FILE, tip, question)
        if answer is not None:
            return answer
    from guard.store import history

    repo = _repo(cwd)
    answer = json.dumps(history.log_changes(repo, name))
    if tip is not None and history.current(repo) == tip:
        fastpath.keep_by(git_dir, fastpath.LOGGED_FILE, tip, question, answer)
    return answer


# The code that reads log's changes from the history.
_LOGGING = ("cli/plain.py", "store/history.py", "store/manifest.py")


def stamp(cwd: Path | str, python: str | None = None) -> None:
    """`patchguard stamp [--python PATH]`: one JSON line describing the code about to run."""
    from guard.ops import provenance  # light: git status starts before the rest is imported

    line = provenance.stamp_at(str(cwd), python)
    import json

    echo(json.dumps(line, separators=(",", ":")))


# --- the record of the last full answer ------------------------------------------------------


def _recalled(
    command: str, names: Sequence[str], as_json: bool, cwd: Path | str, also: str = ""
) -> tuple[fastpath.CurrentKey | None, str | None]:
    """The worktree's key when `check` verified this content, and the command's answer for it
    when one is on record (`also`: what else the answer depends on)."""
    trusted = fastpath.trusted_key(str(cwd))
    if trusted is None:
        return None, None
    return trusted, fastpath.recall(trusted, _question(command, names, as_json, trusted, also))


def _keep(cwd: Path | str, trusted: fastpath.CurrentKey, question: str, answer: str) -> None:
    """Record `answer` for the content `trusted` keys, if the content is still that content
    (a file edited while the command read it is answered again in full next time)."""
    again = fastpath.trusted_key(str(cwd))
    if again is not None and again.key == trusted.key:
        fastpath.keep_answer(trusted, question, answer)


def _question(
    command: str,
    names: Sequence[str],
    as_json: bool,
    trusted: fastpath.CurrentKey,
    also: str = "",
) -> str:
    """What an answer answers: the command and its words, the code that words it, the undo
    journal as it was (a killed writer's entry is said, and recovered, in full), and `also`."""
    words = [command, "json" if as_json else "text", _wording(), also]
    return "\0".join([*words, fastpath.undo_state(trusted.git_dir), *names])


_WORDING = (
    "cli/plain.py",
    "cli/render.py",
    "tree/patching.py",
    "tree/verdicts.py",
    "tree/stashes.py",
)
_wording_digest: list[str] = []


def _wording() -> str:
    """The code that turns verdicts into the text of status and apply (fastpath's
    model_namespace() covers the code that decides them): another patchguard words it anew."""
    if not _wording_digest:
        _wording_digest.append(fastpath.source_digest(_WORDING))
    return _wording_digest[0]


# --- the plain forms, as guard.entry hands them over -----------------------------------------


def run_plain(directory: str, command: str, words: list[str]) -> int | None:
    """Run `command` with `words` (what follows it, -C DIR already in `directory`) when they
    are its plain form: names and --json. None for anything else: click parses it."""
    parsed = _plain_words(words)
    if parsed is None:
        return None
    names, as_json = parsed
    if command == "status":
        return status(directory, names, as_json)
    if command == "apply":
        return apply(directory, names, as_json)
    if command == "list" and not names:
        list_(directory, as_json)
    elif command == "log" and len(names) <= 1:
        log(directory, names[0] if names else None, as_json)
    elif command == "show" and not as_json and not sys.stdout.isatty():
        show(directory, names)
    elif command == "stamp" and not names:
        stamp(directory)  # without --diff, the line is the same with or without --json
    else:
        return None
    return EXIT_OK


def _plain_words(words: list[str]) -> tuple[list[str], bool] | None:
    """(names, --json) of words that hold nothing else; -C DIR pairs are skipped (the
    entry point read them), unless DIR is a file (click says so)."""
    names: list[str] = []
    as_json = False
    tokens = iter(words)
    for token in tokens:
        if token == "-C":
            value = next(tokens, None)
            if value is None or (os.path.exists(value) and not os.path.isdir(value)):
                return None
        elif token == "--json":
            as_json = True
        elif token.startswith("-") or not token:
            return None
        else:
            names.append(token)
    return names, as_json
