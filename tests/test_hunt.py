"""The regression hunt: `compare A B -- CMD` and `bisect run --metric M -- CMD`.

The history (scripts/sample_repo.py, build_slowdown): fourteen commits s00..s13 of the
sglang-shaped code with a benchmark in the repository (bench_throughput.py: sglang's
`Output token throughput (tok/s):` row, 2% noise seeded by a run counter, a failure without the
EAGLE-3 methods), upstream editing the patched file at s05 and the slow all-reduce at s09, a
third off the throughput. The user works on branch `work` at s00 with the methods recorded,
the hooks installed and an unrelated edit in README.md. Everything runs as users run it: the
installed CLI and the real git.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sample_repo
from click.testing import Result
from conftest import Sample, patchguard
from helpers import PATIENCE, Checkout, killed_at_the_end, methods_once_in_class, wait_until
from test_json_docs import documented

BENCH = (sys.executable, sample_repo.THROUGHPUT_BENCH)
TRUE_DELTA = 100 * (1 / sample_repo.SLOWDOWN - 1)  # -33.3%
USER_EDIT = "\nmy own note, not part of any patch\n"


@pytest.fixture
def hunt(
    tmp_path: Path,
    clean_env: dict[str, str],
    slowdown: tuple[Path, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> Checkout:
    template, commits = slowdown
    root = tmp_path / "sglang"
    shutil.copytree(template, root, symlinks=True)
    counter = str(tmp_path / "runs")
    monkeypatch.setenv("BENCH_COUNTER", counter)  # for the commands run in-process
    checkout = Checkout(root, {**clean_env, "BENCH_COUNTER": counter}, dict(commits))
    checkout.git("checkout", "-q", "-b", "work", "s00")
    sample_repo.add_eagle3_methods(root)
    for args in (("record", "eagle3", sample_repo.KIMI), ("install",)):
        assert patchguard("-C", root, *args).exit_code == 0
    with (root / "README.md").open("a") as readme:
        readme.write(USER_EDIT)
    return checkout


def in_process(hunt: Checkout, *args: str) -> Result:
    """The CLI in this process (scipy is loaded once): the commands that need no signal."""
    return patchguard("-C", hunt.root, *args)


def runs_made(hunt: Checkout) -> int:
    return int(Path(hunt.env["BENCH_COUNTER"]).read_text())


def as_the_user_left_it(hunt: Checkout, kimi: bytes) -> None:
    assert hunt.git("symbolic-ref", "HEAD").stdout.strip() == "refs/heads/work"
    assert hunt.head() == hunt.commits["s00"]
    assert hunt.kimi.read_bytes() == kimi
    assert (hunt.root / "README.md").read_text().endswith(USER_EDIT)
    hunt.pg("check", check=0)


def samples_carry_their_code(samples: list[dict[str, object]], commit: str) -> None:
    """Every counted sample ran on `commit` with the patch in place, as its stamp says."""
    assert samples
    for sample in samples:
        stamp = sample["stamp"]
        assert isinstance(stamp, dict)
        assert stamp["head"] == commit
        assert stamp["patches"] == {"eagle3": "applied"}
        assert stamp["ok"] is True


def test_compare_before_and_after_the_slowdown_says_different(
    hunt: Checkout, tmp_path: Path
) -> None:
    kimi = hunt.kimi.read_bytes()
    plot = tmp_path / "hunt.svg"
    result = in_process(hunt, "compare", "s02", "s12", "--json", "--plot", str(plot), "--", *BENCH)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "different"
    assert abs(report["delta_pct"] - TRUE_DELTA) < 3
    low, high = report["ci_pct"]
    assert low <= report["delta_pct"] <= high < 0
    assert report["p_value"] < 0.05
    samples_carry_their_code(report["a"]["samples"], hunt.commits["s02"])
    samples_carry_their_code(report["b"]["samples"], hunt.commits["s12"])
    assert len(report["a"]["samples"]) == len(report["b"]["samples"]) == report["n"]
    assert report["runs"] == runs_made(hunt) == 2 + 2 * report["n"]  # a warm-up per side
    assert report["runs"] <= 8  # a third off at 2% noise: decided at the first look, 3 pairs
    assert set(report) == documented("## `patchguard compare --json`")
    assert "<svg" in plot.read_text()
    as_the_user_left_it(hunt, kimi)


def test_a_compare_goes_home_to_the_branch_where_a_tag_has_its_name(hunt: Checkout) -> None:
    """A tag `work` beside the branch `work`: `git symbolic-ref --short` says `heads/work`, and
    checking that out would have left the user on a detached HEAD."""
    kimi = hunt.kimi.read_bytes()
    hunt.git("tag", "work", "s05")
    result = in_process(hunt, "compare", "s02", "s12", "--json", "--", *BENCH)
    assert result.exit_code == 0, result.stderr
    as_the_user_left_it(hunt, kimi)


def test_a_a_compares_before_the_slowdown_never_say_different(hunt: Checkout) -> None:
    """Two compares before the slowdown, the first across upstream's edit of the patched file
    (s05), read from the JSON lines sglang appends, with the table. Many A/A compares are the
    false-positive test on pure noise (test_stats.py); these ask the same through git."""
    kimi = hunt.kimi.read_bytes()
    metric = ("--metric", "json:output_throughput", "--metric-file", "results.jsonl")
    bench = (*BENCH, "--output-file", "results.jsonl")  # sglang's JSONL, appended per run
    result = in_process(hunt, "compare", "s03", "s07", "--max-repeats", "8", *metric, "--", *bench)
    assert result.exit_code == 0, result.stderr
    assert len((hunt.root / "results.jsonl").read_text().splitlines()) == runs_made(hunt)
    lines = result.stdout.splitlines()
    assert lines[0] == "metric: json:output_throughput, higher is better"
    assert lines[1].split() == ["side", "commit", "median", "n"]
    assert lines[2].split()[:2] == ["A", hunt.commits["s03"][:10]]
    assert lines[3].split()[:2] == ["B", hunt.commits["s07"][:10]]
    assert abs(float(lines[2].split()[2]) - sample_repo.THROUGHPUT) < 3
    assert lines[4].startswith("Δ ") and "95% CI" in lines[4] and "p = " in lines[4]
    assert lines[5].startswith(("same: ", "unknown")), lines[5]
    again = in_process(hunt, "compare", "s01", "s04", "--max-repeats", "8", "--json", "--", *BENCH)
    report = json.loads(again.stdout)  # asked again, of two other commits: still no change
    assert report["verdict"] in ("same", "unknown") and abs(report["delta_pct"]) < 5
    samples_carry_their_code(report["b"]["samples"], hunt.commits["s04"])
    as_the_user_left_it(hunt, kimi)


def test_bisect_on_the_metric_names_the_slow_commit(hunt: Checkout, tmp_path: Path) -> None:
    kimi = hunt.kimi.read_bytes()
    hunt.pg("bisect", "start", "s13", "s00", check=0)
    metric = "Output token throughput (tok/s):"
    plot = tmp_path / "bisect.png"
    asked = ("--metric", metric, "--json", "--plot", str(plot))
    result = in_process(hunt, "bisect", "run", *asked, "--", *BENCH)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "found"
    assert report["first_changed"] == hunt.commits["s09"]
    assert abs(report["delta_pct"] - TRUE_DELTA) < 4 and report["ci_pct"][1] < 0
    steps = report["steps"]
    assert [s["verdict"] for s in steps[:2]] == ["good", "bad"]  # GOOD and BAD, measured first
    for step in steps:
        samples_carry_their_code(step["samples"], step["commit"])
    assert len({s["commit"] for s in steps}) == len(steps)  # nothing measured twice
    # 13 candidates: log2(13) = 3.7 probes of one run each, beside GOOD's and BAD's 8 runs.
    assert report["runs"] == runs_made(hunt) <= 14
    assert [len(s["samples"]) for s in steps[2:]] == [1] * (len(steps) - 2)
    assert set(report) == documented("## `patchguard bisect run --json` (with `--metric M`)")
    assert set(steps[2]) == documented("`steps` (in `bisect run --metric M --json`")
    assert plot.read_bytes().startswith(b"\x89PNG")  # every run at its commit, drawn
    said = hunt.git("bisect", "log").stdout  # git was told, and names the same commit
    assert f"# first bad commit: [{hunt.commits['s09']}]" in said, said
    hunt.pg("git", "bisect", "reset", check=0)
    as_the_user_left_it(hunt, kimi)


METRIC = "Output token throughput (tok/s)"


def test_probes_get_warm_ups_only_when_asked(hunt: Checkout) -> None:
    """--warmups given: a warm-up at every commit the bisect probes too (without it, none:
    test_bisect_on_the_metric_names_the_slow_commit counts the runs). The bisect was started
    with terms of its own: its refs are named by them."""
    hunt.pg("bisect", "start", "--term-new=slow", "--term-old=fast", "s13", "s00", check=0)
    asked = ("bisect", "run", "--metric", METRIC, "--warmups", "1", "--json", "--", *BENCH)
    result = in_process(hunt, *asked)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["first_changed"] == hunt.commits["s09"]
    probes = report["steps"][2:]
    assert probes and all(len(step["samples"]) == 1 for step in probes)
    # GOOD's and BAD's 8, then each probe's run and the warm-up before it.
    assert report["runs"] == runs_made(hunt) == 2 * len(probes) + 8
    said = hunt.git("bisect", "log").stdout  # git was told, in its own words
    assert f"# first slow commit: [{hunt.commits['s09']}]" in said, said
    hunt.pg("git", "bisect", "reset", check=0)


@pytest.mark.parametrize(
    ("command", "hang_at", "go_on"),
    [
        (("compare", "s02", "s12"), 3, "to go on, run the same compare again"),
        (("bisect", "run", "--metric", METRIC), 8, "the 4 samples counted so far are kept"),
        (("bisect", "run", "--metric", METRIC), 10, "the 7 samples counted so far are kept"),
    ],
    ids=["compare", "bisect", "bisect-probing"],
)
def test_ctrl_c_puts_everything_back_and_says_how_to_go_on(
    hunt: Checkout, tmp_path: Path, command: tuple[str, ...], hang_at: int, go_on: str
) -> None:
    kimi = hunt.kimi.read_bytes()
    if command[0] == "bisect":
        hunt.pg("bisect", "start", "s13", "s00", check=0)
    bisecting_at = hunt.head()
    started, armed = tmp_path / "hung", tmp_path / "armed"
    armed.touch()
    # A run hangs (in the compare the first counted one; in the bisect the second run of the
    # third pair of GOOD and BAD), as a benchmark waiting on a server might.
    run = (
        f'{" ".join(BENCH)}; if [ -e {armed} ] && [ "$(cat "$BENCH_COUNTER")" -ge {hang_at} ]; '
        f"then touch {started}; sleep 60; fi"
    )
    child = subprocess.Popen(
        ["patchguard", *command, "--", "sh", "-c", run],
        cwd=hunt.root,
        env=hunt.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    with killed_at_the_end(child):
        wait_until(lambda: started.exists() or child.poll() is not None, "no run hung")
        assert child.poll() is None, child.communicate()
        assert hunt.head() != bisecting_at  # measuring elsewhere...
        assert methods_once_in_class(hunt.kimi)  # ...with the patch in place
        os.killpg(child.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
        stdout, stderr = child.communicate(timeout=PATIENCE)
    assert child.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted" in stderr and go_on in stderr
    assert stdout == ""  # no verdict from a cut-short hunt
    assert hunt.head() == bisecting_at
    if command[0] == "bisect":
        assert methods_once_in_class(hunt.kimi)
        hunt.pg("check", check=0)
        armed.unlink()
        go_on_with_the_hunt(hunt, ("sh", "-c", run), runs_before=runs_made(hunt))
        hunt.pg("git", "bisect", "reset", check=0)
    as_the_user_left_it(hunt, kimi)


def go_on_with_the_hunt(hunt: Checkout, bench: tuple[str, ...], runs_before: int) -> None:
    """The same command again: the warm-ups and the samples taken before are not run again,
    and the summary counts every run the hunt cost, in both sessions."""
    result = in_process(hunt, "bisect", "run", "--metric", METRIC, "--json", "--", *bench)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["first_changed"] == hunt.commits["s09"]
    assert report["runs"] == runs_made(hunt)
    assert "warm-up" not in result.stderr
    # The warm-ups, the samples, and what was lost: the run cut short (and, when it was the
    # second of a pair, the first: a pair counts whole or not at all).
    samples = sum(len(step["samples"]) for step in report["steps"])
    assert 2 + samples + 1 <= runs_made(hunt) <= 2 + samples + 2
    for step in report["steps"]:
        samples_carry_their_code(step["samples"], step["commit"])
    assert not (hunt.root / ".git" / "patchguard-hunt.jsonl").exists()  # a finished hunt


def test_a_bisect_of_a_range_with_no_change_says_so_and_marks_nothing(hunt: Checkout) -> None:
    hunt.pg("bisect", "start", "s08", "s00", check=0)
    before = hunt.git("bisect", "log").stdout
    result = in_process(hunt, "bisect", "run", "--metric", METRIC, "--", *BENCH)
    assert result.exit_code == 1, result.stderr
    assert "nothing to hunt: GOOD and BAD are the same" in result.stdout, result.stdout
    assert hunt.git("bisect", "log").stdout == before
    hunt.pg("git", "bisect", "reset", check=0)


def test_a_commit_without_the_patch_is_never_measured(hunt: Checkout) -> None:
    """The incident: a number measured on unpatched code. Here the patch cannot be carried to
    B (upstream added another method right where the patch adds its own), so nothing is
    measured at all, and the message says how to carry it there."""
    upstream = hunt.at("s12").replace(
        "        self.language_model.load_weights(weights)\n",
        "        self.language_model.load_weights(weights)\n\n    def debug_dump(self):\n"
        "        return None\n",
    )
    conflicting = commit_on_top(hunt, "s12", upstream, "kimi: a debug helper")
    before = hunt.kimi.read_bytes()
    result = in_process(hunt, "compare", "s02", conflicting, "--", *BENCH)
    assert result.exit_code == 1, result.stderr
    assert f"the patches do not hold at {conflicting[:10]}" in result.stderr
    assert "patchguard resolve NAME" in result.stderr
    assert result.stdout == ""
    assert hunt.kimi.read_bytes() == before
    assert hunt.git("symbolic-ref", "--short", "HEAD").stdout.strip() == "work"


def test_a_probe_where_the_patch_does_not_hold_is_skipped_and_the_hunt_goes_on(
    hunt: Checkout,
) -> None:
    """A line of eight commits after s08: the slow all-reduce at the first (k1), upstream's
    conflicting method at the second (k2, where the patch cannot be carried), the file as
    before from the third on. The second probe falls on k2: it is skipped with the resolve
    advice, never measured, and the hunt still names k1."""
    k1 = hunt.git("commit-tree", "s09^{tree}", "-p", "s08", "-m", "k1: slow all-reduce").stdout
    conflicting = hunt.at("s09").replace(
        "        self.language_model.load_weights(weights)\n",
        "        self.language_model.load_weights(weights)\n\n    def debug_dump(self):\n"
        "        return None\n",
    )
    line = [k1.strip(), commit_on_top(hunt, k1.strip(), conflicting, "k2: a debug helper")]
    for number in range(3, 9):
        line.append(commit_on_top(hunt, line[-1], hunt.at("s09"), f"k{number}: kimi as before"))
    hunt.pg("bisect", "start", line[-1], "s08", check=0)
    result = in_process(hunt, "bisect", "run", "--metric", METRIC, "--json", "--", *BENCH)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["first_changed"] == line[0]
    skipped = [step for step in report["steps"] if step["verdict"] == "skip"]
    assert [step["commit"] for step in skipped] == [line[1]]
    assert skipped[0]["samples"] == []
    assert "patchguard resolve NAME" in skipped[0]["reason"]
    assert report["runs"] == runs_made(hunt) <= 8 + 3
    hunt.pg("git", "bisect", "reset", check=0)


def commit_on_top(hunt: Checkout, parent: str, kimi: str, message: str) -> str:
    """A commit of `kimi` on `parent`, made without touching the worktree (git's plumbing)."""
    index = {**hunt.env, "GIT_INDEX_FILE": str(hunt.root / ".git" / "scratch-index")}
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=hunt.root,
        input=kimi,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    for args in (
        ["read-tree", parent],
        ["update-index", "--cacheinfo", f"100644,{blob},{sample_repo.KIMI}"],
    ):
        subprocess.run(["git", *args], cwd=hunt.root, env=index, check=True)
    tree = subprocess.run(
        ["git", "write-tree"], cwd=hunt.root, env=index, capture_output=True, text=True, check=True
    ).stdout.strip()
    return hunt.git("commit-tree", tree, "-p", parent, "-m", message).stdout.strip()


BAD_REQUESTS = [
    (("compare", "s01", "s02", "--plot", "hunt.txt", "--", "true"), "a .png or .svg"),
    (("compare", "s01", "nope", "--", "true"), "'nope' names no commit"),
    (("compare", "s01", "s02", "--repeats", "2", "--max-repeats", "2", "--", "true"), "no change"),
    (("compare", "s01", "s02", "--repeats", "8", "--max-repeats", "4", "--", "true"), "below"),
    (("compare", "s01", "s02", "--metric", "re:(a)(b)", "--", "true"), "exactly one"),
    (("compare", "s01", "s02", "--"), "Missing argument"),
    (("compare", "s01", "s02", "--", "no-such-benchmark"), "cannot start no-such-benchmark"),
    (("bisect", "run", "--json", "true"), "go with --metric"),
    (("bisect", "run", "--metric", "x", "--log", "l.jsonl", "true"), "--log goes with"),
    (("bisect", "run", "--metric", "x", "true"), "no bisect is in progress"),
]


def test_bad_requests_get_one_line_and_change_nothing(hunt: Checkout) -> None:
    before = hunt.kimi.read_bytes()
    for args, said in BAD_REQUESTS:
        result = in_process(hunt, *args)
        assert result.exit_code in (1, 2), (args, result.output)
        assert said in result.stderr, (args, result.stderr)
        assert hunt.kimi.read_bytes() == before
        assert hunt.head() == hunt.commits["s00"]
    assert not Path(hunt.env["BENCH_COUNTER"]).exists()  # the benchmark never ran


def test_an_edit_that_stops_git_ends_the_compare_with_everything_back(hunt: Checkout) -> None:
    """An untracked file where B has one: git refuses to move there; the compare says why and
    puts the user back (branch, patch, the file), having counted nothing."""
    kimi = hunt.kimi.read_bytes()
    mine = hunt.root / "docs" / "notes_12.md"
    mine.parent.mkdir()
    mine.write_text("my own notes\n")
    result = in_process(hunt, "compare", "s02", "s12", "--", *BENCH)
    assert result.exit_code == 1, result.stderr
    assert f"cannot move to {hunt.commits['s12'][:10]}" in result.stderr
    assert "save them (git stash)" in result.stderr
    assert result.stdout == ""
    assert mine.read_text() == "my own notes\n"
    as_the_user_left_it(hunt, kimi)


def test_with_nothing_recorded_nothing_moves(sample: Sample) -> None:
    result = sample.pg("compare", "old", "main", "--", "true")
    assert result.exit_code == 2
    assert "nothing is guarded in this repository yet" in result.stderr
    assert sample.git("symbolic-ref", "--short", "HEAD").stdout.strip() == "main"


def test_check_and_hooks_never_load_the_statistics(hunt: Checkout) -> None:
    """scipy and numpy come with compare and bisect --metric only: `check` (its full path,
    through click) and the hook pay nothing for them."""
    probe = (
        "import sys\nfrom pathlib import Path\nfrom guard.cli import hookrun\nfrom guard.cli.app import run\n"
        "hookrun.run('post-checkout', ['a', 'b', '1'], '', Path.cwd())\n"
        "try:\n    run(['check', '--json'])\nexcept SystemExit:\n    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'numpy', 'matplotlib'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=hunt.root, capture_output=True, text=True
    )
    assert result.stdout.strip().endswith("[]"), result.stdout + result.stderr


def test_a_kept_sample_is_taken_again_only_for_the_same_hunt_and_code(tmp_path: Path) -> None:
    from guard.hunt.kept import Kept, Sample

    code = {"head": "c1", "patches": {"eagle3": "applied"}, "files": {sample_repo.KIMI: "b1"}}
    other_code = {**code, "files": {sample_repo.KIMI: "b2"}}  # the patch re-recorded since
    path = tmp_path / "kept.jsonl"
    kept = Kept(path, ["bisect", "command"])
    kept.add(kind="warmup", commit="c1", stamp=code)
    kept.add(kind="sample", commit="c1", sample={"value": 94.0, "stamp": code})
    kept.add(kind="cost", runs=2)
    again = Kept(path, ["bisect", "command"])
    assert again.samples("c1", code) == [Sample(94.0, code)]
    assert again.warmed("c1", code) and again.earlier_runs == 2
    assert again.samples("c1", other_code) == [] and not again.warmed("c1", other_code)
    assert Kept(path, ["bisect", "another command"]).samples("c1", code) == []
    again.drop()
    assert not path.exists()


def test_bisect_measures_the_commit_git_waits_for_and_a_label_typed_without_its_unit(
    hunt: Checkout,
) -> None:
    """The user looks at BAD after starting the bisect (HEAD is no longer git's pick), and
    types the row's label as it reads, without `(tok/s)`: the hunt still finds s09."""
    kimi = hunt.kimi.read_bytes()
    hunt.pg("bisect", "start", "s13", "s00", check=0)
    hunt.pg("git", "checkout", "-q", "s13", check=0)
    result = in_process(
        hunt, "bisect", "run", "--metric", "Output token throughput", "--json", "--", *BENCH
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["first_changed"] == hunt.commits["s09"]
    hunt.pg("git", "bisect", "reset", check=0)
    as_the_user_left_it(hunt, kimi)


@pytest.mark.parametrize(
    ("chosen", "then"),
    [
        ("'ls-files' in sys.argv[1:3]", "time.sleep(0.3)"),
        ("'status' in sys.argv[1:3]", "time.sleep(0.3)"),
        ("'ls-tree' in sys.argv[1:3]", "time.sleep(0.3)"),
        # A git started just as Ctrl-C comes can take it itself: between fork and the setsid
        # that takes it out of the terminal's group, it is still in ours, its handlers reset
        # (seen under load: `git ls-files --others ... failed: exit -2`, and exit 2).
        ("'--others' in sys.argv", "signal.signal(2, signal.SIG_DFL); os.kill(os.getpid(), 2)"),
    ],
    ids=["ls-files", "status", "ls-tree", "git-dies-of-it"],
)
def test_ctrl_c_while_patchguard_runs_git_stops_between_runs(
    hunt: Checkout, tmp_path: Path, chosen: str, then: str
) -> None:
    """Ctrl-C reaches the terminal's whole process group; none of patchguard's own short git
    commands of a step (here the second step's `ls-files`, `status` or `ls-tree`) may be in it,
    or it dies and the hunt ends as if git had failed, on a detached commit (found by hand on
    real sglang). One that dies of it all the same is the user's Ctrl-C, not git failing."""
    kimi = hunt.kimi.read_bytes()
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    count = tmp_path / "git-count"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import os, signal, sys, time\n"
        f"if {chosen}:\n"
        f"    count = {str(count)!r}\n"
        "    n = int(open(count).read()) + 1 if os.path.exists(count) else 1\n"
        "    open(count, 'w').write(str(n))\n"
        "    if n == 2:  # Ctrl-C: the group of the terminal, where patchguard is\n"
        "        os.killpg(os.getpgid(os.getppid()), signal.SIGINT)\n"
        f"        {then}\n"
        f"os.execv({shutil.which('git')!r}, ['git', *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    env = {**hunt.env, "PATH": f"{wrapper.parent}{os.pathsep}{hunt.env['PATH']}"}
    child = subprocess.run(
        ["patchguard", "compare", "s02", "s12", "--", *BENCH],
        cwd=hunt.root,
        env=env,
        capture_output=True,
        text=True,
        start_new_session=True,  # its own group, as a shell gives a foreground job
        timeout=PATIENCE,
    )
    assert int(count.read_text()) >= 2
    assert child.returncode == 130, child.stderr
    assert "interrupted" in child.stderr and "failed" not in child.stderr, child.stderr
    assert "run the same compare again" in child.stderr, child.stderr  # how to go on
    as_the_user_left_it(hunt, kimi)


def test_a_label_that_names_no_row_says_so_not_that_the_benchmark_fails(hunt: Checkout) -> None:
    result = in_process(hunt, "compare", "s02", "s12", "--metric", "Output token", "--", *BENCH)
    assert result.exit_code == 1
    assert "exited 0, but its output has no positive value" in result.stderr, result.stderr
    assert "fix that first" not in result.stderr
