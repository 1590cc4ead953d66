"""Reports as text for people and as stable JSON for scripts (documented in docs/cli.md)."""

from __future__ import annotations

import json
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from guard.hunt.hunt import Comparison, Hunt, Runs
    from guard.hunt.stats import Decision
    from guard.ops.moves import Lift, StepResult
    from guard.store.manifest import Patch
    from guard.tree.patching import PatchOutcome
    from guard.tree.verdicts import CheckReport, PatchVerdict, SymbolResult

# guard.tree.verdicts is imported only where a report is worded: `list` and `show` word none.


def json_report(format: str, **fields: Any) -> str:
    """A --json report: its `format` (name/version, docs/json.md) first."""
    return json.dumps({"format": format, **fields}, indent=2)


def verdict_json(verdict: PatchVerdict) -> dict[str, Any]:
    return {
        "name": verdict.name,
        "state": str(verdict.state),
        "files": [
            {"path": f.path, "state": str(f.state), "detail": f.detail} for f in verdict.files
        ],
    }


def check_json(report: CheckReport, repository: str) -> str:
    return json_report(
        "patchguard.check/2",
        ok=report.ok,
        repository=repository,
        head=report.head,
        patches=[verdict_json(v) for v in report.patches],
        symbols=[
            {
                "spec": s.spec,
                "present": s.ok,
                "detail": s.detail,
                "patch": s.patch,
                "state": s.state,
                "runtime": s.runtime,
            }
            for s in report.symbols
        ],
        imports=[
            {"module": i.module, "python": i.python, "location": i.location, "ok": i.ok}
            for i in report.imports
        ],
        runtime_seconds=report.runtime_seconds,
        problems=report.problems(),
        warnings=report.warnings,
    )


def outcomes_json(outcomes: Sequence[PatchOutcome]) -> str:
    return json_report(
        "patchguard.apply/2",
        ok=all(o.ok for o in outcomes),
        patches=[
            {**verdict_json(o.verdict), "ok": o.ok, "message": o.message, "written": o.written}
            for o in outcomes
        ],
    )


def status_lines(
    verdicts: Sequence[PatchVerdict], symbols: Sequence[SymbolResult] = ()
) -> list[str]:
    """Each patch file by file, then each missing symbol its patch's state does not explain."""
    lines = []
    for verdict in verdicts:
        lines.append(f"{verdict.name}: {verdict.state}")
        for f in verdict.files:
            lines.append(f"  {f.path}: {f.state} ({f.detail})")
        committed = verdict.committed_in_head
        if committed:
            files = " ".join(f.path for f in verdict.files)
            undo = (
                f"git reset -q --soft HEAD~1 && git restore --staged {files}"
                if committed.only_the_patch
                else f"git reset -q HEAD~1 -- {files} && git commit -q --amend --no-edit"
            )
            lines += [
                f"  the patch is committed in HEAD: {committed.summary}",
                "  if that was an accident (git commit -a), take it back out of the commit, "
                "keeping it in your working tree:",
                f"    {undo}",
            ]
    explained = {v.name for v in verdicts if not v.ok}
    lines += [
        f"{s.spec}: missing ({s.detail})" for s in symbols if not s.ok and s.patch not in explained
    ]
    return lines


def stash_lines(held: Sequence[tuple[str, list[str]]]) -> list[str]:
    """The stash entries that hold a recorded patch, and how to get the rest of each back."""
    return [
        f"{entry} holds patch {', '.join(names)} (git stash took it; git stash pop refuses "
        f"while it is re-applied): to get the rest of the stash back: patchguard git stash pop"
        f"{'' if entry == 'stash@{0}' else ' ' + entry}; to throw it away: git stash drop {entry}"
        for entry, names in held
    ]


def check_lines(report: CheckReport) -> list[str]:
    """A one-screen summary; problems come from CheckReport.problems()."""
    lines = [f"patch {v.name}: {v.state}" for v in report.patches]
    present = sum(1 for s in report.symbols if s.ok)
    lines.append(f"symbols: {present}/{len(report.symbols)} present")
    return lines


def warning_lines(report: CheckReport) -> list[str]:
    """What holds but should not stay, one loud line each (stderr, green or not)."""
    return [f"patchguard: warning: {warning}" for warning in report.warnings]


def outcome_lines(outcomes: Sequence[PatchOutcome]) -> list[str]:
    from guard.tree.verdicts import GOOD_STATES

    lines = []
    for outcome in outcomes:
        files = f" ({', '.join(outcome.written)})" if outcome.written else ""
        lines.append(f"{outcome.verdict.name}: {outcome.verdict.state} -> {outcome.message}{files}")
        for f in outcome.verdict.files:
            if f.state not in GOOD_STATES and not outcome.ok:
                lines.append(f"  {f.path}: {f.state}: {f.detail}")
    return lines


def log_lines(entries: Sequence[dict[str, Any]], name: str | None) -> list[str]:
    """`patchguard log [NAME]`, from history.log_changes: numbered as `show NAME@{N}` reads them."""
    lines = []
    for entry in entries:
        number, head = entry["number"], entry["head"]
        when = entry["time"][:19].replace("T", " ")
        at = f"at {head[:10]}" if head else "at no commit"
        label = f"{name}@{{{number}}}" if name else f"{number}."
        lines.append(f"{label} {when} {at}: {entry['subject']}")
        if entry["invalid"]:  # only the newest state is what `undo` takes back next
            way = "`patchguard undo` takes it back" if number == 0 else "it changed no patch"
            lines.append(f"    (not a valid manifest; {way}): {entry['invalid']}")
        for patch in entry["patches"]:
            said = "(dropped)" if patch["dropped"] else patch["description"] or "(no description)"
            lines.append(f"    {patch['name']}: {said}")
    return lines


def show_lines(patches: Sequence[Patch], color: bool) -> list[str]:
    """`patchguard show`: what each patch is, what it requires, and its diff as recorded."""
    lines: list[str] = []
    for patch in patches:
        title = f"patch {patch.name}"
        lines += [_styled(title, fg="yellow") if color else title]
        if patch.description:
            lines.append(f"    {patch.description}")
        lines.append(f"base:     {patch.base_commit}")
        lines.append(f"recorded: {patch.created_at[:19].replace('T', ' ')} UTC")
        lines += [f"file:     {change.path}" for change in patch.files]
        lines += [f"requires: {spec}" for spec in patch.requires]
        resolutions = [(c.path, r) for c in patch.files for r in c.resolutions]
        lines += [
            f"resolution {number}: {path} at {r.commit[:10]}, "
            f"{r.created_at[:19].replace('T', ' ')} UTC (patchguard resolve {patch.name} --drop {number})"
            for number, (path, r) in enumerate(resolutions, 1)
        ]
        for change in patch.files:
            lines.append("")
            lines += [_diff_line(line, color) for line in change.diff.splitlines()]
        for number, (path, r) in enumerate(resolutions, 1):
            lines += ["", f"resolution {number} ({path} at {r.commit[:10]}):"]
            lines += [_diff_line(line, color) for line in r.diff.splitlines()]
        lines.append("")
    return lines[:-1]


_DIFF_COLORS = (("+++", "bold"), ("---", "bold"), ("+", "green"), ("-", "red"), ("@@", "cyan"))


def _diff_line(line: str, color: bool) -> str:
    for prefix, style in _DIFF_COLORS if color else ():
        if line.startswith(prefix):
            return _styled(line, bold=True) if style == "bold" else _styled(line, fg=style)
    return line


def _styled(text: str, **style: Any) -> str:
    """click's styles, for a terminal only."""
    import click

    return click.style(text, **style)


def banner(title: str, problems: Sequence[str]) -> str:
    """The loud failure block hooks and `check` print to stderr."""
    rule = "=" * 72
    body = "\n".join(f"  - {p}" for p in problems)
    return f"{rule}\npatchguard: {title}\n{body}\n{rule}"


def lift_lines(lift: Lift) -> list[str]:
    """What `patchguard git` and `bisect run` did with the patches around git."""
    names = ", ".join(lift.lifted)
    if lift.stopped == "conflicted stash pop":
        out = f"; patches {names} are out of the tree" if lift.lifted else ""
        return [
            f"the stash pop stopped on a conflict{out}. patchguard apply finishes git's merge "
            "in the patched files (and says whether the stash can be dropped); conflicts "
            "elsewhere are yours to resolve"
        ]
    if lift.stopped and not lift.lifted:
        return []
    if lift.stopped == "am":  # git am runs no hook of ours, not even when it concludes
        return [
            f"git stopped in the middle of an am; patches {names} are out of the tree: once "
            "it is finished (git am --continue) or aborted, run: patchguard apply"
        ]
    if lift.stopped:
        return [
            f"git stopped in the middle of a {lift.stopped}; patches {names} are out of the "
            f"tree and come back when it is finished (git commit, git {lift.stopped} "
            "--continue). If you abort it instead, run: patchguard apply"
        ]
    lines = []
    if lift.stash_held:
        lines.append(
            f"the stash held patch {', '.join(lift.stash_held)}: git applied the rest of the "
            "stash only, and the patch is put back by 3-way merge as after any move"
        )
    for outcome in lift.put_back:
        name = outcome.verdict.name
        if outcome.written:
            lines.append(f"re-applied {name} ({', '.join(outcome.written)})")
        elif not outcome.ok:
            lines.append(f"{name}: {outcome.message}")
        # State.UPSTREAM by its value, which a replayed put-back holds: verdicts stays unloaded
        elif outcome.verdict.state == "upstream" and name in (*lift.lifted, *lift.stash_held):
            lines.append(f"{name} is upstream here (HEAD has all of it); nothing to put back")
    if lift.hint:
        lines.append(lift.hint)
    if lift.skipped:
        names = " ".join(sorted({o.verdict.name for o in lift.put_back})) or "NAME"
        lines.append(
            f"bisect skipped {len(lift.skipped)} commit(s) where the patches did not hold: "
            + "; ".join(lift.skipped)
            + ". To measure one: patchguard git checkout COMMIT, shape the file there, "
            f"patchguard resolve {names}; then run patchguard bisect run again"
        )
    return lines


def step_lines(result: StepResult) -> list[str]:
    from guard.ops.moves import BISECT_SKIP, GO_ON, STOPPED_GO_ON  # only a bisect's

    commit = result.head[:10]
    if result.stops_git and result.problems:  # patchguard's own part failed
        where = f" at {commit}" if commit else ""
        return [
            f"bisect step{where} failed, aborting the bisect: "
            f"{'; '.join(p.rstrip('.') for p in result.problems)}. {GO_ON}"
        ]
    if result.status == BISECT_SKIP and result.skipped:
        return [f"skipping {commit}: {result.skipped}", *(f"  - {p}" for p in result.problems)]
    if result.stops_git:
        return [f"bisect step at {commit}: patches in place; {_ended(result)}. {STOPPED_GO_ON}"]
    verdict = {0: "good", BISECT_SKIP: "skip"}.get(result.status, "bad")
    return [
        f"bisect step at {commit}: patches in place; the command exited {result.status} ({verdict})"
    ]


# --- the regression hunt (guard.hunt.hunt) -----------------------------------------------------------


def compare_lines(comparison: Comparison) -> list[str]:
    """The short table of `patchguard compare`: each side's median, Δ% with its interval, n, p."""
    from statistics import median

    decision, metric = comparison.decision, comparison.metric
    better = f", {metric.direction} is better" if metric.direction else ""
    lines = [f"metric: {metric.spec}{better}", "side  commit      median      n"]
    for side, runs in (("A", comparison.a), ("B", comparison.b)):
        lines.append(
            f"{side:<5} {runs.commit[:10]}  {median(runs.values):<10.4g}  {len(runs.samples)}"
        )
    lines.append(f"{_delta(decision)}, p = {decision.p_value:.2g}, {decision.n[0]} pairs")
    lines.append(_verdict_line(comparison))
    return lines


def _delta(decision: Decision) -> str:
    low, high = decision.ci_pct
    return (
        f"Δ {decision.delta_pct:+.1f}% (95% CI {low:+.1f}% to {high:+.1f}%), single runs vary "
        f"by ±{decision.noise_pct:.1f}%"
    )


def _verdict_line(comparison: Comparison) -> str:
    decision = comparison.decision
    effect = decision.min_effect_pct
    if decision.verdict == "different":
        way = "higher" if decision.delta_pct > 0 else "lower"
        direction = comparison.metric.direction
        judged = f" ({'better' if way == direction else 'worse'})" if direction else ""
        return f"different: B is {abs(decision.delta_pct):.1f}% {way} than A{judged}"
    if decision.verdict == "same":
        return f"same: any change is within ±{effect:g}% (--min-effect)"
    where = (
        f" at the cap ({decision.n[0]} runs per side, --max-repeats)" if comparison.capped else ""
    )
    line = f"unknown{where}: neither a change of {effect:g}% or more nor its absence is shown"
    if decision.unstable:
        line += (
            f"; unstable: single runs vary by ±{decision.noise_pct:.1f}%, more than the change "
            "that counts (quiet the machine, or lengthen each run)"
        )
    return line


def compare_json(comparison: Comparison) -> str:
    from statistics import median

    decision = comparison.decision
    return json_report(
        "patchguard.compare/1",
        verdict=decision.verdict,
        delta_pct=decision.delta_pct,
        ci_pct=list(decision.ci_pct),
        p_value=decision.p_value,
        n=decision.n[0],
        noise_pct=decision.noise_pct,
        unstable=decision.unstable,
        capped=comparison.capped,
        min_effect_pct=decision.min_effect_pct,
        metric=comparison.metric.spec,
        direction=comparison.metric.direction,
        runs=comparison.runs,
        **{
            name: {
                "commit": runs.commit,
                "median": median(runs.values),
                "samples": _samples_json(runs),
            }
            for name, runs in (("a", comparison.a), ("b", comparison.b))
        },
    )


def _samples_json(runs: Runs) -> list[dict[str, Any]]:
    return [{"value": s.value, "stamp": s.stamp} for s in runs.samples]


def hunt_lines(hunt: Hunt) -> list[str]:
    """`bisect run --metric`: GOOD against BAD, each step, and the first changed commit."""
    lines = ["GOOD (A) against BAD (B):", *compare_lines(hunt.endpoints)]
    if hunt.steps:
        lines.append("steps:")
    for step in hunt.steps:
        against = f" {_delta(step.vs_good)}" if step.vs_good else ""
        lines.append(
            f"  {step.runs.commit[:10]} {step.verdict:<4} {len(step.runs.samples)} runs{against}"
        )
        if step.reason:
            lines.append(f"    skipped: {step.reason}")
    if hunt.verdict == "found":
        first = hunt.first_changed or ""
        lines.append(f"first changed: {first[:10]} {hunt.subject}".rstrip())
        if hunt.change is not None:
            parent = f" {hunt.parent[:10]}" if hunt.parent else ""
            lines.append(f"  against its parent{parent}: {_delta(hunt.change)}")
        if hunt.probability is not None:
            lines.append(f"  the first changed one with probability {hunt.probability:.3f}")
    elif hunt.verdict == "ambiguous":
        lines.append(
            "no single commit: the first change is among the skipped commits (git bisect log "
            "lists them); patchguard resolve where the patches did not hold, then go on"
        )
    elif hunt.verdict == "unsettled":
        lines.append(
            "no commit settled: GOOD and BAD differ, but runs between them did not show where "
            "(quiet the machine, or raise --max-repeats); nothing was marked"
        )
    else:
        lines.append(
            f"nothing to hunt: GOOD and BAD are {'the same' if hunt.verdict == 'no-change' else 'not shown to differ'}"
            " (see above); nothing was marked"
        )
    lines.append(f"{hunt.runs} benchmark runs (warm-ups and failed runs included)")
    lines.append("the bisect is still on; to leave it: patchguard git bisect reset")
    return lines


def hunt_json(hunt: Hunt) -> str:
    change = hunt.change
    endpoints = hunt.endpoints
    steps: list[dict[str, Any]] = [
        {"commit": endpoints.a.commit, "verdict": "good", "samples": _samples_json(endpoints.a)},
        {"commit": endpoints.b.commit, "verdict": "bad", "samples": _samples_json(endpoints.b)},
    ]
    steps += [
        {
            "commit": step.runs.commit,
            "verdict": step.verdict,
            "samples": _samples_json(step.runs),
            "delta_pct": step.vs_good.delta_pct if step.vs_good else None,
            "reason": step.reason,
        }
        for step in hunt.steps
    ]
    return json_report(
        "patchguard.bisect/1",
        verdict=hunt.verdict,
        first_changed=hunt.first_changed,
        delta_pct=change.delta_pct if change else None,
        ci_pct=list(change.ci_pct) if change else None,
        endpoints=endpoints.decision.verdict,
        metric=hunt.endpoints.metric.spec,
        direction=hunt.endpoints.metric.direction,
        runs=hunt.runs,
        steps=steps,
    )


def _ended(result: StepResult) -> str:
    """How a step's command ended when git cannot read it as good, bad or skip."""
    names = {member.value: member.name for member in signal.Signals}
    if result.signal == signal.SIGINT:
        return "the command was interrupted (SIGINT: Ctrl-C)"
    if result.signal is not None:
        return (
            f"the command died from {names.get(result.signal, 'a signal')} (signal {result.signal})"
        )
    from guard.ops.moves import INTERRUPTED

    if result.status == INTERRUPTED:
        return "the command exited 130, as a program that was interrupted (Ctrl-C) does"
    by_shell = names.get(result.status - 128)
    if by_shell is not None:
        return (
            f"the command exited {result.status}, as a shell reports a program that died from "
            f"{by_shell}"
        )
    return f"the command exited {result.status}"
