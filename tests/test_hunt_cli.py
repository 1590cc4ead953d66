"""What a hunt asks of the command line and leaves behind: options before COMMAND,
numbers read as printed (sglang's and vLLM's), `undo` after a hunt, the end of a bisect, and a
stash that holds a recorded patch.

The history is tests/test_hunt.py's (scripts/sample_repo.py, build_slowdown): fourteen
commits, the throughput a third lower from s09 on, the user on branch `work` at s00 with the
EAGLE-3 methods recorded and the hooks installed. Everything runs through the installed CLI on
the real git; the benchmarks are small scripts that print what the real ones print.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
import sample_repo
from helpers import Checkout, hunt_checkout, runs_made

BENCH = (sys.executable, sample_repo.THROUGHPUT_BENCH)
METRIC = "Output token throughput (tok/s)"
FEW = ("--repeats", "3", "--max-repeats", "8")  # the fewest runs that can still decide


# --- no option after the command ----------------------------------------------------------------


@pytest.fixture
def hunt(
    tmp_path: Path, clean_env: dict[str, str], slowdown: tuple[Path, dict[str, str]]
) -> Checkout:
    return hunt_checkout(tmp_path, clean_env, slowdown)


def test_a_metric_after_the_command_is_refused_not_a_pass_fail_bisect(hunt: Checkout) -> None:
    """`bisect run python3 bench.py --metric M` once became a pass/fail bisect that marked
    commits it never measured; now it is a usage error that shows the line in the right order,
    and pasting that line runs the metric bisect."""
    hunt.pg("bisect", "start", "s12", "s06", check=0)
    marks = hunt.git("bisect", "log").stdout
    result = hunt.pg("bisect", "run", *BENCH, "--metric", METRIC, check=2)
    right = f"patchguard bisect run --metric {shlex.quote(METRIC)} -- {shlex.join(BENCH)}"
    assert right in result.stderr
    assert runs_made(hunt) == 0
    assert hunt.git("bisect", "log").stdout == marks  # nothing marked
    pasted = hunt.pg(*shlex.split(right)[1:], *FEW, check=0)
    assert runs_made(hunt) > 0
    # the end of a bisect: the commit's short id and subject, its change, how to leave
    end = pasted.stdout.splitlines()
    slow = f"first changed: {hunt.commits['s09'][:10]} s09: distributed: new all-reduce (slow)"
    assert slow in end
    against = end[end.index(slow) + 1]
    parent = hunt.commits["s08"][:10]
    assert against.startswith(f"  against its parent {parent}: Δ -3") and "(95% CI -" in against
    probability = end[end.index(slow) + 2].removeprefix("  the first changed one with probability ")
    assert float(probability) >= 0.99
    hint = end[-1].split(": ", 1)[1]
    assert hint == "patchguard git bisect reset"
    hunt.pg(*shlex.split(hint)[1:], check=0)  # pasted: the bisect is over, the user back
    assert not (hunt.root / ".git" / "BISECT_START").exists()
    assert hunt.git("symbolic-ref", "--short", "HEAD").stdout.strip() == "work"
    hunt.pg("check", check=0)


def test_compare_refuses_its_options_after_the_command_and_keeps_the_commands_own(
    hunt: Checkout, tmp_path: Path
) -> None:
    """compare took `--metric M` after the command as its own; now it is refused with the line
    in the right order. A word of the command that is not ours (`--quick`) stays the command's,
    and after an explicit `--` even `--metric` is the command's."""
    result = hunt.pg("compare", "s02", "s03", *BENCH, "--metric", METRIC, "--repeats=3", check=2)
    right = (
        f"patchguard compare s02 s03 --metric {shlex.quote(METRIC)} --repeats=3 -- "
        f"{shlex.join(BENCH)}"
    )
    assert right in result.stderr
    assert runs_made(hunt) == 0
    # a benchmark that prints its row only when it got both of its own flags
    bench = tmp_path / "picky.py"
    bench.write_text(
        sample_repo.IMPORT_THE_MODEL + "if sys.argv[1:] != ['--quick', '--metric', 'x']:\n"
        "    sys.exit(f'picky.py: unexpected arguments {sys.argv[1:]}')\n"
        f"print('{METRIC}:', 90.0 + len(open(__file__).read()) % 3)\n"
    )
    own = hunt.pg(
        "compare", "s02", "s03", *FEW, "--", sys.executable, str(bench), "--quick", "--metric", "x"
    )
    assert own.returncode == 0, own.stderr
    quick = hunt.pg("compare", "s02", "s03", *FEW, sys.executable, str(bench), "--quick", check=1)
    assert "unexpected arguments ['--quick']" in quick.stderr  # --quick reached the command


# --- after a hunt -------------------------------------------------------------------------------


def test_undo_after_a_compare_takes_back_the_users_change_not_the_hunts(hunt: Checkout) -> None:
    """A compare applies and lifts the patch at every commit it measures (dozens of writes);
    none of them is the user's. `undo --list` is as it was before, and `undo` takes back the
    user's own last change. A pass/fail bisect's steps, each a process of its own, alike."""
    hunt.pg("bisect", "start", "s12", "s06", check=0)
    before = hunt.pg("undo", "--list", check=0).stdout
    fast = f"! grep -q 'SLOW_ALLREDUCE = True' {sample_repo.REGRESSION_FILE}"
    found = hunt.pg("bisect", "run", "sh", "-c", fast, check=0)
    assert f"{hunt.commits['s09']} is the first bad commit" in found.stdout
    assert hunt.pg("undo", "--list", check=0).stdout == before
    hunt.pg("bisect", "reset", check=0)
    hunt.pg("unapply", "eagle3", check=0)
    hunt.pg("apply", "eagle3", check=0)
    listed = hunt.pg("undo", "--list", check=0).stdout
    assert listed.startswith("0. the apply of eagle3")
    many = ("--repeats", "6", "--max-repeats", "12")  # 14 runs: more writes than undo keeps (10)
    hunt.pg("compare", "s02", "s12", *many, "--", *BENCH, check=0)
    assert runs_made(hunt) > 10
    assert hunt.pg("undo", "--list", check=0).stdout == listed
    said = hunt.pg("undo", check=0)
    assert said.stdout.startswith("undid the apply of eagle3")
    assert hunt.pg("undo", "--list", check=0).stdout.startswith("0. the unapply of eagle3")
    hunt.pg("check", check=1)  # the user's apply taken back: the patch is out, as it was


# --- numbers as printed -------------------------------------------------------------------------

# A stand-in for `vllm bench serve`: its result block with vLLM's own format strings
# (vllm/benchmarks/serve.py: `"{:<40} {:<10.2f}".format(label, value)`), and with
# `--save-result --result-filename F` the whole result as one JSON object, the file rewritten
# by each run (json.dump, mode "w", no newline). The throughput is a third lower where the slow
# all-reduce is (s09 on), with 2% noise seeded by the run's number (COUNTER counts the runs).
VLLM_BENCH = """import json, os, random, sys
counter = os.environ["BENCH_COUNTER"]
run = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(run + 1))
slow = "SLOW_ALLREDUCE = True" in open("REGRESSION_FILE").read()
total = 1400.0 / (1.5 if slow else 1.0) * random.Random(run).lognormvariate(0, 0.02)
result = {"request_throughput": 10.7, "output_throughput": total / 3,
    "total_token_throughput": total, "mean_e2el_ms": 900.0, "median_ttft_ms": 40.0,
    "request_rate": "inf", "max_concurrency": None}
print("Starting initial single prompt test run...")
print("{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
print("{:<40} {:<10}".format("Successful requests:", 1000))
print("{:<40} {:<10}".format("Failed requests:", 0))
print("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", total / 3))
print("{:<40} {:<10.2f}".format("Total token throughput (tok/s):", total))
print("{s:{c}^{n}}".format(s="End-to-end Latency", n=50, c="-"))
print("{:<40} {:<10.2f}".format("Mean E2EL (ms):", 900.0))
print("=" * 50)
if "--save-result" in sys.argv and "--write-nothing" not in sys.argv:
    name = sys.argv[sys.argv.index("--result-filename") + 1]
    with open(name, "w", encoding="utf-8") as outfile:
        json.dump(result, outfile)
""".replace("REGRESSION_FILE", sample_repo.REGRESSION_FILE)


def test_vllm_save_result_json_is_read_whole_each_run_and_a_run_that_wrote_nothing_is_refused(
    hunt: Checkout, tmp_path: Path
) -> None:
    """vLLM's --save-result rewrites its file with one JSON object per run: each run's own
    object is read (the key's direction known: total_token_throughput up), and the drop found.
    A later run that writes nothing is not counted: the previous run's object is never read
    again."""
    bench = tmp_path / "vllm_bench.py"
    bench.write_text(sample_repo.IMPORT_THE_MODEL + VLLM_BENCH)
    command = (sys.executable, str(bench), "--save-result", "--result-filename", "result.json")
    measure = ("--metric", "json:total_token_throughput", "--metric-file", "result.json")
    result = hunt.pg("compare", "s08", "s09", *measure, *FEW, "--json", "--", *command, check=0)
    report = json.loads(result.stdout)
    assert report["verdict"] == "different"
    assert report["direction"] == "higher"
    assert -36 < report["delta_pct"] < -30
    assert 1300 < report["a"]["median"] < 1500  # the JSON's number, not a label's row
    runs = runs_made(hunt)
    nothing = hunt.pg(
        "compare", "s08", "s09", *measure, *FEW, "--", *command, "--write-nothing", check=1
    )
    assert "run failed (nothing written to result.json)" in nothing.stderr
    assert runs_made(hunt) == runs + 1  # the first warm-up, and nothing counted


VLLM_ROWS = {  # label: value, as `vllm bench serve` prints them
    "Request throughput (req/s)": 10.74,
    "Output token throughput (tok/s)": 466.67,
    "Peak output token throughput (tok/s)": 512.0,
    "Total token throughput (tok/s)": 1400.0,
    "Mean TTFT (ms)": 41.5,
    "Median TTFT (ms)": 40.25,
    "Mean E2EL (ms)": 900.0,
    "P99 E2EL (ms)": 1250.5,
    "Acceptance length": 2.5,
    "Request goodput (req/s)": 9.5,
}
VLLM_SAVED = {"total_token_throughput": 1400.0, "mean_e2el_ms": 900.0, "median_ttft_ms": 40.25}


@pytest.mark.parametrize(
    ("spec", "value", "direction"),
    [
        ("Output token throughput (tok/s)", 466.67, "higher"),
        ("Peak output token throughput", 512.0, "higher"),
        ("Total token throughput (tok/s):", 1400.0, "higher"),
        ("Request throughput", 10.74, "higher"),
        ("Median TTFT (ms)", 40.25, "lower"),
        ("Mean E2EL (ms)", 900.0, "lower"),
        ("P99 E2EL (ms)", 1250.5, "lower"),
        ("Acceptance length", 2.5, "higher"),
        ("Request goodput (req/s)", 9.5, "higher"),
        ("json:total_token_throughput", 1400.0, "higher"),
        ("json:mean_e2el_ms", 900.0, "lower"),
        ("median_ttft_ms", 40.25, "lower"),
    ],
)
def test_vllm_rows_and_keys_are_read_with_their_direction(
    spec: str, value: float, direction: str
) -> None:
    """vLLM's labels and --save-result keys (vllm/benchmarks/serve.py), printed its way."""
    from guard.hunt.metrics import parse_metric

    block = "\n".join("{:<40} {:<10.2f}".format(f"{k}:", v) for k, v in VLLM_ROWS.items())
    metric = parse_metric(spec)
    assert metric.direction == direction
    assert metric.read(f"{block}\n{json.dumps(VLLM_SAVED)}") == pytest.approx(value)
    if spec.startswith("json:"):  # the saved file, indented or not
        assert metric.read(json.dumps(VLLM_SAVED, indent=4)) == pytest.approx(value)


# sglang's result block (sglang-bench-output.md) with the value of run N as given: argv[N+1]
# (the last one again for later runs), after a warm-up block whose row holds a good number.
PRINTED = """import os, sys
counter = os.environ["BENCH_COUNTER"]
run = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(run + 1))
print("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", 1100.0))
print("{:=^50}".format(" Serving Benchmark Result "))
print("{:<40} {:<10}".format("Output token throughput (tok/s):", sys.argv[1:][min(run, len(sys.argv) - 2)]))
"""


@pytest.mark.parametrize(
    ("printed", "said"),
    [
        (("1,234.56", "nan"), "its last value reads 'nan', not a number"),
        (("1,234.56", "1 234.56"), "can be read more than one way"),
    ],
)
def test_numbers_as_printed_grouped_read_whole_nan_and_ambiguous_refused(
    hunt: Checkout, tmp_path: Path, printed: tuple[str, str], said: str
) -> None:
    """`1,234.56` is 1234.56 (it was read as 1); a last row of nan or inf, or digits that read
    two ways, refuse the run with its line shown, never falling back to the warm-up's row
    (1,100.00) above it. Both warm-ups are the first runs: the second one stops the compare."""
    bench = tmp_path / "printed.py"
    bench.write_text(sample_repo.IMPORT_THE_MODEL + PRINTED)
    result = hunt.pg("compare", "s02", "s03", *FEW, "--", sys.executable, str(bench), *printed)
    assert result.returncode == 1, result.stderr
    assert f"(warm-up 1) at {hunt.commits['s02'][:10]} (s02: docs: release note 2): 1234.56" in (
        result.stderr
    )
    refused = next(
        line
        for line in result.stderr.splitlines()
        if "(warm-up 1) at" in line and hunt.commits["s03"][:10] in line
    )
    assert said in refused
    assert "not counted" in refused and printed[1] in refused  # the line is shown
    assert runs_made(hunt) == 2


@pytest.mark.parametrize(
    ("printed", "value"),
    [
        ("1,234,567.5", 1234567.5),
        ("1_234.5", 1234.5),
        ("1\u00a0234.5", 1234.5),  # a no-break space: never between two columns
        ("1\u202f234.5", 1234.5),
        ("94.12   ", 94.12),
        ("3.5e3", 3500.0),
        ("inf", None),
        ("1e999", None),
        ("-", None),
        ("1.234,5", None),
        ("12 345", None),
    ],
)
def test_a_printed_number_reads_one_way_or_is_refused(printed: str, value: float | None) -> None:
    from guard.hunt.metrics import Unreadable, parse_metric

    metric = parse_metric("Output token throughput (tok/s)")
    output = f"Output token throughput (tok/s): 5.0\nOutput token throughput (tok/s): {printed}\n"
    if value is None:
        with pytest.raises(Unreadable):
            metric.read(output)
    else:
        assert metric.read(output) == pytest.approx(value)


# --- a stash that holds the patch ---------------------------------------------------------------


def test_status_names_a_stash_that_holds_the_patch_and_the_advice_works(hunt: Checkout) -> None:
    """`git stash && git pull && git stash pop`: the pull's hook re-applied the patch, so git
    refuses the pop and the stash stays behind, holding the patch and the user's edit. status
    says so and how to get it back; the advice, pasted, does. A stash of other files only is
    not named."""
    for _ in range(2):  # an answer kept for this content, before any stash
        assert "stash" not in hunt.pg("status", check=0).stdout
    readme = hunt.root / "README.md"
    readme.write_text(readme.read_text() + "my own note\n")
    hunt.git("stash", "-q")
    hunt.git("merge", "-q", "--ff-only", "s03")  # what `git pull` does, with its hook
    assert hunt.pg("check", check=0)
    refused = hunt.git("stash", "pop", check=False)
    assert refused.returncode != 0 and hunt.stash_count() == 1  # git's own refusal
    said = hunt.pg("status", check=0).stdout.splitlines()
    line = next(line for line in said if line.startswith("stash@{0} holds patch eagle3"))
    advice = line.split("to get the rest of the stash back: ", 1)[1].split(";")[0]
    assert advice == "patchguard git stash pop"
    hunt.pg(*shlex.split(advice)[1:], check=0)
    assert readme.read_text().endswith("my own note\n")
    assert hunt.stash_count() == 0
    hunt.pg("check", check=0)
    assert "holds patch" not in hunt.pg("status", check=0).stdout
    readme.write_text(readme.read_text() + "another note\n")
    hunt.git("stash", "push", "-q", "--", "README.md")
    for _ in range(2):  # the full answer, then the one kept for this content and stash
        assert "holds patch" not in hunt.pg("status", check=0).stdout
