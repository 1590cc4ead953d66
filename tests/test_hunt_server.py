"""The server's life in a hunt: `compare --server CMD --ready URL`, process groups,
--timeout.

The repository holds a server of its own (serve.py: http.server on a port, with two
multiprocessing workers, serving /health and /value, whose number is read from value.txt in the
checkout when the server starts) and a benchmark (bench.py) that asks /value and prints it as
sglang's `Output token throughput (tok/s):` row. Commit A has 100 in value.txt, commit B 60. Each
server writes its pid and its workers' to SERVER_PIDS, one line a start, so a test can check that
none of them outlived the hunt. Everything runs as users run it: the installed CLI, real
processes, real sockets on the loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sample_repo
from conftest import patchguard
from helpers import PATIENCE, Checkout, killed_at_the_end, wait_until

SERVER = '''"""A stand-in for sglang.launch_server: workers first, then the port, then /health."""
import http.server
import multiprocessing
import os
import sys
import time
from pathlib import Path


def work():
    while True:
        time.sleep(1)


if __name__ == "__main__":
    port = int(sys.argv[1])
    value = Path("value.txt").read_text().strip()  # the code of this checkout, loaded once
    workers = [multiprocessing.Process(target=work) for _ in range(2)]
    for worker in workers:
        worker.start()
    pids = [os.getpid(), *(worker.pid for worker in workers)]
    with open(os.environ["SERVER_PIDS"], "a") as record:
        record.write(" ".join(map(str, pids)) + "\\n")

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/quit":  # a crash under load
                print("crashed: CUDA out of memory", flush=True)
                os._exit(1)
            body = {"/health": b"ok", "/value": value.encode()}.get(self.path)
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", port), Answer)
    print("serving on", port, flush=True)
    server.serve_forever()
'''

BENCH = """import os, random, sys, time, urllib.request
from pathlib import Path
with open(os.environ["BENCH_RUNS"], "a") as runs:
    runs.write("run\\n")
hang = Path(os.environ["BENCH_HANG"])
if hang.exists():
    Path(str(hang) + "-reached").touch()
    time.sleep(60)
port = os.environ["SERVER_PORT"]
value = float(urllib.request.urlopen(f"http://127.0.0.1:{port}/value", timeout=10).read())
if Path(str(hang) + "-crash").exists():
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/quit", timeout=10)
    except OSError:
        pass
print(f"Output token throughput (tok/s): {value * random.uniform(0.99, 1.01):.2f}")
"""

MEASURE = ("--repeats", "2", "--max-repeats", "8", "--warmups", "0")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path, clean_env: dict[str, str]) -> Checkout:
    """A checkout at A (value 100) with B (value 60) on top, the patch recorded, on `work`."""
    root = tmp_path / "repo"
    root.mkdir()
    sample_repo.git(root, "init", "-q", "-b", "main")
    for path, text in sample_repo.OTHER_FILES.items():
        sample_repo.write(root, path, text)
    sample_repo.write(root, sample_repo.KIMI, sample_repo.KIMI_V1)
    sample_repo.write(
        root, "serve.py", sample_repo.IMPORT_THE_MODEL + SERVER
    )  # as sglang's imports it
    sample_repo.write(root, "bench.py", BENCH)
    sample_repo.write(root, "value.txt", "100\n")
    commits = {"A": sample_repo.commit(root, "A: the fast one")}
    sample_repo.write(root, "value.txt", "60\n")
    commits["B"] = sample_repo.commit(root, "B: the slow one")
    for name, commit in commits.items():
        sample_repo.git(root, "tag", name, commit)
    port = free_port()
    env = {
        **clean_env,
        "SERVER_PIDS": str(tmp_path / "server-pids"),
        "SERVER_PORT": str(port),
        "BENCH_RUNS": str(tmp_path / "bench-runs"),
        "BENCH_HANG": str(tmp_path / "hang"),
    }
    checkout = Checkout(root, env, commits)
    checkout.git("checkout", "-q", "-b", "work", "A")
    sample_repo.add_eagle3_methods(root)
    assert patchguard("-C", root, "record", "eagle3", sample_repo.KIMI).exit_code == 0
    return checkout


def server_options(checkout: Checkout) -> tuple[str, ...]:
    port = checkout.env["SERVER_PORT"]
    return (
        "--server",
        f"{sys.executable} serve.py {port}",
        "--ready",
        f"http://127.0.0.1:{port}/health",
        "--ready-timeout",
        "60",
    )


def bench() -> tuple[str, ...]:
    return ("--", sys.executable, "bench.py")


def server_pids(checkout: Checkout) -> list[int]:
    record = Path(checkout.env["SERVER_PIDS"])
    return [int(pid) for pid in record.read_text().split()] if record.exists() else []


def running(pid: int) -> bool:
    """Alive and not a zombie (this machine's PID 1 may never reap an orphan)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def port_taken(port: int) -> bool:
    """Whether a new server could not bind it (as servers bind: SO_REUSEADDR, so closed
    connections waiting out TIME_WAIT do not count)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def bench_runs(checkout: Checkout) -> int:
    runs = Path(checkout.env["BENCH_RUNS"])
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def nothing_left(checkout: Checkout, starts: int) -> None:
    """Every server started (and its workers) is gone, and the port is free."""
    pids = server_pids(checkout)
    assert len(pids) == 3 * starts, pids
    assert not [pid for pid in pids if running(pid)]
    assert not port_taken(int(checkout.env["SERVER_PORT"]))


def as_it_was(checkout: Checkout, kimi: bytes) -> None:
    assert checkout.git("symbolic-ref", "--short", "HEAD").stdout.strip() == "work"
    assert checkout.head() == checkout.commits["A"]
    assert checkout.kimi.read_bytes() == kimi
    checkout.pg("check", check=0)


def test_each_run_gets_a_server_of_its_commit_and_none_outlives_the_compare(
    served: Checkout,
) -> None:
    result = served.pg("compare", "A", "B", *server_options(served), *MEASURE, "--json", *bench())
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "different", result.stderr
    values = {side: [s["value"] for s in report[side]["samples"]] for side in ("a", "b")}
    assert all(99 <= v <= 101 for v in values["a"]) and all(59 <= v <= 61 for v in values["b"])
    starts = bench_runs(served)  # one start a run (--runs-per-start 1)
    assert report["runs"] == starts >= 4
    nothing_left(served, starts)
    assert result.stderr.count("server ready after") == starts
    assert "(its output: .git/patchguard-server.log)" in result.stderr
    assert "run 1/~4 (pair 1 " in result.stderr  # the first look's runs, as planned
    assert "A: the fast one" in result.stderr and "B: the slow one" in result.stderr


def test_a_server_left_on_the_port_is_named_and_nothing_is_measured(served: Checkout) -> None:
    port = served.env["SERVER_PORT"]
    kimi = served.kimi.read_bytes()
    left = subprocess.Popen(
        [sys.executable, "serve.py", port],
        cwd=served.root,
        env=served.env,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    with killed_at_the_end(left):  # type: ignore[arg-type]
        wait_until(lambda: port_taken(int(port)), "the earlier server never bound its port")
        result = served.pg("compare", "A", "B", *server_options(served), *MEASURE, *bench())
        assert left.poll() is None  # patchguard stops only what it started
        os.killpg(left.pid, signal.SIGKILL)
        left.wait()
    assert result.returncode == 1, result.stderr
    assert f"port {port} is held by pid {left.pid} (" in result.stderr
    assert f"kill -- -{left.pid}" in result.stderr  # the leader of its group: all of it
    assert result.stdout == "" and bench_runs(served) == 0
    assert len(server_pids(served)) == 3  # only the one the test started
    as_it_was(served, kimi)


def test_ctrl_c_during_a_run_stops_the_server_and_puts_everything_back(served: Checkout) -> None:
    kimi = served.kimi.read_bytes()
    hang = Path(served.env["BENCH_HANG"])
    hang.touch()
    child = subprocess.Popen(
        ["patchguard", "compare", "A", "B", *server_options(served), *MEASURE, *bench()],
        cwd=served.root,
        env=served.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as a shell gives a foreground job
    )
    with killed_at_the_end(child):
        reached = Path(f"{hang}-reached")
        wait_until(lambda: reached.exists() or child.poll() is not None, "no run hung")
        assert child.poll() is None, child.communicate()
        assert [pid for pid in server_pids(served) if running(pid)]  # the server is up
        os.killpg(child.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
        stdout, stderr = child.communicate(timeout=PATIENCE)
    assert child.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    assert stdout == ""
    nothing_left(served, 1)
    as_it_was(served, kimi)


def test_timeout_ends_a_hung_run_and_says_so(served: Checkout) -> None:
    kimi = served.kimi.read_bytes()
    Path(served.env["BENCH_HANG"]).touch()
    began = time.monotonic()
    result = served.pg("compare", "A", "B", "--timeout", "1", *bench())  # at the warm-up
    assert time.monotonic() - began < 30
    assert result.returncode == 1, result.stderr
    assert "killed after 1 s (--timeout); not counted" in result.stderr
    as_it_was(served, kimi)


def test_a_background_child_holding_the_output_does_not_make_the_run_wait(
    served: Checkout, tmp_path: Path
) -> None:
    """The command exits at once; the `sleep` it left in the background keeps stdout open. The
    run ends with the command, and the sleep's whole group with it."""
    pid_file = tmp_path / "background"
    left = f"sleep 60 & echo $! > {pid_file}; echo 'Output token throughput (tok/s): 50'"
    began = time.monotonic()
    result = served.pg("compare", "A", "A", *MEASURE, "--", "sh", "-c", left)
    assert time.monotonic() - began < 30
    assert "run 1" in result.stderr and result.returncode in (0, 1), result.stderr
    assert not running(int(pid_file.read_text()))


def test_the_server_options_go_together() -> None:
    """Usage errors, before anything starts."""
    url = ("--ready", "http://127.0.0.1:1/health")
    cases = [
        ((*url,), "go with --server"),
        (("--ready-timeout", "5"), "go with --server"),
        (("--runs-per-start", "1"), "go with --server"),
        (("--server", "x"), "--server needs one way to know it is ready"),
        (("--server", "x", *url, "--ready-line", "up"), "--server needs one way"),
        (("--server", "x", "--ready", "ftp://h/x"), "give an http:// or https:// URL"),
        (("--server", "x", "--ready-line", "("), "--ready-line '('"),
    ]
    for options, said in cases:
        result = patchguard("compare", "A", "B", *options, "--", "true")
        assert result.exit_code == 2, (options, result.output)
        assert said in result.stderr, (options, result.stderr)


def test_a_pass_fail_bisect_refuses_the_server_options_that_have_defaults() -> None:
    """--runs-per-start and --ready-timeout have a value whether given or not, and a bisect
    without --metric once took them silently: given, they are refused as the other measuring
    options are."""
    for options in (("--runs-per-start", "3"), ("--ready-timeout", "5")):
        result = patchguard("bisect", "run", *options, "--", "true")
        assert result.exit_code == 2, (options, result.output)
        assert "the measuring options go with --metric M" in result.stderr, result.stderr


def test_runs_at_one_commit_share_a_start_up_to_runs_per_start(served: Checkout) -> None:
    options = (*server_options(served), "--runs-per-start", "4", *MEASURE)
    result = served.pg("compare", "A", "A", *options, *bench())
    assert result.returncode in (0, 1), result.stderr
    runs = bench_runs(served)
    nothing_left(served, starts=-(-runs // 4))


@pytest.mark.parametrize("ready", ["url", "line"])
def test_a_server_that_exits_before_it_is_ready_shows_its_log_and_nothing_counts(
    served: Checkout, ready: str
) -> None:
    kimi = served.kimi.read_bytes()
    way = ("--ready", "http://127.0.0.1:9/health") if ready == "url" else ("--ready-line", "up")
    result = served.pg(
        "compare", "A", "B", "--server", "echo cannot load the model; exit 3", *way, *bench()
    )
    assert result.returncode == 1, result.stderr
    assert "the server exited before it was ready: cannot load the model" in result.stderr
    assert result.stdout == "" and bench_runs(served) == 0
    as_it_was(served, kimi)


def test_a_server_that_dies_during_a_run_is_not_counted_and_its_workers_end(
    served: Checkout,
) -> None:
    """The benchmark got its number, but the server crashed under it: not counted."""
    Path(f"{served.env['BENCH_HANG']}-crash").touch()
    result = served.pg("compare", "A", "B", *server_options(served), *bench())
    assert result.returncode == 1, result.stderr
    assert "the server exited during the run; not counted: " in result.stderr
    assert "crashed: CUDA out of memory" in result.stderr
    assert result.stdout == ""
    nothing_left(served, starts=1)  # its two workers too, though their server had died


def test_a_stopped_server_is_waited_for_until_the_gpus_memory_falls_back(
    served: Checkout, tmp_path: Path
) -> None:
    """An `nvidia-smi` of the test's own on the PATH: the memory a server took stays in use
    for three looks after it stopped (a driver releasing it late); the hunt looks until it is
    back where it was before the start."""
    looks = tmp_path / "gpu-looks"
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(
        f"#!{sys.executable}\n"
        "import os\n"
        f"looks = {str(looks)!r}\n"
        "n = len(open(looks).read()) if os.path.exists(looks) else 0\n"
        "open(looks, 'a').write('.')\n"
        f"started = os.path.exists({served.env['SERVER_PIDS']!r})\n"
        "print(40000 if started and n < 4 else 1000)\n"  # the first look: before the start
    )
    smi.chmod(0o755)
    env = {**served.env, "PATH": f"{smi.parent}{os.pathsep}{served.env['PATH']}"}
    no_row = ("--metric", "no such row")  # the warm-up fails: one start, one stop
    result = subprocess.run(
        ["patchguard", "compare", "A", "B", *server_options(served), *no_row, *bench()],
        cwd=served.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert result.returncode == 1, result.stderr
    assert len(looks.read_text()) == 5  # before the start; 40000, 40000, 40000; 1000
    assert "GPUs' memory is still" not in result.stderr
    nothing_left(served, starts=1)


def test_a_server_that_escaped_its_session_is_named_when_it_keeps_the_port(
    served: Checkout,
) -> None:
    """The documented limit: a process that moved itself into another session (setsid) is not
    in the group patchguard ends. It still holds the port afterwards, so the hunt stops there
    and names it rather than start the next server against it."""
    port = served.env["SERVER_PORT"]
    escaping = f"setsid --wait {sys.executable} serve.py {port}"  # setsid stays, as its leader
    options = ("--server", escaping, *server_options(served)[2:])
    try:
        result = served.pg("compare", "A", "B", *options, *MEASURE, *bench())
        escaped = server_pids(served)[0]
        assert result.returncode == 1, result.stderr
        assert f"the server was stopped, but port {port} is held by pid {escaped}" in result.stderr
        assert running(escaped)
    finally:
        for pid in server_pids(served):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
