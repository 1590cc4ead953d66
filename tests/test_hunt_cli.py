"""What a hunt asks of the command line and leaves behind (issue 38): options before COMMAND,
numbers read as printed (sglang's and vLLM's), `undo` after a hunt, the end of a bisect, and a
stash that holds a recorded patch.

The history is tests/test_hunt.py's (scripts/sample_repo.py, build_slowdown): fourteen
commits, the throughput a third lower from s09 on, the user on branch `work` at s00 with the
EAGLE-3 methods recorded and the hooks installed. Everything runs through the installed CLI on
the real git; the benchmarks are small scripts that print what the real ones print.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest
import sample_repo
from helpers import Checkout

BENCH = (sys.executable, sample_repo.THROUGHPUT_BENCH)
METRIC = "Output token throughput (tok/s)"
FEW = ("--repeats", "3", "--max-repeats", "8")  # the fewest runs that can still decide


@pytest.fixture(scope="module")
def slowdown(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    template = tmp_path_factory.mktemp("slowdown") / "sglang"
    return template, sample_repo.build_slowdown(template)


@pytest.fixture
def hunt(
    tmp_path: Path, clean_env: dict[str, str], slowdown: tuple[Path, dict[str, str]]
) -> Checkout:
    template, commits = slowdown
    root = tmp_path / "sglang"
    shutil.copytree(template, root, symlinks=True)
    env = {**clean_env, "BENCH_COUNTER": str(tmp_path / "runs")}
    checkout = Checkout(root, env, dict(commits))
    checkout.git("checkout", "-q", "-b", "work", "s00")
    sample_repo.add_eagle3_methods(root)
    checkout.pg("record", "eagle3", sample_repo.KIMI, check=0)
    checkout.pg("install", check=0)
    return checkout


def runs_made(hunt: Checkout) -> int:
    counter = Path(hunt.env["BENCH_COUNTER"])
    return int(counter.read_text()) if counter.exists() else 0


# --- no option after the command ----------------------------------------------------------------


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
    assert f"first changed: {hunt.commits['s09'][:10]}" in pasted.stdout
    assert runs_made(hunt) > 0


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
        "import sys\n"
        "if sys.argv[1:] != ['--quick', '--metric', 'x']:\n"
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
    user's own last change, leaving the patch applied by it and `check` as it was."""
    hunt.pg("unapply", "eagle3", check=0)
    hunt.pg("apply", "eagle3", check=0)
    listed = hunt.pg("undo", "--list", check=0).stdout
    assert listed.startswith("0. the apply of eagle3")
    hunt.pg("compare", "s02", "s12", *FEW, "--", *BENCH, check=0)
    assert runs_made(hunt) > 10  # more writes than the undo entries kept (10)
    assert hunt.pg("undo", "--list", check=0).stdout == listed
    said = hunt.pg("undo", check=0)
    assert said.stdout.startswith("undid the apply of eagle3")
    assert hunt.pg("undo", "--list", check=0).stdout.startswith("0. the unapply of eagle3")
    hunt.pg("check", check=1)  # the user's apply taken back: the patch is out, as it was
