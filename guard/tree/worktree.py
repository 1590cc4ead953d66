"""The files patches are assessed against, and what reading them says about a symbol.

A `Worktree` is one command's view: every file read once (as git sees it and as on disk), HEAD's
from one commit, what a dry run staged, each content parsed once. Its answers about a symbol
follow bases and import-time code into other modules of the checkout, and it remembers every
path it looked at, so the fast path knows what a verdict depends on.
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property, lru_cache
from pathlib import PurePosixPath

from guard.git.objects import blob_id
from guard.git.repo import Repo
from guard.git.worktree_paths import UnsafePath
from guard.store.manifest import Patch
from guard.store.spec import Spec
from guard.truth import bodies, parsed
from guard.truth.effects import ANY, Effects, Reach
from guard.truth.model_names import ABSENT, CANNOT_TELL, NOT_DEFINED, PRESENT, Resolution
from guard.truth.module_names import module_of
from guard.truth.symbols import SourceSyntaxError, SymbolIndex, describe_miss

CANNOT_TELL_FROM_READING = "cannot tell from reading"


class Worktree:
    def __init__(self, repo: Repo, facts: Mapping[str, object] | None = None) -> None:
        self.repo = repo
        # The interpreter's facts conditions are decided for (guard.truth.interpreters); None:
        # patchguard's own, the only verdicts the fast path may remember.
        self.facts = facts
        self._content: dict[str, bytes | None] = {}  # as git sees them (`git diff`'s view)
        self._raw: dict[str, bytes | None] = {}  # the bytes on disk, as read or written
        self._unwritten: set[str] = set()  # staged by a dry run: `_content` is not on disk
        self._head: dict[str, bytes | None] = {}
        self._indexes: dict[bytes, SymbolIndex | SourceSyntaxError] = {}
        self._syntax: dict[bytes, ast.Module | None] = {}  # only for comparing bodies
        self._renames: dict[str, str] = {}
        self.unsafe: dict[str, str] = {}  # path -> why patchguard may not read or write it
        self._import_problems: dict[tuple[str, bytes], str | None] = {}
        self._reached: dict[tuple[str, int], Reach] = {}  # see reached_at_import
        self._rebound_by_imports: dict[tuple[str, int], Reach] = {}  # see _imported_changes
        # Paths looked up but not read, by whether they existed: a verdict that no file
        # there changes holds only while they stay so (guard.store.fastpath keeps both).
        self.absent: set[str] = set()
        self.present: set[str] = set()
        self._exists: dict[tuple[str, bool], bool] = {}
        self._top = str(repo.workdir)

    def prefetch(self, patches: Iterable[Patch]) -> None:
        """Two batches, the same round trips for 1 patch as for 40; HEAD's first, so a base that
        is HEAD's file is not read twice."""
        changes = [change for patch in patches for change in patch.files]
        unread = sorted({change.path for change in changes} - self._head.keys())
        if self.head_commit is not None:
            self._head.update(self.repo.files_at(self.head_commit, unread))
        for change in changes:  # an applied patch's file is its recorded blob: not read again
            current = self.read(change.path)
            if current is not None and blob_id(current) == change.patched_blob:
                self.repo.holds(change.patched_blob, current)
        blobs = [(c.base_blob, c.patched_blob) for c in changes]
        blobs += [(r.base_blob, r.patched_blob) for c in changes for r in c.resolutions]
        self.repo.prefetch(oid for pair in blobs for oid in pair if oid is not None)

    @cached_property
    def head_commit(self) -> str | None:
        """Resolved once: every HEAD file, and the key the fast path remembers, come from one
        commit even if HEAD moves meanwhile. None before the first commit."""
        return self.repo.commit_id("HEAD")

    def followed_path(self, path: str, base_commit: str, existed_at_base: bool) -> str:
        """Where a recorded file is now: itself, or where git's rename detection says it went."""
        if path in self._renames:
            return self._renames[path]
        followed = path
        if existed_at_base and self.read(path) is None and self.head(path) is None:
            followed = self.repo.follow_rename(path, base_commit) or path
        self._renames[path] = followed
        return followed

    def renamed(self, path: str) -> str:
        """Where a file assessed earlier went (symbols move with their file)."""
        return self._renames.get(path, path)

    def read(self, path: str) -> bytes | None:
        """The file as git sees it: what patches are recorded, merged and checked against."""
        if path not in self._content:
            try:
                raw = self.repo.read_raw(path)
            except UnsafePath as refusal:
                self.unsafe[path] = str(refusal)
                raw = None
            self._raw[path] = raw
            self._content[path] = None if raw is None else self.repo.to_git(path, raw)
        return self._content[path]

    def raw(self, path: str) -> bytes | None:
        """The bytes on disk (what undo keeps)."""
        self.read(path)
        return self._raw[path]

    @cached_property
    def _unmerged(self) -> dict[str, dict[int, str]]:
        """Every path's stage entries, read with one git call (pretend changes them)."""
        return self.repo.unmerged()

    def unmerged(self, path: str) -> dict[int, str]:
        return self._unmerged.get(path, {})

    def pretend(self, path: str, content: bytes, stages: dict[int, str]) -> None:
        """Assess `path` as if it held `content` and these stage entries (guard.tree.unmerged),
        before anything is written; the bytes on disk, which undo keeps, stay as read."""
        self.raw(path)
        self._set(path, content)
        self._unmerged[path] = stages

    def head(self, path: str) -> bytes | None:
        if path not in self._head:
            commit = self.head_commit
            self._head[path] = None if commit is None else self.repo.file_at(commit, path)
        return self._head[path]

    def exists(self, path: str, *, file: bool = False) -> bool:
        """Remembered either way: a module that appears or goes there (a package that shadows
        one, a base, an `__init__.py`) changes what Python imports."""
        if (path, file) not in self._exists:  # each package's __init__.py: once per command
            full = os.path.join(self._top, path)  # a string: a thousand lookups per check
            self._exists[path, file] = os.path.isfile(full) if file else os.path.exists(full)
        found = self._exists[path, file]
        (self.present if found else self.absent).add(path)
        return found

    def bytes_on_disk(self) -> dict[str, bytes] | None:
        """What the fast path hashes; None if a file is missing or not written yet."""
        if self._unwritten or None in self._raw.values():
            return None
        return {path: raw for path, raw in self._raw.items() if raw is not None}

    def stage(self, path: str, content: bytes | None) -> None:
        """A dry run's new content (as git sees it): the patches after it are assessed against
        it, while the disk keeps its bytes."""
        self.read(path)
        self._set(path, content)
        self._unwritten.add(path)

    def wrote(self, path: str, content: bytes | None, raw: bytes | None) -> None:
        """A file's new content (as git sees it), now on disk as `raw` (None: deleted)."""
        self._set(path, content)
        self._raw[path] = raw
        self._unwritten.discard(path)
        for file in (True, False):
            self._exists.pop((path, file), None)

    def _set(self, path: str, content: bytes | None) -> None:
        """What was derived from other files may follow any change: another module's hook may
        be the file just written, or the module an import needs."""
        self._content[path] = content
        self._reached.clear()
        self._rebound_by_imports.clear()
        self._import_problems.clear()

    def import_problem(self, path: str, content: bytes) -> str | None:
        """What around the module may stop its import or change its names."""
        if (path, content) not in self._import_problems:
            self._import_problems[path, content] = _package_problem(self, path) or _missing_import(
                self, content, path
            )
        return self._import_problems[path, content]

    def symbols(self, content: bytes, path: str) -> SymbolIndex:
        """Raises SourceSyntaxError."""
        if content not in self._indexes:
            self._indexes[content] = parsed.parse(content, path, self.repo.parse_cache, self.facts)
        cached = self._indexes[content]
        if isinstance(cached, SourceSyntaxError):
            raise cached
        return cached

    def syntax(self, content: bytes, path: str) -> ast.Module | None:
        """None: it does not parse. Apart from `symbols`, whose cached index does not hold it:
        only bodies are compared with it, where the text is not the recorded one."""
        if content not in self._syntax:
            self._syntax[content] = bodies.parse(content, path)
        return self._syntax[content]

    def resolve(self, index: SymbolIndex, path: str, qualname: str, depth: int = 0) -> Resolution:
        """`index.resolve`, and, for a method its class leaves to a base imported from another
        module of this checkout, that module's answer (as attribute lookup goes on to it)."""
        found = index.resolve(qualname)
        if found.state == PRESENT:
            parts = [unicodedata.normalize("NFKC", part) for part in qualname.split(".")]
            why = (
                self.reached_at_import(index, path).touching(parts)
                or self._init_changes(path, parts)
                or self._imported_changes(index, path, parts)
            )
            if why is not None:
                return Resolution(CANNOT_TELL, None, f"code run at import may change it: {why}")
        if found.state != ABSENT or not found.inherit or depth >= _MAX_BASE_FILES:
            return found
        leaf = qualname.rsplit(".", 1)[-1]
        for origin in found.inherit:
            for other, name in _module_files(path, origin):
                if other not in self._content and not self.exists(other, file=True):
                    continue  # not read: a missing file would void the fast path
                content = self.read(other)
                if content is None:
                    continue
                try:
                    inherited = self.resolve(
                        self.symbols(content, other), other, f"{name}.{leaf}", depth + 1
                    )
                except SourceSyntaxError:
                    break
                if inherited.state != ABSENT:
                    return Resolution(
                        inherited.state, None, inherited.reason or f"inherited from {other}::{name}"
                    )
                break
        return found

    def reached_at_import(self, index: SymbolIndex, path: str) -> Reach:
        """What the module's import runs in other modules of the checkout may change (a base
        class's `__init_subclass__` or metaclass, a function it calls), by name."""
        home = index.effects
        if home is None:
            return Reach({})
        key = (path, id(home))
        if key in self._reached:
            return self._reached[key]
        changes: dict[str, str] = {}
        seen: set[tuple[str, str, str]] = set()

        def reach(path: str, kind: str, origin: str, depth: int) -> None:
            """Add what using `origin` (imported by `path`) as `kind` may change. A module
            outside the checkout adds nothing: it changes a class only through what it is
            handed, and that was read where it is handed."""
            if (path, kind, origin) in seen:
                return
            seen.add((path, kind, origin))
            handed = None
            if kind in ("hands", "hands-result"):  # it gets a function or class of the module
                origin, handed = origin.split("\t")
                kind = "call" if kind == "hands" else "result"
            for other, name in self._checkout_modules(path, origin):
                if other not in self._content and not self.exists(other, file=True):
                    continue
                content = self.read(other)
                if content is None:
                    continue
                if depth >= _MAX_EFFECT_FILES:
                    why = f"{origin} leads through more modules than reading follows"
                    changes.setdefault(ANY, why)
                    return
                try:
                    effects = self.symbols(content, other).effects
                except SourceSyntaxError:
                    return  # the import fails: said where the module is read
                if effects is None:
                    changes.setdefault(ANY, f"{other} nests too deeply for reading")
                    return
                first, _, rest = name.partition(".")
                found = effects.export(kind, name)
                if found is None and first in effects.imports:  # imported there: follow it
                    onward = effects.imports[first] + (f".{rest}" if rest else "")
                    reach(other, kind, onward, depth + 1)
                    return
                if found is None and kind == "base" and not rest and first in effects.values:
                    found = _base_value(effects, first)  # `Base = B`, `inst = E()`
                found = found or effects.value(first)  # a value its import made
                if found is None:  # not bound there: from one of its star imports, if any
                    for star in effects.stars:
                        reach(other, kind, f"{star}.{name}", depth + 1)
                    return
                if handed is not None:  # what it does with it: only what it is handed may run
                    ran = home.reach(handed, home=True) if found.runs_arguments else None
                    for changed, why in (ran.changes if ran else {}).items():
                        changes.setdefault(
                            changed, f"{name} in {other} runs what it is handed: {why}"
                        )
                    return
                for changed, why in found.changes.items():
                    changes.setdefault(changed, f"{name} in {other} {why}")
                for need in sorted(found.needs):
                    reach(other, *need, depth + 1)
                for attribute in sorted(found.attributes):  # methods of the guarded module, too
                    calls = home.reach(f"method:{attribute}", home=True)
                    for changed, why in (calls.changes if calls else {}).items():
                        changes.setdefault(
                            changed, f"{name} in {other} calls .{attribute}, which {why}"
                        )
                return

        for kind, origin in sorted(home.at_import.needs):
            reach(path, kind, origin, 0)
        self._reached[key] = Reach(changes)
        for content, other in self._indexes.items():  # what this built, for next time
            if isinstance(other, SymbolIndex):
                parsed.keep_grown(content, other, self.repo.parse_cache, self.facts)
        return self._reached[key]

    def _init_changes(self, path: str, parts: list[str]) -> str | None:
        """Why the code of a package's `__init__.py` around the module (run before it, and
        able to reach it: `from . import mod; strip(mod.C)`) may change one of these names."""
        for init in self.package_inits(path):
            content = self.read(init)
            try:
                index = self.symbols(content, init) if content is not None else None
            except SourceSyntaxError:
                return None  # said as the package's import failing
            if index is None or index.effects is None:
                continue
            own = index.effects.at_import.touching(parts)
            why = own or self.reached_at_import(index, init).touching(parts)
            if why is not None:
                return f"{init}: {why}"
        return None

    def _imported_changes(self, index: SymbolIndex, path: str, parts: list[str]) -> str | None:
        """Why a module of the checkout this one imports at its top may, at its own top, change
        one of these names on what it imported back from this one (`from .mod import C;
        C.m = f`) or on the builtins (`builtins.__build_class__ = ...`): one module deep."""
        if index.effects is None:
            return None
        key = (path, id(index.effects))
        if key not in self._rebound_by_imports:
            stem = PurePosixPath(path).stem.encode()
            changes: dict[str, str] = {}
            for origin in sorted(set(index.effects.imports.values())):
                for other, _ in self._checkout_modules(path, f"{origin}.*"):  # the module too
                    if other == path or not self.exists(other, file=True):
                        continue
                    content = self.read(other)
                    if content is None or (stem not in content and b"builtins" not in content):
                        continue  # it can reach this module neither by name nor by builtins
                    try:
                        effects = self.symbols(content, other).effects
                    except SourceSyntaxError:
                        continue  # the import fails: said where that module is read
                    for name, why in (effects.at_import.changes if effects else {}).items():
                        changes.setdefault(name, f"{other}, imported at its top: {why}")
            self._rebound_by_imports[key] = Reach(changes)
        return self._rebound_by_imports[key].touching(parts)

    def package_inits(self, path: str) -> Iterator[str]:
        """The `__init__.py` of each package around a module, innermost first (importing the
        module runs each, outermost first)."""
        folders = PurePosixPath(path).parent.parts
        for depth in range(len(folders), 0, -1):
            init = "/".join([*folders[:depth], "__init__.py"])
            if not self.exists(init, file=True):
                return
            yield init

    def _checkout_modules(self, path: str, origin: str) -> Iterator[tuple[str, str]]:
        """`_module_files` of a relative origin, or of an absolute one whose top-level package
        sits at the import root of `path`'s package (`torch.cuda` is looked for once, as
        `torch` there, not under every folder)."""
        if origin.startswith("."):
            yield from _module_files(path, origin)
            return
        parts = PurePosixPath(path).parent.parts
        top = len(parts) - len(list(self.package_inits(path)))
        root = "/".join([*parts[:top], origin.split(".")[0]])
        if self.exists(root) or self.exists(f"{root}.py", file=True):
            for other, name in _module_files(path, origin):
                if other.startswith((f"{root}/", f"{root}.py")):
                    yield other, name

    def symbol_problems(
        self,
        content: bytes,
        path: str,
        qualnames: Iterable[str],
        *,
        decided_only: bool = False,
        suggest: bool = True,
    ) -> dict[str, str]:
        """Why each of `qualnames` is not surely defined exactly once at its place in `content`.
        `decided_only`: not the ones reading cannot decide (a merge that keeps them breaks
        nothing reading could see). `suggest`: the closest names (difflib: only where shown)."""
        qualnames = list(qualnames)
        if not qualnames:
            return {}
        # A name nowhere in the text is certainly missing: no parse (a large file takes seconds).
        # Presence is decided by parsing only.
        absent = {
            q: f"not defined in {path}" for q in qualnames if not _mentions_definition(content, q)
        }
        if len(absent) == len(qualnames):
            return absent
        try:
            index = self.symbols(content, path)
        except SourceSyntaxError as error:
            reason = f"{error.path}:{error.lineno}: syntax error: {error.message}"
            return dict.fromkeys(qualnames, reason)
        problems = {}
        for qualname in qualnames:
            found = self.resolve(index, path, qualname)
            if found.state == CANNOT_TELL:
                if not decided_only:
                    problems[qualname] = f"{CANNOT_TELL_FROM_READING}: {found.reason}"
            elif found.state == ABSENT:
                problems[qualname] = _why_absent(index, Spec(path, qualname), found.reason, suggest)
            elif duplicates := index.duplicates(qualname):
                lines = ", ".join(str(d.lineno) for d in duplicates)
                problems[qualname] = (
                    f"defined {len(duplicates)} times (lines {lines}); the last one silently wins"
                )
        return problems


_MAX_BASE_FILES = 8  # a chain of bases across modules deeper than this is not followed
_MAX_EFFECT_FILES = 12  # modules followed from one import-time use (guard.truth.effects)


def _base_value(effects: Effects, name: str) -> Reach | None:
    """What deriving from a module-level value bound by an assignment runs: the hooks of the
    classes it may be; for an instance, anything (its `__mro_entries__`, see `why`)."""
    held = sorted(effects.values[name])
    if any(not ref.startswith("class:") for ref in held) or not held:
        why = (
            "may be an object, not a class: its __mro_entries__ may put other classes (and "
            "their __init_subclass__) in its place"
        )
        return Reach({ANY: why})
    found = [effects.export("base", ref.removeprefix("class:")) for ref in held]
    changes = {k: v for reach in found if reach is not None for k, v in reach.changes.items()}
    needs = frozenset().union(*(reach.needs for reach in found if reach is not None))
    return Reach(changes, needs)


def _module_files(path: str, origin: str) -> Iterator[tuple[str, str]]:
    """(file, qualified name in it) an import origin may name, seen from `path`: `.base.B` is
    `base.py` or `base/__init__.py` beside it; `pkg.mod.B` `pkg/mod.py` under any directory
    above `path` (the checkout's import roots are not known from here)."""
    dotted = origin.lstrip(".")
    level = len(origin) - len(dotted)
    parts = dotted.split(".")
    here = PurePosixPath(path).parent
    if level:
        for _ in range(level - 1):
            here = here.parent
        roots, smallest = [here], 0
    else:
        roots, smallest = [here, *here.parents], 1
    for root in roots:
        for split in range(len(parts) - 1, smallest - 1, -1):
            module = root.joinpath(*parts[:split])
            for candidate in (f"{module}.py", f"{module}/__init__.py"):
                if candidate.startswith("./"):
                    candidate = candidate[2:]
                yield candidate, ".".join(parts[split:])


def _mentions_definition(content: bytes, qualname: str) -> bool:
    """Could `content` bind `qualname`? Only a plain ASCII name can be ruled out as bytes."""
    name = qualname.rsplit(".", 1)[-1]
    mangled = re.fullmatch(r"_[^\W_]\w*?(__\w+)", name)
    name = mangled.group(1) if mangled else name  # `C._C__m` is written `__m` in C
    if hasattr(type, name):
        return True  # every class has it (`__init__`)
    if name.isascii() and content.isascii():
        return name.encode() in content  # a longer name that contains it only costs a parse
    # Python compares identifiers NFKC-normalised (a fullwidth m binds `m`): the text is
    # compared so too. An identifier normalises as it does inside the file: nothing composes
    # across its ends (what could is itself a character of identifiers, so of the same name).
    text = _normalized_source(content)
    if text is None:
        return True  # a declared encoding other than UTF-8, or bytes that are not UTF-8
    return unicodedata.normalize("NFKC", name) in text


@lru_cache(maxsize=64)  # asked once per name and question, of the same few files
def _normalized_source(content: bytes) -> str | None:
    """The source, NFKC-normalised, when its PEP 263 declaration (or the default) is UTF-8."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(content).readline)
        if encoding not in ("utf-8", "utf-8-sig"):
            return None
        return unicodedata.normalize("NFKC", content.decode(encoding))
    except (SyntaxError, UnicodeDecodeError):
        return None


def _why_absent(index: SymbolIndex, spec: Spec, reason: str, suggest: bool) -> str:
    """The resolution's reason, or, for a name defined but not where Python looks, which."""
    if not reason.startswith(NOT_DEFINED):
        return reason
    rest = reason[len(NOT_DEFINED) :]  # e.g. what an unread base might still provide
    defined = index.find(spec.qualname)
    if defined:
        return (
            f"defined at line {defined[-1].lineno}, but not where Python finds it at runtime: "
            "a later binding of its class replaces it, or it sits under `if TYPE_CHECKING:` "
            f"or a test that is always false{rest}"
        )
    return describe_miss(index, spec, suggest) + rest


def _package_problem(tree: Worktree, path: str) -> str | None:
    """Importing `pkg.mod` runs each parent's `__init__.py` first: one that may fail, rebinds
    through reflection, or sets or deletes attributes (`mod.C = None`) leaves them undecided."""
    for init in tree.package_inits(path):
        content = tree.read(init)
        if content is None:
            return None
        try:
            index = tree.symbols(content, init)
        except SourceSyntaxError as error:
            return f"importing the package fails: {init}:{error.lineno}: {error.message}"
        model = index.model
        why = model.unreadable or model.fails or model.may_fail
        if why:
            return f"importing the package may fail or be unreadable: {init}: {why}"
        if index.reflection is not None:
            line, what = index.reflection
            return f"{init}:{line} reaches bindings by reflection ({what})"
        if index.attribute_write is not None:
            return f"{init}:{index.attribute_write} sets or deletes an attribute when imported"
    return None


def _missing_import(tree: Worktree, content: bytes, path: str) -> str | None:
    """A relative import at the top of the module of a module the checkout lacks: the import
    fails (a module of the checkout is never installed elsewhere)."""
    try:
        index = tree.symbols(content, path)
    except SourceSyntaxError:
        return None  # said as a syntax error already
    for lineno, level, module in index.relative_imports:
        parts = path.split("/")[:-1]
        name, _ = module_of(tree.repo.workdir, path)  # namespace packages too (PEP 420)
        if level > name.count(".") + (path.rsplit("/", 1)[-1] == "__init__.py"):
            return f"line {lineno} imports from beyond the top of the package {name}"
        base = "/".join([*parts[: len(parts) - (level - 1)], *module.split(".")])
        if not any(tree.exists(c) for c in (f"{base}.py", base, f"{base}.pyi")):
            folder = tree.repo.workdir / base
            compiled = next(folder.parent.glob(f"{folder.name}.*"), None)  # an extension module
            if compiled is None:
                return f"line {lineno} imports .{module}, which the checkout does not have"
            tree.present.add(str(compiled.relative_to(tree.repo.workdir)))
    return None
