"""The provenance stamp: one JSON line that says exactly which code ran, and what changed
between two of them (`patchguard stamp`, `stamp --diff`, each `bisect run` step's log).

Its own module below the operations: `bisect` steps stamp the tree they measured, and the
pre-flight checks print reports, without either importing the other.
"""

from __future__ import annotations

import os
import time
from contextlib import suppress

from guard.errors import ConfigError
from guard.git.gitpaths import read_head
from guard.git.objects import blob_id
from guard.git.process import StartedGit, run_git, start_git
from guard.store import fastpath

# typing and datetime cost a stamp ~5 ms of its ~50 at run time: for the type checker only
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import PurePosixPath
    from typing import Any

    from guard.git.repo import Repo
    from guard.ops.attest import Verdict

STAMP_FORMAT = "patchguard.stamp/1"
# The code that words a stamp's report of the patches (fastpath.model_namespace() covers the code
# that decides it): a record made by another patchguard is not this one's answer.
_STAMP_CODE = ("ops/provenance.py", "tree/verdicts.py")


def patchguard_version() -> str:
    """The installed version, from the distribution's METADATA where importlib.metadata finds
    it (the first sys.path entry that holds its .dist-info), read without importing that
    (~10-30 ms); importlib.metadata itself for anything else (two of them, an .egg-info)."""
    import sys

    prefix = "git_patchguard-"
    for entry in sys.path:
        try:
            found = [n for n in os.listdir(entry or ".") if n.lower().startswith(prefix)]
        except OSError:
            continue
        if len(found) == 1 and found[0].endswith(".dist-info"):
            version = _metadata_version(os.path.join(entry or ".", found[0], "METADATA"))
            if version is not None:
                return version
        if found:
            break
    return _version_by_importlib()


def _metadata_version(path: str) -> str | None:
    """The Version header of a METADATA file (RFC 822 headers, then a blank line)."""
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    break
                if line.startswith("Version: "):
                    return line[len("Version: ") :].strip() or None
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _version_by_importlib() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("git-patchguard")
    except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
        return "unknown"


# What `git status` says of the tracked files, without refreshing the index file: a read-only
# command writes nothing. Its paths are the repository's, from any directory (porcelain).
_DIRTY = ("--no-optional-locks", "status", "--porcelain=v1", "-z", "-uno", "--no-renames")
_TRACKING = "%(upstream)%00%(upstream:short)%00%(upstream:track,nobracket)"


def stamp_at(directory: str) -> dict[str, Any]:
    """stamp() of the checkout `directory` is in, with `git status` started first: it runs
    while the rest of what a stamp needs is imported, about as long as git status itself."""
    status = start_git(_DIRTY, directory)
    try:
        from pathlib import Path

        from guard.git.repo import Repo

        repo = Repo.discover(Path(directory))
    except BaseException:  # no repository there: its own error, not git status's
        status.discard()
        raise
    return stamp(repo, status)


def stamp(repo: Repo, status: StartedGit | None = None) -> dict[str, Any]:
    """One JSON object that says exactly which code is about to run (keys in docs/benchmarks.md).
    `status`: _DIRTY already started in the checkout (stamp_at)."""
    layout = repo.layout
    # git's own answers come while the check is read or made
    status = status or start_git(_DIRTY, repo.workdir)
    head = read_head(str(layout.git_dir), str(layout.common_dir)) or repo.head_commit()
    branch = _head_branch(repo) if head is not None else None
    tracking = None
    if branch is not None:
        tracking = start_git(
            ["for-each-ref", f"--format={_TRACKING}", f"refs/heads/{branch}"], repo.workdir
        )
    checked = _checked(repo) if layout.manifest_path.exists() else None
    guarded = checked["guarded"] if checked else []
    untracked = _untracked_beside(repo, guarded)  # listed while git status still runs
    files = {}
    for path in guarded:
        content = repo.read_file(path)
        files[path] = None if content is None else blob_id(content)
    dirty = _dirty(status.result().stdout)
    return {
        "format": STAMP_FORMAT,
        "repository": str(repo.workdir),
        "head": head,
        "branch": branch,
        "upstream": None
        if tracking is None or branch is None
        else _tracking(repo, branch, tracking),
        "dirty": dirty,
        "edits": code_edits(repo, dirty, guarded, _untracked_modules(untracked)),
        "patches": checked["patches"] if checked else {},
        "files": files,
        "symbols": checked["symbols"] if checked else {},
        "ok": checked["ok"] if checked else False,
        "problems": checked["problems"] if checked else [],  # why not ok, as `check` says it
        "patchguard": patchguard_version(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),  # ISO 8601, UTC
    }


def with_attestations(stamp_data: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    """The stamp of a run with what its processes attested (`attestations`, docs/benchmarks.md):
    which process imported which guarded module from where, and whether the run counts."""
    return {**stamp_data, "attestations": verdict.as_json()}


def _checked(repo: Repo) -> dict[str, Any]:
    """What `check` says of the patches and symbols, as the stamp holds it, with the guarded
    paths: for content `check` verified, as it said it before (fastpath.recall, keyed by that
    content and the code that says it); otherwise checked in full."""
    import json  # not at import: stamp_at starts git status first

    question = f"stamp\0{fastpath.source_digest(_STAMP_CODE)}"
    trusted = fastpath.trusted_key(str(repo.workdir))
    answer = None if trusted is None else fastpath.recall(trusted, question)
    if answer is not None:
        with suppress(ValueError):
            recalled: dict[str, Any] = json.loads(answer)
            return recalled
    from guard.store.spec import parse_spec
    from guard.tree import assess

    report = assess.check(repo)
    checked = {
        "guarded": sorted(
            {f.path for v in report.patches for f in v.files}
            | {parse_spec(s.spec).path for s in report.symbols if s.patch is None}
        ),
        "patches": {v.name: str(v.state) for v in report.patches},
        "symbols": {s.spec: s.ok for s in report.symbols},
        # As `check` refuses to pass on nothing: a stamp that guards nothing vouches for nothing.
        "ok": report.ok and not report.checks_nothing,
        "problems": report.problems(),
    }
    if trusted is not None and report.ok and not report.warnings:
        again = fastpath.trusted_key(str(repo.workdir))
        if again is not None and again.key == trusted.key:
            fastpath.keep_answer(trusted, question, json.dumps(checked))
    return checked


def _head_branch(repo: Repo) -> str | None:
    """The branch HEAD is on, as git names it; None when HEAD is detached (or unborn)."""
    with open(repo.layout.git_dir / "HEAD", encoding="utf-8") as handle:
        head = handle.read().strip()
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else None


def _tracking(repo: Repo, branch: str, listed: StartedGit) -> dict[str, Any] | None:
    """The branch's upstream and how far HEAD is ahead of it and behind it, from the
    for-each-ref of _TRACKING that `listed` ran."""
    listing = listed.result().stdout
    line = next((line for line in listing.split("\n") if line.startswith("refs/")), None)
    if line is None:
        return None  # none configured
    _, short, track = line.split("\0")
    if track == "gone":  # configured, but its ref is gone: libgit2 says it as it always did
        return _tracking_by_libgit2(repo, branch)
    counts = {"ahead": 0, "behind": 0}
    for part in filter(None, track.split(", ")):
        word, number = part.split(" ")
        counts[word] = int(number)
    return {"ref": short, "ahead": counts["ahead"], "behind": counts["behind"]}


def _tracking_by_libgit2(repo: Repo, branch: str) -> dict[str, Any] | None:
    git = repo.git
    tracking = git.branches.local[branch].upstream
    if tracking is None:
        return None
    ahead, behind = git.ahead_behind(git.head.target, tracking.target)
    return {"ref": tracking.shorthand, "ahead": ahead, "behind": behind}


def _dirty(listing: str) -> list[str]:
    """Tracked files whose worktree content differs from HEAD (staged or not), as `git status`
    (_DIRTY) says (a file a sparse checkout leaves out is no change)."""
    return sorted({entry[3:] for entry in listing.split("\0") if len(entry) > 3})


def code_edits(
    repo: Repo, dirty: list[str], guarded: list[str], untracked: list[str]
) -> dict[str, str | None]:
    """The rest of the code that runs, beside the guarded files: each tracked file whose content
    differs from HEAD's, and each untracked `.py` file in a guarded file's package (where an
    import finds it: `untracked`, as _untracked_beside lists them), by the blob id of its
    content (None: deleted).

    A file only staged, or touched back to HEAD's bytes, is no edit: the code is HEAD's.
    """
    edits: dict[str, str | None] = {}
    others = [path for path in dirty if path not in guarded]
    committed = _head_entries(repo, others)
    for path in others:
        here = _content_id(repo, path)
        if here != committed.get(path):
            edits[path] = here
    for path in untracked:
        edits[path] = _content_id(repo, path)
    return dict(sorted(edits.items()))


def _untracked_beside(repo: Repo, guarded: list[str]) -> StartedGit | None:
    """The untracked files in the packages of the guarded files, listed by one ls-files, now
    started (None: nothing is guarded)."""
    packages = sorted({str(_package_directory(repo, path)) for path in guarded})
    if not packages:
        return None
    return start_git(["ls-files", "-z", "--others", "--", *packages], repo.workdir)


def _untracked_modules(listed: StartedGit | None) -> list[str]:
    """The `.py` files among those _untracked_beside listed."""
    listing = "" if listed is None else listed.result().stdout
    return [path for path in listing.split("\0") if path.endswith(".py")]


def _head_entries(repo: Repo, paths: list[str]) -> dict[str, str]:
    """The id HEAD's tree holds at each of `paths` that it holds (one ls-tree)."""
    if not paths or repo.head_commit() is None:
        return {}
    listing = run_git(
        ["--literal-pathspecs", "ls-tree", "-z", "--full-tree", "HEAD", "--", *paths],
        repo.workdir,
    ).stdout
    entries = {}
    for entry in filter(None, listing.split("\0")):
        info, _, path = entry.partition("\t")
        entries[path] = info.split(" ")[2]
    return entries


def _content_id(repo: Repo, path: str) -> str | None:
    """The id git gives what is at `path` now: a file's blob as git stores it, a link's target
    (a link is never read through), a submodule's checked-out commit; None when nothing is."""
    full = repo.workdir / path
    if full.is_symlink():
        return blob_id(os.fsencode(os.readlink(full)))
    if full.is_dir():  # a submodule, or a directory where the file was (no file, then)
        return (
            run_git(["rev-parse", "HEAD"], full).stdout.strip()
            if (full / ".git").exists()
            else None
        )
    content = repo.read_file(path)
    return None if content is None else blob_id(content)


def _package_directory(repo: Repo, path: str) -> PurePosixPath:
    """The top package a guarded file belongs to (its own directory when it is in none), as
    a path of the checkout: where `import` may find a stray module beside the recorded ones."""
    from pathlib import PurePosixPath

    from guard.truth.module_names import module_of  # the import rule the probe follows

    module, root = module_of(repo.workdir, path)
    top = root.relative_to(repo.workdir) / module.split(".")[0] if "." in module else None
    return PurePosixPath(top.as_posix()) if top is not None else PurePosixPath(path).parent


def load_stamp(source: str, raw: bytes) -> dict[str, Any]:
    """The last stamp line of a file (a results JSONL may hold many).

    Stamps are ASCII JSON; other lines (a log's bytes in any encoding, nested too deeply for
    json) are simply not stamps.
    """
    import json

    lines = [line for line in raw.decode(errors="replace").splitlines() if line.strip()]
    for line in reversed(lines):
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(data, dict) and data.get("format") == STAMP_FORMAT:
            _refuse_malformed(source, data)
            return data
    raise ConfigError(
        f"{source} holds no patchguard stamp (a JSON line with format {STAMP_FORMAT}); "
        "write one with `patchguard stamp >> FILE`"
    )


# The kinds of value each key of a stamp holds (docs/benchmarks.md); None where a key may be null.
_STAMP_TYPES: dict[str, tuple[type, ...]] = {
    "head": (str, type(None)),
    "branch": (str, type(None)),
    "upstream": (dict, type(None)),
    "dirty": (list,),
    "patches": (dict,),
    "files": (dict,),
    "edits": (dict,),
    "symbols": (dict,),
}


def _refuse_malformed(source: str, data: dict[str, Any]) -> None:
    """A line that says it is a stamp but holds other kinds of values: one clear line."""
    values = {
        "patches": (str,),
        "files": (str, type(None)),
        "edits": (str, type(None)),
        "symbols": (bool,),
    }
    for key, kinds in _STAMP_TYPES.items():
        inner = values.get(key)
        bad = key in data and not isinstance(data[key], kinds)
        if not bad and inner and isinstance(data.get(key), dict):
            bad = not all(isinstance(v, inner) for v in data[key].values())
        if bad:
            raise ConfigError(
                f"{source}: the stamp's {key!r} is {type(data[key]).__name__}, not what "
                "`patchguard stamp` writes; write a new one with `patchguard stamp >> FILE`"
            )


def diff_stamps(repo: Repo | None, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed between two stamps, in plain words: the first question of a regression hunt."""
    lines = []
    if old.get("head") != new.get("head"):
        lines.append(_head_moved(repo, old.get("head"), new.get("head")))
    if old.get("branch") != new.get("branch"):
        lines.append(f"branch: {_branch(old)} -> {_branch(new)}")
    if old.get("upstream") != new.get("upstream"):
        lines.append(f"upstream: {_upstream(old)} -> {_upstream(new)}")
    labels = (("patches", "patch"), ("symbols", "symbol"), ("files", "guarded file"))
    for key, label in (*labels, ("edits", "file")):
        before, after = old.get(key) or {}, new.get(key) or {}
        unnamed = _UNEDITED if key == "edits" else None
        for name in sorted(set(before) | set(after)):
            was, now = before.get(name, unnamed), after.get(name, unnamed)
            if was != now:
                lines.append(f"{label} {name}: {_word(key, was)} -> {_word(key, now)}")
    old_dirty, new_dirty = set(old.get("dirty") or []), set(new.get("dirty") or [])
    if old_dirty != new_dirty:
        added = ", ".join(sorted(new_dirty - old_dirty)) or "none"
        gone = ", ".join(sorted(old_dirty - new_dirty)) or "none"
        lines.append(f"uncommitted changes: newly dirty {added}; no longer dirty {gone}")
    if old.get("patchguard") != new.get("patchguard"):
        lines.append(
            f"patchguard: {old.get('patchguard') or 'unknown'} -> {new.get('patchguard') or 'unknown'}"
        )
    return lines or [SAME_CODE]


# What must agree for two nodes to run the same code; their paths, branches and times may differ.
_SAME_CODE_KEYS = ("head", "patches", "files", "edits")
SAME_CODE = "same code: HEAD, patches, guarded files, other edits and symbols are unchanged"
_UNEDITED = object()  # a path an `edits` map does not name: HEAD's content


def same_code(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two stamps describe the same code (a hunt's kept sample against the tree now)."""
    return all(one.get(key) == other.get(key) for key in _SAME_CODE_KEYS)


def differences_from(repo: Repo, other: dict[str, Any]) -> list[str]:
    """What makes this checkout's code differ from another node's stamp (`--same-as`), in the
    words of `stamp --diff`; empty when HEAD, the patches and their states, the guarded files'
    ids and every other edit of the code (`edits`) are the same."""
    here = stamp(repo)
    lines = diff_stamps(
        repo, {k: other.get(k) for k in _SAME_CODE_KEYS}, {k: here.get(k) for k in _SAME_CODE_KEYS}
    )
    return [] if lines == [SAME_CODE] else lines


def _word(key: str, value: Any) -> str:
    if key == "edits":
        return {_UNEDITED: "as HEAD has it", None: "deleted"}.get(value) or str(value)[:10]
    if key == "symbols":
        return {True: "present", False: "missing", None: "not guarded"}[value]
    if key == "files":
        return "absent" if value is None else str(value)[:10]
    return "not recorded" if value is None else str(value)


def _branch(stamp_data: dict[str, Any]) -> str:
    return str(stamp_data.get("branch") or "(detached HEAD)")


def _upstream(stamp_data: dict[str, Any]) -> str:
    upstream = stamp_data.get("upstream")
    if not upstream:
        return "none"
    return f"{upstream['ref']} (ahead {upstream['ahead']}, behind {upstream['behind']})"


def _head_moved(repo: Repo | None, old: str | None, new: str | None) -> str:
    span = f"({(old or 'none')[:7]}..{(new or 'none')[:7]})"
    if repo is None or old is None or new is None:
        return f"HEAD changed {span}"
    import pygit2  # only here: the checks that share this module stay light

    try:
        ahead, behind = repo.git.ahead_behind(new, old)
        old_tree = repo.git.revparse_single(old).peel(pygit2.Commit).tree
        new_tree = repo.git.revparse_single(new).peel(pygit2.Commit).tree
    except (KeyError, ValueError):
        return f"HEAD changed {span}; these commits are not in {repo.workdir}"
    touched = [delta.new_file.path for delta in old_tree.diff_to_tree(new_tree).deltas]
    if not behind:
        moved = f"HEAD moved {ahead} commit{'s' if ahead != 1 else ''} {span}"
    elif not ahead:
        moved = f"HEAD moved back {behind} commit{'s' if behind != 1 else ''} {span}"
    else:
        moved = f"HEAD moved to another line of history: {ahead} ahead, {behind} behind {span}"
    from pathlib import PurePosixPath

    by_directory: dict[str, int] = {}
    for path in touched:
        directory = str(PurePosixPath(path).parent)
        by_directory[directory] = by_directory.get(directory, 0) + 1
    where = ", ".join(
        f"{count} file{'s' if count > 1 else ''} touched under {directory}/"
        for directory, count in sorted(by_directory.items())
    )
    return f"{moved}, {where}" if where else moved
