"""Pre-flight for benchmarks, shared by `check`, `run` and the Python API `require()`: refuse to
start on the wrong code, or with an interpreter that imports a stale copy of it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from guard.collector import without_collector
from guard.errors import ConfigError, GuardError, PatchguardError
from guard.git.repo import Repo
from guard.ops.provenance import differences_from, load_stamp
from guard.tree import assess, patching
from guard.tree.verdicts import CheckReport, ImportResult
from guard.tree.worktree import Worktree
from guard.truth import interpreters

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
print(json.dumps({"spec": found}))
"""


_PYTHON_NAME = re.compile(r"(python|pypy)(\d+(\.\d+)*)?[a-z]?")
# Words that start another command: (their subcommand words, before their options; their
# options that take a value; their positional words, after their options).
_WRAPPERS: dict[str, tuple[int, frozenset[str], int]] = {
    "env": (0, frozenset(), 0),  # read by _env_command
    "nice": (0, frozenset({"-n", "--adjustment"}), 0),
    "nohup": (0, frozenset(), 0),
    "time": (0, frozenset({"-f", "--format", "-o", "--output"}), 0),
    "setsid": (0, frozenset(), 0),
    "timeout": (0, frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),  # DURATION
    "taskset": (0, frozenset(), 1),  # MASK, or the CPU list of -c
    "chrt": (0, frozenset(), 1),  # PRIORITY
    "numactl": (0, frozenset({"-N", "-m", "-C", "-i", "-p", "-P"}), 0),
    "stdbuf": (0, frozenset({"-i", "-o", "-e"}), 0),
    "ionice": (0, frozenset({"-c", "-n", "-p"}), 0),
    "uv": (1, frozenset({"--with", "--python", "-p", "--project", "--directory"}), 0),
    "poetry": (1, frozenset(), 0),
    "pipenv": (1, frozenset(), 0),
}
_HINT = "to check another interpreter, pass --python PATH"
_ENV_LONG_OPTIONS = {"ignore-environment": "i", "unset": "u", "chdir": "C", "split-string": "S"}
_ENV_VALUED = frozenset("uCS")  # env's options that take a value


def interpreter_of(
    python: str | None, command: Sequence[str], cwd: Path, *, needed: bool
) -> tuple[str | None, dict[str, str]]:
    """The interpreter whose answers count, and COMMAND's environment: `--python`; else the one
    COMMAND runs (itself, its script's `#!` line, past its wrappers), so that `--import` checks
    the code that really runs; else python3 on its PATH; else None, when only reading asks."""
    words, env = unwrapped(command, os.environ)
    if python is not None or not (command or needed):
        return python, env
    search = env.get("PATH", os.defpath)
    found = _which(words[0], cwd, search) if words else None
    if found and _PYTHON_NAME.fullmatch(os.path.basename(found)):
        return found, env
    shebang = _shebang_interpreter(found, cwd, search) if found else None
    interpreter = shebang or shutil.which("python3", path=search)
    if interpreter is None and needed:
        raise ConfigError(f"no python3 on PATH to check --import with; {_HINT}")
    return interpreter, env


def unwrapped(command: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command past its wrappers (`env`, `nice`, `uv run`), and its environment."""
    words, changed = list(command), dict(env)
    while words and words[0] in _WRAPPERS:
        if words[0] == "env":
            words, changed = _env_command(words[1:], changed)
            continue
        own, valued, positional = _WRAPPERS[words[0]]
        words = words[1 + own :]
        while words and words[0].startswith("-"):
            if words[0] == "--":
                words = words[1:]
                break
            words = words[2:] if words[0] in valued else words[1:]
        words = words[positional:]
    return words, changed


def _env_command(words: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """What `env ARGS` runs, and with what, as GNU env(1) reads it: options first (`-S`'s words
    are read as more arguments), then NAME=VALUE words up to the command. `-i` and `-u` only
    remove, so each is applied where it is read; `-C DIR` changes nothing an import sees."""
    changed, rest = dict(env), list(words)
    while rest and rest[0].startswith("-") and rest[0] != "--":
        word = rest.pop(0)
        if word.startswith("--"):  # read as its short form: --unset=NAME as -uNAME
            name, _, value = word[2:].partition("=")
            if name not in _ENV_LONG_OPTIONS:
                continue
            word = f"-{_ENV_LONG_OPTIONS[name]}{value}"
        for index, letter in enumerate(word[1:] or "i", start=1):  # `-` alone is -i
            value = ""
            if letter in _ENV_VALUED:
                value = word[index + 1 :] or (rest.pop(0) if rest else "")
            if letter == "i":
                changed.clear()
            elif letter == "u":
                changed.pop(value, None)
            elif letter == "S":
                rest[:0] = shlex.split(value)
            if value:
                break
    if rest[:1] == ["--"]:
        rest.pop(0)
    while rest and "=" in rest[0] and not rest[0].startswith("="):
        name, _, value = rest.pop(0).partition("=")
        changed[name] = value
    return rest, changed


def _which(word: str, cwd: Path, search: str) -> str | None:
    if "/" in word:
        path = cwd / word
        return str(path) if path.is_file() else None
    return shutil.which(word, path=search)


def _shebang_interpreter(path: str, cwd: Path, search: str) -> str | None:
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
    return _which(words[0], cwd, search) if "/" not in words[0] else words[0]


def resolve_import(
    module: str, python: str, workdir: Path, cwd: Path, env: Mapping[str, str]
) -> ImportResult:
    """Does `python` import `module` from this checkout?"""
    try:
        probe = subprocess.run(
            [python, "-c", _RESOLVE, module],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except OSError as error:
        raise interpreters.cannot_run(python, error) from None
    location = None
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
        why = f"{python} could not resolve it: {last}"
    elif (found := json.loads(probe.stdout)["spec"]) is None:
        why = f"{python} cannot import {module} at all"
    else:
        origin = found["origin"] if found["origin"] not in (None, "namespace") else None
        location = origin or (found["locations"] or [None])[0]
        why = f"{module} has no file location for {python}"
    if location is None:
        return ImportResult(module, python, None, False, f"{why}; {_HINT}")
    resolved = Path(location).resolve()
    if resolved.is_relative_to(workdir.resolve()):
        return ImportResult(module, python, str(resolved), True, f"imported from {resolved}")
    why = (
        f"{python} imports {module} from {resolved}, not from this checkout {workdir}: "
        "the patched code is not the code that runs (a non-editable install?). "
        f"Fix: pip uninstall {module.split('.')[0]} && pip install -e <checkout's package dir> "
        f"(or {_HINT})"
    )
    return ImportResult(module, python, str(resolved), False, why)


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
) -> tuple[CheckReport, str | None]:
    """The report, and the interpreter of interpreter_of that answered (None: patchguard's own)."""
    interpreter, env = interpreter_of(python, command, cwd, needed=bool(import_names or runtime))
    facts = None if interpreter is None else interpreters.facts_of(interpreter, repo.layout.git_dir)
    tree = Worktree(repo, facts)
    report = patching.apply_then_check(repo, tree=tree)[1] if apply else assess.check(repo, tree)
    if facts is not None:
        version = ".".join(str(part) for part in facts["sys.version_info"][:3])
        for symbol in report.symbols:
            if not symbol.ok:
                symbol.detail += f"; conditions decided for Python {version} at {interpreter}"
    if report.checks_nothing:
        raise ConfigError(
            f"{repo.layout.manifest_path} guards nothing (no patch, no guard), so a check would "
            "pass without checking anything. Record a patch (patchguard record NAME) or guard a "
            "symbol (patchguard require SPEC)."
        )
    if interpreter is not None and (import_names or runtime):
        report.imports = [
            resolve_import(name, interpreter, repo.workdir, cwd, env) for name in import_names
        ]
        if runtime:
            report.runtime_seconds = confirm_at_runtime(
                report, repo, tree, interpreter, runtime_timeout, env
            )
    return report, interpreter


def gate(cwd: Path, same_as: BinaryIO | None, **asked: Any) -> tuple[Repo, CheckReport, list[str]]:
    """What `check` and `run` decide on: the report of `verify` and, when every guard holds, how
    this node's code differs from the one that wrote `same_as` (read before anything runs)."""
    other = None if same_as is None else (same_as.name, load_stamp(same_as.name, same_as.read()))
    repo = Repo.discover(cwd)
    with without_collector():  # kept parses by the thousand: guard.collector
        report, runs = verify(repo, cwd=cwd, **asked)
    if other is None or not report.ok:
        return repo, report, []
    return repo, report, differences_from(repo, other[1], other[0], runs)


def with_hook_advice(repo: Repo, report: CheckReport) -> list[str]:
    """The problems, and, when the hooks are missing, that they would have prevented some."""
    from guard.ops.install import hooks_installed

    missing = "hooks are not installed, so checkouts do not re-apply patches: patchguard install"
    return [*report.problems(), *([] if hooks_installed(repo.layout) else [missing])]


def require_report(
    repo: str | os.PathLike[str], *, apply: bool, import_name: str | None, runtime: bool = False
) -> CheckReport:
    """The body of `guard.require()`: every failure becomes one GuardError."""
    try:
        report, _ = verify(
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


def confirm_at_runtime(
    report: CheckReport,
    repo: Repo,
    tree: Worktree,
    python: str,
    timeout: float | None,
    env: Mapping[str, str],
) -> float:
    """Set each symbol's runtime answer and verdict (Python decides); the seconds it took.
    `env` is COMMAND's: a module may define a name only when a variable is set."""
    from guard.store.spec import parse_spec
    from guard.truth import probe  # runs user code in another process: never on the hooks' path
    from guard.truth.module_names import module_of
    from guard.truth.symbols import SourceSyntaxError

    asked = []
    for symbol in report.symbols:
        spec = parse_spec(symbol.spec)
        path = tree.renamed(spec.path)
        module, root = module_of(repo.workdir, path)
        content = tree.read(path)
        method = False
        if content is not None:
            with contextlib.suppress(SourceSyntaxError):  # a syntax error is reported anyway
                method = tree.symbols(content, path).defines_callable(spec.qualname)
        asked.append([module, str(root), str(repo.workdir / path), spec.qualname, method])
    if not asked:
        return 0.0
    started = time.monotonic()
    timeout = probe.DEFAULT_TIMEOUT if timeout is None else timeout
    answers = probe.ask(python, asked, repo.workdir, timeout, env)
    for symbol, (state, detail) in zip(report.symbols, answers, strict=True):
        symbol.runtime = state
        if not symbol.ok:
            symbol.detail = f"{detail} (interpreter {python})"
    return time.monotonic() - started
