"""No traceback, ever: one error handler around every command and hook (issue 11, item 11)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import Sample

from guard.errors import CRASH_LOG_NAME, INTERRUPTED_MESSAGE
from guard.fastpath import blob_id
from guard.gitdir import locate


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
    (layout.store_dir / "validated").write_text(blob_id(raw) + "\n")


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


def test_ctrl_c_exits_130_with_one_line(sample: Sample, clean_env: dict[str, str]) -> None:
    sample.record_eagle3()
    child = subprocess.Popen(  # `import -` waits on stdin: a command busy when Ctrl-C comes
        ["patchguard", "-C", str(sample.root), "import", "-"],
        env=clean_env,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(1.0)
    os.killpg(child.pid, signal.SIGINT)
    _, stderr = child.communicate(timeout=30)
    assert child.returncode == 130
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
