"""The regression hunt: `patchguard compare A B -- CMD` and `patchguard bisect run --metric M`.

CMD runs in the user's own checkout (an editable install runs the code there), at each commit
with the patches carried: lifted for the whole hunt (guard.ops.moves.lifted, under the worktree's
lock), applied and checked at each commit it visits, lifted again before it moves on. Every
sample carries the stamp of the tree it ran on (guard.ops.provenance.stamp); a run where the
patches were not in place, or that changed the code it ran on, is never counted, and neither is
one whose processes did not attest the patched code (guard.ops.attest: each run has the import
guard in every Python it starts). The moves are
`git checkout --detach` out of reach of the terminal's Ctrl-C, so a Ctrl-C stops the hunt
between runs: the user's branch, tree, patches and other edits come back as they were, and the
message says how to go on (exit 130). Each run of CMD, and the server of --server, leads a
process group of its own (guard.hunt.processes, guard.hunt.server): patchguard passes the
signal on, and ends every group it started before it moves or exits.

The decisions are guard.hunt.stats'. compare runs A and B in order-balanced pairs after a warm-up
at each; a bisect measures GOOD and BAD as compare does, then each commit git bisect offers
(V8's bisect.pl: marked only when it differs from exactly one of GOOD and BAD).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from guard.errors import EXIT_INTERRUPTED, ConfigError, GuardFailure, PatchguardError
from guard.git.lock import HELD_VARIABLE
from guard.git.objects import blob_id
from guard.git.process import out_of_reach_of_ctrl_c, run_git
from guard.git.repo import Repo
from guard.hunt import stats
from guard.hunt.metrics import Metric, Unreadable
from guard.hunt.processes import Finished, Group, run_grouped
from guard.hunt.server import SERVER_LOG, Server, ServerSpec
from guard.ops import attest, moves
from guard.ops.provenance import same_code, stamp, with_attestations
from guard.store.derived import load_manifest
from guard.tree import patching
from guard.tree.verdicts import CheckReport

DEFAULT_REPEATS = 8
DEFAULT_MAX_REPEATS = 32
DEFAULT_MIN_EFFECT_PCT = 5.0
FOUND, NO_CHANGE, UNDECIDED, AMBIGUOUS = "found", "no-change", "unknown", "ambiguous"
_TAIL_LINES = 5  # of a failed run's output, in its message
KEPT_FILE = "patchguard-hunt.jsonl"  # in the worktree's git dir: a metric bisect's samples


class Interrupted(PatchguardError):
    """Ctrl-C (or SIGTERM/SIGHUP) stopped the hunt; everything was put back first."""

    exit_code = EXIT_INTERRUPTED


class _Stop(Exception):
    """Raised between runs once a signal asked to stop; becomes Interrupted after cleanup."""


class _NotCarried(Exception):
    """The patches do not hold at a commit: nothing there can be measured."""

    def __init__(self, commit: str, problems: list[str]) -> None:
        super().__init__(commit)
        self.commit = commit
        self.problems = problems


@dataclass(frozen=True)
class Options:
    command: tuple[str, ...]
    metric: Metric
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT
    repeats: int = DEFAULT_REPEATS
    max_repeats: int = DEFAULT_MAX_REPEATS
    warmups: int = 1
    metric_file: Path | None = None  # what each run appends here is read, not its output;
    # relative to the top of the checkout, where CMD runs (as git bisect run runs it)
    server: ServerSpec | None = None  # started at each commit before CMD runs there
    timeout: float | None = None  # seconds a run of CMD may take before its group is ended


@dataclass
class Sample:
    value: float
    stamp: dict[str, Any]


@dataclass
class Runs:
    """The counted samples of one commit (warm-ups and failed runs are not among them)."""

    commit: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def values(self) -> list[float]:
        return [s.value for s in self.samples]


@dataclass
class Comparison:
    metric: Metric
    a: Runs
    b: Runs
    decision: stats.Decision
    capped: bool  # still unknown with the most runs allowed
    runs: int  # every run of CMD, warm-ups and failed ones included


@dataclass
class Step:
    commit: str
    verdict: str  # "good", "bad" or "skip" (what was marked)
    runs: Runs
    vs_good: stats.Decision | None = None
    vs_bad: stats.Decision | None = None
    reason: str | None = None  # why a commit was skipped


@dataclass
class Hunt:
    metric: Metric
    endpoints: Comparison
    steps: list[Step]
    verdict: str  # FOUND, NO_CHANGE, UNDECIDED or AMBIGUOUS
    first_changed: str | None
    change: stats.Decision | None  # first_changed against GOOD
    runs: int
    subject: str = ""  # first_changed's, for the summary


class _Kept:
    """A metric bisect's samples, written down as they are measured (KEPT_FILE), so a hunt
    that Ctrl-C stopped goes on without measuring anything twice. A kept sample is taken again
    only for the same hunt (bisect, endpoints, command, metric) and the same code: its stamp's
    HEAD, patches and guarded files equal the stamp at that commit now. A finished hunt drops
    the file."""

    def __init__(self, path: Path, hunt: list[str]) -> None:
        self.path = path
        self.key = hashlib.sha1(json.dumps(hunt).encode()).hexdigest()
        self.lines: list[dict[str, Any]] = []
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                with suppress(json.JSONDecodeError):
                    data = json.loads(line)
                    if isinstance(data, dict) and data.get("hunt") == self.key:
                        self.lines.append(data)

    def pairs(
        self, stamp_a: dict[str, Any], stamp_b: dict[str, Any]
    ) -> list[tuple[str, Sample, Sample]]:
        """(which side led, A's sample, B's sample) of the pairs kept, where the code is the same."""
        found = []
        for line in self.lines:
            if line.get("kind") == "pair":
                a, b = Sample(**line["a"]), Sample(**line["b"])
                if same_code(a.stamp, stamp_a) and same_code(b.stamp, stamp_b):
                    found.append((str(line["lead"]), a, b))
        return found

    def samples(self, commit: str, now: dict[str, Any]) -> list[Sample]:
        found = [Sample(**line["sample"]) for line in self.lines if line.get("commit") == commit]
        return [sample for sample in found if same_code(sample.stamp, now)]

    def add(self, **record: Any) -> None:
        line = {"hunt": self.key, **record}
        self.lines.append(line)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, separators=(",", ":")) + "\n")

    def samples_kept(self) -> int:
        return sum(2 if line.get("kind") == "pair" else 1 for line in self.lines)

    def drop(self) -> None:
        self.path.unlink(missing_ok=True)


# --- measuring with the patches carried ---------------------------------------------------------


class _Bench:
    """Runs CMD at commits of one checkout with the patches in place, and reads the metric."""

    def __init__(self, repo: Repo, options: Options, progress: Callable[[str], None]) -> None:
        self.repo = repo
        self.options = options
        self.progress = progress
        self.home = _current(repo)  # where the user is: back there at the end
        self.here: str | None = None  # the commit the patches are applied at, stamp taken
        self.stamp: dict[str, Any] = {}
        self.report: CheckReport | None = None  # the check at `here`: what the runs attest
        self.stamps: dict[str, dict[str, Any]] = {}  # each commit's, at its last visit
        self.applied = False
        self.runs = 0
        self.stop_asked = False
        self.child: Group | None = None  # the run under way: signals are passed on to it
        self.seconds: list[float] = []  # each run's, for the estimate of what is left
        self.planned: int | None = None  # the runs the hunt expects to take, when it knows
        self.subjects: dict[str, str] = {}
        self.server = (
            None
            if options.server is None
            else Server(options.server, repo.layout.git_dir / SERVER_LOG, progress)
        )
        self.server_attested: attest.AttestedRun | None = None  # for the server's processes
        self.printed_no_value = False  # the last failed run exited 0 but gave no metric
        given = options.metric_file
        self.metric_file = None if given is None else repo.workdir / given

    def _view(self) -> Repo:
        """A fresh view after git moved (the index and HEAD read anew)."""
        return Repo(self.repo.layout)

    def _git(self, *args: str) -> str:
        held = {HELD_VARIABLE: str(self.repo.layout.worktree_lock_path)}
        return run_git(args, self.repo.workdir, env=held).stdout

    def head(self) -> str:
        return self._git("rev-parse", "HEAD").strip()

    def visit(self, commit: str) -> None:
        """HEAD at `commit` (detached), the patches applied and checked, the stamp taken."""
        if self.here == commit:
            return
        self.leave()
        if self.head() != commit:
            try:
                self._git("checkout", "-q", "--detach", commit)
            except ConfigError as error:
                raise GuardFailure(
                    f"cannot move to {commit[:10]}: {error}. The patches are lifted for the "
                    "move, so it is your other edits or untracked files that stop git: save "
                    "them (git stash) and run the command again"
                ) from None
        view = self._view()
        self.applied = True
        _, report = patching.apply_then_check(view, allow_mid_operation=True)
        if not report.ok:
            raise _NotCarried(commit, report.problems())
        self.stamp = self.stamps[commit] = stamp(view)
        self.report = report
        self.here = commit

    def leave(self) -> None:
        """Stop the server, lift the patches again (before any move)."""
        try:
            self._stop_server()
        finally:
            self._lift()

    def _lift(self) -> None:
        if not self.applied:
            return
        self.applied, self.here = False, None
        stuck = [o for o in patching.unapply(self._view(), allow_mid_operation=True) if not o.ok]
        if stuck:
            reasons = "; ".join(f"patch {o.verdict.name}: {o.message}" for o in stuck)
            raise GuardFailure(f"cannot lift the patches after measuring: {reasons}")

    def go_home(self) -> None:
        try:
            self.leave()
        finally:
            self._checkout_home()

    def _checkout_home(self) -> None:
        """The branch again (a commit id, as a bisect's home is, leaves HEAD detached there)."""
        if _current(self.repo) != self.home:
            self._git("checkout", "-q", self.home)

    def stop_if_asked(self) -> None:
        if self.stop_asked:
            raise _Stop

    def run(self, commit: str, what: str) -> Sample | None:
        """One run of CMD at `commit`: its sample, or None when it failed or printed no value
        (or the server did not get ready, or died under it: then CMD is not run or not counted)."""
        self.visit(commit)
        self.stop_if_asked()
        where = f"{commit[:10]} ({self._subject(commit)})"
        server = self.server
        if server is not None and not server.running:
            self.server_attested = self._attested_run()  # the server's processes attest too
            env = self.server_attested.environment(self._child_env())
            failed = server.start(self.repo.workdir, env, where, self._asked)
            self.stop_if_asked()
            if failed is not None:
                self._stop_server()
                self.progress(f"{what} at {where}: not run, {failed}")
                return None
        attested_run = self.server_attested or self._attested_run()
        try:
            before = self._metric_file_state()
            began = time.monotonic()
            finished = run_grouped(
                self.options.command,
                self.repo.workdir,
                attested_run.environment(self._child_env()),
                self.options.timeout,
                self._asked,
                self._running,
            )
            attested = attested_run.judge(self.repo.workdir, list(self.options.command))
        finally:
            if attested_run is not self.server_attested:
                attested_run.close()
        self.runs += 1
        self.seconds.append(time.monotonic() - began)
        self.stop_if_asked()  # a run cut short by Ctrl-C is never counted
        self._refuse_changed_code(commit)
        value = self._value(finished.status, finished.output, before)
        died = server is not None and not server.alive()
        said = self._failure(finished, value, server.tail() if server and died else None)
        if said is None and not attested.counted:
            said = f"{value:g} not counted: {'; '.join(attested.problems)}"
        self.progress(f"{self._count()} ({what}) at {where}: {said or f'{value:g}'}{self._left()}")
        if server is not None:
            server.runs += 1
            if said or server.runs >= server.spec.runs_per_start:
                self._stop_server()  # after a failed run too: the next one gets a fresh server
        if said is not None or isinstance(value, str):  # (a value-less run has said why)
            return None
        now = datetime.now(UTC).isoformat(timespec="seconds")
        return Sample(value, with_attestations({**self.stamp, "timestamp": now}, attested))

    def _failure(
        self, finished: Finished, value: float | str, server_died: str | None
    ) -> str | None:
        """Why a run is not counted (None: it is): killed at --timeout, its server gone under
        it (the server's last log lines), or no value that counts (`value` says why)."""
        self.printed_no_value = False
        if finished.timed_out:
            return f"killed after {self.options.timeout:g} s (--timeout); not counted"
        if server_died is not None:
            return f"the server exited during the run; not counted: {server_died}"
        if not isinstance(value, str):
            return None
        self.printed_no_value = finished.status == 0
        tail = " | ".join(finished.output.strip().splitlines()[-_TAIL_LINES:]) or "(no output)"
        return f"run failed ({value}); not counted: {tail}"

    def _asked(self) -> bool:
        return self.stop_asked

    def _running(self, group: Group | None) -> None:
        self.child = group

    def _child_env(self) -> dict[str, str]:
        """The environment of every process the hunt starts, CMD and server alike: the user's,
        and the worktree lock marked held (a hook or patchguard run inside waits for nothing)."""
        return {**os.environ, HELD_VARIABLE: str(self.repo.layout.worktree_lock_path)}

    def _subject(self, commit: str) -> str:
        if commit not in self.subjects:
            self.subjects[commit] = self._git("log", "-1", "--format=%s", commit).strip()
        return self.subjects[commit]

    def _count(self) -> str:
        """`run 3/~8` where the hunt said what it plans (an estimate), else `run 3`."""
        planned = f"/~{self.planned}" if self.planned and self.planned >= self.runs else ""
        return f"run {self.runs}{planned}"

    def _left(self) -> str:
        """The time the planned runs left take at the median run's pace."""
        if not self.planned or self.planned <= self.runs or not self.seconds:
            return ""
        left = (self.planned - self.runs) * statistics.median(self.seconds)
        return f" (about {_duration(left)} left)" if left >= 1 else ""

    def warm_up(self, commit: str) -> bool:
        """The uncounted first runs at a commit (file caches, bytecode); False if one failed."""
        return all(
            self.run(commit, f"warm-up {n + 1}") is not None for n in range(self.options.warmups)
        )

    def _attested_run(self) -> attest.AttestedRun:
        """A run's import guard, for the code checked at this commit (guard.ops.attest)."""
        assert self.report is not None  # visit() checked the code first
        return attest.AttestedRun(self._view(), self.report)

    def _stop_server(self) -> None:
        """End the server's whole group; what its processes attested goes with it."""
        try:
            if self.server is not None:
                self.server.stop()
        finally:
            if self.server_attested is not None:
                self.server_attested.close()
                self.server_attested = None

    def _refuse_changed_code(self, commit: str) -> None:
        """A run that moved HEAD or edited a guarded file measured other code: stop."""
        changed = [
            path
            for path, blob in self.stamp.get("files", {}).items()
            if _blob_of(self.repo, path) != blob
        ]
        if self.head() != commit or changed:
            self.here = None
            raise GuardFailure(
                f"the command changed the code it measured at {commit[:10]} "
                f"({', '.join(changed) or 'HEAD moved'}); nothing of this run is counted. A "
                "benchmark must not check out or edit the checkout it measures"
            )

    def _value(self, status: int, output: str, before: tuple[bytes, int] | None) -> float | str:
        """The run's value, or why it has none that counts (its exit, nothing written to
        --metric-file, a last value that is nan, inf or not read for sure, none at all)."""
        if status:
            return f"exit {status}"
        source = output
        if self.metric_file is not None:
            written = self._metric_file_text(self.metric_file, before)
            if written is None:
                return f"nothing written to {self.options.metric_file}"
            source = written
        metric = self.options.metric
        try:
            value = metric.read(source)
        except Unreadable as refusal:
            return f"{metric.describe()}: {refusal}"
        if value is None or value <= 0:
            return f"no positive value for {metric.describe()}"
        return value

    def _metric_file_state(self) -> tuple[bytes, int] | None:
        """--metric-file's bytes and modification time before a run (None: no file yet)."""
        path = self.metric_file
        try:
            return (path.read_bytes(), path.stat().st_mtime_ns) if path is not None else None
        except OSError:
            return None

    @staticmethod
    def _metric_file_text(path: Path, before: tuple[bytes, int] | None) -> str | None:
        """What the run wrote to --metric-file: what it appended (sglang's --output-file), or
        all of it when it rewrote the file (vLLM's --save-result); None when it wrote nothing,
        so the previous run's line is never read again."""
        try:
            data, written = path.read_bytes(), path.stat().st_mtime_ns
        except OSError:
            return None
        if before is not None:
            if (data, written) == before:
                return None
            if before[0] and data.startswith(before[0]) and data != before[0]:
                data = data[len(before[0]) :]
        return data.decode(errors="replace")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def _blob_of(repo: Repo, path: str) -> str | None:
    content = repo.read_file(path)
    return None if content is None else blob_id(content)


def _current(repo: Repo) -> str:
    """The branch HEAD is on, or HEAD's commit when it is detached."""
    try:
        return run_git(["symbolic-ref", "-q", "--short", "HEAD"], repo.workdir).stdout.strip()
    except ConfigError:  # detached: symbolic-ref -q fails without a word
        return run_git(["rev-parse", "HEAD"], repo.workdir).stdout.strip()


@contextmanager
def _session(
    repo: Repo, options: Options, progress: Callable[[str], None], operation: str
) -> Iterator[_Bench]:
    """Signals deferred, the patches lifted, a bench; at the end (and on Ctrl-C) back home."""
    refusing = repo.operation_in_progress()
    if refusing:
        raise GuardFailure(
            f"a {refusing} is in progress; finish it (or abort it) before measuring commits"
        )
    load_manifest(repo)  # nothing recorded: said now, before any move (and nothing to carry)
    bench = _Bench(repo, options, progress)
    with (
        out_of_reach_of_ctrl_c(),
        _deferred_signals(bench),
        moves.lifted(repo, operation, hunt=True) as lift,
    ):
        try:
            yield bench
        finally:
            bench.go_home()
    if not lift.ok:
        problems = "; ".join(lift.report.problems() if lift.report else [])
        raise GuardFailure(f"after {operation}, the patches do not hold: {problems}")


@contextmanager
def _deferred_signals(bench: _Bench) -> Iterator[None]:
    """Ctrl-C (and SIGTERM, SIGHUP) is passed on to the run's process group, which has a
    session of its own and so is out of the terminal's reach; patchguard notes it, and stops at
    the next point between runs, the server's group ended on the way out (_Bench.leave)."""

    def note(number: int, _frame: FrameType | None) -> None:
        bench.stop_asked = True
        if bench.child is not None:
            bench.child.signal(number)

    numbers = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {number: signal.signal(number, note) for number in numbers}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _commit(repo: Repo, revision: str) -> str:
    try:
        found = run_git(["rev-parse", "--verify", "-q", f"{revision}^{{commit}}"], repo.workdir)
    except ConfigError:
        raise ConfigError(f"{revision!r} names no commit here (git rev-parse)") from None
    return found.stdout.strip()


# --- compare --------------------------------------------------------------------------------------


def compare(
    repo: Repo, a: str, b: str, options: Options, progress: Callable[[str], None]
) -> Comparison:
    """CMD at A and at B in order-balanced pairs, until the answer is settled or at the cap."""
    commits = _commit(repo, a), _commit(repo, b)
    try:
        with _session(repo, options, progress, "compare") as bench:
            bench.planned = 2 * (options.warmups + options.repeats)  # the first look's
            return _compare(bench, *commits)
    except _Stop:
        raise Interrupted(
            "interrupted: nothing was counted, and your branch, tree and patches are back as "
            "they were; to go on, run the same compare again"
        ) from None
    except _NotCarried as refusal:
        raise GuardFailure(_not_carried(refusal, "compare")) from None


def _compare(bench: _Bench, a: str, b: str, kept: _Kept | None = None) -> Comparison:
    options = bench.options
    runs_a, runs_b = Runs(a), Runs(b)
    for commit in sorted((a, b), key=lambda c: c != bench.head()):  # where it is first
        bench.visit(commit)
        if bench.warm_up(commit):
            continue
        if bench.printed_no_value:
            raise GuardFailure(
                f"{' '.join(options.command)} ran at {commit[:10]} with the patches in place "
                f"and exited 0, but its output has no positive value for "
                f"{options.metric.describe()}; check --metric against the output above"
            )
        raise GuardFailure(
            f"{' '.join(options.command)} fails at {commit[:10]} with the patches in "
            "place (its output is above); fix that first (patchguard run -- CMD there)"
        )
    sides = {"A": runs_a, "B": runs_b}
    first = {"A": 0, "B": 0}  # pairs kept that began with each side (A and B may be one commit)
    failures = 0
    for lead, sample_a, sample_b in kept.pairs(bench.stamps[a], bench.stamps[b]) if kept else []:
        first[lead] += 1
        runs_a.samples.append(sample_a)
        runs_b.samples.append(sample_b)

    def look(size: int, alpha: float) -> stats.Decision:
        nonlocal failures
        while len(runs_a.samples) < size:
            if first["A"] == first["B"]:  # balanced: begin where the last pair ended
                lead = "A" if bench.here == a else "B"
            else:
                lead = "A" if first["A"] < first["B"] else "B"
            order = (lead, "B" if lead == "A" else "A")
            number = len(runs_a.samples) + 1
            got = [bench.run(sides[side].commit, f"pair {number} {side}") for side in order]
            pair = [sample for sample in got if sample is not None]
            if len(pair) < 2:  # a failed pair is dropped, as Skia does
                failures += 1
                if failures > max(2, size // 2):
                    raise GuardFailure(
                        f"{failures} pairs failed; the command is not reliable enough to compare "
                        "(the failed runs' output is above)"
                    )
                continue
            first[lead] += 1
            for side, sample in zip(order, pair, strict=True):
                sides[side].samples.append(sample)
            if kept is not None:
                kept.add(
                    kind="pair",
                    lead=lead,
                    a=asdict(runs_a.samples[-1]),
                    b=asdict(runs_b.samples[-1]),
                )
        return stats.decide(
            runs_a.values,
            runs_b.values,
            paired=True,
            min_effect_pct=options.min_effect_pct,
            alpha=alpha,
        )

    plan = stats.Plan(options.repeats, options.max_repeats)
    decision, size = stats.settle(plan, look, lambda d: d.verdict != stats.UNKNOWN)
    capped = decision.verdict == stats.UNKNOWN and size == plan.sizes[-1]
    return Comparison(options.metric, runs_a, runs_b, decision, capped, bench.runs)


def _not_carried(refusal: _NotCarried, operation: str) -> str:
    problems = "; ".join(refusal.problems)
    return (
        f"the patches do not hold at {refusal.commit[:10]}, so nothing can be measured there: "
        f"{problems}. To carry them there: patchguard git checkout {refusal.commit[:10]}, shape "
        f"the file, patchguard resolve NAME; then run the {operation} again"
    )


# --- bisect run --metric ------------------------------------------------------------------------


def bisect(repo: Repo, options: Options, progress: Callable[[str], None]) -> Hunt:
    """After `patchguard bisect start BAD GOOD`: measure GOOD and BAD, then mark each commit
    git bisect offers as like GOOD or like BAD, until git names the first changed one."""
    if not (repo.layout.git_dir / "BISECT_START").exists():
        raise GuardFailure(
            "no bisect is in progress; start one first: patchguard bisect start BAD GOOD"
        )
    good_term, bad_term = _terms(repo)
    bad = _refs(repo, f"refs/bisect/{bad_term}")
    goods = _refs(repo, f"refs/bisect/{good_term}-")
    if len(bad) != 1 or not goods:
        raise GuardFailure(
            "the bisect needs one bad and at least one good commit before it can measure: "
            "patchguard bisect start BAD GOOD"
        )
    steps: list[Step] = []
    hunt = [
        (repo.layout.git_dir / "BISECT_START").read_text(errors="replace"),
        goods[0],
        bad[0],
        *options.command,
        options.metric.spec,
        str(options.metric_file),
    ]
    kept = _Kept(repo.layout.git_dir / KEPT_FILE, hunt)
    try:
        with _session(repo, options, progress, "bisect run --metric") as bench:
            bench.planned = 2 * (options.warmups + options.repeats)  # GOOD's and BAD's first look
            found = _bisect(bench, goods[0], bad[0], steps, (good_term, bad_term), kept)
    except _Stop:
        marked = f"{len(steps)} commit(s) marked so far stay marked" if steps else "nothing marked"
        raise Interrupted(
            f"interrupted: {marked}, the {kept.samples_kept()} samples counted so far are kept, "
            "the bisect stays where it is, and the tree and patches are as they were; to go "
            "on, run the same patchguard bisect run --metric again: nothing is measured twice "
            "(or leave the bisect: patchguard git bisect reset)"
        ) from None
    kept.drop()
    if found.first_changed is not None:
        subject = ["log", "-1", "--format=%s", found.first_changed]
        found.subject = run_git(subject, repo.workdir).stdout.strip()
    return found


def _bisect(
    bench: _Bench, good: str, bad: str, steps: list[Step], terms: tuple[str, str], kept: _Kept
) -> Hunt:
    options = bench.options
    try:
        endpoints = _compare(bench, good, bad, kept)
    except _NotCarried as refusal:
        raise GuardFailure(_not_carried(refusal, "bisect")) from None
    if endpoints.decision.verdict != stats.DIFFERENT:
        verdict = NO_CHANGE if endpoints.decision.verdict == stats.SAME else UNDECIDED
        return Hunt(options.metric, endpoints, steps, verdict, None, None, bench.runs)
    measured = {good: endpoints.a, bad: endpoints.b}
    while True:
        commit = _waiting(bench)
        if commit in measured:  # git has nothing left between GOOD and BAD
            first = bad if commit == bad else None
            break
        step = _step(bench, commit, endpoints, kept)
        measured[commit] = step.runs
        steps.append(step)
        said = _mark(bench, step, terms)
        first_line = f" is the first {terms[1]} commit"
        found = [line.split()[0] for line in said if line.endswith(first_line)]
        if found:
            first = _commit(bench.repo, found[0])
            break
        if any("only 'skip'ped commits left" in line for line in said):
            first = None
            break
    change = endpoints.decision if first == bad else None
    for step in steps:
        if step.commit == first:
            change = step.vs_good
    verdict = FOUND if first is not None else AMBIGUOUS
    return Hunt(options.metric, endpoints, steps, verdict, first, change, bench.runs)


def _waiting(bench: _Bench) -> str:
    """The commit git bisect waits to hear about: the one it checked out last (it says so in
    BISECT_EXPECTED_REV), wherever the user moved HEAD since; HEAD where git wrote none."""
    try:
        expected = (bench.repo.layout.git_dir / "BISECT_EXPECTED_REV").read_text().strip()
    except OSError:
        return bench.home
    return _commit(bench.repo, expected) if expected else bench.home


def _step(bench: _Bench, commit: str, endpoints: Comparison, kept: _Kept) -> Step:
    """Measure one commit against GOOD's and BAD's runs; mark it like the one it does not
    differ from, or skip it when it differs from both or neither at the cap."""
    options = bench.options
    runs = Runs(commit)
    try:
        bench.visit(commit)
        if not bench.warm_up(commit):
            return Step(
                commit, "skip", runs, reason="the command failed here (its output is above)"
            )
    except _NotCarried as refusal:
        return Step(commit, "skip", runs, reason=_not_carried(refusal, "bisect"))
    runs.samples = kept.samples(commit, bench.stamps[commit])
    failures = 0

    def look(size: int, alpha: float) -> tuple[stats.Decision, stats.Decision] | None:
        nonlocal failures
        while len(runs.samples) < size:
            sample = bench.run(commit, f"run {len(runs.samples) + 1}")
            if sample is None:
                failures += 1
                if failures > max(2, size // 2):
                    return None
                continue
            runs.samples.append(sample)
            kept.add(kind="sample", commit=commit, sample=asdict(sample))
        vs_good, vs_bad = (
            stats.decide(
                side.values,
                runs.values,
                paired=False,
                min_effect_pct=options.min_effect_pct,
                alpha=alpha,
            )
            for side in (endpoints.a, endpoints.b)
        )
        return vs_good, vs_bad

    plan = stats.Plan(max(3, options.repeats // 2), options.max_repeats)
    answer, _ = stats.settle(plan, look, lambda got: got is None or _like(*got) is not None)
    if answer is None:
        return Step(commit, "skip", runs, reason="the command failed too often here")
    vs_good, vs_bad = answer
    like = _like(vs_good, vs_bad)
    reason = None if like else "it differs from both GOOD and BAD, or from neither, at the cap"
    return Step(commit, like or "skip", runs, vs_good, vs_bad, reason)


def _like(vs_good: stats.Decision, vs_bad: stats.Decision) -> str | None:
    """V8's bisect.pl: a commit is like the one side it does not differ from."""
    good_differs, bad_differs = (d.verdict == stats.DIFFERENT for d in (vs_good, vs_bad))
    if good_differs == bad_differs:
        return None
    return "bad" if good_differs else "good"


def _mark(bench: _Bench, step: Step, terms: tuple[str, str]) -> list[str]:
    """Tell git bisect (with the patches lifted: git then checks out the next commit)."""
    bench.leave()
    term = {"good": terms[0], "bad": terms[1]}.get(step.verdict, "skip")
    change = f" ({step.vs_good.delta_pct:+.1f}% against GOOD)" if step.vs_good else ""
    bench.progress(f"{step.commit[:10]} is {step.verdict}{change}: git bisect {term}")
    said = bench._git("bisect", term, step.commit).splitlines()
    bench.home = bench.head()
    for line in said:
        if line.startswith("Bisecting:"):
            bench.progress(line)
    return said


def _terms(repo: Repo) -> tuple[str, str]:
    terms = repo.layout.git_dir / "BISECT_TERMS"
    words = terms.read_text().split() if terms.exists() else []
    return (words[1], words[0]) if len(words) == 2 else ("good", "bad")


def _refs(repo: Repo, prefix: str) -> list[str]:
    listed = run_git(["for-each-ref", "--format=%(refname) %(objectname)"], repo.workdir)
    found = []
    for line in listed.stdout.splitlines():
        name, _, commit = line.partition(" ")
        if name == prefix or (prefix.endswith("-") and name.startswith(prefix)):
            found.append(commit)
    return found


# --- the plot -------------------------------------------------------------------------------------


def require_plotting(path: Path) -> None:
    """Before anything is measured: a plot that cannot be drawn is refused now, not at the end."""
    if path.suffix.lower() not in (".png", ".svg"):
        raise ConfigError(f"--plot {path}: name a .png or .svg file")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(
            "--plot needs matplotlib, which is not installed: pip install 'git-patchguard[plot]'"
        ) from None


def plot(comparison: Comparison, path: Path) -> None:
    """Each side's runs as points over a box: the distribution the verdict was drawn from."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(5, 4))
    sides = (comparison.a, comparison.b)
    axes.boxplot([side.values for side in sides], widths=0.4)
    for position, side in enumerate(sides, start=1):
        axes.plot([position] * len(side.values), side.values, "o", alpha=0.5)
    axes.set_xticks([1, 2], [f"A {comparison.a.commit[:10]}", f"B {comparison.b.commit[:10]}"])
    axes.set_ylabel(comparison.metric.key)
    decision = comparison.decision
    axes.set_title(f"{decision.verdict}: {decision.delta_pct:+.1f}%")
    figure.tight_layout()
    figure.savefig(path)
    pyplot.close(figure)
