"""The provenance stamp: one JSON line that says exactly which code ran, and what changed
between two of them. Its own module so that bisect steps (which stamp the tree they measured)
and the pre-flight checks (which print reports) need not import each other.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import suppress
from itertools import takewhile
from typing import TYPE_CHECKING

from guard.errors import ConfigError
from guard.git.gitpaths import read_head
from guard.git.objects import blob_id
from guard.git.process import STATUS, StartedGit, changed_tracked, run_git, start_git

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from guard.git.repo import Repo

STAMP_FORMAT = "patchguard.stamp/1"


# STATUS, and the branch's upstream: how far HEAD is from it comes in the headers, as git counts
# it whatever status.aheadBehind says, so one git process answers both.
_STATUS = (*STATUS, "--branch", "--ahead-behind")


def stamp_at(directory: Path, python: str | None) -> dict[str, Any]:
    """stamp() of the checkout `directory` is in, with `git status` started first: it runs
    while the rest of what a stamp needs is imported, about as long as git status itself."""
    status = start_git(_STATUS, directory)
    try:
        from guard.git.repo import Repo

        repo = Repo.discover(directory)
    except BaseException:  # no repository there: its own error, not git status's
        status.discard()
        raise
    return stamp(repo, status, python)


def stamp(
    repo: Repo, status: StartedGit | None = None, python: str | None = None
) -> dict[str, Any]:
    """One JSON object that says exactly which code is about to run (keys in docs/benchmarks.md).
    `status`: _STATUS already started in the checkout (stamp_at)."""
    layout = repo.layout
    # git's own answers come while the check is read or made
    status = status or start_git(_STATUS, repo.workdir)
    hidden = _hidden_entries(repo)
    head = read_head(str(layout.git_dir), str(layout.common_dir)) or repo.commit_id("HEAD")
    branch = _head_branch(repo) if head is not None else None
    checked = _checked(repo)
    guarded = list(checked["files"])
    untracked = _untracked_beside(repo, guarded)  # listed while git status still runs
    listing = status.result().stdout.split("\0")
    dirty = changed_tracked(listing)
    edits = code_edits(repo, dirty, guarded, hidden(), untracked())
    return {
        "format": STAMP_FORMAT,
        "repository": str(repo.workdir),
        "head": head,
        "branch": branch,
        "upstream": None if branch is None else _tracking(listing),
        "dirty": dirty,
        "edits": edits,
        **checked,  # patches, files, symbols, ok, problems
        "python": interpreter(repo, python),
        # as importlib.metadata finds it, without importing that (half a stamp's time again)
        "patchguard": installed(sys.path, {"pg": ("git-patchguard",)})["pg"] or "unknown",
        "timestamp": utc_now(),
    }


def utc_now() -> str:
    """ISO 8601 to the second, UTC: a stamp's time, and each of a hunt's samples'."""
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())


def _checked(repo: Repo) -> dict[str, Any]:
    """What `check` says of the patches and symbols, and the blob id of each guarded file
    (None: absent), as the stamp holds them."""
    if not repo.layout.has_patches():  # nothing recorded: nothing vouched for
        return {"patches": {}, "files": {}, "symbols": {}, "ok": False, "problems": []}
    from guard.store.spec import parse_spec
    from guard.tree import assess

    report = assess.check(repo)
    guarded = {f.path for v in report.patches for f in v.files}
    guarded |= {parse_spec(s.spec).path for s in report.symbols if s.patch is None}
    contents = {path: repo.read_file(path) for path in sorted(guarded)}
    return {
        "patches": {v.name: str(v.state) for v in report.patches},
        "files": {path: None if c is None else blob_id(c) for path, c in contents.items()},
        "symbols": {s.spec: s.ok for s in report.symbols},
        # As `check` refuses to pass on nothing: a stamp that guards nothing vouches for nothing.
        "ok": report.ok and not report.checks_nothing,
        "problems": report.problems(),  # why not ok, as `check` says it
    }


def _head_branch(repo: Repo) -> str | None:
    """The branch HEAD is on; None when it is detached."""
    head = (repo.layout.git_dir / "HEAD").read_text(encoding="utf-8").strip()
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else None


def _tracking(listing: list[str]) -> dict[str, Any] | None:
    """From the headers of _STATUS's `listing`; None when no upstream is configured, or when its
    ref is gone (git then names it without counting)."""
    headers = dict(entry[2:].partition(" ")[::2] for entry in listing if entry[:2] == "# ")
    if "branch.upstream" not in headers or "branch.ab" not in headers:
        return None
    ahead, behind = headers["branch.ab"].split(" ")
    return {"ref": headers["branch.upstream"], "ahead": int(ahead), "behind": -int(behind)}


def code_edits(
    repo: Repo, dirty: list[str], guarded: list[str], hidden: list[str], untracked: list[str]
) -> dict[str, str | None]:
    """The rest of the code that runs, by blob id (None: deleted): each tracked file that
    differs from HEAD's (`dirty`, and the `hidden` entries git status skips) and each `untracked`
    file in a guarded file's package (an import finds it; a `.so` or `.json` it loads). A file
    only staged, or touched back to HEAD's bytes, is no edit: the code is HEAD's."""
    others = sorted({path for path in (*dirty, *hidden) if path not in guarded})
    committed, new = _head_entries(repo, others), set(untracked)
    ids = {path: _content_id(repo, path) for path in sorted({*others, *new})}
    return {path: blob for path, blob in ids.items() if path in new or blob != committed.get(path)}


def _hidden_entries(repo: Repo) -> Callable[[], list[str]]:
    """The index entries `git status` does not compare with the worktree (an edit there still
    runs), once asked for (`ls-files -v`, started now): each skip-worktree one (tag `S`, or `s`
    with assume-unchanged too) that has a file (without one, a sparse checkout left it out),
    and each assume-unchanged one (a lowercase tag; deleted, when no file)."""
    listed = start_git(("ls-files", "-v", "-z"), repo.workdir)

    def answer() -> list[str]:
        entries = (entry.partition(" ")[::2] for entry in listed.result().stdout.split("\0"))
        return [
            path
            for tag, path in entries
            if (os.path.lexists(repo.workdir / path) if tag in ("S", "s") else tag.islower())
        ]

    return answer


def _untracked_beside(repo: Repo, guarded: list[str]) -> Callable[[], list[str]]:
    """The untracked files beside the guarded files (_package_specs), once asked for (one
    ls-files, started now). Ignored files too (a built `.so` is usually ignored), but not
    `__pycache__`: bytecode compiled from the sources compared already."""
    specs = sorted({spec for path in guarded for spec in _package_specs(repo, path)})
    if not specs:
        return list
    options = ["--literal-pathspecs", "ls-files", "-z", "--others", "--exclude=__pycache__"]
    listed = start_git([*options, "--", *specs], repo.workdir)
    return lambda: [path for path in listed.result().stdout.split("\0") if path]


# The distributions whose version changes what guarded model code does (what sglang's models
# import), as a stamp names them, with the names each is published under.
_DISTRIBUTIONS = {
    "torch": ("torch",),
    "triton": ("triton",),
    "flashinfer": ("flashinfer-python", "flashinfer"),
    "sgl-kernel": ("sgl-kernel",),
    "transformers": ("transformers",),
    "vllm": ("vllm",),
    "sglang": ("sglang",),
}


def interpreter(repo: Repo, python: str | None) -> dict[str, Any] | None:
    """The interpreter that runs the code: its path, version, and the version of each of
    _DISTRIBUTIONS (None: not installed). `python` None: python3 on PATH, if there is one."""
    # a `python` not on PATH is said as an interpreter that cannot run
    found = python if python and "/" in python else _on_path(python or "python3") or python
    if found is None:
        return None
    from guard.truth.interpreters import search_path

    try:
        version, path = search_path(found, repo.layout.git_dir)
    except ConfigError:
        if python is not None:
            raise
        return None  # a python3 on PATH that does not run is no interpreter for the code
    return {
        "executable": os.path.abspath(found),
        "version": version,
        "distributions": installed(path),
    }


def _on_path(name: str) -> str | None:
    """The executable `name` on PATH, as a shell finds it (shutil.which, without the bz2 and
    lzma modules shutil imports)."""
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def installed(
    path: list[str], distributions: dict[str, tuple[str, ...]] = _DISTRIBUTIONS
) -> dict[str, str | None]:
    """The version of each of `distributions` (shown name: names it is published under) on
    `path`, as importlib.metadata.version finds it: the first `.dist-info` (or `.egg-info`)."""
    wanted = {_normalized(name): shown for shown, names in distributions.items() for name in names}
    versions: dict[str, str | None] = dict.fromkeys(distributions)
    for entry in path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue  # a zip, a directory that is gone
        for name in names:
            stem, dot, kind = name.rpartition(".")
            if not dot or kind not in ("dist-info", "egg-info"):
                continue
            distribution, _, version = stem.partition("-")
            shown = wanted.get(_normalized(distribution))
            if shown is None or versions[shown] is not None:
                continue
            metadata = "METADATA" if kind == "dist-info" else "PKG-INFO"
            said = _metadata_version(os.path.join(entry or ".", name, metadata))
            versions[shown] = said or version.partition("-")[0] or "unknown"
    return versions


def _metadata_version(path: str) -> str | None:
    """The Version header of a METADATA file (RFC 822 headers, then a blank line)."""
    with suppress(OSError, UnicodeDecodeError), open(path, encoding="utf-8") as handle:
        for line in takewhile(str.strip, handle):
            if line.startswith("Version: "):
                return line[len("Version: ") :].strip() or None
    return None


def _normalized(name: str) -> str:
    """As a `.dist-info` directory spells the name, lowercase (`sgl-kernel`, `SGL.Kernel` alike)."""
    return name.lower().replace("-", "_").replace(".", "_")


def _head_entries(repo: Repo, paths: list[str]) -> dict[str, str]:
    """The id HEAD's tree holds at each of `paths` that it holds (one ls-tree)."""
    if not paths or repo.commit_id("HEAD") is None:
        return {}
    listing = run_git(
        ["--literal-pathspecs", "ls-tree", "-z", "--full-tree", "HEAD", "--", *paths],
        repo.workdir,
    ).stdout
    rows = (entry.partition("\t") for entry in listing.split("\0") if entry)
    return {path: info.split(" ")[2] for info, _, path in rows}


def _content_id(repo: Repo, path: str) -> str | None:
    """The id git gives what is at `path` now: a file's blob as git stores it, a link's target
    (a link is never read through), a submodule's checked-out commit; None when nothing is."""
    full = repo.workdir / path
    if full.is_symlink():
        return blob_id(os.fsencode(os.readlink(full)))
    if full.is_dir():  # a submodule, or a directory where the file was (no file, then)
        is_submodule = (full / ".git").exists()
        return run_git(["rev-parse", "HEAD"], full).stdout.strip() if is_submodule else None
    content = repo.read_file(path)
    return None if content is None else blob_id(content)


def _package_specs(repo: Repo, path: str) -> list[str]:
    """Pathspecs of where code beside a guarded file may be: in a regular package, all its top
    package (what `import` reaches from there); in a namespace package (sglang's `srt/models/`,
    whose `srt/` has no `__init__.py` either), its own directory and the files directly in each
    directory above it up to the highest with an `__init__.py` (`srt/stray.py`), not their other
    subpackages (a whole sglang tree costs a stamp twice the listing). Else its directory."""
    from pathlib import PurePosixPath

    directory = PurePosixPath(path).parent
    above = [d for d in (directory, *directory.parents) if d.name]
    packages = [(repo.workdir / d / "__init__.py").is_file() for d in above]
    if packages[:1] == [True]:
        return [str(above[packages.index(False) - 1 if False in packages else -1])]
    specs = [str(directory)]
    if True in packages:
        for loose in above[1 : len(packages) - packages[::-1].index(True)]:
            with suppress(OSError), os.scandir(repo.workdir / loose) as entries:
                specs += [
                    f"{loose}/{e.name}" for e in entries if not e.is_dir(follow_symlinks=False)
                ]
    return specs


def load_stamp(source: str, raw: bytes) -> dict[str, Any]:
    """The last stamp line of a file (a results JSONL may hold many). Stamps are ASCII JSON;
    other lines (a log's bytes in any encoding, nested too deeply for json) are not stamps."""
    import json

    for line in reversed(raw.decode(errors="replace").splitlines()):
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


# The kinds of value each key of a stamp holds (docs/benchmarks.md; None where a key may be
# null), and those of each value of a map.
_STAMP_TYPES: dict[str, tuple[tuple[type, ...], tuple[type, ...]]] = {
    "head": ((str, type(None)), ()),
    "branch": ((str, type(None)), ()),
    "upstream": ((dict, type(None)), (str, int)),
    "dirty": ((list,), (str,)),
    "patches": ((dict,), (str,)),
    "files": ((dict,), (str, type(None))),
    "edits": ((dict,), (str, type(None))),
    "symbols": ((dict,), (bool,)),
    "python": ((dict, type(None)), (object,)),
}
_UPSTREAM_KEYS = {"ref", "ahead", "behind"}  # what _word reads of an upstream


def _refuse_malformed(source: str, data: dict[str, Any]) -> None:
    """A line that says it is a stamp but holds other kinds of values: one clear line."""
    for key, (kinds, inner) in _STAMP_TYPES.items():
        value = data.get(key)
        if key == "python" and isinstance(value, dict):  # what python_changes reads
            value, kinds, inner = value.get("distributions") or {}, (dict,), (str, type(None))
        parts = (
            value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        )
        if key in data and (
            not isinstance(value, kinds)
            or not all(isinstance(v, inner) for v in parts)
            or (key == "upstream" and isinstance(value, dict) and value.keys() != _UPSTREAM_KEYS)
        ):
            raise ConfigError(
                f"{source}: the stamp's {key!r} is {type(data[key]).__name__}, not what "
                "`patchguard stamp` writes; write a new one with `patchguard stamp >> FILE`"
            )


def diff_stamps(repo: Repo | None, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed between two stamps, in plain words: the first question of a regression hunt."""
    lines = []
    if old.get("head") != new.get("head"):
        lines.append(_head_moved(repo, old.get("head"), new.get("head")))
    lines += _changed(old, new, "branch") + _changed(old, new, "upstream")
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
    lines += python_changes(old, new, lambda what, was, now: f"{what}: {was} -> {now}")
    return lines + _changed(old, new, "patchguard") or [SAME_CODE]


def _changed(old: dict[str, Any], new: dict[str, Any], key: str) -> list[str]:
    was, now = old.get(key), new.get(key)
    return [] if was == now else [f"{key}: {_word(key, was)} -> {_word(key, now)}"]


# What must agree for two nodes to run the same code; their paths, branches and times may differ,
# and so may where their interpreters are (`python`'s version and distributions must agree).
_SAME_CODE_KEYS = ("head", "patches", "files", "edits")
SAME_CODE = (
    "same code: HEAD, patches, guarded files, other edits, symbols, Python and its "
    "distributions are unchanged"
)
_UNEDITED = object()  # a path an `edits` map does not name: HEAD's content


def same_code(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two stamps describe the same code (a hunt's kept sample against the tree now):
    their interpreters agree when `stamp --diff` finds no difference between them."""
    same = all(one.get(key) == other.get(key) for key in _SAME_CODE_KEYS)
    return same and not python_changes(one, other, lambda what, was, now: what)


def differences_from(
    repo: Repo, other: dict[str, Any], source: str = "the stamp", python: str | None = None
) -> list[str]:
    """What makes this checkout's code differ from another node's stamp (`--same-as`, read from
    `source`), in the words of `stamp --diff` (empty: the same code). `python`: the interpreter
    that runs the code here; its differences are said "torch 2.4.0 here, 2.5.1 in SOURCE"."""
    here = stamp(repo, python=python)
    code = [{key: each.get(key) for key in _SAME_CODE_KEYS} for each in (other, here)]
    lines = [line for line in diff_stamps(repo, *code) if line != SAME_CODE]
    return lines + python_changes(
        other, here, lambda what, was, now: f"{what} {now} here, {was} in {source}"
    )


_UNSAID = "not said (a stamp of an older patchguard)"


def python_changes(
    old: dict[str, Any], new: dict[str, Any], said: Callable[[str, str, str], str]
) -> list[str]:
    """One line per difference of the interpreters two stamps name, `said(what, old, new)`:
    Python's version, then each distribution's ("not installed" where it is not)."""
    was, now = old.get("python", _UNSAID), new.get("python", _UNSAID)
    if not isinstance(was, dict) or not isinstance(now, dict):
        words = [
            str(p["version"]) if isinstance(p, dict) else p or "no python3 on PATH"
            for p in (was, now)
        ]
        return [] if was == now else [said("Python", words[0], words[1])]
    lines = []
    if was.get("version") != now.get("version"):
        lines.append(said("Python", str(was.get("version")), str(now.get("version"))))
    before, after = was.get("distributions") or {}, now.get("distributions") or {}
    for name in sorted(set(before) | set(after)):
        one, other = before.get(name, _UNSAID), after.get(name, _UNSAID)
        if one != other:
            lines.append(said(name, one or "not installed", other or "not installed"))
    return lines


def _word(key: str, value: Any) -> str:
    if key == "edits":
        return {_UNEDITED: "as HEAD has it", None: "deleted"}.get(value) or str(value)[:10]
    if key == "symbols":
        return {True: "present", False: "missing", None: "not guarded"}[value]
    if key == "files":
        return "absent" if value is None else str(value)[:10]
    if key == "upstream" and value:
        return f"{value['ref']} (ahead {value['ahead']}, behind {value['behind']})"
    unset = {"branch": "(detached HEAD)", "upstream": "none", "patchguard": "unknown"}
    if key in unset:
        return str(value or unset[key])
    return "not recorded" if value is None else str(value)


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
    from collections import Counter
    from pathlib import PurePosixPath

    by_directory = Counter(str(PurePosixPath(path).parent) for path in touched)
    where = ", ".join(
        f"{count} file{'s' if count > 1 else ''} touched under {directory}/"
        for directory, count in sorted(by_directory.items())
    )
    return f"{moved}, {where}" if where else moved
