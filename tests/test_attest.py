"""Attested runs: the processes a command starts say which code they imported (guard.ops.attest,
hooks/attest/sitecustomize.py). Each story is held against Python itself first: without the
guard, the interpreter really runs the other code."""

from __future__ import annotations

import json
import os
import py_compile
import shlex
import signal
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample

IMPORT = (
    "import sglang.srt.models.kimi_k25 as k; "
    f"print('methods', callable(getattr(k.{sample_repo.CLASS}, {sample_repo.METHODS[1]!r}, None)))"
)
TORCH = "class nn:\n    Module = object\n"
# A base class whose hook takes a recorded method away from every subclass: reading the model
# file cannot see it (torch is not in the checkout), only the process that ran it can.
TORCH_TAKING = (
    "class _Module:\n"
    "    def __init_subclass__(cls, **kwargs):\n"
    "        cls.get_embed_and_head = {}\n"
    "class nn:\n"
    "    Module = _Module\n"
)


@pytest.fixture
def patched(sample: Sample, tmp_path: Path, clean_env: dict[str, str]) -> tuple[Sample, dict]:
    """The sample with eagle3 recorded, and an environment whose Python imports the checkout
    (torch a stand-in)."""
    sample.record_eagle3()
    stubs = tmp_path / "stubs"
    (stubs / "torch").mkdir(parents=True)
    (stubs / "torch" / "__init__.py").write_text(TORCH)
    env = {**clean_env, "PYTHONPATH": f"{stubs}{os.pathsep}{sample.root / 'python'}"}
    return sample, env


def appearing_during_the_run(sample: Sample, env: dict, stale: Path):
    """`run` of a command that puts `stale` in place itself, after patchguard's check read the
    tree (a benchmark that builds or unpacks code at its start): only the import guard sees it."""
    hidden = stale.with_name(stale.name + ".hidden")
    stale.rename(hidden)
    move = f"mv {shlex.quote(str(hidden))} {shlex.quote(str(stale))}"
    return run(sample, env, "sh", "-c", f'{move} && exec "$0" -c "$1"', sys.executable, IMPORT)


def run(sample: Sample, env: dict, *command: str, stamp: Path | None = None):
    options = ["--stamp", str(stamp)] if stamp else []
    result = subprocess.run(
        ["patchguard", "-C", str(sample.root), "run", *options, "--", *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=sample.root,
    )
    assert "Traceback (most recent call last)" not in result.stderr.split("=" * 72)[-1]
    return result


def attestations(stamp: Path) -> dict:
    return json.loads(stamp.read_text().splitlines()[-1])["attestations"]


def test_the_checkouts_code_is_attested_by_the_process_that_ran_it(patched, tmp_path) -> None:
    sample, env = patched
    stamp = tmp_path / "runs.jsonl"
    result = run(sample, env, sys.executable, "-c", IMPORT, stamp=stamp)
    assert result.returncode == 0, result.stderr
    assert "methods True" in result.stdout
    seen = attestations(stamp)
    assert seen["counted"] is True
    assert [p["verdict"] for p in seen["processes"]] == ["ok"]
    assert seen["processes"][0]["path"] == str((sample.kimi).resolve())


def test_a_non_editable_install_in_another_venv_is_refused(patched, tmp_path) -> None:
    """(1) The unpatched copy installed in the serving venv: the import fails, run exits 1."""
    sample, env = patched
    serving = tmp_path / "serving"
    venv.create(serving, with_pip=False)
    site = Path(
        subprocess.run(
            [
                serving / "bin" / "python",
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    for path in sample.git("ls-files", "python/sglang").stdout.split():
        copy = site / Path(path).relative_to("python")
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(sample.git("show", f"HEAD:{path}").stdout)
    env = {**env, "PYTHONPATH": str(tmp_path / "stubs")}
    python = str(serving / "bin" / "python")
    plain = subprocess.run([python, "-c", IMPORT], capture_output=True, text=True, env=env)
    assert "methods False" in plain.stdout  # Python itself runs the stale copy
    result = run(sample, env, python, "-c", IMPORT)
    assert result.returncode == 1
    installed = site / "sglang" / "srt" / "models" / "kimi_k25.py"
    assert f"from {installed}, not from the checkout's" in result.stderr
    assert "pip install -e" in result.stderr
    assert "methods" not in result.stdout  # it died at the import, before measuring anything


SPAWNED = """
import multiprocessing, os

def work(_):
    import sglang.srt.models.kimi_k25
    return os.getpid()

if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        print("worker", pool.map(work, [0])[0], "main", os.getpid())
"""


def test_a_spawned_worker_attests_what_it_imported(patched, tmp_path) -> None:
    """(b) sglang's scheduler and TP workers are multiprocessing spawn children."""
    sample, env = patched
    script = tmp_path / "serve.py"
    script.write_text(SPAWNED)
    stamp = tmp_path / "runs.jsonl"
    result = run(sample, env, sys.executable, str(script), stamp=stamp)
    assert result.returncode == 0, result.stderr
    words = result.stdout.split()
    worker, main = int(words[1]), int(words[3])
    seen = attestations(stamp)
    assert seen["counted"] is True
    ok = [p for p in seen["processes"] if p["verdict"] == "ok"]
    assert [p["pid"] for p in ok] == [worker] and worker != main


def test_an_unchecked_hash_pyc_of_the_unpatched_file_is_refused(patched) -> None:
    """(4) Python never reads the .py when its .pyc says not to."""
    sample, env = patched
    patched_text = sample.kimi.read_text()
    sample.kimi.write_text(sample.git("show", f"HEAD:{sample_repo.KIMI}").stdout)
    import importlib.util

    cached = importlib.util.cache_from_source(str(sample.kimi))
    py_compile.compile(
        str(sample.kimi),
        cfile=cached,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    sample.kimi.write_text(patched_text)
    plain = subprocess.run([sys.executable, "-c", IMPORT], capture_output=True, text=True, env=env)
    assert "methods False" in plain.stdout  # Python itself runs the stale bytecode
    refused = run(sample, env, sys.executable, "-c", IMPORT)  # reading sees it beside the .py
    assert refused.returncode == 1 and "command NOT run" in refused.stderr, refused.stderr
    result = appearing_during_the_run(sample, env, Path(cached))  # the import guard sees it
    assert result.returncode == 1
    assert f"{cached} is an unchecked-hash .pyc" in result.stderr
    assert f"rm {cached}" in result.stderr


EXTENSION = """#include <Python.h>
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "kimi_k25", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_kimi_k25(void) { return PyModule_Create(&module); }
"""


def test_an_extension_module_beside_the_py_is_refused(patched, tmp_path) -> None:
    """(4) An untracked kimi_k25.cpython-311-x86_64-linux-gnu.so wins the import."""
    sample, env = patched
    source = tmp_path / "kimi_k25.c"
    source.write_text(EXTENSION)
    built = sample.kimi.with_name("kimi_k25" + sysconfig.get_config_var("EXT_SUFFIX"))
    include = sysconfig.get_paths()["include"]
    subprocess.run(
        ["gcc", "-shared", "-fPIC", f"-I{include}", "-o", str(built), str(source)], check=True
    )
    plain = subprocess.run(
        [sys.executable, "-c", "import sglang.srt.models.kimi_k25 as k; print(k.__file__)"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert plain.stdout.strip() == str(built)  # Python itself takes the extension
    refused = run(sample, env, sys.executable, "-c", IMPORT)  # reading sees it beside the .py
    assert refused.returncode == 1 and "command NOT run" in refused.stderr, refused.stderr
    result = appearing_during_the_run(sample, env, built)  # the import guard sees it
    assert result.returncode == 1
    assert f"Python takes {built} instead of {sample.kimi}" in result.stderr
    assert f"rm {built}" in result.stderr


@pytest.mark.parametrize("taken", ["None", "cls.forward"])
def test_a_class_hook_that_takes_the_method_away_is_refused(patched, tmp_path, taken) -> None:
    """(5) Reading sees the recorded methods; a base's __init_subclass__ outside the checkout
    rebinds one, so the class Python sees has other code there."""
    sample, env = patched
    (tmp_path / "stubs" / "torch" / "__init__.py").write_text(TORCH_TAKING.format(taken))
    assert sample.pg("check", "--quiet").exit_code == 0  # reading cannot see it
    result = run(sample, env, sys.executable, "-c", IMPORT)
    assert result.returncode == 1
    assert f"{sample_repo.CLASS}.get_embed_and_head is " in result.stderr
    assert "not the code recorded at line" in result.stderr


TAKES_THE_PATCH_OUT = f"""
import shlex
import subprocess
kimi = {sample_repo.KIMI!r}
patched = open(kimi).read()
open(kimi, "w").write(subprocess.run(["git", "show", "HEAD:" + kimi], capture_output=True, text=True).stdout)
try:
    import sglang.srt.models.kimi_k25
finally:
    open(kimi, "w").write(patched)
"""


def test_a_run_that_takes_the_patch_out_and_puts_it_back_is_refused(patched, tmp_path) -> None:
    """(6) The end state holds the patch; the process imported other code."""
    sample, env = patched
    script = tmp_path / "sly.py"
    script.write_text(TAKES_THE_PATCH_OUT)
    result = run(sample, env, sys.executable, str(script))
    assert result.returncode == 1
    assert "its content changed after patchguard checked it" in result.stderr
    assert sample.pg("check", "--quiet").exit_code == 0  # the end state alone looks fine


def test_a_run_that_imports_no_guarded_module_is_not_attested(patched, tmp_path) -> None:
    """(f) A benchmark that asks a server left running: its number came from elsewhere."""
    sample, env = patched
    stamp = tmp_path / "runs.jsonl"
    result = run(sample, env, sys.executable, "-c", "print('tok/s 61')", stamp=stamp)
    assert result.returncode == 0
    assert (
        f"no process of this run imported {sample_repo.KIMI}: the number came from elsewhere"
        in result.stderr
    )
    assert attestations(stamp)["counted"] is False


@pytest.mark.parametrize("flag", ["-I", "-E", "-S"])
def test_a_python_started_without_the_guard_is_named_and_not_proof(patched, tmp_path, flag) -> None:
    """(3) -I and -E skip PYTHONPATH, -S sitecustomize: such a process cannot attest, so it
    proves nothing."""
    sample, env = patched
    child = f"import subprocess, sys; subprocess.run([sys.executable, {flag!r}, '-c', 'pass'])"
    script = f"{IMPORT}; {child}"
    stamp = tmp_path / "runs.jsonl"
    result = run(sample, env, sys.executable, "-c", script, stamp=stamp)
    assert result.returncode == 0
    assert f"started a Python that cannot attest (started with {flag})" in result.stderr
    assert attestations(stamp)["counted"] is False
    itself = run(sample, env, sys.executable, flag, "-c", "pass")
    assert f"starts Python with {flag}, which skips the import guard" in itself.stderr


def test_a_python_started_with_a_cleared_environment_is_named(patched, tmp_path) -> None:
    sample, env = patched
    child = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'], env={})"
    stamp = tmp_path / "runs.jsonl"
    result = run(sample, env, sys.executable, "-c", f"{IMPORT}; {child}", stamp=stamp)
    assert "cannot attest (started with a cleared environment)" in result.stderr
    assert attestations(stamp)["counted"] is False


def test_compare_does_not_count_a_run_that_imported_no_guarded_module(patched) -> None:
    """(f) The incident's own number from a server left running is never a sample."""
    sample, env = patched
    number = "print('Output token throughput (tok/s): 61')"
    compare = ["compare", "HEAD~1", "HEAD", "--max-repeats", "8"]
    result = subprocess.run(
        ["patchguard", "-C", str(sample.root), *compare, "--", sys.executable, "-c", number],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 1, result.stderr
    assert (
        f"61 not counted: no process of this run imported {sample_repo.KIMI}: the number came "
        "from elsewhere, e.g. a server left running" in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_nothing_is_installed_where_python_looks_without_run(clean_env) -> None:
    """The guard costs nothing when `run` is not used: Python finds no sitecustomize of ours
    and no .pth names it."""
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib.util as u, sys; s = u.find_spec('sitecustomize');"
            "print(s and s.origin); print(sys.meta_path)",
        ],
        capture_output=True,
        text=True,
        env=clean_env,
    ).stdout
    assert "attest" not in found and "_Guard" not in found


FORGES = f"""
import os
records = os.path.join(os.environ["PATCHGUARD_ATTEST"], "records")
head = f"{{os.getpid()}}\\t{{os.getppid()}}\\tpython"
row = "import\\tsglang.srt.models.kimi_k25\\t{{}}\\tok\\t"
with open(os.path.join(records, "1-1"), "w") as handle:
    handle.write(head + "\\n" + row.format(os.path.realpath({sample_repo.KIMI!r})) + "\\n00\\n")
print("tok/s 61")
"""


def test_a_record_the_run_did_not_write_is_not_counted(patched, tmp_path) -> None:
    """What a benchmark writes itself, without the run's key, attests nothing."""
    sample, env = patched
    script = tmp_path / "forge.py"
    script.write_text(FORGES)
    stamp = tmp_path / "runs.jsonl"
    result = run(sample, env, sys.executable, str(script), stamp=stamp)
    assert result.returncode == 0, result.stderr
    assert "does not carry the run's key (1-1): forged or damaged" in result.stderr
    assert attestations(stamp)["counted"] is False


def test_a_same_size_edit_within_the_same_second_runs_the_py_not_its_stale_pyc(patched) -> None:
    """(4) A timestamp .pyc matches by mtime and size: Python runs the old bytecode; the guard
    compiles the .py itself, so the run measures (and attests) the recorded code."""
    sample, env = patched
    text = sample.kimi.read_text()
    mtime = sample.kimi.stat().st_mtime_ns
    sample.kimi.write_text(text.replace("def get_embed_and_head", "def get_embed_and_hxad"))
    os.utime(sample.kimi, ns=(mtime, mtime))
    py_compile.compile(str(sample.kimi))  # timestamp-based, as Python writes it
    sample.kimi.write_text(text)
    os.utime(sample.kimi, ns=(mtime, mtime))
    plain = subprocess.run([sys.executable, "-c", IMPORT], capture_output=True, text=True, env=env)
    assert "methods False" in plain.stdout  # Python itself runs the stale bytecode
    result = run(sample, env, sys.executable, "-c", IMPORT)
    assert result.returncode == 0, result.stderr
    assert "methods True" in result.stdout
    assert "not attested" not in result.stderr


REAL = Path(__file__).parent / "data" / "sglang_0_5_10" / "kimi_k25.py.txt"
REAL_BENCH = f"""
import sys
sys.path[:0] = [{str(Path(__file__).parent)!r}, "python"]
import standin_packages
standin_packages.install()
import sglang.srt.models.kimi_k25 as k
print("methods", "get_embed_and_head" in vars(k.KimiK25ForConditionalGeneration))
"""


@pytest.fixture
def real_layout(tmp_path: Path, clean_env: dict[str, str]) -> tuple[Path, dict]:
    """sglang 0.5.10's real kimi_k25.py at its place in sglang's namespace layout (no
    `__init__.py` in srt/ and models/), committed without the EAGLE-3 methods, typed back and
    recorded as the patch."""
    root = tmp_path / "sglang"
    kimi = root / "python" / "sglang" / "srt" / "models" / "kimi_k25.py"
    kimi.parent.mkdir(parents=True)
    (root / "python" / "sglang" / "__init__.py").write_text("")
    text = REAL.read_text()
    start = text.index("    def set_eagle3_layers_to_capture(")
    kimi.write_text(text[:start].rstrip() + "\n\n\n" + text[text.index("EntryClass = [") :])
    env = {**clean_env, "PYTHONPATH": ""}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "sglang 0.5.10"]):
        subprocess.run(["git", *args], cwd=root, check=True, env=env)
    kimi.write_text(text)
    recorded = subprocess.run(
        ["patchguard", "-C", str(root), "record", "eagle3", str(kimi.relative_to(root))],
        capture_output=True,
        text=True,
        env=env,
    )
    assert recorded.returncode == 0, recorded.stderr
    (tmp_path / "bench.py").write_text(REAL_BENCH)
    return root, env


def test_the_real_model_file_in_its_namespace_layout_is_attested(real_layout, tmp_path) -> None:
    """(2) Imported as sglang.srt.models.kimi_k25 (reading names it kimi_k25): attested."""
    root, env = real_layout
    stamp = tmp_path / "runs.jsonl"
    sample = Sample(root, {})
    result = run(sample, env, sys.executable, str(tmp_path / "bench.py"), stamp=stamp)
    assert result.returncode == 0, result.stderr
    assert "methods True" in result.stdout
    seen = attestations(stamp)
    assert seen["counted"] is True, seen
    assert [p["module"] for p in seen["processes"]] == ["sglang.srt.models.kimi_k25"]


def test_a_stale_copy_of_the_namespace_layout_is_refused(real_layout, tmp_path) -> None:
    """(2) The same name from another directory on sys.path is a wrong import, though reading
    names the checkout's file kimi_k25."""
    root, env = real_layout
    stale = tmp_path / "site" / "sglang" / "srt" / "models"
    stale.mkdir(parents=True)
    (tmp_path / "site" / "sglang" / "__init__.py").write_text("")
    shown = subprocess.run(
        ["git", "show", "HEAD:python/sglang/srt/models/kimi_k25.py"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    (stale / "kimi_k25.py").write_text(shown.stdout)
    bench = tmp_path / "bench.py"
    bench.write_text(bench.read_text().replace('"python"]', f"{str(tmp_path / 'site')!r}]"))
    plain = subprocess.run([sys.executable, str(bench)], capture_output=True, text=True, env=env)
    assert "methods False" in plain.stdout, plain.stderr  # Python itself runs the stale copy
    result = run(Sample(root, {}), env, sys.executable, str(bench))
    assert result.returncode == 1
    assert f"from {stale / 'kimi_k25.py'}, not from the checkout's" in result.stderr


WAITS = """
import signal, sys, time
for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(number, lambda number, frame: sys.exit(40 + number))
print("ready", flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_run_passes_signals_on_and_keeps_the_exit_status(patched, number) -> None:
    """run supervises the command now: a signal sent to patchguard reaches it, and its exit
    status is run's."""
    sample, env = patched
    child = subprocess.Popen(
        ["patchguard", "-C", str(sample.root), "run", "--", sys.executable, "-c", WAITS],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    child.send_signal(number)
    assert child.wait(timeout=30) == 40 + number


def test_a_run_whose_guarded_modules_no_single_process_imported_is_not_counted(
    patched, tmp_path
) -> None:
    """One process must have run the patched code as a whole: two guarded files imported by
    two different processes are two halves of it."""
    sample, env = patched
    required = sample.pg("require", "python/sglang/srt/distributed/parallel_state.py::TP_GROUP")
    assert required.exit_code == 0, required.output
    child = "import subprocess, sys; subprocess.run([sys.executable, '-c', {!r}], check=True)"
    script = "import sglang.srt.distributed.parallel_state; " + child.format(IMPORT)
    stamp = tmp_path / "runs.jsonl"
    result = run(sample, env, sys.executable, "-c", script, stamp=stamp)
    assert result.returncode == 0, result.stderr
    assert "methods True" in result.stdout
    assert "no single process of this run imported all of" in result.stderr
    seen = attestations(stamp)
    assert seen["counted"] is False
    assert len({p["pid"] for p in seen["processes"]}) == 2
    both = f"{script}; {IMPORT}"
    assert run(sample, env, sys.executable, "-c", both).stderr == ""


def test_a_run_whose_patches_guard_no_python_module_counts(sample: Sample, clean_env, tmp_path):
    """Attestation is about Python modules: a patch on a README has nothing to attest, and its
    runs count as before."""
    (sample.root / "README.md").write_text("# sglang (sample), with notes\n")
    recorded = sample.pg("record", "notes", "README.md")
    assert recorded.exit_code == 0, recorded.output
    stamp = tmp_path / "runs.jsonl"
    result = run(sample, clean_env, sys.executable, "-c", "print('tok/s 94')", stamp=stamp)
    assert result.returncode == 0
    assert result.stderr == ""
    assert attestations(stamp) == {"counted": True, "problems": [], "processes": []}


def test_the_sitecustomize_the_guard_shadows_still_runs_once(patched, tmp_path) -> None:
    """The guard goes first on PYTHONPATH, then runs the sitecustomize Python would have run."""
    sample, env = patched
    own = tmp_path / "own"
    own.mkdir()
    said = "import os, sys\nif 'PATCHGUARD_ATTEST' in os.environ:\n    print('own sitecustomize')\n"
    (own / "sitecustomize.py").write_text(said)  # said in the command's processes only
    env = {**env, "PYTHONPATH": f"{own}{os.pathsep}{env['PYTHONPATH']}"}
    result = run(sample, env, sys.executable, "-c", f"{IMPORT}; import sitecustomize")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "own sitecustomize\nmethods True\n"
