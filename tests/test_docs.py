"""The docs stay true: every error message has a troubleshooting entry, the Quickstart runs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

ERROR_TYPES = {"ConfigError", "GuardFailure", "GuardError", "UnsafePath"}
MIN_FRAGMENT = 12
# Calls whose N-th argument is a message shown to users (a state's reason, an import verdict).
DETAIL_ARGUMENT = {"FileVerdict": 2, "ImportResult": 4, "banner": 0}
REASON_FUNCTIONS = {"_busy", "fix_for", "describe_miss"}


def _fragment(node: ast.expr) -> str | None:
    """The longest literal piece of a message (f-string holes removed), as the entry's key."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        pieces = [node.value]
    elif isinstance(node, ast.JoinedStr):
        pieces = [v.value for v in node.values if isinstance(v, ast.Constant)]
    elif isinstance(node, ast.BinOp):
        pieces = [p for side in (node.left, node.right) if (p := _fragment(side))]
    else:
        return None
    best = max((p.strip() for p in pieces), key=len, default="")
    return best if len(best) >= MIN_FRAGMENT else None


def error_messages() -> list[tuple[str, int, str]]:
    """(file, line, key) for every message patchguard can print as an error or hook notice."""
    found = []
    for path in sorted((ROOT / "guard").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            is_problem = name == "append" and "problems" in ast.unparse(func)
            message = None
            if name in ERROR_TYPES or name == "say" or is_problem:
                message = node.args[0]
            elif name in DETAIL_ARGUMENT and len(node.args) > DETAIL_ARGUMENT[name]:
                message = node.args[DETAIL_ARGUMENT[name]]
            key = _fragment(message) if message is not None else None
            if key:
                found.append((path.name, node.lineno, key))
        for node in ast.walk(ast.parse(path.read_text())):  # reasons returned as text
            if isinstance(node, ast.FunctionDef) and node.name in REASON_FUNCTIONS:
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Return) and inner.value is not None:
                        key = _fragment(inner.value)
                        if key:
                            found.append((path.name, inner.lineno, key))
    template = (ROOT / "hooks" / "patchguard-hook.sh").read_text()
    for number, line in enumerate(template.splitlines(), 1):
        if match := re.search(r'echo "patchguard: (.*?)" >&2', line):
            key = max(re.split(r"\$\w+|\$\{\w+[^}]*\}", match.group(1)), key=len).strip()
            found.append(("patchguard-hook.sh", number, key))
    return found


def test_catalogue_finds_messages() -> None:
    assert len(error_messages()) > 30


@pytest.mark.parametrize("where", error_messages(), ids=lambda w: f"{w[0]}:{w[1]}")
def test_every_error_message_has_a_troubleshooting_entry(where: tuple[str, int, str]) -> None:
    text = " ".join((ROOT / "docs" / "troubleshooting.md").read_text().split())
    key = " ".join(where[2].split())
    assert key in text, (
        f"docs/troubleshooting.md has no entry quoting {key!r} ({where[0]}:{where[1]})"
    )


STEP = re.compile(
    r"<!-- tested -->\n```sh\n(?P<commands>.*?)```\n"
    r"(?:\nIt prints[^\n]*:\n\n```text\n(?P<output>.*?)```)?",
    flags=re.S,
)
# What the Quickstart says differs on a reader's screen, and nothing else: commit ids
# (a reader's commits are made at another time) and the venv interpreter's name.
COMMIT_ID = re.compile(r"\b(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
INTERPRETER = re.compile(r"(/bin/python3)(?:\.\d+)?$", flags=re.M)


def masked(text: str) -> str:
    return INTERPRETER.sub(r"\1", COMMIT_ID.sub("<id>", text))


def quickstart_steps() -> list[tuple[str, str]]:
    """(commands, what the step prints) for every `<!-- tested -->` block, in order."""
    text = (ROOT / "docs" / "quickstart.md").read_text()
    return [(m["commands"], m["output"] or "") for m in STEP.finditer(text)]


def run_quickstart(home: Path, env: dict[str, str]) -> list[str]:
    """Run every step in one shell, as a reader would; return what each step printed."""
    marker = "@@quickstart-step@@"
    script = "exec 2>&1\n" + "".join(
        f"{commands}echo {marker}\n" for commands, _ in quickstart_steps()
    )
    script += 'command -v python3 >"$HOME/python3-after-quickstart"\n'  # install must not shadow it
    result = subprocess.run(
        ["sh", "-ec", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    printed = result.stdout.replace(str(home), "~").split(marker + "\n")
    assert result.returncode == 0, result.stdout
    return printed[:-1]


def test_quickstart_runs_as_written_and_prints_what_it_shows(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    steps = quickstart_steps()
    assert len(steps) == (ROOT / "docs" / "quickstart.md").read_text().count("```sh")
    env = {**clean_env, "HOME": str(tmp_path), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("VIRTUAL_ENV", None)
    for name in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):  # the reader's commits: made now
        env.pop(name, None)
    printed = run_quickstart(tmp_path, env)
    for (commands, shown), output in zip(steps, printed, strict=True):
        assert masked(output) == masked(shown), f"step:\n{commands}"
    assert COMMIT_ID.search(printed[1]) and "<id>" not in printed[1]  # ids were there to mask
    python3 = (tmp_path / "python3-after-quickstart").read_text()
    assert not python3.startswith(str(tmp_path / ".venvs")), "the install shadows python3"


def test_docs_site_builds_strictly_with_the_diagram(tmp_path: Path) -> None:
    """`make docs`: no warning (a broken link fails), and mermaid is a diagram, not code."""
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    design = (site / "design" / "index.html").read_text()
    assert '<pre class="mermaid"><code>flowchart' in design
    assert "language-mermaid" not in design
