"""A symbol is present when Python would find it at runtime.

Each rule is tried on a copy of a real-sized model file: the sample's kimi_k25.py grown to
several hundred lines of methods, with the EAGLE-3 methods in the class.
"""

from __future__ import annotations

import json

import pytest
import sample_repo
from conftest import Sample

KIMI = sample_repo.KIMI
CLASS = sample_repo.CLASS
SPEC = f"{KIMI}::{CLASS}.get_embed_and_head"

FILLER = "".join(
    f"""
    def layer_{n}(self, hidden, residual=None):
        \"\"\"Layer {n} of the sample model.\"\"\"
        if residual is not None:
            hidden = hidden + residual
        return self.language_model.layers[{n}](hidden)
"""
    for n in range(80)
)


@pytest.fixture
def model(sample: Sample) -> Sample:
    """The guard on get_embed_and_head, on a ~500-line model file, committed."""
    sample_repo.add_eagle3_methods(sample.root)
    text = sample.kimi.read_text().replace("\n\nEntryClass", FILLER + "\n\nEntryClass", 1)
    sample.kimi.write_text(text)
    assert text.count("\n") > 450
    sample.git("commit", "-qam", "a real-sized model with the methods")
    assert sample.pg("require", SPEC).exit_code == 0
    return sample


def symbol(sample: Sample, *extra: str) -> dict[str, object]:
    result = sample.pg("check", "--json", *extra)
    data = json.loads(result.output)
    found = next(s for s in data["symbols"] if s["spec"] == SPEC)
    return {"exit": result.exit_code, **found}


def edit(sample: Sample, old: str, new: str) -> None:
    text = sample.kimi.read_text()
    assert old in text
    sample.kimi.write_text(text.replace(old, new, 1))


def test_the_model_as_written_holds(model: Sample) -> None:
    assert symbol(model)["present"] is True


def test_a_later_assignment_of_a_value_removes_a_method(model: Sample) -> None:
    edit(model, "\n\nEntryClass", "\n    get_embed_and_head = None\n\n\nEntryClass")
    found = symbol(model)
    assert found["exit"] == 1
    assert "rebound to a value" in str(found["detail"])


def test_del_removes_a_method(model: Sample) -> None:
    edit(model, "\n\nEntryClass", "\n    del get_embed_and_head\n\n\nEntryClass")
    found = symbol(model)
    assert found["exit"] == 1
    assert "deleted at line" in str(found["detail"])


def test_a_second_class_of_the_same_name_replaces_the_first(model: Sample) -> None:
    edit(
        model,
        "\n\nEntryClass",
        f"\n\n\nclass {CLASS}:\n    def forward(self):\n        return None\n\n\nEntryClass",
    )
    found = symbol(model)
    assert found["exit"] == 1
    assert "not where Python finds it at runtime" in str(found["detail"])


@pytest.mark.parametrize("test", ["TYPE_CHECKING", "typing.TYPE_CHECKING", "False", "0"])
def test_code_that_never_runs_defines_nothing(model: Sample, test: str) -> None:
    text = model.kimi.read_text()
    start = text.index("    def get_embed_and_head(")
    end = text.index("    def set_embed_and_head(")
    block = text[start:end]
    indented = "".join(f"    {line}" if line.strip() else line for line in block.splitlines(True))
    model.kimi.write_text(text[:start] + f"    if {test}:\n" + indented + text[end:])
    assert symbol(model)["exit"] == 1


def test_a_runtime_condition_is_never_green(model: Sample) -> None:
    text = model.kimi.read_text()
    start = text.index("    def get_embed_and_head(")
    end = text.index("    def set_embed_and_head(")
    block = text[start:end]
    indented = "".join(f"    {line}" if line.strip() else line for line in block.splitlines(True))
    model.kimi.write_text(text[:start] + "    if _is_npu:\n" + indented + text[end:])
    found = symbol(model)
    assert found["exit"] == 1
    assert found["state"] == "cannot-tell"
    assert "only when `_is_npu` is true" in str(found["detail"])
    result = model.pg("check")
    assert result.exit_code == 1
    assert "patchguard check --runtime" in result.stderr
    assert model.pg("check", "--strict").exit_code == 1  # still accepted by old scripts


@pytest.mark.parametrize(
    "wrapped",
    [
        "    try:\n        def get_embed_and_head(self):\n            return 1\n    except ImportError:\n        pass\n",
        "    @property\n    def get_embed_and_head(self):\n        return 1\n",
        "    @functools.lru_cache\n    def get_embed_and_head(self):\n        return 1\n",
        "    async def get_embed_and_head(self):\n        return 1\n",
        "    class get_embed_and_head:\n        pass\n",
        "    get_embed_and_head = staticmethod(lambda: 1)\n",
    ],
    ids=["try", "property", "decorator", "async", "nested-class", "wrapped-callable"],
)
def test_what_keeps_working(model: Sample, wrapped: str) -> None:
    text = model.kimi.read_text()
    start = text.index("    def get_embed_and_head(")
    end = text.index("    def set_embed_and_head(")
    model.kimi.write_text("import functools\n" + text[:start] + wrapped + "\n" + text[end:])
    assert symbol(model)["exit"] == 0, symbol(model)


def test_names_bound_by_assignment_can_be_required(model: Sample) -> None:
    edit(model, "        super().__init__()\n", "        super().__init__()\n")
    edit(model, f"class {CLASS}(nn.Module):\n", f"class {CLASS}(nn.Module):\n    arch = 'kimi'\n")
    model.git("commit", "-qam", "class attribute")
    assert model.pg("require", f"{KIMI}::EntryClass", f"{KIMI}::{CLASS}.arch").exit_code == 0
    assert model.pg("check").exit_code == 0
    edit(model, "    arch = 'kimi'\n", "")
    result = model.pg("check")
    assert result.exit_code == 1
    assert f"{CLASS}.arch" in result.stderr
