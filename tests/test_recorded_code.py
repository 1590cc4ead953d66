"""Green means the recorded code, not only its names.

1. A definition the patch adds that is in place by name with another body is `edited`: never
   green (`check`, `run`, `stamp`), named with its first differing line; `apply` puts the
   recorded lines back (journaled, undoable, other edits kept), `record` keeps the edit.
2. A function the patch adds at module level whose first parameter is `self` is a slip
   wherever it stands (after `EntryClass` too): `record` refuses naming the class,
   `--as-typed` records it.
3. `check` names module-level copies of a patch's methods, with their lines and the fix.

All through the installed CLI on the sglang-shaped model file, the patch typed as a person
types it (right after the last method, no comment).
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest
import sample_repo
from conftest import Sample, method_count
from helpers import Checkout
from test_resolve import build as build_resolve_history

from guard.truth import bodies, slips

KIMI = sample_repo.KIMI
CLASS = sample_repo.CLASS
CALL = "self.language_model.set_eagle3_layers_to_capture(layer_ids)"
SPEC = f"{CLASS}.set_eagle3_layers_to_capture"
# The incident's slip: the three methods typed at column 0 after `EntryClass = [...]`.
AT_COLUMN_0 = textwrap.dedent(sample_repo.EAGLE3_METHODS)


@pytest.fixture
def node(sample: Sample, clean_env: dict[str, str]) -> Checkout:
    """The sample checkout with the three methods recorded as patch eagle3."""
    sample.record_eagle3()
    return Checkout(sample.root, clean_env)


def gut(node: Checkout) -> None:
    """The body of set_eagle3_layers_to_capture replaced with `pass`."""
    text = node.kimi.read_text()
    assert text.count(CALL) == 1
    node.kimi.write_text(text.replace(CALL, "pass"))


def test_a_gutted_body_is_edited_never_green(node: Checkout) -> None:
    gut(node)
    status = node.pg("status", check=1)
    assert "eagle3: edited" in status.stdout
    line = node.kimi.read_text().splitlines().index("        pass") + 1
    named = f"{SPEC} is not the recorded code: line {line} is `pass`, recorded `{CALL}`"
    assert named in status.stdout
    checked = node.pg("check", check=1)
    assert named in checked.stderr
    assert "patchguard record eagle3" in checked.stderr  # keep the edit
    assert "patchguard apply eagle3" in checked.stderr  # or put the recorded code back
    ran = node.pg("run", "--", "python3", "-c", "print('ran')", check=1)
    assert "ran" not in ran.stdout
    assert named in ran.stderr
    stamp = json.loads(node.pg("stamp", check=0).stdout)
    assert stamp["ok"] is False
    assert stamp["patches"] == {"eagle3": "edited"}
    assert any(named in problem for problem in stamp["problems"])
    assert json.loads(node.pg("check", "--json", check=1).stdout)["patches"][0]["state"] == "edited"
    unapplied = node.pg("unapply", check=1)
    assert "keep the edit first (patchguard record eagle3)" in unapplied.stdout
    assert "pass" in node.kimi.read_text()  # nothing written


def test_apply_puts_the_recorded_code_back_keeping_other_edits_and_undo_takes_it_back(
    node: Checkout,
) -> None:
    recorded = node.kimi.read_text()
    gut(node)
    text = node.kimi.read_text().replace(
        "        self.language_model.load_weights(weights)\n",
        "        self.language_model.load_weights(weights)  # my own edit\n",
    )
    node.kimi.write_text(text + "MY_LOCAL = 1\n")
    edited = node.kimi.read_text()
    dry = node.pg("apply", "--dry-run", check=0)
    assert "would put the recorded code back" in dry.stdout
    assert node.kimi.read_text() == edited
    applied = node.pg("apply", check=0)
    assert "put the recorded code back" in applied.stdout
    expected = recorded.replace("load_weights(weights)\n", "load_weights(weights)  # my own edit\n")
    assert node.kimi.read_text() == expected + "MY_LOCAL = 1\n"
    node.pg("check", check=0)
    node.pg("undo", check=0)
    assert node.kimi.read_text() == edited
    assert "eagle3: edited" in node.pg("status", check=1).stdout


def test_recording_the_edit_keeps_it_and_makes_it_applied(node: Checkout) -> None:
    gut(node)
    node.pg("record", "eagle3", KIMI, check=0)
    assert "eagle3: applied" in node.pg("status", check=0).stdout
    node.pg("check", check=0)
    assert "pass" in node.kimi.read_text()


def test_comments_and_formatting_are_not_an_edit_a_docstring_is(node: Checkout) -> None:
    text = node.kimi.read_text()
    node.kimi.write_text(
        text.replace(
            f"        {CALL}\n",
            "        # forwarded as is\n"
            "        self.language_model.set_eagle3_layers_to_capture(\n"
            "            layer_ids\n"
            "        )\n",
        ).replace("def get_embed_and_head(self):", "def get_embed_and_head( self ):")
    )
    status = node.pg("status", check=0)
    assert "eagle3: applied" in status.stdout
    node.pg("check", check=0)
    node.kimi.write_text(
        text.replace(
            f"        {CALL}\n",
            f'        """Choose the layers the draft reads."""\n        {CALL}\n',
        )
    )
    edited = node.pg("check", check=1)
    assert f"{SPEC} is not the recorded code" in edited.stderr
    assert '`"""Choose the layers the draft reads."""`' in edited.stderr


def test_an_added_class_is_held_whole_and_put_back_whole(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    node = Checkout(sample.root, clean_env)
    added = '\n\nclass Helper:\n    """Helps."""\n\n    LIMIT = 3\n\n    def go(self, x):\n'
    node.kimi.write_text(node.kimi.read_text() + added + "        return x + 1\n")
    node.pg("record", "helper", KIMI, check=0)
    recorded = node.kimi.read_text()
    node.kimi.write_text(
        recorded.replace("LIMIT = 3", "LIMIT = 4").replace("x + 1", "x + 2") + "X = 1\n"
    )
    status = node.pg("status", check=1).stdout
    assert "Helper is not the recorded code" in status and "`LIMIT = 4`" in status
    assert "Helper.go is not the recorded code" in status and "`return x + 2`" in status
    node.pg("apply", check=0)
    assert node.kimi.read_text() == recorded + "X = 1\n"
    node.pg("check", check=0)


def test_a_hook_never_undoes_the_edit(node: Checkout) -> None:
    """The edit may be deliberate: a checkout's re-apply leaves it, red, with both ways out."""
    node.pg("install", check=0)
    gut(node)
    edited = node.kimi.read_text()
    moved = node.git("checkout", "-q", "-b", "experiment", check=False)
    assert "patch eagle3 is edited" in moved.stderr
    assert "patchguard record eagle3" in moved.stderr
    assert node.kimi.read_text() == edited


def test_with_a_resolution_the_resolution_is_the_reference(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    build_resolve_history(tmp_path / "sglang")
    hunt = Checkout(tmp_path / "sglang", clean_env)
    hunt.git("checkout", "-q", "-b", "work", "r0")
    sample_repo.add_eagle3_methods(hunt.root)
    hunt.pg("record", "eagle3", KIMI, check=0)
    hunt.pg("git", "checkout", "-q", "r1", check=1)  # upstream's method where ours were
    sample_repo.add_eagle3_methods(hunt.root)
    adapted = CALL.replace("(layer_ids)", "(layer_ids or [])")
    hunt.kimi.write_text(hunt.kimi.read_text().replace(CALL, adapted))
    hunt.pg("resolve", "eagle3", "--keep-extra", check=0)  # the adapted call is the extra line
    hunt.pg("check", check=0)
    hunt.kimi.write_text(hunt.kimi.read_text().replace(adapted, CALL))  # the recording's body
    line = hunt.kimi.read_text().splitlines().index(f"        {CALL}") + 1
    edited = hunt.pg("check", check=1)
    assert f"line {line} is `{CALL}`, recorded `{adapted}`" in edited.stderr
    assert "keep your edit for this version of the file: patchguard resolve eagle3" in (
        edited.stderr
    )
    hunt.pg("apply", check=0)
    assert adapted in hunt.kimi.read_text()
    hunt.pg("check", check=0)
    hunt.kimi.write_text(hunt.kimi.read_text().replace(adapted, CALL))
    hunt.pg("resolve", "eagle3", "--keep-extra", check=0)  # the edit kept, for this version
    hunt.pg("check", check=0)


def test_a_method_typed_after_entryclass_is_a_slip_naming_its_class(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    node = Checkout(sample.root, clean_env)
    node.kimi.write_text(node.kimi.read_text() + AT_COLUMN_0)
    lines = node.kimi.read_text().splitlines()
    entry = lines.index(f"EntryClass = [{CLASS}]") + 1
    first = lines.index("def set_eagle3_layers_to_capture(self, layer_ids=None):") + 1
    slip = (
        f"{KIMI}:{first}: def set_eagle3_layers_to_capture(self, ...) is at module level, "
        f"after `EntryClass = [{CLASS}]` (line {entry}), not in a class"
    )
    strict = node.pg("record", "slip", KIMI, "--strict", check=1)
    assert slip in strict.stderr
    assert f"probably meant inside class {CLASS} (indentation)" in strict.stderr
    assert strict.stderr.count("is at module level") == 3
    assert "nothing recorded" in node.pg("list", check=0).stdout
    refused = node.pg("record", "slip", KIMI, check=1)
    assert slip in refused.stderr
    assert f"class {CLASS} defines self.language_model, which it uses" in refused.stderr
    recorded = node.pg("record", "slip", KIMI, "--as-typed", check=0)
    assert slip in recorded.stderr


def test_the_slip_names_the_class_whose_methods_call_it(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """Not the nearest class above: the one that calls `self.NAME()`."""
    node = Checkout(sample.root, clean_env)
    text = node.kimi.read_text().replace(
        "        self.language_model.load_weights(weights)\n",
        "        self.language_model.load_weights(weights)\n        self.tie_weights()\n",
    )
    other = "\n\nclass Other:\n    pass\n"
    node.kimi.write_text(text + other + "\n\ndef tie_weights(self):\n    return None\n")
    recorded = node.pg("record", "tie", KIMI, check=1)
    assert f"class {CLASS} calls self.tie_weights(): probably meant inside class {CLASS}" in (
        recorded.stderr
    )


def test_a_function_the_module_puts_into_a_class_is_no_slip(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    node = Checkout(sample.root, clean_env)
    added = (
        "\n\ndef describe(self):\n    return type(self).__name__\n\n\n"
        "def _forward(self, *args):\n    return self.language_model(*args)\n\n\n"
        f"{CLASS}.describe = describe\n"
        f"setattr({CLASS}, 'forward', functools.wraps({CLASS}.forward)(_forward))\n"
    )
    node.kimi.write_text("import functools\n" + node.kimi.read_text() + added)
    recorded = node.pg("record", "describe", KIMI, "--strict", check=0)
    assert "warning" not in recorded.stderr


def test_stray_module_level_copies_are_named_until_they_are_deleted(node: Checkout) -> None:
    """The patch lost (a restore), the methods typed again at column 0 after EntryClass."""
    node.git("checkout", "--", KIMI)
    node.kimi.write_text(node.kimi.read_text() + AT_COLUMN_0)
    lost = node.pg("check", check=1)
    assert "-> patchguard apply eagle3" in lost.stderr
    assert "the class has none: patchguard apply eagle3 puts it back" in lost.stderr
    node.pg("apply", check=0)
    text = node.kimi.read_text()
    assert all(method_count(text, m) == 2 for m in sample_repo.METHODS)
    lines = text.splitlines()
    start = lines.index("def set_eagle3_layers_to_capture(self, layer_ids=None):") + 1
    stray = (
        f"{KIMI}:{start}: def set_eagle3_layers_to_capture(self, ...) at module level is a stray "
        f"copy of patch eagle3's method {SPEC}"
    )
    fix = f"-> delete lines {start}-{start + 1} of {KIMI}"
    for _ in range(2):  # said every time: never remembered as verified
        checked = node.pg("check", check=0)
        assert stray in checked.stderr
        assert fix in checked.stderr
        assert checked.stderr.count("stray copy") == 3
    warnings = json.loads(node.pg("check", "--json", check=0).stdout)["warnings"]
    assert len(warnings) == 3
    assert stray in node.pg("status", check=0).stderr
    node.kimi.write_text(text[: text.index(AT_COLUMN_0)])
    clean = node.pg("check", check=0)
    assert "stray" not in clean.stderr
    assert "all guards hold" in clean.stdout


def test_a_stray_copy_is_not_said_of_a_module_level_function_of_another_name(
    node: Checkout,
) -> None:
    node.kimi.write_text(node.kimi.read_text() + "\n\ndef helper(self):\n    return self\n")
    checked = node.pg("check", check=0)
    assert "stray" not in checked.stderr


def test_a_form_feed_does_not_shift_the_lines_said() -> None:
    """Python ends a line only at \\n or \\r; a form feed (`^L`, in older files) is not a line
    break to it, so the lines quoted are the ones Python numbers."""
    recorded = b"\x0c\ndef f():\n    return 1\n"
    current = b"\x0c\ndef f():\n    return 2\n"
    trees = ast.parse(current), ast.parse(recorded)
    (edit,) = bodies.edits(current, trees[0], {"f": 2}, recorded, trees[1], {"f": 2})
    assert (edit.line, edit.text, edit.recorded_text) == (3, "return 2", "return 1")
    source = b"class C:\n    pass\n\x0c\nx = 1\ndef m(self):\n    return 1\n"
    (dedented,) = slips.slips(source, "mod.py", [5]).dedented
    assert "after `x = 1` (line 4)" in dedented
