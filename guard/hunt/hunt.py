"""The regression hunt: `patchguard compare A B -- CMD` and `patchguard bisect run --metric M`.

CMD runs in the user's own checkout (an editable install runs the code there), so the patches
are lifted for the whole hunt and applied at each commit it visits. A run counts only with the
patches in place, the code unchanged by it, and its processes' word that they imported the
patched code (guard.ops.attest). Ctrl-C stops the hunt between runs, never mid-move, so the
user's branch, tree, patches and other edits come back as they were (exit 130). What the runs
mean is for guard.hunt.stats (compare) and guard.hunt.culprit (bisect) to decide.
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from guard.errors import EXIT_INTERRUPTED, ConfigError, GuardFailure, PatchguardError
from guard.git.lock import HELD_VARIABLE
from guard.git.objects import blob_id
from guard.git.process import out_of_reach_of_ctrl_c, run_git, signals_to
from guard.git.repo import Repo
from guard.hunt import culprit, stats
from guard.hunt.kept import KEPT_FILE, HomeNote, Kept, Sample
from guard.hunt.metrics import Metric, Unreadable
from guard.hunt.processes import Finished, Group, run_grouped
from guard.hunt.server import SERVER_LOG, Server, ServerSpec
from guard.ops import attest, moves
from guard.ops.provenance import stamp, utc_now
from guard.store.derived import load_manifest
from guard.tree import patching
from guard.tree.verdicts import CheckReport

DEFAULT_MAX_REPEATS = 24  # pairs per side at the last look (3, 6, 12, 24)
FOUND, NO_CHANGE, UNDECIDED, AMBIGUOUS = "found", "no-change", "unknown", "ambiguous"
UNSETTLED = "unsettled"  # GOOD and BAD differ, but the probes did not settle on a commit
_TAIL_LINES = 5  # of a failed run's output, in its message


class Interrupted(PatchguardError):
    """Ctrl-C (or SIGTERM/SIGHUP) stopped the hunt; everything was put back first."""

    exit_code = EXIT_INTERRUPTED


class _NotCarried(GuardFailure):
    """The patches do not hold at a commit: a probe skips it; anywhere else it ends the hunt."""


@dataclass(frozen=True)
class Options:
    command: tuple[str, ...]
    metric: Metric
    min_effect_pct: float
    repeats: int
    max_repeats: int
    warmups: int
    metric_file: Path | None  # read, not the output; from the checkout's top, where CMD runs
    server: ServerSpec | None  # started at each commit before CMD runs there
    timeout: float | None  # seconds a run of CMD may take before its group is ended
    probe_warmups: int  # uncounted runs at each commit a bisect probes: only when asked


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
    """A commit a metric bisect probed (runs.commit), or skipped."""

    verdict: str  # "good" or "bad" (which side its runs are like), or "skip"
    runs: Runs
    vs_good: stats.Decision | None = None  # its change against GOOD (the hunt's pooled spread)
    reason: str | None = None  # why a commit was skipped


@dataclass
class Hunt:
    endpoints: Comparison  # GOOD against BAD, with the hunt's metric
    steps: list[Step]
    verdict: str  # FOUND, NO_CHANGE, UNDECIDED, AMBIGUOUS or UNSETTLED
    runs: int  # every run of CMD the hunt cost, in this session and the ones Ctrl-C stopped
    line: list[str] = field(default_factory=list)  # the candidates searched, oldest first
    first_changed: str | None = None  # the rest: only when FOUND
    change: stats.Decision | None = None  # first_changed against its parent
    parent: str | None = None  # first_changed's parent on the line searched
    probability: float | None = None  # the posterior that first_changed is the one
    subject: str = ""  # first_changed's, for the summary


# --- measuring with the patches carried ---------------------------------------------------------


class _Bench:
    """Runs CMD at commits of one checkout with the patches in place, and reads the metric."""

    def __init__(
        self, repo: Repo, options: Options, progress: Callable[[str], None], hunt: str
    ) -> None:
        self.repo = repo
        self.options = options
        self.progress = progress
        self.hunt = hunt  # "compare" or "bisect": what the advice says to run again
        self.kept: Kept | None = None  # a metric bisect's (compare keeps nothing for a next one)
        self.home = _current(repo)  # where the user is: back there at the end
        self.note = HomeNote(repo.layout.git_dir)
        self.here: str | None = None  # the commit the patches are applied at, stamp taken
        self.report: CheckReport | None = None  # the check at `here`: what the runs attest
        self.stamps: dict[str, dict[str, Any]] = {}  # each commit's, at its last visit
        self.applied = False
        self.runs = 0
        self.stop_asked = False
        self.child: Group | None = None  # the run under way: signals are passed on to it
        self.seconds: list[float] = []  # each run's, for the estimate of what is left
        self.planned = 2 * (options.warmups + options.repeats)  # an estimate: the first look's
        self.subjects: dict[str, str] = {}
        self.server = (
            None
            if options.server is None
            else Server(options.server, repo.layout.git_dir / SERVER_LOG, progress)
        )
        self.server_attested: attest.AttestedRun | None = None  # for the server's processes
        self.printed_no_value = False  # the last failed run exited 0 but gave no metric
        self.wrote_nothing = False  # ...because it wrote nothing to --metric-file
        self.server_failed: str | None = None  # why the last run's server did not get ready
        self.unattested: str | None = None  # why the last run's value was not counted
        given = options.metric_file
        self.metric_file = None if given is None else repo.workdir / given

    def _view(self) -> Repo:
        """A fresh view after git moved (the index and HEAD read anew)."""
        return Repo(self.repo.layout)

    def _git(self, *args: str) -> str:
        return run_git(args, self.repo.workdir, env=self._child_env()).stdout

    def head(self) -> str:
        return self._git("rev-parse", "HEAD").strip()

    def visit(self, commit: str) -> None:
        """HEAD at `commit` (detached), the patches applied and checked, the stamp taken."""
        if self.here == commit:
            return
        self.leave()
        if self.head() != commit:
            self.note.moving_to(commit)  # first: SIGKILL may come during the checkout
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
            raise _NotCarried(
                f"the patches do not hold at {commit[:10]}, so nothing can be measured there: "
                f"{'; '.join(report.problems())}. To carry them there: patchguard git checkout "
                f"{commit[:10]}, shape the file, patchguard resolve NAME; then run the "
                f"{self.hunt} again"
            )
        self.stamps[commit] = stamp(view)
        self.report = report
        self.here = commit

    def leave(self) -> None:
        try:
            self._stop_server()
        finally:
            if self.applied:
                self.applied, self.here = False, None
                lifted = patching.unapply(self._view(), allow_mid_operation=True)
                if stuck := [o for o in lifted if not o.ok]:
                    reasons = "; ".join(f"patch {o.verdict.name}: {o.message}" for o in stuck)
                    raise GuardFailure(f"cannot lift the patches after measuring: {reasons}")

    def go_home(self) -> None:
        """The branch again (a commit id, as a bisect's home is, leaves HEAD detached there)."""
        try:
            self.leave()
        finally:
            if _current(self.repo) != self.home:
                self._git("checkout", "-q", self.home)

    def stop_if_asked(self) -> None:
        """Between runs, once a signal asked: Interrupted, saying what the cleanup leaves."""
        if not self.stop_asked:
            return
        if self.kept is None:
            raise Interrupted(
                "interrupted: nothing was counted, and your branch, tree and patches are back "
                "as they were; to go on, run the same compare again"
            )
        raise Interrupted(
            f"interrupted: nothing is marked before the hunt settles, the "
            f"{self.kept.samples_kept()} samples counted so far are kept, the bisect stays "
            "where it is, and the tree and patches are as they were; to go on, run the same "
            "patchguard bisect run --metric again: nothing is measured twice (or leave the "
            "bisect: patchguard git bisect reset)"
        )

    def keep(self, **record: Any) -> None:
        """For a metric bisect: written at once (SIGKILL runs no finally)."""
        if self.kept is not None:
            self.kept.add(**record)

    def run(self, commit: str, what: str) -> Sample | None:
        """One run of CMD at `commit`: its sample, or None when it is not counted (said why)."""
        self.visit(commit)
        self.stop_if_asked()
        where = f"{commit[:10]} ({self._subject(commit)})"
        server = self.server
        self.server_failed = self.unattested = None
        if server is not None and server.group is None:
            self.server_attested = self._attested_run()  # the server's processes attest too
            env = self.server_attested.environment(self._child_env())
            failed = server.start(self.repo.workdir, env, where, lambda: self.stop_asked)
            self.stop_if_asked()
            if failed is not None:
                self._stop_server()
                self.server_failed = failed
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
                lambda: self.stop_asked,
                self._running,
            )
            attested = attested_run.judge(self.repo.workdir, list(self.options.command))
        finally:
            if attested_run is not self.server_attested:
                attested_run.close()
        self.runs += 1
        self.keep(kind="cost", runs=1)
        self.seconds.append(time.monotonic() - began)
        self.stop_if_asked()  # a run cut short by Ctrl-C is never counted
        self._refuse_changed_code(commit)
        value = self._value(finished.status, finished.output, before)
        died = server is not None and not server.alive()
        said = self._failure(finished, value, server.tail() if server and died else None)
        if said is None and attested.problems:
            self.unattested = "; ".join(attested.problems)
            said = f"{value:g} not counted: {self.unattested}"
        self.progress(f"{self._count()} ({what}) at {where}: {said or f'{value:g}'}{self._left()}")
        if server is not None:
            server.runs += 1
            if said or server.runs >= server.spec.runs_per_start:
                self._stop_server()  # after a failed run too: the next one gets a fresh server
        if said is not None or isinstance(value, str):  # (a value-less run has said why)
            return None
        return Sample(
            value,
            {**self.stamps[commit], "timestamp": utc_now(), "attestations": attested.as_json()},
        )

    def _failure(
        self, finished: Finished, value: float | str, server_died: str | None
    ) -> str | None:
        """Why a run is not counted (None: it is); a str `value` says why it has none."""
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

    def why_not_counted(self) -> str:
        """Why the last runs at a commit gave no sample: the server, the attestation, or CMD."""
        if self.server_failed is not None:
            return f"the server never got ready here: {self.server_failed}"
        if self.unattested is not None:
            return f"its values are not counted here: {self.unattested}"
        return "the command failed too often here (its output is above)"

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
        """`run 3/~8` while the runs are within what the hunt planned, else `run 3`."""
        planned = f"/~{self.planned}" if self.planned >= self.runs else ""
        return f"run {self.runs}{planned}"

    def _left(self) -> str:
        """The time the planned runs left take at the median run's pace."""
        if self.planned <= self.runs or not self.seconds:
            return ""
        left = (self.planned - self.runs) * statistics.median(self.seconds)
        return f" (about {_duration(left)} left)" if left >= 1 else ""

    def _attested_run(self) -> attest.AttestedRun:
        """A run's import guard, for the code checked at this commit (guard.ops.attest)."""
        assert self.report is not None  # visit() checked the code first
        return attest.AttestedRun(self._view(), self.report)

    def _stop_server(self) -> None:
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
            for path, blob in self.stamps[commit].get("files", {}).items()
            if _blob_of(self.repo, path) != blob
        ]
        if self.head() != commit or changed:
            raise GuardFailure(
                f"the command changed the code it measured at {commit[:10]} "
                f"({', '.join(changed) or 'HEAD moved'}); nothing of this run is counted. A "
                "benchmark must not check out or edit the checkout it measures"
            )

    def _value(self, status: int, output: str, before: tuple[bytes, int] | None) -> float | str:
        """The run's value, or why it has none that counts."""
        if status:
            return f"exit {status}"
        source = output
        if self.metric_file is not None:
            written = self._metric_file_text(before)
            self.wrote_nothing = written is None
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
        path = self.metric_file
        try:
            return (path.read_bytes(), path.stat().st_mtime_ns) if path is not None else None
        except OSError:
            return None

    def _metric_file_text(self, before: tuple[bytes, int] | None) -> str | None:
        """What the run wrote to --metric-file: what it appended (sglang's --output-file), or
        all of it when it rewrote the file (vLLM's --save-result); None when it wrote nothing,
        so the previous run's line is never read again."""
        after = self._metric_file_state()
        if after is None or after == before:
            return None
        data = after[0]
        if before is not None and before[0] and data.startswith(before[0]) and data != before[0]:
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
    """The branch HEAD is on, or HEAD's commit when it is detached (read anew each time)."""
    head = repo.git.head
    return str(head.target) if repo.git.head_is_detached else head.shorthand


@contextmanager
def _session(
    repo: Repo, options: Options, progress: Callable[[str], None], operation: str
) -> Iterator[_Bench]:
    """Signals deferred, the patches lifted, a bench; at the end (and on Ctrl-C) back home."""
    if refusing := repo.operation_in_progress():
        raise GuardFailure(
            f"a {refusing} is in progress; finish it (or abort it) before measuring commits"
        )
    load_manifest(repo)  # nothing recorded: said now, before any move (and nothing to carry)
    bench = _Bench(repo, options, progress, operation.split()[0])

    def note(number: int, _frame: object) -> None:
        """The run's process group has a session of its own, out of the terminal's reach: a
        signal is passed on to it, and the hunt stops at the next point between runs."""
        bench.stop_asked = True
        if bench.child is not None:
            bench.child.signal(number)

    with (
        out_of_reach_of_ctrl_c(),
        signals_to(note, signal.SIGINT, signal.SIGTERM, signal.SIGHUP),
        moves.lifted(repo, operation, hunt=True) as lift,
    ):
        # Before the first move, under the worktree's lock (no other hunt runs): see HomeNote.
        if (earlier := bench.note.begin(bench.home, lift.entry)) is not None:
            shown = earlier[:10] if len(earlier) == 40 else earlier
            progress(
                f"an earlier hunt was killed before it went back to {shown}; this one goes "
                "back there when it ends"
            )
            bench.home = earlier
        try:
            yield bench
        except KeyboardInterrupt:  # a git of ours the same Ctrl-C reached (guard.git.process)
            bench.stop_asked = True
            bench.stop_if_asked()  # the hunt's own words for it: what is kept, how to go on
        finally:
            bench.go_home()
            bench.note.drop()
    if not lift.ok:
        problems = "; ".join(lift.report.problems() if lift.report else [])
        raise GuardFailure(f"after {operation}, the patches do not hold: {problems}")


def _commit(repo: Repo, revision: str) -> str:
    if (found := repo.commit_id(f"{revision}^{{commit}}")) is None:
        raise ConfigError(f"{revision!r} names no commit here (git rev-parse)")
    return found


# --- compare --------------------------------------------------------------------------------------


def compare(
    repo: Repo, a: str, b: str, options: Options, progress: Callable[[str], None]
) -> Comparison:
    """CMD at A and at B in order-balanced pairs, until the answer is settled or at the cap."""
    commits = _commit(repo, a), _commit(repo, b)
    with _session(repo, options, progress, "compare") as bench:
        return _compare(bench, *commits)


def _compare(bench: _Bench, a: str, b: str) -> Comparison:
    options, kept = bench.options, bench.kept
    runs_a, runs_b = Runs(a), Runs(b)
    for commit in sorted((a, b), key=lambda c: c != bench.head()):  # where it is first
        if _warm_up(bench, commit, options.warmups):
            continue
        if options.server is not None and bench.server_failed is not None:
            raise GuardFailure(  # the server is to blame, not CMD (which never ran)
                f"the server never got ready at {commit[:10]} with the patches in place, so "
                f"{' '.join(options.command)} was not run: {bench.server_failed}. Start it there "
                f"by hand (patchguard git checkout {commit[:10]}, then {options.server.command}) "
                "and check --ready/--ready-line and --ready-timeout against its output"
            )
        if bench.unattested is not None:
            raise GuardFailure(
                f"{' '.join(options.command)} ran at {commit[:10]} and printed a value, but it "
                f"is not counted: {bench.unattested}"
            )
        if bench.printed_no_value:
            missing = (
                f"wrote nothing to --metric-file {options.metric_file} (read from the top of "
                "the checkout, where it runs); check where the command writes"
                if bench.wrote_nothing
                else f"its output has no positive value for {options.metric.describe()}; "
                "check --metric against the output above"
            )
            raise GuardFailure(
                f"{' '.join(options.command)} ran at {commit[:10]} with the patches in place "
                f"and exited 0, but {missing}"
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
        bench.planned = bench.runs + 2 * max(0, size - len(runs_a.samples))  # this look's
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
            last = asdict(runs_a.samples[-1]), asdict(runs_b.samples[-1])
            bench.keep(kind="pair", lead=lead, a=last[0], b=last[1])
        return stats.decide(
            runs_a.values, runs_b.values, min_effect_pct=options.min_effect_pct, alpha=alpha
        )

    decision = stats.settle(
        options.repeats, options.max_repeats, look, lambda d: d.verdict != stats.UNKNOWN
    )
    capped = decision.verdict == stats.UNKNOWN  # settle looks again while unknown, to the cap
    return Comparison(options.metric, runs_a, runs_b, decision, capped, bench.runs)


# --- bisect run --metric ------------------------------------------------------------------------


def bisect(repo: Repo, options: Options, progress: Callable[[str], None]) -> Hunt:
    """After `patchguard bisect start BAD GOOD`: the first changed commit, told to git bisect."""
    if not repo.layout.bisect_start.exists():
        raise GuardFailure(
            "no bisect is in progress; start one first: patchguard bisect start BAD GOOD"
        )
    terms = repo.layout.git_dir / "BISECT_TERMS"  # bisect start --term-old/--term-new's words
    words = terms.read_text().split() if terms.exists() else []
    good_term, bad_term = (words[1], words[0]) if len(words) == 2 else ("good", "bad")
    bad = _refs(repo, f"refs/bisect/{bad_term}")
    goods = _refs(repo, f"refs/bisect/{good_term}-*")
    if len(bad) != 1 or not goods:
        raise GuardFailure(
            "the bisect needs one bad and at least one good commit before it can measure: "
            "patchguard bisect start BAD GOOD"
        )
    hunt = [
        repo.layout.bisect_start.read_text(errors="replace"),
        goods[0],
        bad[0],
        *options.command,
        options.metric.spec,
        str(options.metric_file),
    ]
    kept = Kept(repo.layout.git_dir / KEPT_FILE, hunt)
    with _session(repo, options, progress, "bisect run --metric") as bench:
        bench.kept = kept
        found = _bisect(bench, goods[0], bad[0], (good_term, bad_term), kept)
    kept.drop()
    return found


def _bisect(bench: _Bench, good: str, bad: str, terms: tuple[str, str], kept: Kept) -> Hunt:
    options = bench.options
    endpoints = _compare(bench, good, bad)

    def cost() -> int:
        return kept.earlier_runs + bench.runs

    if endpoints.decision.verdict != stats.DIFFERENT:
        verdict = NO_CHANGE if endpoints.decision.verdict == stats.SAME else UNDECIDED
        return Hunt(endpoints, [], verdict, cost())
    line = _line(bench.repo, good, bad)
    bench.planned = bench.runs + len(line).bit_length()  # ~log2: a probe's run each, an estimate
    measured = {good: endpoints.a, bad: endpoints.b}
    reasons: dict[str, str] = {}

    def take(index: int, size: int) -> list[float] | None:
        commit = line[index]
        if commit not in measured:  # a probe's first visit: warmed up if asked (--warmups)
            try:
                warmed = _warm_up(bench, commit, options.probe_warmups)
            except _NotCarried as refusal:
                reasons[commit] = str(refusal)
                return None
            if not warmed:
                reasons[commit] = "the command failed here (its output is above)"
                return None
            measured[commit] = Runs(commit, kept.samples(commit, bench.stamps[commit]))
        if not _measure(bench, measured[commit], size):
            reasons[commit] = bench.why_not_counted()
            return None
        return measured[commit].values

    fit = culprit.Fit.of(endpoints.a.values, endpoints.b.values)
    posterior = culprit.search(fit, len(line), take, options.max_repeats)
    evidence = posterior.evidence

    def steps() -> list[Step]:
        """The probed commits, oldest first, each with its change against GOOD."""
        found = []
        for index, commit in enumerate(line):
            runs = measured.get(commit, Runs(commit))
            if commit in reasons:
                found.append(Step("skip", runs, None, reasons[commit]))
            elif index in evidence:
                like = "bad" if evidence[index] > 0 else "good"
                against = _pooled(measured, endpoints.a, runs, options.min_effect_pct)
                found.append(Step(like, runs, against))
        return found

    group = posterior.settled()
    if group is None or len(group) > 1:
        verdict = UNSETTLED if group is None else AMBIGUOUS
        return Hunt(endpoints, steps(), verdict, cost(), line)
    first = line[group[0]]
    parent = line[group[0] - 1] if group[0] else good
    probability = float(posterior.probabilities()[group[0]])
    bench.progress(f"{first[:10]} is the first changed commit with probability {probability:.3f}")
    change = _against_parent(bench, measured, parent, first)
    probed = steps()
    _tell_git(bench, (parent, first), (good, bad), terms)
    subject = bench._subject(first)
    return Hunt(endpoints, probed, FOUND, cost(), line, first, change, parent, probability, subject)


def _line(repo: Repo, good: str, bad: str) -> list[str]:
    """First-parent only, so that each candidate has one parent on the line and "the first
    changed" is well defined (a merge counts as one commit)."""
    listed = run_git(
        ["rev-list", "--reverse", "--first-parent", "--ancestry-path", f"{good}..{bad}"],
        repo.workdir,
    ).stdout.split()
    if not listed or listed[-1] != bad:
        raise GuardFailure(
            f"BAD ({bad[:10]}) does not descend from GOOD ({good[:10]}) along its first "
            "parents, so there is no line of commits to search; start the bisect with a GOOD "
            "that is an ancestor of BAD: patchguard bisect start BAD GOOD"
        )
    return listed


def _warm_up(bench: _Bench, commit: str, count: int) -> bool:
    """The uncounted first runs at `commit` (file caches, bytecode), unless a stopped hunt ran
    them on this code already; False if one failed."""
    bench.visit(commit)
    if not count or (bench.kept is not None and bench.kept.warmed(commit, bench.stamps[commit])):
        return True
    if not all(bench.run(commit, f"warm-up {n + 1}") is not None for n in range(count)):
        return False
    bench.keep(kind="warmup", commit=commit, stamp=bench.stamps[commit])
    return True


def _measure(bench: _Bench, runs: Runs, size: int) -> bool:
    """Runs of CMD at runs.commit until it has `size` samples; False if it fails too often."""
    failures = 0
    while len(runs.samples) < size:
        sample = bench.run(runs.commit, f"run {len(runs.samples) + 1}")
        if sample is None:
            failures += 1
            if failures > 2:
                return False
            continue
        runs.samples.append(sample)
        bench.keep(kind="sample", commit=runs.commit, sample=asdict(sample))
    return True


def _pooled(
    measured: dict[str, Runs], a: Runs, b: Runs, min_effect_pct: float, alpha: float = stats.ALPHA
) -> stats.Decision:
    """B against A, with the spread of single runs pooled over every commit the hunt measured."""
    spread = stats.pooled_spread([runs.values for runs in measured.values()])
    return stats.decide(
        a.values, b.values, min_effect_pct=min_effect_pct, alpha=alpha, spread=spread
    )


def _against_parent(
    bench: _Bench, measured: dict[str, Runs], parent: str, first: str
) -> stats.Decision | None:
    """The first changed commit against its parent; more runs at both while undecided."""
    options = bench.options
    sides = measured[parent], measured[first]

    def look(size: int, alpha: float) -> stats.Decision | None:
        if not all(_measure(bench, runs, size) for runs in sides):
            return None
        return _pooled(measured, *sides, options.min_effect_pct, alpha)

    start = min(len(runs.samples) for runs in sides)
    cap = max(start, options.max_repeats)
    # None: the command failed too often there to say by how much
    return stats.settle(start, cap, look, lambda d: d is None or d.verdict != stats.UNKNOWN)


def _tell_git(
    bench: _Bench, found: tuple[str, str], endpoints: tuple[str, str], terms: tuple[str, str]
) -> None:
    """So that git's state and `git bisect log` agree with the verdict. With merges in the range
    git may still want side-branch commits tested (the hunt followed first parents): said, and
    the verdict stands."""
    said: list[str] = []
    for commit, endpoint, term in zip(found, endpoints, terms, strict=True):
        if commit == endpoint:  # GOOD and BAD are marked already
            continue
        bench.leave()  # the patches lifted: git then checks out the next commit
        bench.progress(f"git bisect {term} {commit[:10]}")
        lines = bench._git("bisect", term, commit).splitlines()
        bench.home = bench.head()
        bench.note.write(bench.home)
        for line in lines:
            if line.startswith("Bisecting:"):
                bench.progress(line)
        said += lines
    first = found[1]
    named = f"{first} is the first {terms[1]} commit"
    if said and not any(line.startswith(named) for line in said):
        bench.progress(
            f"git bisect has commits off the first-parent line left to test; patchguard's "
            f"answer is {first[:10]} (see git bisect log)"
        )


def _refs(repo: Repo, pattern: str) -> list[str]:
    return run_git(["for-each-ref", "--format=%(objectname)", pattern], repo.workdir).stdout.split()
