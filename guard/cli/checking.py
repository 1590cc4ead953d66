"""The gate before code runs: check, run (only if every guard holds), and stamp (what ran)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from guard.cli import render
from guard.cli.options import PASS_THROUGH, directory_option, epilog, json_option
from guard.errors import EXIT_GUARD_FAILED, EXIT_OK, ConfigError, PatchguardError, silence_stdout
from guard.git.repo import Repo
from guard.ops import provenance

_same_as_option = click.option(
    "--same-as",
    "same_as",
    type=click.File("rb"),
    default=None,
    metavar="STAMP",
    help="Also fail unless this node runs the same code as the node that wrote STAMP "
    "(patchguard stamp): HEAD, the patches and their states, the guarded files, and every "
    "other edit (tracked files not as HEAD has them, untracked .py files in guarded "
    "packages), each difference named by path.",
)


def _with_import_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option(
        "--runtime-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help="How long --runtime may take to import the guarded modules (default: 600).",
    )(func)
    func = click.option(
        "--runtime",
        is_flag=True,
        help="Ask Python: import each guarded module in a fresh process of the interpreter "
        "(see --python), with COMMAND's environment (env VAR=1, env -u VAR, env -i), confirm "
        "it is this checkout's file, and look each symbol up. Python decides every symbol, "
        "including those reading cannot tell. Writes nothing.",
    )(func)
    func = click.option(
        "--python",
        default=None,
        metavar="PATH",
        help="The interpreter for --import, --runtime and the conditions reading decides "
        "(sys.version_info, sys.platform...) (default: for run, the one COMMAND runs: itself, "
        "its script's #! line, or python3 on PATH; for check, python3 on PATH for --import and "
        "--runtime, patchguard's own for reading).",
    )(func)
    return click.option(
        "--import",
        "import_names",
        multiple=True,
        metavar="MODULE",
        help="Also verify that the interpreter imports MODULE from this checkout (repeatable).",
    )(func)


@click.command(
    epilog=epilog(
        "patchguard check",
        "patchguard check -C ~/sglang --quiet || exit 1",
        "patchguard check --import sglang --python ~/venvs/serve/bin/python",
        "patchguard check --json",
        "patchguard check --runtime --python ~/venvs/serve/bin/python",
        "patchguard stamp > ~/node0.stamp && patchguard check --same-as ~/node0.stamp",
    )
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing when everything holds.")
@click.option(
    "--strict",
    is_flag=True,
    hidden=True,
    help="Accepted for old scripts: a symbol reading cannot decide always fails now.",
)
@json_option
@_with_import_options
@_same_as_option
@directory_option
def check(cwd: Path, quiet: bool, strict: bool, as_json: bool, same_as: Any, **asked: Any) -> int:
    """Verify patches and required symbols (read-only).

    Each file is parsed, and each symbol gets one of three answers: present (importing the
    module surely binds it at its qualified place, by the last binding of its name), absent
    (it surely does not: a later `name = None`, `del`, `delattr`, a second `class`, code under
    `if TYPE_CHECKING:` or a test Python decides false), or cannot tell (a runtime condition
    such as `if _is_npu:`, a try body that may fail first, a decorator or metaclass reading
    cannot follow). Only present is green. Prints one line per problem with the command that
    fixes it.
    """
    del strict
    from guard.cli import preflight  # not for stamp, which this module also holds

    repo, report, differs = preflight.gate(cwd, same_as, **asked)
    if differs:
        print(render.banner(f"code differs from {same_as.name}", differs), file=sys.stderr)
        return EXIT_GUARD_FAILED
    try:
        if as_json:
            print(render.check_json(report, str(repo.workdir)))
        elif not report.ok:
            advice = preflight.with_hook_advice(repo, report)
            print(render.banner("guard FAILED", advice), file=sys.stderr)
        elif not quiet:
            print("\n".join([*render.check_lines(report), "patchguard: all guards hold"]))
        if not as_json:
            for line in render.warning_lines(report):
                print(line, file=sys.stderr)
    except BrokenPipeError:  # the reader left early: the verdict stands, a failed guard stays 1
        silence_stdout()
    return EXIT_OK if report.ok else EXIT_GUARD_FAILED


@click.command(
    context_settings=PASS_THROUGH,
    epilog=epilog(
        "patchguard run -- python ~/bench.py --model-path /models/kimi-k2.5",
        "patchguard run --apply --import sglang python ~/bench.py --apply x",
        "patchguard run --import sglang -- ~/venvs/serve/bin/python ~/bench.py",
        "patchguard run --same-as ~/node0.stamp -- python ~/bench.py",
        "patchguard run --stamp results.jsonl -- python ~/bench.py",
    ),
)
@click.option("--apply", "apply_first", is_flag=True, help="Re-apply patches before checking.")
@click.option(
    "--stamp",
    "stamp_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="After COMMAND, append to FILE the stamp of the code it ran (patchguard stamp), with "
    "what its processes attested (key attestations).",
)
@_with_import_options
@_same_as_option
@directory_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    cwd: Path,
    apply_first: bool,
    stamp_file: Path | None,
    same_as: Any,
    command: tuple[str, ...],
    **asked: Any,
) -> int:
    """Run COMMAND only if every guard holds.

    Otherwise exit 1 without running it, and say why.

    COMMAND runs under the import guard: every Python process it starts checks that each
    guarded module it imports is this checkout's recorded code, and fails that import at once
    otherwise; patchguard then exits 1 and names it. Otherwise COMMAND's exit status, stdin,
    stdout and signals (SIGINT, SIGTERM, SIGHUP) pass through, and a run in which no process
    imported the guarded code is said on stderr. patchguard's options end at COMMAND's first word: everything after
    it is COMMAND's (`--` before COMMAND works too). --import, --runtime and the conditions
    reading decides (sys.version_info, sys.platform) are for the interpreter COMMAND runs (see
    --python) and, for --runtime, with COMMAND's environment (`env VAR=1 python ...`);
    --runtime probes before COMMAND starts.
    """
    from guard.cli import preflight

    if command[:1] == ("--",):
        command = command[1:]
    repo, report, differs = preflight.gate(
        cwd, same_as, command=command, apply=apply_first, **asked
    )
    if not report.ok or differs:
        problems = [
            *(preflight.with_hook_advice(repo, report) if not report.ok else []),
            *(f"code differs from {same_as.name}: {line}" for line in differs),
            f"not started: {' '.join(command)}",
        ]
        click.echo(render.banner("guard FAILED, command NOT run", problems), err=True)
        return EXIT_GUARD_FAILED
    for line in render.warning_lines(report):
        click.echo(line, err=True)
    from guard.ops import attest

    before = None if stamp_file is None else provenance.stamp(repo)  # the code about to run
    status, _, verdict = attest.run_attested(repo, report, command)
    if stamp_file is not None and before is not None:
        line = json.dumps({**before, "attestations": verdict.as_json()}, separators=(",", ":"))
        try:
            with open(stamp_file, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as error:
            raise ConfigError(
                f"cannot append the stamp to {stamp_file}: {error.strerror}; the command ran "
                f"(status {status}); pass a --stamp FILE in a directory that exists"
            ) from None
    if verdict.wrong:
        lines = [*verdict.problems, f"exit status of {command[0]}: {status}"]
        print(render.banner("guard FAILED: the command ran other code", lines), file=sys.stderr)
        return EXIT_GUARD_FAILED
    for problem in verdict.problems:
        print(f"patchguard: not attested: {problem}", file=sys.stderr)
    return status


@click.command(
    epilog=epilog(
        "patchguard stamp >> results.jsonl",
        "patchguard stamp | patchguard stamp --diff results.jsonl -",
        "patchguard stamp --diff results.jsonl results.jsonl",
    )
)
@json_option
@click.option(
    "--diff",
    "diff_files",
    nargs=2,
    type=click.File("rb"),
    default=None,
    metavar="A B",
    help="Say in words what changed between two stamps (files, or - for stdin).",
)
@click.option(
    "--python",
    metavar="PATH",
    help="The interpreter that runs the code, whose version and installed torch, triton, "
    "flashinfer, sgl-kernel, transformers, vllm and sglang the stamp names (default: python3 "
    "on PATH).",
)
@directory_option
def stamp(cwd: Path, as_json: bool, diff_files: tuple[Any, Any] | None, python: str | None) -> None:
    """Print a JSON line describing the code about to run.

    Append it to a results JSONL.

    The line is JSON with or without --json. Keys are documented in docs/benchmarks.md.
    With --diff, the last stamp of each file is compared.
    """
    if diff_files is None:
        click.echo(json.dumps(provenance.stamp_at(cwd, python), separators=(",", ":")))
        return
    old, new = (provenance.load_stamp(f.name, f.read()) for f in diff_files)
    try:
        repo: Repo | None = Repo.discover(cwd)
    except PatchguardError:
        repo = None
    lines = provenance.diff_stamps(repo, old, new)
    click.echo(json.dumps({"changes": lines}) if as_json else "\n".join(lines))
