"""compare and bisect: a change hunted across commits with the patches carried. guard.hunt.hunt,
and with it scipy, loads only when a command measures; matplotlib only when --plot draws."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import sys
from collections.abc import Callable
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click
from click.core import ParameterSource

from guard.cli import render
from guard.cli.options import (
    PASS_THROUGH,
    directory_option,
    epilog,
    git_lifted,
    json_option,
    report_lift,
)
from guard.errors import EXIT_GUARD_FAILED, EXIT_OK, ConfigError, one_line
from guard.git.gitpaths import crash_dir
from guard.git.repo import Repo

if TYPE_CHECKING:
    from guard.hunt.hunt import Comparison, Hunt


class _CommandLast(click.Command):
    """A command that ends with the user's COMMAND, marked off by `--` before click parses.

    A trailing `--metric M` read as COMMAND's makes `bisect run` a pass/fail bisect that
    measures nothing; read as ours, it changes what COMMAND gets. So a long option of ours
    after COMMAND's first word is refused, with the line in the right order. Short options
    are COMMAND's: `-C` means something to make, git and tar.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self._options_first(ctx, args))

    def _options_first(self, ctx: click.Context, args: list[str]) -> list[str]:
        params = self.get_params(ctx)
        takes_value = {}
        for param in params:
            if isinstance(param, click.Option):
                for name in (*param.opts, *param.secondary_opts):
                    takes_value[name] = not (param.is_flag or param.count)
        leading = sum(isinstance(p, click.Argument) for p in params) - 1  # A and B of compare
        start = 0
        while start < len(args):
            word = args[start]
            if word == "--":
                return args  # COMMAND's, whatever it holds
            if word.startswith("-") and len(word) > 1:
                name, equals, _ = word.partition("=")
                start += 2 if takes_value.get(name) and not equals else 1
            elif leading:
                leading, start = leading - 1, start + 1
            else:
                break
        before, rest = args[:start], args[start:]
        if not rest:
            return args  # no COMMAND: click says it is missing
        ours: list[str] = []  # our options after COMMAND's first word, with their values
        kept = [rest[0]]  # COMMAND without them
        words = iter(rest[1:])
        for word in words:
            name, equals, _ = word.partition("=")
            if word == "--":
                kept += [word, *words]
                break
            if name.startswith("--") and name in takes_value and name != "--help":
                ours += [word, *islice(words, int(takes_value[name] and not equals))]  # its value
            else:
                kept.append(word)
        if ours:
            right = shlex.join([*before, *ours, "--", *kept])
            named = ", ".join(
                dict.fromkeys(w.partition("=")[0] for w in ours if w.startswith("--"))
            )
            raise click.UsageError(
                f"{named} after COMMAND: patchguard's options go before it (everything from "
                f"COMMAND's first word on is COMMAND's). Run: {ctx.command_path} {right}  (or, "
                f"when COMMAND takes them itself: {ctx.command_path} "
                f"{shlex.join([*before, '--', *rest])})"
            )
        return [*before, "--", *rest]


def _measure_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--timeout",
            type=click.FloatRange(min=0, min_open=True),
            metavar="S",
            help="End a run of COMMAND (its whole process group) after S seconds; it is not "
            "counted.",
        ),
        click.option(
            "--runs-per-start",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            metavar="K",
            help="With --server: runs of COMMAND against one start of the server.",
        ),
        click.option(
            "--ready-timeout",
            type=click.FloatRange(min=0, min_open=True),
            default=600,
            show_default=True,
            metavar="S",
            help="With --server: seconds it may take to get ready; past that the run is not "
            "counted.",
        ),
        click.option(
            "--ready-line",
            metavar="REGEX",
            help="With --server: ready when a line of its output matches REGEX (no port is "
            "watched).",
        ),
        click.option(
            "--ready",
            "ready_url",
            metavar="URL",
            help="With --server: ready when URL answers 2xx (e.g. http://127.0.0.1:30000/health); "
            "its port must be free before each start.",
        ),
        click.option(
            "--server",
            metavar="CMD",
            help="Start CMD (a shell line, at the top of the checkout) at each commit before "
            "COMMAND runs, and stop its whole process group before moving on; needs --ready or "
            "--ready-line. Its output goes to .git/patchguard-server.log.",
        ),
        click.option(
            "--metric-file",
            type=click.Path(dir_okay=False, path_type=Path),
            metavar="FILE",
            help="Read the metric from what each run appends to FILE (sglang's --output-file "
            "JSONL), not from its output; relative to the top of the checkout, where COMMAND "
            "runs.",
        ),
        click.option(
            "--higher-is-better/--lower-is-better",
            "higher_is_better",
            default=None,
            help="Which way is better, for a metric whose name does not say (sglang's do: "
            "throughput up, latency down).",
        ),
        click.option(
            "--warmups",
            type=click.IntRange(min=0),
            metavar="N",
            help="Uncounted runs at each commit before the counted ones (default: 1 at "
            "compare's two commits and a bisect's GOOD and BAD; none at the commits a bisect "
            "probes unless given).",
        ),
        click.option(
            "--max-repeats",
            type=click.IntRange(min=2),
            metavar="K",
            help="The cap: while the answer is unknown the runs are doubled up to K per side "
            "(default: 24).",
        ),
        click.option(
            "--repeats",
            type=click.IntRange(min=2),
            default=3,  # stats.MIN_PAIRS: the t-test can decide at 3 pairs
            metavar="N",
            help="Counted runs per side to begin with (default: 3).",
        ),
        click.option(
            "--min-effect",
            type=click.FloatRange(min=0),
            default=5.0,
            metavar="PCT",
            help="The smallest change that counts, in percent (default: 5): `different` needs "
            "at least half of it, `same` means the whole interval is within it.",
        ),
    ]
    for option in options:
        func = option(func)
    return func


def _progress(line: str) -> None:
    click.echo(f"patchguard: {line}", err=True)


def _hunt_options(command: tuple[str, ...], metric: str, measuring: dict[str, Any]) -> Any:
    """hunt.Options from `measuring`, the values of _measure_options (scipy loads only here)."""
    from guard.hunt import hunt, stats
    from guard.hunt.metrics import HIGHER, LOWER, parse_metric

    if command[:1] == ("--",):
        command = command[1:]
    repeats = measuring["repeats"]
    cap = measuring["max_repeats"] or max(hunt.DEFAULT_MAX_REPEATS, repeats)
    if cap < repeats:
        raise click.UsageError(f"--max-repeats {cap} is below --repeats {repeats}")
    if cap < stats.MIN_PAIRS:
        raise click.UsageError(
            f"with at most {cap} runs per side no change can be shown (too few to check the "
            f"test); raise --max-repeats to {stats.MIN_PAIRS} or more"
        )
    higher = measuring["higher_is_better"]
    direction = None if higher is None else HIGHER if higher else LOWER
    warmups = measuring["warmups"]
    server = _server(measuring)
    return hunt.Options(
        command=command,
        metric=parse_metric(metric, direction),
        min_effect_pct=measuring["min_effect"],
        repeats=repeats,
        max_repeats=cap,
        warmups=1 if warmups is None else warmups,
        metric_file=measuring["metric_file"],
        server=server,
        timeout=measuring["timeout"],
        probe_warmups=warmups or 0,
    )


def _given(*names: str) -> bool:
    """Was any of these options typed (or set in the environment)? Given, not valued: several
    have a default, so a value says nothing of what the user asked."""
    context = click.get_current_context()
    return any(context.get_parameter_source(name) != ParameterSource.DEFAULT for name in names)


def _server(measuring: dict[str, Any]) -> Any:
    """The --server options as a hunt.server.ServerSpec (None without --server)."""
    from guard.hunt.server import ServerSpec

    ready_url, ready_line = measuring["ready_url"], measuring["ready_line"]
    if measuring["server"] is None:
        if _given("ready_url", "ready_line", "ready_timeout", "runs_per_start"):
            raise click.UsageError(
                "--ready, --ready-line, --ready-timeout and --runs-per-start go with --server"
            )
        return None
    if (ready_url is None) == (ready_line is None):
        raise click.UsageError(
            "--server needs one way to know it is ready: --ready URL (answers 2xx, e.g. "
            "http://127.0.0.1:30000/health) or --ready-line REGEX"
        )
    spec = ServerSpec(
        measuring["server"],
        ready_url,
        ready_line,
        measuring["ready_timeout"],
        measuring["runs_per_start"],
    )
    try:  # here, not mid-hunt
        re.compile(ready_line or "")
        spec.address  # noqa: B018 (a port that is not a number raises)
    except re.error as error:
        raise click.UsageError(f"--ready-line {ready_line!r}: {error}") from None
    except ValueError as error:
        raise click.UsageError(f"--ready {ready_url!r}: {error}") from None
    if ready_url is not None and urlsplit(ready_url).scheme not in ("http", "https"):
        raise click.UsageError(f"--ready {ready_url!r}: give an http:// or https:// URL")
    return spec


def _plot_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--plot",
        "plot_file",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="FILE",
        help=f"Draw {what} into FILE (.png or .svg; needs git-patchguard[plot]).",
    )


def _plotting(cwd: Path, plot_file: Path | None) -> Path | None:
    """Before anything is measured: a plot that cannot be drawn is refused now, not at the end."""
    if plot_file is None:
        return None
    path = cwd / plot_file
    if path.suffix.lower() not in (".png", ".svg"):
        raise ConfigError(f"--plot {path}: name a .png or .svg file")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConfigError(
            "--plot needs matplotlib, which is not installed: pip install 'git-patchguard[plot]'"
        ) from None
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK):
        raise ConfigError(
            f"--plot {path}: {path.parent} is not a directory patchguard can write to; name "
            "a file in one that is"
        )
    return path


def _plot(comparison: Comparison, path: Path) -> None:
    """Each side's runs as points over a box: the distribution the verdict was drawn from."""
    figure, axes = _figure(5.0)
    sides = (comparison.a, comparison.b)
    axes.boxplot([side.values for side in sides], widths=0.4)
    for position, side in enumerate(sides, start=1):
        axes.plot([position] * len(side.values), side.values, "o", alpha=0.5)
    axes.set_xticks([1, 2], [f"A {comparison.a.commit[:10]}", f"B {comparison.b.commit[:10]}"])
    axes.set_ylabel(comparison.metric.key)
    decision = comparison.decision
    axes.set_title(f"{decision.verdict}: {decision.delta_pct:+.1f}%")
    _save(figure, path)


def _plot_bisect(found: Hunt, path: Path) -> None:
    """Every run at its commit: where the hunt spent its runs, how clearly the number moved."""
    good, bad = found.endpoints.a, found.endpoints.b
    order = [good.commit, *found.line] if found.line else [good.commit, bad.commit]
    runs = {good.commit: good.values, bad.commit: bad.values}
    runs.update({step.runs.commit: step.runs.values for step in found.steps})
    figure, axes = _figure(max(5.0, 0.45 * len(order) + 2))
    for position, commit in enumerate(order):
        values = runs.get(commit, [])
        colour = "tab:red" if commit == found.first_changed else "tab:blue"
        axes.plot([position] * len(values), values, "o", alpha=0.6, color=colour)
    if found.first_changed in order:
        axes.axvline(order.index(found.first_changed) - 0.5, color="tab:red", linestyle="--")
    labels = [commit[:7] for commit in order]
    labels[0], labels[-1] = f"GOOD {labels[0]}", f"BAD {labels[-1]}"
    axes.set_xticks(range(len(order)), labels, rotation=60, ha="right", fontsize=7)
    axes.set_ylabel(found.endpoints.metric.key)
    measured = sum(len(values) for values in runs.values())
    title = f"{found.verdict}: {found.first_changed[:10]}" if found.first_changed else found.verdict
    axes.set_title(f"{title} ({measured} runs counted, {found.runs} in all)")
    _save(figure, path)


def _figure(width: float) -> tuple[Any, Any]:
    """A figure drawn off screen (no display needed) and its axes."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot.subplots(figsize=(width, 4))


def _save(figure: Any, path: Path) -> None:
    """A disk that filled since the verdict was printed costs the picture, with one line."""
    from matplotlib import pyplot

    figure.tight_layout()
    try:
        figure.savefig(path)
    except OSError as error:
        raise ConfigError(f"--plot {path}: cannot write it ({error.strerror})") from None
    finally:
        pyplot.close(figure)


@click.command(
    cls=_CommandLast,
    epilog=epilog(
        "patchguard compare v0.5.9 v0.5.10 -- python ~/throughput.py",
        "patchguard compare c1 c2 --metric 'Median TTFT (ms)' --json -- python ~/throughput.py",
    ),
)
@click.argument("a")
@click.argument("b")
@click.option(
    "--metric",
    default="Output token throughput (tok/s)",
    show_default=True,
    metavar="M",
    help="A line's label as printed (with or without its colon and its unit), json:KEY or "
    "re:PATTERN.",
)
@_measure_options
@json_option
@_plot_option("each side's runs")
@directory_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def compare(
    cwd: Path,
    a: str,
    b: str,
    metric: str,
    as_json: bool,
    plot_file: Path | None,
    command: tuple[str, ...],
    **measuring: Any,
) -> None:
    """Run COMMAND at commits A and B with the patches carried, and say whether it changed.

    A warm-up run at each side, then A and B in order-balanced pairs; the metric of each run
    is read from its output. The answer is `different` (significant, and nearer --min-effect
    than no change), `same` (the whole 95% interval within --min-effect) or `unknown`; while
    unknown the runs are doubled, up to --max-repeats. Every sample is stamped with the code
    it ran on, and only runs with the patches in place count. Afterwards (and after Ctrl-C,
    exit 130) your branch, tree and patches are as they were. Put COMMAND after `--`.
    """
    from guard.hunt import hunt

    options = _hunt_options(command, metric, measuring)
    plot_file = _plotting(cwd, plot_file)
    comparison = hunt.compare(Repo.discover(cwd), a, b, options, _progress)
    click.echo(
        render.compare_json(comparison) if as_json else "\n".join(render.compare_lines(comparison))
    )
    if plot_file is not None:  # after the verdict: a failed write costs only the picture
        _plot(comparison, plot_file)


@click.group(epilog=epilog("patchguard bisect run --log hunt.jsonl python ~/bench.py"))
def bisect() -> None:
    """Bisect a regression with the patches in place at every commit."""


@bisect.command(
    name="run",
    cls=_CommandLast,
    context_settings=PASS_THROUGH,
    epilog=epilog(
        "patchguard git bisect start v0.5.10 v0.5.9",
        "patchguard bisect run --log hunt.jsonl python ~/bench.py --quick",
        "patchguard git bisect reset",
        exit_codes="Exit codes: 0 when git bisect run found the commit; 1 when no bisect is in "
        "progress or a guard fails afterwards (with --metric: when no commit is named); 2 usage "
        "or configuration error; 4 when the bisect stopped at a commit with nothing marked (the "
        "command died from a signal or exited above 127, or patchguard's part of the step "
        "failed: run it again to go on); 130 interrupted; otherwise git bisect run's own.",
    ),
)
@click.option(
    "--log",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append one JSON line per step: the stamp of the tree measured and COMMAND's exit.",
)
@click.option(
    "--metric",
    metavar="M",
    help="Bisect on a measured metric instead of COMMAND's status (a label as printed, "
    "json:KEY or re:PATTERN): GOOD and BAD are measured (see compare), then the commits "
    "between them are probed until one is the first changed with 99% probability.",
)
@_measure_options
@json_option
@_plot_option("every run at its commit, the commit found marked (with --metric)")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def bisect_run(
    ctx: click.Context,
    /,
    log: Path | None,
    command: tuple[str, ...],
    metric: str | None,
    as_json: bool,
    plot_file: Path | None,
    **measuring: Any,
) -> int:
    """Drive `git bisect run COMMAND` with the patches applied at each commit.

    At each commit the patches are applied and checked; where they cannot be applied or
    a guard fails, the commit is skipped (exit 125) and the reason printed. Otherwise
    COMMAND runs with the patches in place, and they are lifted again before git moves
    on. COMMAND's status means what it means to git bisect: 0 good, 1-127 bad, 125 skip;
    a command that was interrupted, died from a signal or exited above 127 stops the bisect
    there with nothing marked, and says so. A failure of patchguard itself aborts the bisect
    rather than mark a commit bad.
    Options go before COMMAND: everything from its first word on is COMMAND's, and one of
    these options written after it is refused (exit 2) with the line in the right order.

    With --metric M, COMMAND is a benchmark and its status does not decide: GOOD and BAD are
    measured as `patchguard compare` measures them, then the commits of the first-parent
    line between them are probed where the chance of being the first changed one splits in
    half: one run per probe while the runs are clearly like GOOD or like BAD, more where
    they are not; a commit where the patches do not hold is skipped. It ends when one commit
    holds 99% of that chance, with its change against its parent, and marks both in git
    bisect (exit 0; 1 when no commit is named). Put COMMAND after `--`.
    """
    cwd: Path = ctx.obj
    if metric is not None:
        if log is not None:
            raise click.UsageError(
                "--log goes with a pass/fail COMMAND; with --metric, --json holds every sample "
                "and the stamp of the code it ran on"
            )
        from guard.hunt import hunt

        plot_file = _plotting(cwd, plot_file)
        options = _hunt_options(command, metric, measuring)
        found = hunt.bisect(Repo.discover(cwd), options, _progress)
        click.echo(render.hunt_json(found) if as_json else "\n".join(render.hunt_lines(found)))
        if plot_file is not None:  # after the verdict: a failed write costs only the picture
            _plot_bisect(found, plot_file)
        return EXIT_OK if found.verdict == hunt.FOUND else EXIT_GUARD_FAILED
    if _given(*measuring, "plot_file", "as_json"):
        raise click.UsageError("--json, --plot and the measuring options go with --metric M")
    from guard.ops import moves

    status, lift = moves.bisect_run(Repo.discover(cwd), command, log)
    if status == EXIT_OK:  # git ends "bisect found first bad commit" without a newline
        sys.stdout.write("\n")
        sys.stdout.flush()
    return report_lift(lift, "bisect run", status)


def _bisect_shorthand(word: str) -> None:

    @bisect.command(
        name=word,
        context_settings=PASS_THROUGH,
        short_help=f"patchguard git bisect {word}, the patches carried.",
        help=f"Same as `patchguard git bisect {word} ...`: git moves with the patches lifted, "
        "then puts them back and checks.",
    )
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    @click.pass_context
    def shorthand(ctx: click.Context, args: tuple[str, ...]) -> int:
        return git_lifted(ctx.obj, ("bisect", word, *args))


for _word in ("start", "good", "bad", "skip", "reset", "log"):
    _bisect_shorthand(_word)


@bisect.command(name="step", hidden=True, context_settings=PASS_THROUGH)
@click.option("--log", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--decided", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def bisect_step(log: Path | None, decided: Path | None, command: tuple[str, ...]) -> int:
    """One step of `patchguard bisect run` (run by git bisect, not by hand).

    `--decided FILE` receives the status before the step exits: moves.STEP_WRAPPER passes on
    only that one, so a step that dies on the way cannot mark a commit.
    """
    from guard.ops import moves

    if command[:1] == ("--",):
        command = command[1:]
    try:
        result = moves.bisect_step(Repo.discover(Path.cwd()), command, log)
    except Exception as error:  # no repository to step in: abort, never a mark for git
        result = moves.StepResult(
            moves.BISECT_ABORT, "", None, [one_line(error, lambda: crash_dir([]))]
        )
    for line in render.step_lines(result):
        click.echo(f"patchguard: {line}", err=True)
    if decided is not None:
        with contextlib.suppress(OSError):  # not written: the wrapper aborts the bisect
            decided.write_text(str(result.status))
    return result.status
