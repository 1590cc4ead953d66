"""The runtime probe: ask Python itself whether each required symbol is there (issue 19).

Reading decides most symbols; where it cannot tell (a runtime condition, a decorator it cannot
follow), `check --runtime`, `run --runtime` and `require(runtime=True)` import each guarded
module in ONE fresh process of the interpreter the command will run, confirm the module's
`__file__` is this checkout's file, and look each symbol up with getattr (a name the file
defines with `def` or `class` must be callable or a descriptor). The probe runs user code, so
it never runs in patchguard's own process nor on the hooks' path; it writes nothing (no
bytecode either).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

from guard.assess import CheckReport, Worktree
from guard.errors import ConfigError
from guard.repo import Repo
from guard.symbols import ABSENT, PRESENT, SourceSyntaxError, parse_spec

DEFAULT_TIMEOUT = 600.0  # seconds: an sglang model module imports torch
_MARK = "patchguard-probe:"

# Run by the probed interpreter: stdin is a JSON list of [module, root, file, qualname, method];
# the answer is one marked line on stdout (the modules' own output goes elsewhere).
_PROBE = (
    r"""
import contextlib, importlib, io, json, os, sys, unicodedata
asked = json.loads(sys.stdin.read())
modules, answers, missing = {}, [], object()
for module, root, expected, qualname, method in asked:
    if root not in sys.path:
        sys.path.append(root)  # last: an installed copy wins, and the file check sees it
    if module not in modules:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                modules[module] = importlib.import_module(module)
        except BaseException as error:
            modules[module] = "importing %s failed: %s: %s" % (module, type(error).__name__, error)
    obj = modules[module]
    if isinstance(obj, str):
        answers.append([False, obj])
        continue
    where = os.path.realpath(getattr(obj, "__file__", None) or "")
    if where != os.path.realpath(expected):
        answers.append([False, "%s is imported from %s, not from this checkout" % (module, where)])
        continue
    for part in qualname.split("."):
        part = unicodedata.normalize("NFKC", part)
        if isinstance(obj, type) and part.startswith("__") and not part.endswith("__"):
            part = "_" + obj.__name__.lstrip("_") + part
        obj = getattr(obj, part, missing)
        if obj is missing:
            break
    if obj is missing:
        answers.append([False, "Python finds no %s in %s" % (qualname, module)])
    elif method and (obj is None or not (callable(obj) or hasattr(type(obj), "__get__"))):
        answers.append([False, "%s is %r at runtime, not a function" % (qualname, obj)])
    else:
        answers.append([True, "present at runtime"])
print("""
    + repr(_MARK)
    + """ + json.dumps(answers))
"""
)


def module_of(workdir: Path, path: str) -> tuple[str, Path]:
    """The module name a checkout file imports as, and the sys.path entry it imports from:
    the file's packages (directories with `__init__.py`) up to the first that is not one."""
    file = workdir / path
    parts = [file.stem] if file.name != "__init__.py" else []
    directory = file.parent
    while (directory / "__init__.py").is_file() and directory != workdir:
        parts.insert(0, directory.name)
        directory = directory.parent
    return ".".join(parts) or file.stem, directory


def confirm(report: CheckReport, repo: Repo, tree: Worktree, python: str, timeout: float) -> float:
    """Set each symbol's runtime answer (and its verdict: Python decides); the seconds it took."""
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
    answers = _run(python, asked, repo.workdir, timeout)
    for symbol, (present, detail) in zip(report.symbols, answers, strict=True):
        symbol.runtime = PRESENT if present else ABSENT
        symbol.ok = present is True
        if not symbol.ok:
            symbol.detail = f"{detail} ({python})"
    return time.monotonic() - started


def _run(python: str, asked: list[list[object]], cwd: Path, timeout: float) -> list[list[object]]:
    modules = sorted({str(a[0]) for a in asked})
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(
            [python, "-B", "-c", _PROBE],
            input=json.dumps(asked),
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"the runtime probe did not finish in {timeout:g} s importing {', '.join(modules)} "
            f"with {python}; raise --runtime-timeout, or check without --runtime"
        ) from None
    except OSError as error:
        raise ConfigError(
            f"cannot run the interpreter {python}: {error}. Pass an existing one with --python PATH."
        ) from None
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(_MARK):
            answers: list[list[object]] = json.loads(line[len(_MARK) :])
            return answers
    last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    raise ConfigError(
        f"the runtime probe with {python} ended without an answer (exit {done.returncode}): {last}"
    )
