"""The incident's slip is refused, and never green or put back unnoticed.

The three EAGLE-3 methods typed at column 0 after `EntryClass = [...]` in a file that defines
the class: `record` refuses (exit 1, nothing recorded), naming the class and the lines to
indent; `record --as-typed` records them as typed, and from then on `check` (and its JSON
`warnings`) names each while it stands. Once the user indents them into the class, `apply` (and
the hook after a checkout) never puts module-level copies back: a re-record keeps the file.
All through the installed CLI on the sglang-shaped sample.
"""

from __future__ import annotations

import ast
import json
import shlex
import textwrap

import pytest
import sample_repo
from conftest import Sample
from helpers import Checkout

KIMI = sample_repo.KIMI
CLASS = sample_repo.CLASS
AT_COLUMN_0 = textwrap.dedent(sample_repo.EAGLE3_METHODS)
LOAD_WEIGHTS = "        self.language_model.load_weights(weights)\n"


@pytest.fixture
def node(sample: Sample, clean_env: dict[str, str]) -> Checkout:
    """The sample checkout with the incident's slip typed: the methods after EntryClass."""
    checkout = Checkout(sample.root, clean_env)
    checkout.kimi.write_text(checkout.kimi.read_text() + AT_COLUMN_0)
    return checkout


def module_level(node: Checkout) -> set[str]:
    """The functions the model file defines at module level, as Python's parser reads it."""
    tree = ast.parse(node.kimi.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def indent_into_class(node: Checkout) -> None:
    """What the user does on reading the refusal: the methods moved into the class."""
    text = node.kimi.read_text().replace(AT_COLUMN_0, "")
    methods = sample_repo.EAGLE3_METHODS.strip("\n")
    node.kimi.write_text(text.replace(LOAD_WEIGHTS, LOAD_WEIGHTS + methods + "\n", 1))
    assert not module_level(node) & set(sample_repo.METHODS)


def test_record_refuses_the_slip_naming_the_class_and_the_lines_and_as_typed_records_it(
    node: Checkout,
) -> None:
    lines = node.kimi.read_text().splitlines()
    first = lines.index("def set_eagle3_layers_to_capture(self, layer_ids=None):") + 1
    models = node.root / "python/sglang/srt/models"
    refused = node.pg("record", "eagle3", "-C", str(models), "kimi_k25.py", check=1)
    assert f"indent lines {first}-{first + 1} into class {CLASS}" in refused.stderr
    assert refused.stderr.count(f"probably meant inside class {CLASS}") == 3
    assert "nothing recorded" in node.pg("list", check=0).stdout
    # the way out it names, pasted as it stands (its path is the one the user gave, from there)
    pasted = refused.stderr.rsplit("keep them at module level as typed: ", 1)[1].strip()
    assert pasted.endswith("--as-typed")
    words = shlex.split(pasted)
    recorded = node.pg(*words[1:3], "-C", str(models), *words[3:], check=0)
    assert "(recorded as typed)" in recorded.stderr
    assert f"requires {KIMI}::set_eagle3_layers_to_capture" in recorded.stdout


def test_a_method_typed_outside_a_file_without_classes_is_recorded(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """No class it could have been meant for: a plain function, recorded without a word."""
    checkout = Checkout(sample.root, clean_env)
    state = checkout.root / "python/sglang/srt/distributed/parallel_state.py"
    state.write_text(state.read_text() + "\n\ndef describe(self):\n    return 1\n")
    recorded = checkout.pg("record", "helper", str(state), check=0)
    assert "warning" not in recorded.stderr


def test_check_names_a_slip_recorded_as_typed_while_it_stands(node: Checkout) -> None:
    node.pg("record", "eagle3", KIMI, "--as-typed", check=0)
    first = (
        node.kimi.read_text()
        .splitlines()
        .index("def set_eagle3_layers_to_capture(self, layer_ids=None):")
    )
    named = (
        f"{KIMI}:{first + 1}: def set_eagle3_layers_to_capture(self, ...) is at module level, "
        f"not a method of class {CLASS}"
    )
    fix = f"-> indent lines {first + 1}-{first + 2} into class {CLASS}, then patchguard record"
    for _ in range(2):  # said every time: never remembered as verified
        checked = node.pg("check", check=0)
        assert named in checked.stderr
        assert fix in checked.stderr
        assert checked.stderr.count("is at module level") == 3
    warnings = json.loads(node.pg("check", "--json", check=0).stdout)["warnings"]
    assert len(warnings) == 3
    assert any(named in warning for warning in warnings)
    assert named in node.pg("run", "--", "true", check=0).stderr


def test_after_the_fix_apply_and_the_hook_never_put_module_level_copies_back(
    node: Checkout,
) -> None:
    node.pg("record", "eagle3", KIMI, "--as-typed", check=0)
    node.pg("install", check=0)
    indent_into_class(node)
    fixed = node.kimi.read_text()
    checked = node.pg("check", check=1)
    assert f"a method of class {CLASS} now -> keep it there: patchguard record eagle3" in (
        checked.stderr
    )
    applied = node.pg("apply", check=1)
    assert (
        "would put set_eagle3_layers_to_capture, get_embed_and_head, set_embed_and_head back"
        in (applied.stdout)
    )
    assert "keep the file as it is: patchguard record eagle3" in applied.stdout
    assert node.kimi.read_text() == fixed
    main = node.head()
    moved = node.git("checkout", "-q", "HEAD~1", check=False)  # the hook re-applies what it can
    assert moved.returncode == 1  # the hook's guard failed, loudly: the patch is not applied
    assert node.head() != main
    assert node.kimi.read_text() == fixed
    assert not module_level(node) & set(sample_repo.METHODS)
    node.git("checkout", "-q", "main", check=False)
    recorded = node.pg("record", "eagle3", KIMI, check=0)
    assert f"requires {KIMI}::{CLASS}.get_embed_and_head" in recorded.stdout
    clean = node.pg("check", check=0)
    assert "warning" not in clean.stderr
    node.pg("apply", check=0)
    assert node.kimi.read_text() == fixed
