"""Issue 21, item 11: every --json format is documented (docs/json.md) with exactly the keys the
real output has, top level and one level into `patches`, so the docs cannot drift."""

from __future__ import annotations

import json
import re

import click
import pytest
from conftest import ROOT, Sample

from guard.cli import cli

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
]


@pytest.mark.parametrize(("args", "section", "patches"), COMMANDS, ids=lambda a: str(a))
def test_every_json_key_is_documented_and_every_documented_key_is_there(
    sample: Sample, args: tuple[str, ...], section: str, patches: str | None
) -> None:
    sample.record_eagle3()
    result = sample.pg(*args)
    report = json.loads(result.output)
    assert set(report) == documented(section), args
    if patches is not None:
        assert set(report["patches"][0]) == documented(patches), args


def test_every_command_with_json_has_a_section() -> None:
    def with_json(command: click.Command, path: str) -> set[str]:
        found = {path} if any("--json" in p.opts for p in command.params) else set()
        for name, sub in getattr(command, "commands", {}).items():
            found |= with_json(sub, f"{path} {name}".strip())
        return found

    sections = set(re.findall(r"`patchguard ([a-z ]+?) --json`", DOC))
    assert with_json(cli, "") <= sections
