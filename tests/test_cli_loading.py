"""A command imports its own module of the CLI, not the whole CLI (issue 30): people run
`patchguard status` many times a day, and each run paid for all 24 commands' options and
imports. The group (guard.cli.app) knows each command by name and module, and loads it when it
runs; `--help`, which lists every command's summary, loads them all.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import click
import pytest
from conftest import ROOT, Sample
from helpers import modules_loaded, subcommands
from test_layers import imports_of_guard_modules

from guard.cli.app import COMMANDS, cli

COMMAND_MODULES = sorted({f"guard.cli.{where.split('.')[0]}" for where in COMMANDS.values()})


def loaded_command_modules(sample: Sample, *args: str) -> list[str]:
    return modules_loaded(sample.root, COMMAND_MODULES, *args)


@pytest.mark.parametrize(
    ("args", "modules"),
    [
        (("status",), ["guard.cli.worktree"]),
        (("status", "--help"), ["guard.cli.worktree"]),
        (("list", "--json"), ["guard.cli.patches"]),
        (("unapply", "--dry-run"), ["guard.cli.worktree"]),
        # the bisect shorthands lift the patches as `patchguard git` does (guard.cli.options)
        (("bisect", "log"), ["guard.cli.hunting"]),
    ],
)
def test_one_command_loads_its_own_module_only(
    sample: Sample, args: tuple[str, ...], modules: list[str]
) -> None:
    sample.record_eagle3()
    assert loaded_command_modules(sample, *args) == modules


def test_help_and_a_mistyped_command_still_know_every_command(sample: Sample) -> None:
    assert loaded_command_modules(sample, "--help") == COMMAND_MODULES
    typo = subprocess.run(
        [sys.executable, str(ROOT / "patchguard_entry.py"), "statu"],
        cwd=sample.root,
        capture_output=True,
        text=True,
    )
    assert typo.returncode == 2
    assert "No such command 'statu'. (Did you mean one of: 'stamp', 'status'?)" in typo.stderr


def test_the_group_names_every_command_its_modules_define() -> None:
    """A command added to a module but not to COMMANDS would be unreachable, silently."""
    found = subcommands(cli)
    assert list(found) == sorted(COMMANDS)
    for name, command in found.items():
        assert command.name == name
    defined = {}
    for module in COMMAND_MODULES:
        tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Call)
                and isinstance(d.func, ast.Attribute)
                and d.func.attr in ("command", "group")
                and isinstance(d.func.value, ast.Name)
                and d.func.value.id == "click"
                for d in node.decorator_list
            ):
                defined[node.name] = module
    named = {where.split(".")[1]: f"guard.cli.{where.split('.')[0]}" for where in COMMANDS.values()}
    assert named == defined
    assert all(isinstance(c, click.Command) for c in found.values())


def test_no_command_module_imports_the_group() -> None:
    """The group imports its commands by name (importlib), which tests/test_layers.py does not
    see: a command module importing guard.cli.app back would be a circle it cannot catch."""
    graph = imports_of_guard_modules()
    assert [name for name, imported in graph.items() if "guard.cli.app" in imported] == [
        "guard.entry"
    ]
