"""Property tests: random patches to random Python files, with the user's unrelated edits mixed in."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from conftest import git, patchguard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HEADER_LINES = 8  # module constants the user edits; the class below is what patches touch
GAP = ["", "", "", "", ""]  # keeps user edits and patch hunks apart, as unrelated edits are


def base_lines(methods: int) -> list[str]:
    lines = [f"C_{i} = {i}" for i in range(HEADER_LINES)] + GAP + ["class Model:"]
    for number in range(methods):
        lines += [f"    def m{number}(self):", f"        return {number}", ""]
    return lines


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[str], list[str], list[str]]:
    """(base, patched, patched plus the user's later edits) as lists of lines."""
    methods = draw(st.integers(min_value=1, max_value=8))
    base = base_lines(methods)
    class_start = HEADER_LINES + len(GAP) + 1
    patched = list(base)
    after = sorted(
        draw(st.sets(st.integers(0, methods - 1), min_size=1, max_size=methods)), reverse=True
    )
    for number in after:  # insert new methods after some existing ones
        at = class_start + 3 * number + 3
        patched[at:at] = [f"    def added_{number}(self):", f"        return {number} * 2", ""]
    if draw(st.booleans()):  # and change a body the patch owns
        patched[class_start + 1] = "        return -1"
    edited = list(patched)
    for index in draw(st.sets(st.integers(0, HEADER_LINES - 1), max_size=3)):
        edited[index] = f"C_{index} = {draw(st.integers(100, 999))}  # mine"
    return base, patched, edited


def write(path: Path, lines: list[str]) -> bytes:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(data)
    return data


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(scenarios())
def test_record_unapply_apply_round_trips(scenario) -> None:
    base, patched, edited = scenario
    root = Path(tempfile.mkdtemp(prefix="patchguard-prop-"))
    try:
        git(root, "init", "-q")
        module = root / "model.py"
        base_bytes = write(module, base)
        git(root, "add", "-A")
        git(root, "commit", "-qm", "base")
        write(module, patched)
        assert patchguard("-C", root, "record", "p", "model.py").exit_code == 0
        edited_bytes = write(module, edited)  # the user's unrelated edits, after recording

        assert patchguard("-C", root, "unapply").exit_code == 0
        without_patch = module.read_bytes()
        user_only = [*edited[:HEADER_LINES], *base[HEADER_LINES:]]
        assert without_patch == ("\n".join(user_only) + "\n").encode()

        assert patchguard("-C", root, "apply").exit_code == 0
        assert module.read_bytes() == edited_bytes  # record, unapply, apply: same bytes
        assert patchguard("-C", root, "apply").exit_code == 0
        assert module.read_bytes() == edited_bytes  # apply twice == apply once

        assert patchguard("-C", root, "unapply").exit_code == 0
        assert module.read_bytes() == without_patch  # unapply after apply: original bytes
        if without_patch == base_bytes:
            assert git(root, "status", "--porcelain").stdout == ""
    finally:
        shutil.rmtree(root, ignore_errors=True)
