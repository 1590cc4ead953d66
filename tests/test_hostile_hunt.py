"""A hostile user's hunt: what a server that never gets ready is blamed for, and what a
hunt killed outright (SIGKILL: no handler runs) leaves for the next one.

The history is tests/test_hunt.py's (scripts/sample_repo.py, build_slowdown): fourteen commits,
the throughput a third lower from s09 on, the user on branch `work` at s00 with the EAGLE-3
methods recorded and the hooks installed. Everything runs through the installed CLI on the real
git, with real processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sample_repo
import test_hunt_server
from helpers import PATIENCE, Checkout, hunt_checkout, killed_at_the_end, runs_made, wait_until

BENCH = (sys.executable, sample_repo.THROUGHPUT_BENCH)
METRIC = "Output token throughput (tok/s)"


@pytest.fixture
def hunt(
    tmp_path: Path, clean_env: dict[str, str], slowdown: tuple[Path, dict[str, str]]
) -> Checkout:
    return hunt_checkout(tmp_path, clean_env, slowdown)


def on_work_at_s00(hunt: Checkout, kimi: bytes) -> None:
    assert hunt.git("symbolic-ref", "-q", "--short", "HEAD", check=False).stdout.strip() == "work"
    assert hunt.head() == hunt.commits["s00"]
    assert hunt.kimi.read_bytes() == kimi
    hunt.pg("check", check=0)


# --- wrong blames ----------------------------------------------------------------------------------


def test_a_server_that_never_gets_ready_is_blamed_not_the_benchmark(hunt: Checkout) -> None:
    """The benchmark never ran: the last line must not tell the user to fix it."""
    kimi = hunt.kimi.read_bytes()
    server = ("--server", "echo loading the model; sleep 60", "--ready-line", "^ready$")
    result = hunt.pg(
        "compare", "s02", "s12", *server, "--ready-timeout", "1", "--", *BENCH, check=1
    )
    assert runs_made(hunt) == 0
    last = result.stderr.strip().splitlines()[-1]
    assert "the server" in last and "loading the model" in last, last
    assert "fails at" not in last and "fix that first" not in last, last
    on_work_at_s00(hunt, kimi)


# --- SIGKILL mid-hunt, then the next run ----------------------------------------------------------


def hanging_once(tmp_path: Path, at: int) -> tuple[str, ...]:
    """BENCH, but its run number `at` hangs (once: the next session runs the same command)."""
    hung = tmp_path / "hung"
    return (
        "sh",
        "-c",
        f'{" ".join(BENCH)}; if [ ! -e {hung} ] && [ "$(cat "$BENCH_COUNTER")" -ge {at} ]; '
        f"then git rev-parse HEAD > {hung}; sleep 60; fi",
    )


def killed_mid_run(hunt: Checkout, tmp_path: Path, command: tuple[str, ...], at: int) -> str:
    """`patchguard COMMAND -- hanging_once` killed with SIGKILL while its run number `at` hangs
    (after the hunt moved away from where the user was); returns the commit it was measuring."""
    hung = tmp_path / "hung"
    child = subprocess.Popen(
        ["patchguard", *command, "--", *hanging_once(tmp_path, at)],
        cwd=hunt.root,
        env=hunt.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    with killed_at_the_end(child):
        wait_until(lambda: hung.exists() or child.poll() is not None, "no run hung")
        assert child.poll() is None, child.communicate()
        child.kill()  # the patchguard process alone, as the OOM killer or `kill -9 PID` does
        child.communicate(timeout=PATIENCE)
    return hung.read_text().strip()


def test_a_compare_killed_outright_sends_the_next_hunt_back_to_the_users_branch(
    hunt: Checkout, tmp_path: Path
) -> None:
    """SIGKILL leaves HEAD detached at the commit measured; the next hunt must still end where
    the user was (branch `work`), and say so, not at the commit the killed one left."""
    kimi = hunt.kimi.read_bytes()
    history = hunt.pg("undo", "--list", check=0).stdout
    measuring = killed_mid_run(hunt, tmp_path, ("compare", "s02", "s12"), at=3)
    assert hunt.head() == measuring != hunt.commits["s00"]  # where SIGKILL left it
    result = hunt.pg("compare", "s02", "s12", "--", *BENCH, check=0)
    assert "work" in result.stderr, result.stderr  # it says where it goes back to
    on_work_at_s00(hunt, kimi)
    again = hunt.pg("compare", "s02", "s12", "--", *BENCH, check=0)
    assert "killed" not in again.stderr  # a hunt that ended cleanly leaves nothing to say
    on_work_at_s00(hunt, kimi)
    # the killed hunt's own lift is not left for `undo` (it would take it for the user's)
    assert hunt.pg("undo", "--list", check=0).stdout == history


def test_a_bisect_killed_outright_counts_every_run_it_cost_when_it_goes_on(
    hunt: Checkout, tmp_path: Path
) -> None:
    """The summary's run count is the GPU time the hunt cost, in every session, the killed
    one included (its samples were kept as they were measured, so its runs were real)."""
    hunt.pg("bisect", "start", "s13", "s00", check=0)
    killed_mid_run(hunt, tmp_path, ("bisect", "run", "--metric", METRIC), at=9)
    before = runs_made(hunt)
    assert before >= 9
    bench = hanging_once(tmp_path, at=9)  # the same command: the same hunt goes on
    result = hunt.pg("bisect", "run", "--metric", METRIC, "--json", "--", *bench, check=0)
    report = json.loads(result.stdout)
    assert report["first_changed"] == hunt.commits["s09"]
    assert report["runs"] >= runs_made(hunt) - 1, (report["runs"], runs_made(hunt))
    hunt.pg("git", "bisect", "reset", check=0)


def test_after_a_killed_hunt_a_commit_the_user_chose_is_where_the_next_one_ends(
    hunt: Checkout, tmp_path: Path
) -> None:
    """The note a killed hunt left is stale once the user moved: the next hunt ends where the
    user is now, not on the branch of before."""
    killed_mid_run(hunt, tmp_path, ("compare", "s02", "s12"), at=3)
    hunt.pg("git", "checkout", "-q", "--detach", "s04", check=0)  # the user's own choice
    result = hunt.pg("compare", "s02", "s12", "--", *BENCH, check=0)
    assert "killed" not in result.stderr
    assert hunt.head() == hunt.commits["s04"]
    assert hunt.git("symbolic-ref", "-q", "HEAD", check=False).returncode != 0  # detached


def test_a_value_not_attested_is_not_blamed_on_the_command_failing(hunt: Checkout) -> None:
    """The benchmark exits 0 with a number, but no process of it imported the patched code: the
    last line says so, not that the command fails."""
    kimi = hunt.kimi.read_bytes()
    elsewhere = ("sh", "-c", "echo 'Output token throughput (tok/s): 1,234.50'")
    result = hunt.pg("compare", "s02", "s12", "--", *elsewhere, check=1)
    last = result.stderr.strip().splitlines()[-1]
    assert "not counted" in last and "imported" in last, last
    assert "fails at" not in last and "fix that first" not in last, last
    on_work_at_s00(hunt, kimi)


# --- a server a killed hunt left ------------------------------------------------------------------


# tests/test_hunt_server.py's checkout: a server with two workers, and its benchmark.
served = test_hunt_server.served


def test_the_server_of_a_killed_hunt_is_named_and_the_advice_ends_all_of_it(
    served: Checkout,
) -> None:
    """SIGKILL leaves the server's session running (no handler runs). The next hunt measures
    nothing against it, names it, and the line it gives ends the server and its workers."""
    hang = Path(served.env["BENCH_HANG"])
    hang.touch()
    options = (*test_hunt_server.server_options(served), *test_hunt_server.MEASURE)
    child = subprocess.Popen(
        ["patchguard", "compare", "A", "B", *options, *test_hunt_server.bench()],
        cwd=served.root,
        env=served.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    pids: list[int] = []
    try:
        with killed_at_the_end(child):
            reached = Path(f"{hang}-reached")
            wait_until(lambda: reached.exists() or child.poll() is not None, "no run hung")
            child.kill()
            child.communicate(timeout=PATIENCE)
        hang.unlink()
        pids = test_hunt_server.server_pids(served)
        assert [pid for pid in pids if test_hunt_server.running(pid)]  # left, as SIGKILL does
        result = served.pg("compare", "A", "B", *options, *test_hunt_server.bench(), check=1)
        assert test_hunt_server.server_pids(served) == pids  # no second server started
        advice = result.stderr.rsplit("stop it: ", 1)[1].split(";")[0].strip()
        subprocess.run(advice, shell=True, check=True)
        deadline = time.monotonic() + 10
        while [pid for pid in pids if test_hunt_server.running(pid)]:
            assert time.monotonic() < deadline, f"{advice} left some of the server's processes"
            time.sleep(0.05)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# --- progress -------------------------------------------------------------------------------------


def test_a_compare_that_looks_again_still_says_how_many_runs_are_planned(
    hunt: Checkout,
) -> None:
    """Runs are minutes each: a second look (here 6 more runs) must still show `run N/~M`."""
    result = hunt.pg(
        "compare", "s01", "s04", "--max-repeats", "6", "--min-effect", "1", "--", *BENCH
    )
    second_look = [line for line in result.stderr.splitlines() if "(pair 4 " in line]
    assert second_look and "/~" in second_look[0], result.stderr


# --- wrong exit codes, wrong blames at the end of the runs -----------------------------------------


def test_a_plot_that_cannot_be_written_is_refused_before_any_run(hunt: Checkout) -> None:
    result = hunt.pg("compare", "s02", "s12", "--plot", "no/such/dir/hunt.png", "--", *BENCH)
    assert result.returncode == 2, result.stderr
    assert "no/such/dir" in result.stderr and runs_made(hunt) == 0


def test_a_metric_file_the_command_never_writes_is_named_not_the_metric(hunt: Checkout) -> None:
    result = hunt.pg(
        "compare", "s02", "s12", "--metric", "json:output_throughput", "--metric-file",
        "results.jsonl", "--", *BENCH, check=1,
    )  # fmt: skip
    last = result.stderr.strip().splitlines()[-1]
    assert "wrote nothing to --metric-file results.jsonl" in last, last


def test_a_note_that_names_no_undo_entry_never_removes_anything(
    hunt: Checkout, tmp_path: Path
) -> None:
    """The note a killed hunt leaves is a plain file in the git dir; whatever it names that is
    not an undo entry stays where it is."""
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "journal.json").write_text("mine\n")
    note = hunt.root / ".git" / "patchguard-hunt-home"
    note.write_text(f"work\n{precious}\n{hunt.commits['s00']}\n")
    hunt.pg("compare", "s02", "s12", "--", *BENCH, check=0)
    assert (precious / "journal.json").read_text() == "mine\n"
    assert not note.exists()


def test_a_bisect_says_how_many_runs_its_probes_are_expected_to_take(hunt: Checkout) -> None:
    hunt.pg("bisect", "start", "s13", "s00", check=0)
    result = hunt.pg("bisect", "run", "--metric", METRIC, "--", *BENCH, check=0)
    probes = [line for line in result.stderr.splitlines() if "(run 1) at" in line]
    assert probes and all("/~" in line for line in probes), result.stderr
