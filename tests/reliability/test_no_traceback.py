"""No traceback, ever: one error handler around every command and hook."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample
from helpers import (
    NOBODY,
    as_another_user,
    blocked_reading_its_stdin,
    children_of,
    home_others_can_read,
    killed_at_the_end,
    subcommands,
    wait_until,
)

from guard.errors import CRASH_LOG_NAME, INTERRUPTED_MESSAGE
from guard.git.gitdir import locate
from guard.store.manifest import validated_key


def run(
    env: dict[str, str], *args: str | Path, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["patchguard", *map(str, args)], env=env, capture_output=True, text=True, **kwargs
    )


def break_the_manifest_behind_the_cache(sample: Sample) -> None:
    """A real way to reach a bug path: bytes the validated cache vouches for, but that lack a
    field. (Nothing is mocked: the files are just as a broken tool could leave them.)"""
    layout = locate(sample.root)
    data = json.loads(layout.manifest_path.read_text())
    del data["patches"][0]["files"][0]["patched_blob"]
    raw = (json.dumps(data, indent=2) + "\n").encode()
    layout.manifest_path.write_bytes(raw)
    (layout.store_dir / "validated").write_text(validated_key(raw) + "\n")


def test_an_internal_error_is_one_line_exit_3_and_a_log(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    break_the_manifest_behind_the_cache(sample)
    result = run(clean_env, "-C", sample.root, "status")
    assert result.returncode == 3
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "internal error" in result.stderr
    log = locate(sample.root).git_dir / CRASH_LOG_NAME
    assert str(log) in result.stderr
    assert "Traceback" in log.read_text()
    assert "python:" in log.read_text()


def test_an_internal_error_in_a_hook_fails_loudly_without_a_traceback(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    assert sample.pg("install").exit_code == 0
    sample.git("stash")
    break_the_manifest_behind_the_cache(sample)
    checkout = subprocess.run(
        ["git", "checkout", "-q", "old"],
        cwd=sample.root,
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert checkout.returncode != 0
    assert "internal error" in checkout.stderr
    assert "Traceback" not in checkout.stderr


def as_a_terminal_starts_a_job() -> None:
    """What a shell gives a foreground job: Ctrl-C neither blocked nor ignored, whatever the
    test runner's own process had (its mask and ignored signals survive fork and exec)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _started_as_a_job(
    sample: Sample, env: dict[str, str], *args: str, **streams: int
) -> subprocess.Popen[str]:
    """`patchguard -C ROOT ARGS` as a shell starts a foreground job (its own group, Ctrl-C
    neither blocked nor ignored), its stderr captured."""
    return subprocess.Popen(
        ["patchguard", "-C", str(sample.root), *args],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=as_a_terminal_starts_a_job,
        **streams,
    )


def test_ctrl_c_exits_130_with_one_line(sample: Sample, clean_env: dict[str, str]) -> None:
    sample.record_eagle3()
    # `import -` waits on stdin: a command busy when Ctrl-C comes
    child = _started_as_a_job(sample, clean_env, "import", "-", stdin=subprocess.PIPE)
    with killed_at_the_end(child):
        wait_until(lambda: blocked_reading_its_stdin(child.pid), "import - never read its stdin")
        os.killpg(child.pid, signal.SIGINT)
        # stdin stays open until it has ended: closed at once, the read could return the end
        # of the input before Python saw the signal, and the command end on an empty bundle
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            signals = Path(f"/proc/{child.pid}/status").read_text().splitlines()
            raise AssertionError(
                f"Ctrl-C did not end it: {[x for x in signals if 'Sig' in x]}"
            ) from None
        assert child.stderr is not None and child.stdin is not None
        stderr = child.stderr.read()
        child.stdin.close()
    assert child.returncode == 130, stderr
    assert stderr.strip() == INTERRUPTED_MESSAGE
    assert sample.pg("check").exit_code == 0  # nothing lost


def test_a_closed_pipe_is_not_an_error(sample: Sample, clean_env: dict[str, str]) -> None:
    sample.record_eagle3()
    shown = subprocess.run(
        f"patchguard -C '{sample.root}' show | head -1",
        shell=True,
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert shown.stdout == "patch eagle3\n"
    assert shown.stderr == ""


@pytest.mark.parametrize(
    "args",
    [
        ("list",),
        ("status",),
        ("status", "--json"),
        ("show",),
        ("check",),
        ("stamp",),
        ("export",),
        ("--help",),
        ("status", "--help"),
        ("git", "--help"),
        ("--version",),
    ],
    ids=" ".join,
)
def test_a_reader_that_closed_the_pipe_first_is_exit_0(
    sample: Sample, clean_env: dict[str, str], args: tuple[str, ...]
) -> None:
    """`patchguard list | head -c0` under `set -o pipefail`: the reader had enough, no guard
    failed. The pipe's read end is closed before patchguard starts, so every write fails."""
    sample.record_eagle3()
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            ["patchguard", "-C", str(sample.root), *args],
            env=clean_env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "Broken pipe" not in result.stderr and "BrokenPipe" not in result.stderr


def test_a_closed_pipe_keeps_a_failed_guard_failed(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    sample.git("stash")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            ["patchguard", "-C", str(sample.root), "check", "--json"],
            env=clean_env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 1, result.stderr  # the report was decided before the write
    assert "Traceback" not in result.stderr


def _limit_file_size() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))  # writes past 600 bytes fail: EFBIG


def test_a_write_that_fails_midway_is_one_line_and_loses_nothing(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """A full disk, simulated by a file-size limit: the same OSError path (EFBIG, not ENOSPC)."""
    sample.record_eagle3()
    sample.git("stash")
    sample.git("checkout", "-q", "old")
    before = sample.kimi.read_bytes()
    sample.pg("check")  # the merge made and kept (git merge-file's inputs are files too)
    result = subprocess.run(
        ["patchguard", "-C", str(sample.root), "apply"],
        env=clean_env,
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "nothing was changed" in result.stderr
    assert f"undo copy of {sample_repo.KIMI} in" in result.stderr  # which file it could not keep
    assert sample.kimi.read_bytes() == before
    undo_dir = locate(sample.root).git_dir / "patchguard-undo"
    assert not undo_dir.exists() or list(undo_dir.iterdir()) == []  # no empty entry left
    assert sample.pg("apply").exit_code == 0  # with room again, it simply works


def _limit_file_size_as_ulimit_does() -> None:
    """`ulimit -f` in a shell: the limit, and SIGXFSZ ignored, so a write fails with EFBIG."""
    _limit_file_size()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_record_under_a_file_size_limit_is_one_line_and_records_nothing(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    manifest = locate(sample.root).manifest_path
    before = manifest.read_bytes()
    tip = sample.git("rev-parse", "refs/patchguard/history").stdout
    with sample.kimi.open("a") as handle:
        handle.write("EXTRA = 1\n")
    result = subprocess.run(
        ["patchguard", "-C", str(sample.root), "record", "more", sample_repo.KIMI],
        env=clean_env,
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size_as_ulimit_does,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "File too large" in result.stderr
    assert manifest.read_bytes() == before
    assert "patch more" not in sample.pg("list").output
    # the history too: "nothing was changed" holds for the ref, not only manifest.json
    assert sample.git("rev-parse", "refs/patchguard/history").stdout == tip
    assert "recorded more" not in sample.pg("log").output


def test_status_in_a_deleted_directory_is_one_line(
    sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    gone = tmp_path / "gone"
    gone.mkdir()
    script = f"cd '{gone}' && rmdir '{gone}' && patchguard status; echo \"exit $?\""
    result = subprocess.run(["sh", "-c", script], env=clean_env, capture_output=True, text=True)
    assert result.stdout.splitlines()[-1] == "exit 2"
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "patchguard: the current directory no longer exists (deleted, or replaced by a "
        "checkout); cd into your checkout and run patchguard again"
    ]


def test_a_read_only_directory_during_apply_is_one_line(clean_env: dict[str, str]) -> None:
    prefix = as_another_user()
    with home_others_can_read() as home:
        root = home / "sglang"
        sample = Sample(root, sample_repo.build(root))
        sample.record_eagle3()
        sample.git("stash")
        sample.git("checkout", "-q", "old")
        subprocess.run(["chown", "-R", f"{NOBODY}:{NOBODY}", str(root)], check=True)
        models = root / "python/sglang/srt/models"
        subprocess.run(["chown", "root:root", str(models)], check=True)
        models.chmod(0o755)  # the user may read it, not write in it
        before = sample.kimi.read_bytes()
        env = {**clean_env, "HOME": str(home), "GIT_CONFIG_GLOBAL": "/dev/null"}
        result = subprocess.run(
            [*prefix, str(Path(sys.executable).parent / "patchguard"), "-C", str(root), "apply"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 2, result.stderr
        assert "Permission denied" in result.stderr
        assert "Traceback" not in result.stderr
        assert sample.kimi.read_bytes() == before


# One plausible invocation per command; the sweep fails if a command is missing here.
INVOCATIONS = {
    "apply": ["apply"],
    "bisect run": ["bisect", "run", "true"],
    "compare": ["compare", "HEAD", "HEAD", "--", "true"],
    "bisect start": ["bisect", "start"],
    "bisect good": ["bisect", "good"],
    "bisect bad": ["bisect", "bad"],
    "bisect skip": ["bisect", "skip"],
    "bisect reset": ["bisect", "reset"],
    "bisect log": ["bisect", "log"],
    "check": ["check"],
    "doctor": ["doctor"],
    "drop": ["drop", "eagle3"],
    "export": ["export"],
    "git": ["git", "status", "--short"],
    "hook": ["hook", "post-commit"],
    "import": ["import", "no-such-bundle.json"],
    "install": ["install"],
    "list": ["list"],
    "log": ["log", "eagle3"],
    "push": ["push", "no-such-remote"],
    "fetch": ["fetch", "no-such-remote"],
    "record": ["record", "p"],
    "resolve": ["resolve", "eagle3"],
    "require": ["require", f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward"],
    "run": ["run", "true"],
    "show": ["show"],
    "stamp": ["stamp"],
    "status": ["status"],
    "unapply": ["unapply"],
    "undo": ["undo"],
    "uninstall": ["uninstall"],
}


def _all_commands() -> set[str]:
    import click

    from guard.cli.app import cli

    found = set()
    for name, command in subcommands(cli).items():
        if isinstance(command, click.Group):
            found |= {f"{name} {sub}" for sub, c in subcommands(command).items() if not c.hidden}
        else:
            found.add(name)
    return found


def test_the_sweep_knows_every_command() -> None:
    assert set(INVOCATIONS) == _all_commands()


@pytest.mark.parametrize("state", ["no-repository", "broken-manifest", "bad-lock-timeout"])
def test_no_command_ever_prints_a_traceback(
    state: str, sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    env = dict(clean_env)
    where = sample.root
    if state == "no-repository":
        where = tmp_path / "not-a-repository"
        where.mkdir()
    else:
        sample.record_eagle3()
    if state == "broken-manifest":
        locate(sample.root).manifest_path.write_text("{")
    if state == "bad-lock-timeout":
        env["PATCHGUARD_LOCK_TIMEOUT"] = "soon"
    for name, args in INVOCATIONS.items():
        result = subprocess.run(
            ["patchguard", "-C", str(where), *args],
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )
        said = f"{state} {name}: {result.stderr}"
        assert "Traceback" not in result.stderr, said
        assert result.returncode in (0, 1, 2), said  # never 3: no bug reached
        if state == "bad-lock-timeout" and name in ("apply", "record", "drop"):
            assert result.returncode == 2, said
            assert "PATCHGUARD_LOCK_TIMEOUT='soon' is not a number of seconds" in result.stderr


# Bad input of every kind, fed to every command through the manifest (which every command but
# these reads) and through the files `import` and `stamp --diff` read.
READS_NO_PATCHES = {
    "doctor",
    "install",
    "uninstall",
    "undo",
    "bisect run",
    "log",
    "push",
    "fetch",
}  # log, push and fetch read the history ref (and the remote) before manifest.json
BAD_INPUTS = {
    "non-utf8": b'{"schema_version": 1, "patches": ["\xff\xfe"]}',
    "non-json": b"this is not json {",
    "deeply-nested": b"[" * 200_000 + b"]" * 200_000,
    "huge": b'{"schema_version": 1, "patches": "' + b"x" * (16 << 20) + b'"}',
}


@pytest.mark.parametrize("kind", BAD_INPUTS)
def test_bad_input_to_every_command_is_exit_2_in_one_line(
    kind: str, sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    bad = tmp_path / "bad-input"
    bad.write_bytes(BAD_INPUTS[kind])
    for args in (["import", str(bad)], ["stamp", "--diff", str(bad), str(bad)]):
        result = run(clean_env, "-C", sample.root, *args, stdin=subprocess.DEVNULL, timeout=120)
        said = f"{kind} {args[0]}: {result.stderr}"
        assert result.returncode == 2, said
        assert "Traceback" not in result.stderr, said
        assert len(result.stderr.strip().splitlines()) == 1, said
    good_bundle = tmp_path / "good.json"
    good_bundle.write_text(sample.pg("export").stdout)
    locate(sample.root).manifest_path.write_bytes(BAD_INPUTS[kind])
    commands = {**INVOCATIONS, "import": ["import", str(good_bundle)]}
    commands["hook"] = ["hook", "post-checkout", "0", "0", "1"]  # as git runs it: in the tree
    for name, args in commands.items():
        where = [] if name == "hook" else ["-C", sample.root]
        result = run(
            clean_env, *where, *args, cwd=sample.root, stdin=subprocess.DEVNULL, timeout=120
        )
        said = f"{kind} {name}: {result.stderr}"
        assert "Traceback" not in result.stderr, said
        if name in READS_NO_PATCHES:  # "nothing to undo", "no bisect is in progress", ...
            assert result.returncode in (0, 1, 2), said
            continue
        assert result.returncode == 2, said
        assert len(result.stderr.strip().splitlines()) == 1, said
        assert "manifest" in result.stderr, said


_FILLER = "".join(f"# upstream's long comment, line {n}\n" for n in range(100_000))  # 3.5 MB


def _stamp_reading_two_big_files(sample: Sample, env: dict[str, str]) -> subprocess.Popen[str]:
    """`patchguard stamp` started where it reads two model files of a few MB from git, both in
    one batch of `git cat-file` (two patches, taken out by `git stash`: not verified)."""
    models = [sample.kimi, sample.kimi.with_name("deepseek_v2.py")]
    for model in models:
        model.write_text(model.read_text() + _FILLER)
    sample.git("commit", "-qam", "two big model files")
    for number, model in enumerate(models):
        model.write_text(model.read_text() + "\n\ndef extra():\n    return 1\n")
        assert sample.pg("record", f"p{number}", model, "-m", "extra").exit_code == 0
    sample.git("stash", "-q")
    return _started_as_a_job(sample, env, "stamp", stdout=subprocess.DEVNULL)


def _stopped_when(child: subprocess.Popen[str], git_is: Callable[[str, int], bool]) -> int:
    """Step `child` (stopped, then let run a moment, again and again) from the moment its
    `git cat-file` has started until that git is in a state `git_is(wchan, bytes written)`
    accepts, with `child` stopped: that git's pid. Stepped, not polled: a poll misses a state
    that lasts a millisecond about one run in three, while a stopped reader leaves git blocked
    writing until it is let run again."""
    while (reader := _cat_file_of(child)) is None:
        assert child.poll() is None, "it ended before its git ever started"
        time.sleep(0.001)
    while True:
        os.kill(child.pid, signal.SIGSTOP)
        while _state(child.pid) not in "TZX":  # a stop takes microseconds
            time.sleep(0.0001)
        assert _state(child.pid) == "T", "it ended before its git was ever so"
        time.sleep(0.002)  # git fills the pipe its stopped reader leaves unread
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            if _git_is(reader, git_is):
                return int(reader)
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(0.0005)


def _cat_file_of(child: subprocess.Popen[str]) -> str | None:
    """The pid of `child`'s `git cat-file`, once it runs."""
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for pid in Path(f"/proc/{child.pid}/task/{child.pid}/children").read_text().split():
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"git\0cat-file\0"):
                return pid
    return None


def _git_is(pid: str, git_is: Callable[[str, int], bool]) -> bool:
    io = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return git_is(Path(f"/proc/{pid}/wchan").read_text(), int(io["wchar"]))


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _ended(child: subprocess.Popen[str], what: str) -> str:
    """`child`'s stderr once it ends (within 30 s, else `what` failed)."""
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{what}: still waiting on {children_of(child.pid)}") from None
    assert child.stderr is not None
    return child.stderr.read()


def test_ctrl_c_while_git_is_answering_is_130_not_a_hang(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """Ctrl-C while patchguard reads a batch of git objects: the answers git has not written
    yet must not keep patchguard waiting for git on its way out. It is interrupted while its
    `git cat-file` is blocked writing the first of two big files."""
    child = _stamp_reading_two_big_files(sample, clean_env)
    with killed_at_the_end(child):
        _stopped_when(
            child, lambda wchan, written: "pipe_write" in wchan and written < len(_FILLER)
        )
        os.kill(child.pid, signal.SIGINT)
        os.kill(child.pid, signal.SIGCONT)
        stderr = _ended(child, "Ctrl-C did not end it")
    assert child.returncode == 130, stderr
    assert stderr.strip() == INTERRUPTED_MESSAGE


def test_a_git_reader_killed_while_answering_fails_loudly(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """patchguard's `git cat-file` ends (killed, out of memory) halfway through the last
    answer of a batch: that file's bytes are cut short, and the next question goes into a pipe
    nobody reads. That is git failing: one line, exit 2; never a short file taken for the
    whole one, nor the closed pipe for a reader of patchguard's output that had enough (exit
    0: a hook that checked nothing would say nothing)."""
    child = _stamp_reading_two_big_files(sample, clean_env)
    with killed_at_the_end(child):
        reader = _stopped_when(
            child,
            lambda wchan, written: (
                "pipe_write" in wchan and len(_FILLER) < written < 2 * len(_FILLER)
            ),
        )
        os.kill(reader, signal.SIGKILL)
        wait_until(lambda: not Path(f"/proc/{reader}/cmdline").read_bytes(), "git lives on")
        os.kill(child.pid, signal.SIGCONT)
        stderr = _ended(child, "it never ended")
    assert child.returncode == 2, stderr
    assert "`git cat-file` stopped" in stderr and len(stderr.strip().splitlines()) == 1
