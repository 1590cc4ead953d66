"""Attested runs: the processes a command starts say which code they imported, and a run counts
only on their word (`patchguard run`, each run of `compare` and `bisect run`).

The file in the worktree says nothing of the code a benchmark runs (a non-editable install, a
stale .pyc or .so, a module that rebinds the method, a server left running). So the import
guard (hooks/attest/sitecustomize.py) goes first on each run's PYTHONPATH: every Python process
of the run judges each guarded module it imports, fails a wrong import at once, and writes what
it found to a record file of its own, MAC'd with the run's key.

Threat model: records live outside stdout and stderr, so nothing the benchmark prints can fake or
suppress one. The key is in the environment (children must inherit it), so code set on forging
a record in-process can: this guards against the wrong code running by accident, not against an
adversary. A Python started without the guard (`-I`, `-E`, `-S`, a cleared environment) writes
nothing: the guard names those it sees start, and a run none of whose processes imported the
guarded code is never counted.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import importlib.util
import os
import py_compile
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from guard.errors import ConfigError
from guard.git.objects import blob_id
from guard.git.process import signals_to
from guard.git.repo import Repo
from guard.ops.install import packaged
from guard.store.spec import parse_spec
from guard.tree.verdicts import CheckReport
from guard.tree.worktree import Worktree
from guard.truth.module_names import module_of
from guard.truth.symbols import SourceSyntaxError

RUN_VARIABLE = "PATCHGUARD_ATTEST"  # as hooks/attest/sitecustomize.py reads them
KEY_VARIABLE = "PATCHGUARD_ATTEST_KEY"
GUARD_NAME = "sitecustomize.py"


class Record(NamedTuple):
    """One process's word on one import (or on a Python it started without the guard)."""

    pid: int
    ppid: int
    module: str
    path: str
    verdict: str  # "ok", "wrong" or "unguarded"
    detail: str


@dataclass
class Verdict:
    """What the records of one run say: the run counts only when there are no `problems`."""

    records: list[Record] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # why it is not counted, one line each
    wrong: bool = False  # a process imported a guarded module wrongly (`run` exits 1)

    def as_json(self) -> dict[str, object]:
        """The stamp's `attestations` (docs/benchmarks.md, Stamp keys)."""
        shown = ("pid", "ppid", "module", "path", "verdict")
        processes = [{key: getattr(record, key) for key in shown} for record in self.records]
        return {"counted": not self.problems, "problems": self.problems, "processes": processes}


class AttestedRun:
    """One run's directory: the guard, its config, and the records its processes write."""

    def __init__(self, repo: Repo, report: CheckReport) -> None:
        guard = packaged(f"attest/{GUARD_NAME}")
        if guard is None:
            raise ConfigError(
                "the import guard hooks/attest/sitecustomize.py is missing from this "
                "installation; reinstall patchguard"
            )
        self.files, config = _guard_config(repo, report)
        self.directory = Path(tempfile.mkdtemp(prefix="patchguard-run-"))
        self.key = secrets.token_bytes(32)
        (self.directory / "records").mkdir()
        shutil.copyfile(guard, self.directory / GUARD_NAME)
        # Its bytecode, for the interpreters of this Python's version: under
        # PYTHONDONTWRITEBYTECODE (many images set it) no process of the run writes it, and each
        # compiled the guard again, most of what it may cost a process.
        py_compile.compile(str(self.directory / GUARD_NAME), doraise=True)
        (self.directory / "config").write_text("\n".join(config) + "\n", encoding="utf-8")

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        """`base` with the guard first on PYTHONPATH and the run's directory and key."""
        path = [str(self.directory), *filter(None, base.get("PYTHONPATH", "").split(os.pathsep))]
        return {
            **base,
            "PYTHONPATH": os.pathsep.join(path),
            RUN_VARIABLE: str(self.directory),
            KEY_VARIABLE: self.key.hex(),
        }

    def judge(self, workdir: Path, command: list[str]) -> Verdict:
        """Counted when one process imported every guarded module any process did, each such
        import was the checked code, each record is the run's, and no Python ran unguarded."""
        verdict = Verdict()
        if not self.files:  # the patches guard no Python module: there is nothing to attest
            return verdict
        # COMMAND itself, by the guard's own rule, which it applies to each Python it sees start
        spec = importlib.util.spec_from_file_location("guard_rules", self.directory / GUARD_NAME)
        assert spec is not None and spec.loader is not None
        rules = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(rules)
        why = rules._without_guard(command, self.environment(dict(os.environ)), str(self.directory))
        if why is not None:
            verdict.problems.append(
                f"{' '.join(command)} starts Python with {why}, which skips the import guard: "
                "what it imported is unknown, so the run is not proof"
            )
        for path in sorted((self.directory / "records").iterdir()):
            if path.name.endswith(".partial"):
                continue
            records = self._read(path)
            if records is None:
                verdict.problems.append(
                    f"a record of this run does not carry the run's key ({path.name}): forged "
                    "or damaged, so nothing of the run is counted"
                )
                continue
            verdict.records.extend(records)
        imported: dict[int, set[str]] = {}
        for record in verdict.records:
            if record.verdict == "ok":
                imported.setdefault(record.pid, set()).add(record.path)
            elif record.verdict == "wrong":
                verdict.wrong = True
                verdict.problems.append(f"process {record.pid}: {record.detail}")
            elif record.verdict == "unguarded":
                verdict.problems.append(
                    f"process {record.pid} started a Python that cannot attest ({record.detail}): "
                    f"{record.path}; what it imported is unknown, so the run is not proof"
                )
        every = set().union(*imported.values())
        if not imported and not verdict.wrong:
            named = ", ".join(_relative(real, workdir) for real in self.files)
            verdict.problems.append(
                f"no process of this run imported {named}: the number came from elsewhere, e.g. "
                "a server left running (or a Python started without the guard)"
            )
        elif imported and not any(paths == every for paths in imported.values()):
            named = ", ".join(_relative(real, workdir) for real in sorted(every))
            verdict.problems.append(
                f"no single process of this run imported all of {named}, so none ran the "
                "patched code as a whole"
            )
        return verdict

    def _read(self, path: Path) -> list[Record] | None:
        """A record file's rows; None when its MAC is not the run's."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        body, _, mac = text[:-1].rpartition("\n")
        body += "\n"
        expected = hashlib.blake2b(body.encode(), key=self.key).hexdigest()
        if not hmac.compare_digest(expected, mac):
            return None
        head, *rows = body.splitlines()
        pid, ppid, _executable = head.split("\t", 2)
        # a row: kind ("import" or "unguarded", as its verdict says too), module, path, ...
        return [Record(int(pid), int(ppid), *row.split("\t", 4)[1:]) for row in rows]

    def close(self) -> None:
        """Forget the directory: a process still running (a server) then attests nothing."""
        shutil.rmtree(self.directory, ignore_errors=True)


def _guard_config(repo: Repo, report: CheckReport) -> tuple[list[str], list[str]]:
    """The guarded files by real path, and the guard's config lines for them. A file's blob id
    is of its bytes on disk: Python reads those, not what git and the check see (autocrlf, eol)."""
    tree = Worktree(repo)
    specs = [parse_spec(s.spec) for s in report.symbols]
    required = [(tree.renamed(spec.path), spec.qualname) for spec in specs]
    paths = {f.path for v in report.patches for f in v.files} | {path for path, _ in required}
    files, lines = [], []
    for path in sorted(paths):
        raw, content = tree.raw(path), tree.read(path)
        if raw is None or content is None or not path.endswith(".py"):
            continue
        real = str((repo.workdir / path).resolve())
        module = module_of(repo.workdir, path)[0]
        files.append(real)
        lines.append(f"F\t{real}\t{module}\t{blob_id(raw)}")
        lines += [f"N\t{real}\t{name}" for name in _longer_names(real, module, repo.workdir)]
        for qualname in (qualname for where, qualname in required if where == path):
            with contextlib.suppress(SourceSyntaxError):  # the check says it already
                definitions = tree.symbols(content, path).find(qualname)
                if definitions:
                    starts = sorted({d.start_lineno for d in definitions})
                    numbers = ",".join(str(n) for n in starts)
                    lines.append(f"D\t{real}\t{qualname}\t{definitions[-1].kind}\t{numbers}")
    return files, lines


def _longer_names(real: str, module: str, workdir: Path) -> list[str]:
    """The names the module has when a sys.path entry above its import root holds its packages
    as namespace ones (PEP 420: sglang 0.5.9's `srt/models/` has no `__init__.py`, so module_of
    says `kimi_k25`, and Python imports `sglang.srt.models.kimi_k25` too): from elsewhere, a
    module of one of these names is a wrong import."""
    # module_of's root (a package's own directory holds its name)
    directory = Path(real).parents[module.count(".") + (Path(real).name == "__init__.py")]
    names, name, top = [], module, workdir.resolve()
    while directory != top and directory.is_relative_to(top) and directory.name.isidentifier():
        name = f"{directory.name}.{name}"
        names.append(name)
        directory = directory.parent
    return names


def _relative(real: str, workdir: Path) -> str:
    with contextlib.suppress(ValueError):
        return Path(real).relative_to(workdir.resolve()).as_posix()
    return real


def run_attested(
    repo: Repo,
    report: CheckReport,
    command: Sequence[str],
    cwd: Path | None = None,
) -> tuple[int, int | None, Verdict]:
    """COMMAND under the import guard, as `run` and each step of `bisect run` run it: its exit
    status as a shell gives it (128 + N for a signal N), N, and what its processes attested.
    stdio passes through; SIGINT, SIGTERM and SIGHUP are passed on (see pass_on)."""
    run = AttestedRun(repo, report)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            child = subprocess.Popen(command, env=run.environment(dict(os.environ)), cwd=cwd)
        except OSError as error:
            raise ConfigError(
                f"cannot run {command[0]}: {error.strerror}; check the command and PATH"
            ) from None

        def pass_on(number: int, _frame: object) -> None:
            with contextlib.suppress(OSError, ValueError):  # no terminal: pass it on
                if number == signal.SIGINT and os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp():
                    return  # our process group holds the terminal: its Ctrl-C reached COMMAND
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(number)

        with signals_to(pass_on, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            status = child.wait()
        verdict = run.judge(repo.workdir, list(command))
    finally:
        run.close()
    return (status, None, verdict) if status >= 0 else (128 - status, -status, verdict)
