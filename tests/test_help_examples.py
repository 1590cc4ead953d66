"""Every example in every command's help runs, as written, and does what it says.

The examples form one story on the sample history (scripts/sample_repo.py, build_hunt): a
clone of upstream at ~/sglang, reset to c0 with the EAGLE-3 methods added, a benchmark at
~/bench.py (and one that prints sglang's throughput rows at ~/throughput.py), a serving venv
at ~/venvs/serve that imports sglang from the checkout (with a stand-in torch, so `check
--runtime` can import the model), a second checkout at ~/sglang-gpu2, and a stash of an unrelated edit. They run through sh in that
order, in ~/sglang, with HOME pointing at the test's directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest
import sample_repo
from conftest import git
from helpers import subcommands

from guard.cli.app import cli

# The order of the story: each command's examples run in the order its help lists them.
ORDER = [
    "",  # patchguard itself: record, then check
    "record",
    "require",
    "install",
    "doctor",
    "check",
    "status",
    "show",
    "log",
    "list",
    "apply",
    "unapply",
    "undo",
    "stamp",
    "run",
    "compare",
    "export",
    "import",
    "push",
    "fetch",
    "git",
    "bisect",
    "bisect run",
    "resolve",
    "drop",
    "uninstall",
]


def examples() -> dict[str, list[str]]:
    """Command path ("" for the group) -> the examples its help lists."""
    found: dict[str, list[str]] = {}

    def visit(command: click.Command, path: str) -> None:
        lines = (command.epilog or "").splitlines()
        if "Examples:" in lines:
            start = lines.index("Examples:") + 1
            listed = []
            for line in lines[start:]:
                if not line.strip():
                    break
                listed.append(line.strip())
            found[path] = listed
        for name, sub in subcommands(command).items():
            if not sub.hidden:
                visit(sub, f"{path} {name}".strip())

    visit(cli, "")
    return found


def test_the_story_covers_every_command_with_examples() -> None:
    assert sorted(examples()) == sorted(ORDER)


@pytest.fixture
def home(tmp_path: Path, clean_env: dict[str, str]) -> Iterator[tuple[Path, dict[str, str]]]:
    home = tmp_path / "home"
    home.mkdir()
    upstream = tmp_path / "upstream"
    sample_repo.build_hunt(upstream)
    checkout = home / "sglang"
    git(tmp_path, "clone", "-q", str(upstream), str(checkout))
    git(checkout, "reset", "-q", "--hard", "c0")
    git(tmp_path, "clone", "-q", str(upstream), str(home / "sglang-gpu2"))
    git(home / "sglang-gpu2", "reset", "-q", "--hard", "c0")
    other = checkout / "python/sglang/srt/models/deepseek_v2.py"
    other.write_text(other.read_text() + "# local experiment\n")
    git(checkout, "stash", "push", "-q", "--", str(other))
    sample_repo.add_eagle3_methods(checkout)
    (home / "bench.py").write_text(sample_repo.HUNT_BENCH_TEXT)
    (home / "throughput.py").write_text(sample_repo.THROUGHPUT_BENCH_TEXT)
    venv = home / "venvs" / "serve"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "sglang-checkout.pth").write_text(str(checkout / "python") + "\n")
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(
        "import types\n\nnn = types.SimpleNamespace(Module=object)\n"
    )
    env = {**clean_env, "HOME": str(home), "PYTHONPATH": str(checkout / "python")}
    yield home, env


def _methods_in_place(home: Path) -> bool:
    text = (home / "sglang" / sample_repo.KIMI).read_text()
    return all(text.count(f"def {m}(") == 1 for m in sample_repo.METHODS)


def _listed(home: Path) -> dict[str, object]:
    listing = subprocess.run(
        [
            str(Path(sys.executable).parent / "patchguard"),
            "-C",
            str(home / "sglang"),
            "list",
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    return json.loads(listing.stdout) if listing.returncode == 0 else {}


# What some examples promise beyond exit 0, checked right after them.
EFFECTS: dict[str, Callable[[Path, str], bool]] = {
    "patchguard check --json": lambda home, out: json.loads(out)["ok"] is True,
    "patchguard stamp >> results.jsonl": lambda home, out: (
        (home / "sglang" / "results.jsonl").read_text().count("patchguard.stamp/1") == 1
    ),
    "patchguard export -o eagle3.bundle.json": lambda home, out: (
        home / "sglang" / "eagle3.bundle.json"
    ).exists(),
    "patchguard export eagle3 > eagle3-only.bundle.json": lambda home, out: (
        '"name": "eagle3"' in (home / "sglang" / "eagle3-only.bundle.json").read_text()
    ),
    "patchguard export | patchguard -C ~/sglang-gpu2 import -": lambda home, out: (
        "eagle3" in (home / "sglang-gpu2" / ".git" / "patchguard" / "manifest.json").read_text()
    ),
    "patchguard git pull": lambda home, out: _methods_in_place(home),
    "patchguard git checkout v0.5.9": lambda home, out: _methods_in_place(home),
    "patchguard git stash pop": lambda home, out: (
        "local experiment" in (home / "sglang/python/sglang/srt/models/deepseek_v2.py").read_text()
    ),
    "patchguard bisect run --log hunt.jsonl python ~/bench.py": lambda home, out: (
        "is the first bad commit" in out
    ),
    "patchguard git bisect reset": lambda home, out: _methods_in_place(home),
    "patchguard compare v0.5.9 v0.5.10 -- python ~/throughput.py": lambda home, out: (
        "different: B is 3" in out and _methods_in_place(home)
    ),
    "patchguard drop eagle3": lambda home, out: not _listed(home).get("patches"),
    "patchguard push origin": lambda home, out: "pushed the patches to origin" in out,
    "patchguard -C ~/sglang-gpu2 fetch --install origin": lambda home, out: (
        home / "sglang-gpu2" / ".git" / "hooks" / "post-checkout"
    ).exists(),
    "patchguard uninstall": lambda home, out: (
        not (home / "sglang" / ".git" / "hooks" / "post-checkout").exists()
    ),
}


def test_every_help_example_runs_as_written(home: tuple[Path, dict[str, str]]) -> None:
    root, env = home
    listed = examples()
    for command in ORDER:
        for example in listed[command]:
            result = subprocess.run(
                ["sh", "-c", example],
                cwd=root / "sglang",
                env=env,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=120,
            )
            said = f"{example}\n{result.stdout}\n{result.stderr}"
            assert result.returncode == 0, said
            assert "Traceback" not in result.stderr, said
            check = EFFECTS.get(example)
            assert check is None or check(root, result.stdout), said
