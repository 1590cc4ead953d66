"""Every place the code and the docs name a module of ours (`guard.store.history`,
`guard.tree.assess.Worktree`, `guard/git/repo.py`) names one that exists: a move into layers
or a split must not leave a reader sent to a module that is gone."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from conftest import ROOT

DOTTED = re.compile(r"\bguard(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"\bguard/[\w/]+\.py\b")


def texts() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "patchguard_entry.py"]
    for folder in ("guard", "tests", "scripts", "benchmarks", "docs", "hooks"):
        for path in sorted((ROOT / folder).rglob("*")):
            parts = path.relative_to(ROOT).parts
            if path.is_file() and path.suffix in (".py", ".md", ".sh") and "work" not in parts:
                found.append(path)
    return found


def names_something(dotted: str) -> bool:
    """The longest importable module prefix, then attributes for the rest."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def test_every_module_named_in_code_and_docs_exists() -> None:
    missing: dict[str, str] = {}
    for path in texts():
        text = path.read_text(errors="replace")
        for dotted in {m.group(0).rstrip(".") for m in DOTTED.finditer(text)}:
            if "__main__" not in dotted and not names_something(dotted):
                missing.setdefault(dotted, str(path.relative_to(ROOT)))
        for named in {m.group(0) for m in PATH.finditer(text)}:
            if not (ROOT / named).is_file():
                missing.setdefault(named, str(path.relative_to(ROOT)))
    assert missing == {}, f"names of modules that do not exist (name: where): {missing}"
