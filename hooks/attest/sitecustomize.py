"""patchguard's import guard, put at the front of PYTHONPATH by `patchguard run` (and each run of
`compare` and `bisect run`) so that every Python process the command starts, children included,
runs it at start-up, the way coverage.py measures subprocesses (COVERAGE_PROCESS_START).

Self-contained on purpose: the benchmark's interpreter may not have patchguard installed, and a
process that imports no guarded module must pay next to nothing (no json, no hashlib: the
config is tab-separated lines; the record's MAC is keyed BLAKE2 from the builtin _blake2, loaded
only when there is something to write).

For each guarded file's module, under whatever name and from wherever Python finds it:
- it must be the checkout's file (by real path), compiled from the .py itself (never a cached
  .pyc, never an extension module or a .pyc that would win the import);
- its content must be the content patchguard checked when the run started;
- once it has run, each required definition must be bound, where Python looks it up, to the
  function defined at the line patchguard's reading places it (co_filename, co_firstlineno);
otherwise the import fails at once (ImportError, one line with the way out). Each process
writes what it found to a file of its own in the run's directory (written whole, then renamed),
MAC'd with the run's key: the command's output cannot fake or suppress an attestation.

After its own work it runs the sitecustomize it shadows (the next one on sys.path).
"""

import os
import sys

_RUN = "PATCHGUARD_ATTEST"  # the run's directory: config, and records/ (one file per process)
_KEY = "PATCHGUARD_ATTEST_KEY"  # hex; the records' MAC key
_SPAWNS = frozenset(("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system"))
_NO_GUARD_FLAGS = {"I": "-I", "E": "-E", "S": "-S"}


class _Wrong(ImportError):
    pass


class _Guard:
    """The meta-path finder: first in sys.meta_path, it asks the others and judges what they
    found for a guarded module (by file stem, then by real path and by module name)."""

    def __init__(self, run, key, lines):
        self.run, self.key = run, key
        self.files = {}  # real path -> (module name, blob id)
        self.names = {}  # module name -> real path
        self.stems = set()
        self.defs = {}  # real path -> [(qualname, kind, {line, ...})]
        self.records = []
        self.record_path = None
        self.loaded = []  # (module, real path) of each guarded module this process ran
        self.checking = False
        for line in lines:
            fields = line.split("\t")
            if fields[0] == "F" and len(fields) == 4:
                self.files[fields[1]] = (fields[2], fields[3])
                self.names[fields[2]] = fields[1]
                self.stems.add(fields[2].rpartition(".")[2])
            elif fields[0] == "N" and len(fields) == 3:  # another name it may be imported as
                self.names[fields[2]] = fields[1]
            elif fields[0] == "D" and len(fields) == 5:
                lines_at = {int(n) for n in fields[4].split(",") if n}
                self.defs.setdefault(fields[1], []).append((fields[2], fields[3], lines_at))

    def find_spec(self, name, path=None, target=None):
        if self.loaded:
            self.recheck()
        leaf = name.rpartition(".")[2]
        if leaf not in self.stems and name not in self.names:
            return None  # not guarded: the other finders answer, as without the guard
        spec = None
        for finder in sys.meta_path:
            find = None if finder is self else getattr(finder, "find_spec", None)
            if find is not None:
                spec = find(name, path, target)
                if spec is not None:
                    break
        if spec is None:
            return None
        return self._judge(name, leaf, spec)

    def _judge(self, name, leaf, spec):
        origin = spec.origin if spec.has_location else None
        real = os.path.realpath(origin) if origin else None
        if real in self.files:
            loader = spec.loader
            if type(loader).__name__ != "SourceFileLoader":
                self._refuse(name, real, f"{real} is loaded by {type(loader).__name__}")
            self._refuse_stale_pyc(name, real, spec.cached)
            spec.loader = _Loader(self, name, real, origin)
            return spec
        beside = None if real is None else os.path.join(os.path.dirname(real), leaf + ".py")
        if beside in self.files:
            self._refuse(
                name,
                beside,
                f"Python takes {origin} instead of {beside}; delete it (rm {origin}) so the .py "
                "is imported",
            )
        if name in self.names:
            self._refuse(
                name,
                self.names[name],
                f"Python imports {name} from {real or 'no file'}, not from the checkout's "
                f"{self.names[name]}: install the checkout (pip install -e <its package dir>) "
                "into that interpreter, or run the interpreter that has it (--python)",
            )
        return spec

    def ran(self, module, real):
        """A guarded module ran with the recorded definitions: later code (an old shim, the
        benchmark) may still rebind one, so they are checked again at each later import and
        at exit. `module` None: the file runs as __main__ (`python -m MOD`, `python FILE`),
        whose definitions exist only once it has run, so they are looked up at exit."""
        if not self.loaded:
            import atexit

            atexit.register(self.recheck, True)
        self.loaded.append((module, real))

    def main_ran(self, real):
        """COMMAND runs a guarded file as __main__: its code is the checked content, compiled
        from the .py (as an import's)."""
        self.note("import", "__main__", real, "ok", "")
        self.ran(None, real)

    def recheck(self, at_exit=False):
        """Each ran module's definitions still the recorded code; one that is not is said once
        (the run is not counted)."""
        if self.checking:
            return  # an attribute's lookup that imports
        self.checking = True
        try:
            for module, real in list(self.loaded):
                if module is None:  # __main__: once it has run, if it is still that file
                    main = sys.modules.get("__main__")
                    where = getattr(main, "__file__", None)
                    if not at_exit or not where or os.path.realpath(where) != real:
                        continue
                    module = main
                for qualname, kind, lines in self.defs.get(real, ()):
                    found = _bound(module, qualname)
                    if _is_recorded(found, kind, qualname, module.__name__, real, lines):
                        continue
                    self.loaded = [e for e in self.loaded if e[1] != real]
                    self.note(
                        "import",
                        module.__name__,
                        real,
                        "wrong",
                        f"patchguard: {real}: after later code ran, {qualname} is "
                        f"{_describe(found)}, not the code recorded at line {min(lines)}: "
                        "a module or the benchmark rebinds it; remove that rebinding so the "
                        "recorded definition is the one Python keeps",
                    )
                    break
        finally:
            self.checking = False

    def _refuse_stale_pyc(self, name, real, cached):
        """A hash-based .pyc that Python would load without looking at the .py (unchecked, or
        --check-hash-based-pycs never) and whose hash is not the .py's: stale code that any
        process without this guard runs."""
        try:
            with open(cached, "rb") as handle:
                header = handle.read(16)
        except (OSError, TypeError):
            return
        flags = int.from_bytes(header[4:8], "little")
        if not flags & 1:
            return  # timestamp-based: this guard compiles the .py anyway
        import _imp

        if flags & 2 and _imp.check_hash_based_pycs != "never":
            return  # checked against the .py by Python itself
        with open(real, "rb") as handle:
            source = handle.read()
        if _imp.source_hash(_magic(), source) != header[8:16]:
            self._refuse(
                name,
                real,
                f"{cached} is an unchecked-hash .pyc of other code that Python runs instead of "
                f"the .py; delete it (rm {cached})",
            )

    def _refuse(self, name, real, why):
        message = f"patchguard: {real}: {why}"
        self.note("import", name, real, "wrong", message)
        raise _Wrong(message, name=name)

    def note(self, kind, module, path, verdict, detail):
        """Add a record and write this process's file again, whole, then renamed over."""
        row = (kind, module, path, verdict, detail.replace("\t", " ").replace("\n", " "))
        self.records.append("\t".join(row))
        try:
            if self.record_path is None:
                self.record_path = os.path.join(self.run, "records", f"{os.getpid()}-{_clock()}")
            head = f"{os.getpid()}\t{os.getppid()}\t{sys.executable}"
            body = "\n".join([head, *self.records]) + "\n"
            from _blake2 import blake2b

            mac = blake2b(body.encode(), key=self.key).hexdigest()
            partial = self.record_path + ".partial"
            with open(partial, "w", encoding="utf-8") as handle:
                handle.write(f"{body}{mac}\n")
            os.replace(partial, self.record_path)
        except OSError:
            pass  # the run is over (its directory gone): nobody reads this process's word

    def forked(self):
        self.records, self.record_path = [], None

    def audit(self, event, args):
        """A Python started in a way that skips this guard cannot attest: say so."""
        if event not in _SPAWNS:
            return
        if event == "os.spawn":
            args = args[1:]
        elif event == "os.system":  # the shell runs it, with this process's environment
            args = ("sh", ["sh", "-c", args[0]], None)
        elif event == "subprocess.Popen":
            args = (args[0] or (args[1] or [""])[0], args[1], args[3])
        executable, argv, env = args[0], list(args[1] or ()), args[2]
        words = [os.fsdecode(w) for w in (executable or (argv or [""])[0], *argv[1:])]
        if env is None:
            env = os.environ
        env = {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
        why = _without_guard(words, env, self.run)
        if why is not None:
            shown = " ".join(os.fsdecode(a) for a in argv)[:200]
            self.note("unguarded", "", shown, "unguarded", f"started with {why}")


# Commands that run the command after their own options and arguments (none python-named).
_WRAPPERS = frozenset(
    ("timeout", "taskset", "nice", "nohup", "setsid", "stdbuf", "numactl", "chrt", "ionice",
     "time", "exec", "uv", "poetry", "pipenv", "prlimit")
)  # fmt: skip
_SHELLS = frozenset(("sh", "bash", "dash", "zsh", "ksh"))


def _without_guard(words, env, run):
    """Why the Python that WORDS start (directly, past env(1) and other wrappers, or in a
    shell's -c string) runs without this run's guard: an interpreter option (-I, -E, -S), a
    cleared environment, a PYTHONPATH without the guard's directory; None when it keeps the
    guard (or WORDS start no Python this can see)."""
    while words:
        name = os.path.basename(words[0])
        if name.startswith(("python", "pypy")):
            why = _flags_without_guard(words[1:])
            if why is None and _RUN not in env:
                why = "a cleared environment"
            entries = {
                os.path.realpath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p
            }
            if why is None and os.path.realpath(run) not in entries:
                why = "a PYTHONPATH of its own, without the import guard's directory"
            return why
        if name == "env":
            words, env = _env_command(words[1:], env)
        elif name in _SHELLS:  # its -c (or -ec, -lc...) string
            cluster = [i for i, w in enumerate(words[1:-1], 1) if w[:2] != "--" and w[:1] == "-"]
            cluster = [i for i in cluster if "c" in words[i]]
            if not cluster:
                return None
            at = cluster[0] + 1
            return _shell_without_guard(words[at], words[at + 1 :], env, run)
        elif name in _WRAPPERS:
            words = words[1:]
            while words and not os.path.basename(words[0]).startswith(("python", "pypy")):
                if os.path.basename(words[0]) in ("env", *_SHELLS):
                    break
                words = words[1:]
        else:
            return None
    return None


def _env_command(words, env):
    """What `env ARGS` runs and with what environment, as GNU env(1) reads ARGS."""
    env, rest = dict(env), list(words)
    while rest and rest[0].startswith("-") and rest[0] != "--":
        word = rest.pop(0)
        name, _, value = word[2:].partition("=")
        if word in ("-", "-i", "--ignore-environment"):
            env.clear()
        elif word.startswith("-u") or name == "unset":
            env.pop(word[2:] or value or (rest.pop(0) if rest else ""), None)
        elif word in ("-C", "-S", "--chdir", "--split-string"):
            moved = rest.pop(0) if rest else ""
            if word in ("-S", "--split-string"):
                rest[:0] = moved.split()
        elif word[1:].isalpha() and "i" in word:
            env.clear()  # -iv and the like
    if rest[:1] == ["--"]:
        rest.pop(0)
    while rest and "=" in rest[0] and not rest[0].startswith("="):
        name, _, value = rest.pop(0).partition("=")
        env[name] = value
    return rest, env


def _shell_without_guard(script, positional, env, run):
    """The first Python that a shell's -c SCRIPT starts without the guard: each simple
    command in turn, with `NAME=VALUE` prefixes and `export NAME=VALUE` applied, and "$0",
    "$@" as the shell's POSITIONAL words."""
    import shlex

    try:
        lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return None
    env, command = dict(env), []
    for token in [*tokens, ";"]:
        if token and set(token) <= set(";&|()"):
            if command[:1] == ["export"]:
                for word in command[1:]:
                    name, has, value = word.partition("=")
                    if has:
                        env[name] = value
            elif command:
                local = dict(env)
                while command and "=" in command[0] and not command[0].startswith("="):
                    name, _, value = command.pop(0).partition("=")
                    local[name] = value
                why = _without_guard(command, local, run)
                if why is not None:
                    return why
            command = []
        elif token in ("$0", "$@"):
            command += positional[:1] if token == "$0" else positional[1:]
        else:
            command.append(token)
    return None


def _flags_without_guard(words):
    """The interpreter option that skips sitecustomize or PYTHONPATH (-I, -E, -S), if any."""
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word.startswith("--") and word != "--":
            skip = word == "--check-hash-based-pycs"
        elif word in ("-", "--") or not word.startswith("-"):
            return None  # the script: options end
        else:
            for index, letter in enumerate(word[1:], start=2):
                if letter in _NO_GUARD_FLAGS:
                    return _NO_GUARD_FLAGS[letter]
                if letter in "cm":
                    return None
                if letter in "XW":
                    skip = index == len(word)
                    break
    return None


class _Loader(sys.modules["_frozen_importlib_external"].SourceFileLoader):
    """Compiles the checkout's .py (never its cached bytecode), refuses content other than the
    checked one, and after the module ran, definitions bound elsewhere than the recorded code."""

    def __init__(self, finder, name, real, origin):
        super().__init__(name, origin)
        self.finder, self.real = finder, real
        self.executing = False

    def get_code(self, fullname):
        source = self.get_data(self.path)
        as_main = not self.executing  # runpy (`python -m`) runs it as __main__ itself
        from _sha1 import sha1

        blob = sha1(b"blob %d\0" % len(source) + source).hexdigest()
        if blob != self.finder.files[self.real][1]:
            self.finder._refuse(fullname, self.real, _CHANGED)
        code = self.source_to_code(source, self.path)
        if as_main:
            self.finder.main_ran(self.real)
        return code

    def exec_module(self, module):
        self.executing = True
        super().exec_module(module)
        for qualname, kind, lines in self.finder.defs.get(self.real, ()):
            found = _bound(module, qualname)
            if not _is_recorded(found, kind, qualname, module.__name__, self.real, lines):
                self.finder._refuse(
                    module.__name__,
                    self.real,
                    f"after the module ran, {qualname} is {_describe(found)}, not the code "
                    f"recorded at line {min(lines)}: the module rebinds it (or a class "
                    "hook replaces it); fix the file so the recorded definition is the one "
                    "Python keeps",
                )
        self.finder.note("import", module.__name__, self.real, "ok", "")
        self.finder.ran(module, self.real)


_MISSING = object()
_CHANGED = (
    "its content changed after patchguard checked it at the start of the run (the run or "
    "something else edited it): nothing of this run is the checked code"
)


def _bound(module, qualname):
    found = module
    for part in qualname.split("."):
        try:
            found = getattr(found, part)
        except Exception:
            return _MISSING
    return found


def _is_recorded(found, kind, qualname, module_name, real, lines):
    if kind == "class":
        return (
            isinstance(found, type)
            and getattr(found, "__module__", None) == module_name
            and getattr(found, "__qualname__", None) == qualname
        )
    for _ in range(32):  # decorators' __wrapped__ chains, property/classmethod/staticmethod
        if found is None or found is _MISSING:
            return False
        if isinstance(found, property):
            found = found.fget
            continue
        inner = getattr(found, "__func__", None)
        found = inner if inner is not None else found
        code = getattr(found, "__code__", None)
        if (
            code is not None
            and code.co_firstlineno in lines
            and (code.co_filename == real or os.path.realpath(code.co_filename) == real)
        ):
            return True
        found = getattr(found, "__wrapped__", None)
    return False


def _describe(found):
    if found is _MISSING:
        return "missing"
    code = getattr(getattr(found, "__func__", found), "__code__", None)
    if code is not None:
        return f"the function at {code.co_filename}:{code.co_firstlineno}"
    return repr(found)[:80]


def _magic():
    return sys.modules["_frozen_importlib_external"]._RAW_MAGIC_NUMBER


def _clock():
    import time

    return time.time_ns()


def _start():
    run = os.environ.get(_RUN)
    if not run or any(isinstance(f, _Guard) for f in sys.meta_path):
        return
    try:
        with open(os.path.join(run, "config"), encoding="utf-8") as handle:
            lines = handle.read().splitlines()
        key = bytes.fromhex(os.environ.get(_KEY, ""))
    except (OSError, ValueError):
        return  # the run is over: a process left running guards nothing and attests nothing
    finder = _Guard(run, key, lines)
    sys.meta_path.insert(0, finder)
    script = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script in finder.files:  # `python FILE`: Python compiles the file itself, now
        with open(script, "rb") as handle:
            source = handle.read()
        from _sha1 import sha1

        if sha1(b"blob %d\0" % len(source) + source).hexdigest() == finder.files[script][1]:
            finder.main_ran(script)
        else:
            finder.note("import", "__main__", script, "wrong", f"patchguard: {script}: {_CHANGED}")
    sys.addaudithook(finder.audit)
    os.register_at_fork(after_in_child=finder.forked)


def _chain():
    """Run the sitecustomize this one shadows, as Python would have without it."""
    here = os.path.dirname(os.path.realpath(__file__))
    rest = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    finder = sys.modules["_frozen_importlib_external"].PathFinder
    spec = finder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = type(sys)("sitecustomize")
    module.__file__, module.__spec__, module.__loader__ = spec.origin, spec, spec.loader
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if __name__ == "sitecustomize":  # patchguard loads it under another name for its rules
    _start()
    _chain()
