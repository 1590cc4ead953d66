"""Every --json format is documented (docs/json.md) with exactly the keys the
real output has, top level and one level into `patches`, so the docs cannot drift."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import click
import pytest
from conftest import ROOT, Sample, patchguard
from helpers import subcommands

from guard.cli.app import cli

DOC = (ROOT / "docs" / "json.md").read_text()


def documented(caption: str) -> set[str]:
    """The keys of the first table after the line that starts with `caption`."""
    start = DOC.index(caption)
    block = next(part for part in DOC[start:].split("\n\n")[1:] if part.startswith("| key"))
    return set(re.findall(r"^\| `([a-z_]+)` \|", block, flags=re.M))


COMMANDS = [
    (("check", "--json"), "## `patchguard check --json`", "`patches` (in `check --json`"),
    (("status", "--json"), "## `patchguard status --json`", "`patches` (in `check --json`"),
    (("apply", "--json"), "## `patchguard apply --json`", "`patches` (in `apply --json`"),
    (("unapply", "--json", "--dry-run"), "## `patchguard apply --json`", "`patches` (in `apply"),
    (("list", "--json"), "## `patchguard list --json`", None),
    (("doctor", "--json"), "## `patchguard doctor --json`", None),
    (("stamp", "--json"), "## `patchguard stamp --json`", None),
    (("log", "--json"), "## `patchguard log --json`", "`changes` (in `log --json`"),
    (("log", "eagle3", "--json"), "## `patchguard log --json`", "`changes` (in `log --json`"),
    (("undo", "--list", "--json"), "## `patchguard undo --list --json`", "`entries` (in `undo"),
]
LISTS = ("patches", "changes", "entries")  # the list one level down each report holds


def assert_documented(report: dict[str, object], section: str, nested: str | None) -> None:
    assert set(report) == documented(section), section
    assert re.fullmatch(r"patchguard\.[a-z-]+/\d+", str(report["format"])), section
    if nested is not None:
        (key,) = [k for k in LISTS if k in report]
        items = report[key]
        assert isinstance(items, list) and items, section
        assert set(items[0]) == documented(nested), section


@pytest.mark.parametrize(("args", "section", "nested"), COMMANDS, ids=lambda a: str(a))
def test_every_json_key_is_documented_and_every_documented_key_is_there(
    sample: Sample, args: tuple[str, ...], section: str, nested: str | None
) -> None:
    sample.record_eagle3()
    result = sample.pg(*args)
    assert_documented(json.loads(result.stdout), section, nested)


def test_fetch_json_is_documented_key_by_key(sample: Sample, tmp_path: Path) -> None:
    """Through a real remote: a clone fetches the patch another pushed."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    sample.record_eagle3()
    assert sample.pg("push", str(remote)).exit_code == 0
    clone = tmp_path / "node1"
    subprocess.run(["git", "clone", "-q", str(sample.root), str(clone)], check=True)
    fetched = patchguard("-C", clone, "fetch", "--json", str(remote))
    assert fetched.exit_code == 0, fetched.output
    report = json.loads(fetched.stdout)
    assert_documented(report, "## `patchguard fetch --json`", None)
    assert report["format"] == "patchguard.fetch/1"
    assert report["changes"] == [{"kind": "new", "name": "eagle3"}]
    assert report["worktree"] == [
        "the worktree does not hold patch eagle3 yet: patchguard apply eagle3 puts it in"
    ]
    again = json.loads(patchguard("-C", clone, "fetch", "--json", str(remote)).stdout)
    assert again["up_to_date"] is True and again["changes"] == []


def test_every_report_has_a_format_key_naming_its_command(sample: Sample) -> None:
    """patchguard.COMMAND/N for every --json report (list and doctor had none)."""
    sample.record_eagle3()
    for args, name in [
        (("list", "--json"), "list/1"),
        (("doctor", "--json"), "doctor/1"),
        (("log", "--json"), "log/1"),
        (("undo", "--list", "--json"), "undo-list/1"),
        (("status", "--json"), "status/2"),
    ]:
        assert json.loads(sample.pg(*args).stdout)["format"] == f"patchguard.{name}", args


def test_every_command_with_json_has_a_section() -> None:
    def with_json(command: click.Command, path: str) -> set[str]:
        found = {path} if any("--json" in p.opts for p in command.params) else set()
        for name, sub in subcommands(command).items():
            found |= with_json(sub, f"{path} {name}".strip())
        return found

    sections = set(re.findall(r"`patchguard ([a-z ]+?)(?: --[a-z]+)* --json`", DOC))
    assert with_json(cli, "") <= sections
