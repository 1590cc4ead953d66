"""The static model held against Python itself, on every binding form of tests/binding_forms.py.

Each form is a package in one checkout; the oracle imports every `pkg.mod` in ONE fresh
interpreter and answers, per form, whether the required symbol is there (bound, and, for a
name the source defines with `def` or `class`, callable or a descriptor). patchguard's static verdict is `require` then `check`
(the library for every form, the installed CLI for all of them at once): it must never be
green where Python finds nothing. Where it is red but Python finds the symbol (a false red),
reading could not decide; those are counted and kept under a ceiling.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from binding_forms import Form, forms
from conftest import GIT_IDENTITY, git
from helpers import run_patchguard

from guard.errors import PatchguardError
from guard.git.repo import PARSE_CACHE_DIR, Repo
from guard.store import history
from guard.store.derived import load_manifest
from guard.tree.assess import check, check_symbol
from guard.tree.recording import require
from guard.tree.worktree import Worktree
from guard.truth import parsed
from guard.truth.symbols import SymbolIndex

# Forms that are red while Python finds the symbol: reading cannot decide them (a decorator,
# a call, a condition decided only at runtime...). Lower this when the model decides more.
FALSE_RED_CEILING = (
    8  # a function bound over the defined one (C.m = f) is not a false red: Python runs other code
)

ORACLE = r"""
import contextlib, importlib, io, json, sys, unicodedata
root, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, root)
missing = object()
answers = {}
for package, qualname, method in json.loads(sys.stdin.read()):
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            obj = importlib.import_module(package + ".mod")
    except BaseException:
        answers[package] = [False, False]
        continue
    for part in qualname.split("."):
        part = unicodedata.normalize("NFKC", part)
        if isinstance(obj, type) and part.startswith("__") and not part.endswith("__"):
            part = "_" + obj.__name__.lstrip("_") + part
        obj = getattr(obj, part, missing)
        if obj is missing:
            break
    found = obj is not missing and (
        not method or (obj is not None and (callable(obj) or hasattr(type(obj), "__get__")))
    )
    # the function defined under that name, or a decorator's wrapper of it (made inside the
    # decorator: `<locals>`), or no function at all; not one defined under another name
    while found and hasattr(obj, "__wrapped__"):
        obj = obj.__wrapped__
    code = getattr(getattr(obj, "__func__", obj), "__code__", None)
    leaf = unicodedata.normalize("NFKC", qualname.rsplit(".", 1)[-1])
    name = code.co_name if code is not None else leaf
    mangled = name.startswith("__") and leaf.endswith(name)  # `C._C__m` is `__m` in C
    defined = not method or name == leaf or mangled or "<locals>" in code.co_qualname
    answers[package] = [found, found and defined]
json.dump(answers, open(out, "w"))
"""


def _is_method(form: Form) -> bool:
    """A method (or function, or class) must be callable at runtime; any other name (a class
    attribute, a slot) only bound."""
    leaf = re.escape(form.qualname.rsplit(".", 1)[-1].lstrip("_"))
    text = unicodedata.normalize("NFKC", form.mod)  # as the probe decides: the guarded file
    return (
        re.search(rf"\b(def|class)\s+_*{unicodedata.normalize('NFKC', leaf)}\b", text) is not None
    )


def _package(index: int) -> str:
    return f"form_{index:03d}"


def _spec(index: int, form: Form) -> str:
    return f"{_package(index)}/mod.py::{form.qualname}"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Form]]:
    """Every form as a package of one committed checkout."""
    root = tmp_path_factory.mktemp("forms")
    all_forms = forms()
    for index, form in enumerate(all_forms):
        package = root / _package(index)
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "mod.py").write_text(form.mod, encoding="utf-8")
        for name, text in form.others.items():
            (package / name).parent.mkdir(parents=True, exist_ok=True)
            (package / name).write_text(text, encoding="utf-8")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "binding forms", env={**os.environ, **GIT_IDENTITY})
    return root, all_forms


@pytest.fixture(scope="module")
def python_answers(checkout: tuple[Path, list[Form]]) -> dict[str, list[bool]]:
    """Per form: does Python find the symbol (callable, for a name defined with `def` or
    `class`), and is it the function defined under that name (not one bound in its place)?"""
    root, all_forms = checkout
    out = root.parent / "oracle.json"
    specs = [[_package(i), form.qualname, _is_method(form)] for i, form in enumerate(all_forms)]
    subprocess.run(
        [sys.executable, "-I", "-c", ORACLE, str(root), str(out)],
        input=json.dumps(specs),
        text=True,
        check=True,
        cwd=root,
        timeout=120,
    )
    answers: dict[str, list[bool]] = json.loads(out.read_text())
    return answers


@pytest.fixture(scope="module")
def python_says(python_answers: dict[str, list[bool]]) -> dict[str, bool]:
    """Does Python find the symbol: what `check --runtime` answers."""
    return {package: found for package, (found, _) in python_answers.items()}


@pytest.fixture(scope="module")
def python_runs_it(python_answers: dict[str, list[bool]]) -> dict[str, bool]:
    """Does Python find the code defined under the name: what reading's green promises (a
    function bound in its place, `C.m = f`, is not the recorded code)."""
    return {package: defined for package, (_, defined) in python_answers.items()}


@pytest.fixture(scope="module")
def static_says(checkout: tuple[Path, list[Form]]) -> dict[str, tuple[bool, str]]:
    """check_symbol's verdict (ok, state) on every form's spec, read once for the module: the
    library test holds it against Python, the CLI test guards the ones it found present."""
    root, all_forms = checkout
    tree = Worktree(Repo.discover(root))
    verdicts = {}
    for index, form in enumerate(all_forms):
        result = check_symbol(tree, _spec(index, form), None)
        verdicts[_spec(index, form)] = (result.ok, result.state)
    return verdicts


def test_the_generator_covers_enough_forms(
    checkout: tuple[Path, list[Form]], python_says: dict[str, bool]
) -> None:
    _, all_forms = checkout
    assert len(all_forms) >= 100
    assert len(python_says) == len(all_forms)
    for form in all_forms:  # each is valid Python (unless too deep for `ast` itself)
        for text in (form.mod, *form.others.values()):
            with contextlib.suppress(RecursionError):
                ast.parse(text)
    present = sum(python_says.values())
    assert 30 < present < len(all_forms) - 30  # both answers are well represented


def test_static_is_never_green_where_python_finds_nothing(
    checkout: tuple[Path, list[Form]],
    python_runs_it: dict[str, bool],
    static_says: dict[str, tuple[bool, str]],
) -> None:
    root, all_forms = checkout
    repo = Repo.discover(root)
    green: dict[str, bool] = {}
    states: dict[str, str] = {}
    for index, form in enumerate(all_forms):
        green[_package(index)], states[_package(index)] = static_says[_spec(index, form)]
    present = [_spec(i, f) for i, f in enumerate(all_forms) if green[_package(i)]]
    try:
        require(repo, present, cwd=root)
    except PatchguardError as error:  # pragma: no cover - a refusal names the form
        pytest.fail(f"require refused a symbol check_symbol found: {error}")
    report = check(repo)
    by_spec = {s.spec: s.ok for s in report.symbols}
    for index, form in enumerate(all_forms):
        green[_package(index)] = green[_package(index)] and by_spec[_spec(index, form)]
    false_greens = [
        f"{form.name}: {_spec(i, form)}"
        for i, form in enumerate(all_forms)
        if green[_package(i)] and not python_runs_it[_package(i)]
    ]
    assert false_greens == [], "\n".join(false_greens)
    false_reds = [
        f"{form.name} ({states[_package(i)]})"
        for i, form in enumerate(all_forms)
        if python_runs_it[_package(i)] and not green[_package(i)]
    ]
    print(f"\nstatic false reds: {len(false_reds)} of {len(all_forms)} forms")
    print("\n".join(f"  {line}" for line in false_reds))
    assert len(false_reds) <= FALSE_RED_CEILING, false_reds


def test_a_kept_parse_answers_as_a_fresh_one(
    checkout: tuple[Path, list[Form]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file's parse is kept by its content (guard.truth.parsed); on every form, the
    kept one gives the same answers, and a second command parses nothing."""
    root, all_forms = checkout
    copy = tmp_path / "copy"
    git(tmp_path, "clone", "-q", str(root), str(copy))
    repo = Repo.discover(copy)
    specs = [_spec(i, f) for i, f in enumerate(all_forms)]
    fresh = [check_symbol(Worktree(repo), spec, None) for spec in specs]
    assert any((repo.layout.git_dir / PARSE_CACHE_DIR).iterdir())

    def parse_again(*args: object) -> None:
        raise AssertionError(f"parsed again: {args[1:]}")

    monkeypatch.setattr(SymbolIndex, "parse", parse_again)
    kept = [check_symbol(Worktree(Repo.discover(copy)), spec, None) for spec in specs]
    assert [(r.ok, r.state, r.detail) for r in kept] == [(r.ok, r.state, r.detail) for r in fresh]


def test_the_cli_agrees_with_the_library_and_never_crashes(
    checkout: tuple[Path, list[Form]],
    static_says: dict[str, tuple[bool, str]],
    clean_env: dict[str, str],
    tmp_path: Path,
) -> None:
    """`patchguard check --json` on the guards of every form the library found present."""
    root, all_forms = checkout
    copy = tmp_path / "copy"
    git(tmp_path, "clone", "-q", str(root), str(copy))  # the same lines, committed
    specs = [_spec(i, f) for i, f in enumerate(all_forms)]
    present = [s for s in specs if static_says[s][0]]
    run_patchguard(copy, clean_env, ("require", *present), check=0)
    data = json.loads(run_patchguard(copy, clean_env, ("check", "--json"), check=0).stdout)
    assert {s["spec"] for s in data["symbols"]} == set(present)
    assert all(s["state"] == "present" for s in data["symbols"])
    for spec in specs:  # every other form: a red answer, each with an exit code, no traceback
        if spec not in present:
            result = run_patchguard(copy, clean_env, ("require", spec), check=None)
            assert result.returncode in (1, 2), result.stderr
            assert result.stderr.startswith("patchguard: cannot guard"), result.stderr
            break  # one is enough here; test_static_... covers every form in-process


def test_check_runtime_agrees_with_python_on_every_form(
    checkout: tuple[Path, list[Form]],
    python_says: dict[str, bool],
    clean_env: dict[str, str],
    tmp_path: Path,
) -> None:
    """Every form guarded (as a manifest may hold them), then `check --runtime --json`."""
    root, all_forms = checkout
    copy = tmp_path / "copy"
    git(tmp_path, "clone", "-q", str(root), str(copy))
    repo = Repo.discover(copy)
    specs = [_spec(i, f) for i, f in enumerate(all_forms)]
    with repo.lock("require", store=True):
        history.save(repo, load_manifest(repo, missing_ok=True)._replace(guards=specs), "guards")
    before = git(copy, "status", "--porcelain", "--ignored").stdout
    static = json.loads(run_patchguard(copy, clean_env, ("check", "--json"), check=1).stdout)
    assert {s["state"] for s in static["symbols"]} == {"present", "absent", "cannot-tell"}
    args = ("check", "--runtime", "--json", "--python", sys.executable)
    # Python as users run it, writing bytecode where it may: "wrote nothing" then means the probe
    # itself keeps its imports' bytecode out of the checkout.
    may_write = {k: v for k, v in clean_env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    data = json.loads(run_patchguard(copy, may_write, args, check=1).stdout)
    answers = {s["spec"]: s for s in data["symbols"]}
    disagree = [
        f"{form.name}: runtime {answers[_spec(i, form)]['runtime']}, Python {python_says[_package(i)]}"
        for i, form in enumerate(all_forms)
        if answers[_spec(i, form)]["present"] != python_says[_package(i)]
    ]
    assert disagree == []
    assert {s["runtime"] for s in data["symbols"]} == {"present", "absent", "cannot-tell"}
    failed = [s for s in data["symbols"] if s["runtime"] == "cannot-tell"]
    assert all("cannot tell: importing " in s["detail"] for s in failed)  # nothing else is
    assert git(copy, "status", "--porcelain", "--ignored").stdout == before  # wrote nothing


def test_an_inherited_answer_follows_a_write_to_the_base_module(tmp_path: Path) -> None:
    """The view answers each symbol once (Worktree.resolve), and forgets its answers when a
    file changes: a method inherited from another module of the checkout is found once the
    base module is written, in the same view, as Python would find it after that write."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text("class Base:\n    pass\n")
    (package / "mod.py").write_text("from .base import Base\n\n\nclass C(Base):\n    pass\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base without m", env={**os.environ, **GIT_IDENTITY})
    tree = Worktree(Repo.discover(tmp_path))
    assert not check_symbol(tree, "pkg/mod.py::C.m", None).ok
    written = b"class Base:\n    def m(self):\n        return 1\n"
    (package / "base.py").write_bytes(written)
    tree.wrote("pkg/base.py", written, written)
    assert check_symbol(tree, "pkg/mod.py::C.m", None).ok
    python = "import sys; sys.path.insert(0, ''); import pkg.mod; print(pkg.mod.C().m())"
    ran = subprocess.run([sys.executable, "-I", "-c", python], cwd=tmp_path, capture_output=True)
    assert ran.stdout == b"1\n", ran.stderr


def test_nodes_built_for_another_module_are_kept_for_the_next_command(tmp_path: Path) -> None:
    """A check that follows an import into another module builds that module's graph nodes
    (guard.truth.effects) and stores its parse again (guard.truth.parsed.keep_grown): the
    next command finds them built rather than parsing that module a second time."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    base = (
        "def register(cls):\n    cls.registered = True\n\n\n"
        "class Base:\n    def __init_subclass__(cls, **kwargs):\n        register(cls)\n"
    )
    (package / "base.py").write_text(base)
    (package / "mod.py").write_text(
        "from .base import Base\n\n\nclass C(Base):\n    def m(self):\n        return 1\n"
    )
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "a base that runs code", env={**os.environ, **GIT_IDENTITY})
    repo = Repo.discover(tmp_path)
    check_symbol(Worktree(repo), "pkg/mod.py::C.m", None)
    kept = parsed.parse(base.encode(), "pkg/base.py", Repo.discover(tmp_path).parse_cache)
    assert isinstance(kept, SymbolIndex) and kept.effects is not None
    assert "Base.__init_subclass__" not in kept.effects.graph.pending


def test_a_missing_module_written_in_the_same_view_stops_being_missing(tmp_path: Path) -> None:
    """What stops an import is also forgotten when a file of the view changes: once the
    module that a relative import names is written, the symbol is there, as Python finds it."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(
        "from .helper import x\n\n\nclass C:\n    def m(self):\n        return x\n"
    )
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "mod imports a helper", env={**os.environ, **GIT_IDENTITY})
    tree = Worktree(Repo.discover(tmp_path))
    assert not check_symbol(tree, "pkg/mod.py::C.m", None).ok
    (package / "helper.py").write_bytes(b"x = 1\n")
    tree.wrote("pkg/helper.py", b"x = 1\n", b"x = 1\n")
    assert check_symbol(tree, "pkg/mod.py::C.m", None).ok
    python = "import sys; sys.path.insert(0, ''); import pkg.mod; print(pkg.mod.C().m())"
    ran = subprocess.run([sys.executable, "-I", "-c", python], cwd=tmp_path, capture_output=True)
    assert ran.stdout == b"1\n", ran.stderr


def _interpreters() -> list[str]:
    """This Python and every other 3.11+ installed beside it (pyenv's): each parses its own
    statement kinds."""
    import glob

    found = [sys.executable, *sorted(glob.glob("/root/.pyenv/versions/3.1[1-9]*/bin/python3"))]
    return list(dict.fromkeys(found))


@pytest.mark.parametrize("python", _interpreters())
def test_every_statement_kind_of_python_is_one_reading_knows(python: str) -> None:
    """As pyflakes fails its own tests on a node kind it has no handler for: a Python with a
    statement kind the model does not read fails here (the model reads it as cannot tell): each
    has a branch of _stmt (by its ast class, or by name for a newer Python's) or is inert."""
    import inspect

    from guard.truth.model_statements import _INERT_STATEMENTS, _Model

    branches = inspect.getsource(_Model._stmt)
    known = {*re.findall(r"\bast\.(\w+)", branches), *re.findall(r'"(\w+)"', branches)}
    known |= {kind.__name__ for kind in _INERT_STATEMENTS}
    listed = subprocess.run(
        [python, "-I", "-c", "import ast; print(*(c.__name__ for c in ast.stmt.__subclasses__()))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "FunctionDef" in listed
    assert set(listed) - known == set()


def test_a_statement_kind_reading_does_not_know_is_cannot_tell() -> None:
    """A statement of a kind the model has no reading for binds, as far as reading knows,
    anything: never silently nothing."""
    import ast

    from guard.truth.model_names import CANNOT_TELL, PRESENT
    from guard.truth.model_statements import _Model

    class Unknown(ast.stmt):
        _fields = ()

    tree = ast.parse("class C:\n    def m(self):\n        return 1\n")
    known = _Model()
    known.run(tree)
    assert known.resolve(["C", "m"], True).state == PRESENT
    tree.body.append(Unknown(lineno=4, col_offset=0, end_lineno=4, end_col_offset=1))
    model = _Model()
    model.run(tree)
    found = model.resolve(["C", "m"], True)
    assert found.state == CANNOT_TELL
    assert "line 4 is a statement reading does not know (Unknown)" in found.reason


TYPE_ALIASES = {  # source after `class C` with `def m`: does Python 3.12 still find C.m?
    "type C = int\n": False,
    "type X = C\n": True,
    "type C[T] = list[T]\n": False,
}


@pytest.mark.skipif(
    not Path("/root/.pyenv/versions/3.12.1/bin/python3").exists(), reason="no Python 3.12"
)
def test_a_type_alias_is_read_as_python_3_12_binds_it(tmp_path: Path) -> None:
    """PEP 695 `type X = ...` binds X (lazily): read by a patchguard model running under
    3.12 itself, never green where 3.12's import finds nothing."""
    python = "/root/.pyenv/versions/3.12.1/bin/python3"
    source = "class C:\n    def m(self):\n        return 1\n\n\n"
    script = (
        "import importlib, json, sys\n"
        "from guard.truth.symbols import SymbolIndex\n"
        "out = {}\n"
        "for name in sys.argv[1:]:\n"
        "    text = open(name + '.py', 'rb').read()\n"
        "    state = SymbolIndex.parse(text, name + '.py').resolve('C.m').state\n"
        "    found = callable(getattr(getattr(importlib.import_module(name), 'C', None), 'm', None))\n"
        "    out[name] = [state, found]\n"
        "print(json.dumps(out))\n"
    )
    names = []
    for index, (tail, _) in enumerate(TYPE_ALIASES.items()):
        (tmp_path / f"alias_{index}.py").write_text(source + tail)
        names.append(f"alias_{index}")
    ran = subprocess.run(
        [python, "-c", script, *names],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": f"{Path(__file__).parents[1]}:{tmp_path}", "PATH": os.environ["PATH"]},
    )
    assert ran.returncode == 0, ran.stderr
    answers = json.loads(ran.stdout)
    for index, found in enumerate(TYPE_ALIASES.values()):
        state, python_found = answers[f"alias_{index}"]
        assert python_found == found
        assert state == ("present" if found else "cannot-tell")


SPEC_C_M = "pkg/mod.py::C.m"
REBOUND = {  # at the end of the guarded file: (tail, does Python find C.m)
    "itself-through-sys-modules": ("import sys\n\nsys.modules[__name__].C = None\n", False),
    "itself-imported": ("from . import mod as _me\n\n_me.C.m = None\n", False),
    "function-bound-after": ("def f(self):\n    return 2\n\n\nC.m = f\n", True),
    "code-swapped": ("C.m.__code__ = (lambda self: 2).__code__\n", True),
}


@pytest.mark.parametrize("name", sorted(REBOUND))
def test_check_never_reads_a_rebinding_as_nothing(
    name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Through the installed CLI: `check` says cannot tell (exit 1), and `check --runtime` then
    answers as Python's import does."""
    tail, python_finds = REBOUND[name]
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(f"class C:\n    def m(self):\n        return 1\n\n\n{tail}")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "C", env={**os.environ, **GIT_IDENTITY})
    repo = Repo.discover(tmp_path)  # guarded as a manifest may hold it (require refuses it)
    with repo.lock("require", store=True):
        history.save(
            repo, load_manifest(repo, missing_ok=True)._replace(guards=[SPEC_C_M]), "guard"
        )
    said = run_patchguard(tmp_path, clean_env, ("check",), check=1)
    assert "cannot tell from reading" in said.stdout + said.stderr
    runtime = ("check", "--runtime", "--python", sys.executable)
    run_patchguard(tmp_path, clean_env, runtime, check=0 if python_finds else 1)
