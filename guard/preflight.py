"""Pre-flight for benchmarks: refuse to start on the wrong code, and stamp the code that ran.

`verify` is what `check --import`, `run` and the Python API `require()` share: apply (on
request), check, and make sure the interpreter imports this checkout and not a stale copy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from guard import assess, fastpath, patching
from guard.assess import CheckReport, ImportResult
from guard.errors import EXIT_GUARD_FAILED, EXIT_OK, ConfigError, GuardError, PatchguardError
from guard.repo import Repo
from guard.symbols import parse_spec

STAMP_FORMAT = "patchguard.stamp/1"

# Resolves MODULE the way `import` would, without executing any package code: the top level
# through sys.path, each submodule through its parent's search locations only.
_RESOLVE = r"""
import importlib.machinery, importlib.util, json, sys
parts = sys.argv[1].split(".")
spec = importlib.util.find_spec(parts[0])
for part in parts[1:]:
    locations = list(spec.submodule_search_locations or []) if spec else []
    spec = importlib.machinery.PathFinder.find_spec(part, locations) if locations else None
found = None
if spec is not None:
    found = {"origin": spec.origin, "locations": list(spec.submodule_search_locations or [])}
print(json.dumps({"executable": sys.executable, "spec": found}))
"""


def patchguard_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # ~10 ms; stamps only

    try:
        return version("git-patchguard")
    except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
        return "unknown"


_PYTHON_NAME = re.compile(r"(python|pypy)(\d+(\.\d+)*)?[a-z]?")
# Words that start another command, with how many option words of their own they take.
_WRAPPERS = {"env": 0, "nice": 0, "nohup": 0, "time": 0, "uv": 1, "poetry": 1, "pipenv": 1}
_HINT = "to check another interpreter, pass --python PATH"


def command_interpreter(command: Sequence[str], cwd: Path) -> str:
    """The Python that COMMAND will run, so `--import` checks the code that really runs.

    The command itself when it is a Python interpreter; the interpreter of a script's `#!`
    line; the command after a wrapper (`env`, `nice`, `uv run`); otherwise python3 on PATH.
    """
    words = list(command)
    while words and words[0] in _WRAPPERS:
        words = _after_wrapper(words)
    found = _which(words[0], cwd) if words else None
    if found and _PYTHON_NAME.fullmatch(os.path.basename(found)):
        return found
    if found:
        shebang = _shebang_interpreter(found, cwd)
        if shebang:
            return shebang
    fallback = shutil.which("python3")
    if fallback is None:
        raise ConfigError(f"no python3 on PATH to check --import with; {_HINT}")
    return fallback


def _after_wrapper(words: list[str]) -> list[str]:
    """The command a wrapper runs: past its options, VAR=value words and subcommand."""
    rest = words[1 + _WRAPPERS[words[0]] :]
    while rest and (rest[0].startswith("-") or ("=" in rest[0] and words[0] == "env")):
        takes_value = rest[0] in ("-n", "--adjustment", "-u", "--unset", "-C", "--chdir")
        rest = rest[2:] if takes_value else rest[1:]
    return rest


def _which(word: str, cwd: Path) -> str | None:
    if "/" in word:
        path = cwd / word
        return str(path) if path.is_file() else None
    return shutil.which(word)


def _shebang_interpreter(path: str, cwd: Path) -> str | None:
    """The Python named on a script's `#!` line (directly or through env), if any."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    if not words or not _PYTHON_NAME.fullmatch(os.path.basename(words[0])):
        return None
    return _which(words[0], cwd) if "/" not in words[0] else words[0]


def resolve_import(module: str, python: str, workdir: Path, cwd: Path) -> ImportResult:
    """Does `python` import `module` from this checkout? Package code is never run."""
    try:
        probe = subprocess.run(
            [python, "-c", _RESOLVE, module],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError as error:
        raise ConfigError(
            f"cannot run the interpreter {python}: {error}. Pass an existing one with --python PATH."
        ) from None
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
        return ImportResult(
            module, python, None, False, f"{python} could not resolve it: {last}; {_HINT}"
        )
    found = json.loads(probe.stdout)["spec"]
    if found is None:
        return ImportResult(
            module, python, None, False, f"{python} cannot import {module} at all; {_HINT}"
        )
    location = found["origin"] if found["origin"] not in (None, "namespace") else None
    location = location or (found["locations"] or [None])[0]
    if location is None:
        return ImportResult(
            module, python, None, False, f"{module} has no file location for {python}; {_HINT}"
        )
    resolved = Path(location).resolve()
    if resolved.is_relative_to(workdir.resolve()):
        return ImportResult(module, python, str(resolved), True, f"imported from {resolved}")
    return ImportResult(
        module,
        python,
        str(resolved),
        False,
        f"{python} imports {module} from {resolved}, not from this checkout {workdir}: "
        "the patched code is not the code that runs (a non-editable install?). "
        f"Fix: pip uninstall {module.split('.')[0]} && pip install -e <checkout's package dir> "
        f"(or {_HINT})",
    )


def verify(
    repo: Repo,
    *,
    apply: bool = False,
    import_names: Sequence[str] = (),
    python: str | None = None,
    command: Sequence[str] = (),
    runtime: bool = False,
    runtime_timeout: float | None = None,
    cwd: Path,
) -> CheckReport:
    """Apply if asked, then check everything; the report says whether the code is right.

    `--import` and `--runtime` use `python`, else the interpreter COMMAND will run.
    """
    tree = assess.Worktree(repo)
    report = patching.apply_then_check(repo)[1] if apply else assess.check(repo, tree)
    if report.checks_nothing:
        raise ConfigError(
            f"{repo.layout.manifest_path} guards nothing (no patch, no guard), so a check would "
            "pass without checking anything. Record a patch (patchguard record NAME) or guard a "
            "symbol (patchguard require SPEC)."
        )
    if not import_names and not runtime:
        return report
    interpreter = python or command_interpreter(command, cwd)
    report.imports = [resolve_import(name, interpreter, repo.workdir, cwd) for name in import_names]
    if runtime:
        from guard import probe  # runs user code in another process: never on the hooks' path

        timeout = probe.DEFAULT_TIMEOUT if runtime_timeout is None else runtime_timeout
        report.runtime_seconds = probe.confirm(report, repo, tree, interpreter, timeout)
    return report


def report_check(
    cwd: Path,
    *,
    quiet: bool = False,
    as_json: bool = False,
    import_names: Sequence[str] = (),
    python: str | None = None,
    runtime: bool = False,
    runtime_timeout: float | None = None,
) -> int:
    """`patchguard check`: print the report (JSON, the banner, or a summary); the exit code.

    Shared by the click command and the entry point, which serves a plain `check` without
    importing click when the verified cache misses.
    """
    from guard import render

    repo = Repo.discover(cwd)
    report = verify(
        repo,
        import_names=import_names,
        python=python,
        runtime=runtime,
        runtime_timeout=runtime_timeout,
        cwd=cwd,
    )
    if as_json:
        print(render.check_json(report, str(repo.workdir)))
    elif not report.ok:
        print(render.banner("guard FAILED", with_hook_advice(repo, report)), file=sys.stderr)
    elif not quiet:
        print("\n".join([*render.check_lines(report), "patchguard: all guards hold"]))
    return EXIT_OK if report.ok else EXIT_GUARD_FAILED


def with_hook_advice(repo: Repo, report: CheckReport) -> list[str]:
    """The problems, and, when the hooks are missing, that they would have prevented some."""
    from guard.install import hooks_installed

    if hooks_installed(repo.layout):
        return report.problems()
    return [
        *report.problems(),
        "hooks are not installed, so checkouts do not re-apply patches: patchguard install",
    ]


def require_report(
    repo: str | os.PathLike[str], *, apply: bool, import_name: str | None, runtime: bool = False
) -> CheckReport:
    """The body of `guard.require()`: every failure becomes one GuardError."""
    try:
        report = verify(
            Repo.discover(Path(repo)),
            apply=apply,
            import_names=[import_name] if import_name else [],
            runtime=runtime,
            python=sys.executable,  # the interpreter that called require() is the one that runs
            cwd=Path.cwd(),
        )
    except PatchguardError as error:
        raise GuardError(f"patchguard: {error}", [str(error)], error.exit_code) from None
    if not report.ok:
        problems = report.problems()
        listing = "\n".join(f"  - {problem}" for problem in problems)
        raise GuardError(f"patchguard: the code is not as guarded:\n{listing}", problems)
    return report


# --- stamp ---------------------------------------------------------------------------------


def stamp(repo: Repo) -> dict[str, Any]:
    """One JSON object that says exactly which code is about to run (keys in docs/benchmarks.md)."""
    report = assess.check(repo) if repo.layout.manifest_path.exists() else None
    git = repo.git
    branch = None if git.head_is_detached or git.head_is_unborn else git.head.shorthand
    upstream = None
    if branch is not None:
        tracking = git.branches.local[branch].upstream
        if tracking is not None:
            ahead, behind = git.ahead_behind(git.head.target, tracking.target)
            upstream = {"ref": tracking.shorthand, "ahead": ahead, "behind": behind}
    guarded = sorted(
        {f.path for v in report.patches for f in v.files}
        | {parse_spec(s.spec).path for s in report.symbols if s.patch is None}
        if report
        else set()
    )
    files = {}
    for path in guarded:
        content = repo.read_file(path)
        files[path] = None if content is None else fastpath.blob_id(content)
    return {
        "format": STAMP_FORMAT,
        "repository": str(repo.workdir),
        "head": None if git.head_is_unborn else str(git.head.target),
        "branch": branch,
        "upstream": upstream,
        "dirty": repo.changed_tracked_files(),
        "patches": {v.name: str(v.state) for v in report.patches} if report else {},
        "files": files,
        "symbols": {s.spec: s.ok for s in report.symbols} if report else {},
        "ok": report.ok if report else True,
        "patchguard": patchguard_version(),
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def load_stamp(source: str, text: str) -> dict[str, Any]:
    """The last stamp line of a file (a results JSONL may hold many)."""
    lines = [line for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and data.get("format") == STAMP_FORMAT:
            return data
    raise ConfigError(
        f"{source} holds no patchguard stamp (a JSON line with format {STAMP_FORMAT}); "
        "write one with `patchguard stamp >> FILE`"
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
    for key, label in (("patches", "patch"), ("symbols", "symbol"), ("files", "guarded file")):
        before, after = old.get(key) or {}, new.get(key) or {}
        for name in sorted(set(before) | set(after)):
            if before.get(name) != after.get(name):
                lines.append(
                    f"{label} {name}: {_word(key, before.get(name))} -> {_word(key, after.get(name))}"
                )
    old_dirty, new_dirty = set(old.get("dirty") or []), set(new.get("dirty") or [])
    if old_dirty != new_dirty:
        added = ", ".join(sorted(new_dirty - old_dirty)) or "none"
        gone = ", ".join(sorted(old_dirty - new_dirty)) or "none"
        lines.append(f"uncommitted changes: newly dirty {added}; no longer dirty {gone}")
    if old.get("patchguard") != new.get("patchguard"):
        lines.append(
            f"patchguard: {old.get('patchguard') or 'unknown'} -> {new.get('patchguard') or 'unknown'}"
        )
    return lines or ["same code: HEAD, patches, guarded files and symbols are unchanged"]


def _word(key: str, value: Any) -> str:
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
    by_directory: dict[str, int] = {}
    for path in touched:
        directory = str(PurePosixPath(path).parent)
        by_directory[directory] = by_directory.get(directory, 0) + 1
    where = ", ".join(
        f"{count} file{'s' if count > 1 else ''} touched under {directory}/"
        for directory, count in sorted(by_directory.items())
    )
    return f"{moved}, {where}" if where else moved


def execute(command: Sequence[str]) -> None:
    """Replace this process with the benchmark: its status, signals and stdio pass through."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], list(command))
    except OSError as error:
        raise ConfigError(
            f"cannot run {command[0]}: {error.strerror}; check the command and PATH"
        ) from None
