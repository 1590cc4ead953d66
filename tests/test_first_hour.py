"""What a new user trips over in the first hour (issue: first hour): each item has a test here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Sample

ARGS_PRINTER = "import sys; print(sys.argv[1:])"


def pg_process(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["patchguard", *map(str, args)], env=env, capture_output=True, text=True
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture
def bench(sample: Sample, tmp_path: Path) -> Path:
    sample.record_eagle3()
    script = tmp_path / "bench.py"
    script.write_text(ARGS_PRINTER + "\n")
    return script


# --- 1. run stops reading its own options at the command ----------------------------------------


@pytest.mark.parametrize(
    "prefix",
    [(), ("--",), ("env", "FOO=1"), ("nice", "-n", "5")],
    ids=["plain", "dashdash", "env", "nice"],
)
def test_options_after_the_command_are_the_commands(
    sample: Sample, bench: Path, clean_env: dict[str, str], prefix: tuple[str, ...]
) -> None:
    result = pg_process(
        clean_env,
        "-C",
        sample.root,
        "run",
        *prefix,
        sys.executable,
        bench,
        "--apply",
        "x",
        "--help",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['--apply', 'x', '--help']"


# --- 2. --import checks the interpreter the command will use -------------------------------------


@pytest.fixture
def other_venv(sample: Sample, tmp_path: Path) -> Path:
    """Another interpreter, which (unlike patchguard's) imports sglang from the checkout."""
    venv = tmp_path / "other-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "sglang-checkout.pth").write_text(str(sample.root / "python") + "\n")
    return venv / "bin" / "python"


def test_import_is_checked_with_the_commands_interpreter(
    sample: Sample, bench: Path, other_venv: Path, clean_env: dict[str, str]
) -> None:
    result = pg_process(
        clean_env, "-C", sample.root, "run", "--import", "sglang", "--",
        other_venv, bench, "--apply", "x",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['--apply', 'x']"


def test_import_follows_a_scripts_shebang(
    sample: Sample, tmp_path: Path, other_venv: Path, clean_env: dict[str, str]
) -> None:
    sample.record_eagle3()
    script = tmp_path / "bench-script"
    script.write_text(f"#!{other_venv}\n{ARGS_PRINTER}\n")
    script.chmod(0o755)
    result = pg_process(clean_env, "-C", sample.root, "run", "--import", "sglang", script, "-v")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['-v']"


def test_import_failure_names_the_interpreter_and_the_flag(
    sample: Sample, bench: Path, clean_env: dict[str, str]
) -> None:
    result = pg_process(
        clean_env, "-C", sample.root, "run", "--import", "sglang", sys.executable, bench
    )
    assert result.returncode == 1
    assert f"{sys.executable} cannot import sglang at all" in result.stderr
    assert "--python PATH" in result.stderr
    assert "command NOT run" in result.stderr
