"""Symbols are found by parsing: a method is only present when it is inside its class."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import git, patchguard

from guard.git.objects import blob_id
from guard.git.repo import Repo
from guard.store.spec import Spec, parse_spec
from guard.truth import symbols
from guard.truth.symbols import SourceSyntaxError, SymbolIndex, describe_miss

CLASS_THEN_ENTRY = b"""\
class Model:
    def forward(self):
        pass


EntryClass = [Model]

    def get_embed_and_head(self):
        pass
"""

APPENDED_AFTER_ENTRY = b"""\
class Model:
    def forward(self):
        pass


EntryClass = [Model]


def get_embed_and_head(self):
    pass
"""


def test_nested_qualified_names_are_found() -> None:
    source = (
        b"class Outer:\n    class Inner:\n        def method(self): ...\n\ndef function(): ...\n"
    )
    index = SymbolIndex.parse(source, "m.py")
    assert [d.lineno for d in index.find("Outer.Inner.method")] == [3]
    assert index.find("function")[0].kind == "def"
    assert index.find("Outer.method") == []


def test_method_appended_after_entryclass_is_not_in_the_class() -> None:
    index = SymbolIndex.parse(APPENDED_AFTER_ENTRY, "kimi.py")
    assert index.find("Model.get_embed_and_head") == []
    reason = describe_miss(index, Spec("kimi.py", "Model.get_embed_and_head"))
    assert "not in Model" in reason
    assert "module level (line 9)" in reason


def test_syntax_error_reports_its_line() -> None:
    with pytest.raises(SourceSyntaxError) as caught:
        SymbolIndex.parse(CLASS_THEN_ENTRY, "kimi.py")
    assert caught.value.lineno == 8
    assert str(caught.value).startswith("kimi.py:8:")


def test_duplicates_in_one_block_are_reported_but_property_setters_are_not() -> None:
    source = b"""\
class A:
    def f(self): ...
    def f(self): ...

    @property
    def p(self): ...
    @p.setter
    def p(self, v): ...
"""
    index = SymbolIndex.parse(source, "a.py")
    assert [d.lineno for d in index.duplicates("A.f")] == [2, 3]
    assert index.duplicates("A.p") == []


def test_definitions_under_if_at_class_level_belong_to_the_class() -> None:
    source = b"import sys\nclass A:\n    if sys.version_info >= (3, 11):\n        def g(self): ...\n    else:\n        def g(self): ...\n"
    index = SymbolIndex.parse(source, "a.py")
    assert len(index.find("A.g")) == 2
    assert index.duplicates("A.g") == []


def test_a_loop_over_a_range_too_long_to_count_is_read() -> None:
    """Whether a loop runs is read from its range without counting it: `len()` of this range
    overflows, and the parse must not fail on it."""
    source = b"class C:\n    for _ in range(10000000000000000000000):\n        def m(self): ...\n        break\n"
    assert SymbolIndex.parse(source, "a.py").resolve("C.m").state == "present"


def test_defined_on_lines_lists_only_added_defs() -> None:
    source = b"class A:\n    def old(self): ...\n    def new(self): ...\n"
    assert SymbolIndex.parse(source, "a.py").defined_on_lines({3}) == ["A.new"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a/b.py::Class.method", Spec("a/b.py", "Class.method")),
        ("b.py::function", Spec("b.py", "function")),
        ("b.py::Outer.Inner.method", Spec("b.py", "Outer.Inner.method")),
    ],
)
def test_parse_spec_accepts_pytest_style_ids(text: str, expected: Spec) -> None:
    assert parse_spec(text) == expected
    assert str(expected) == text


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("b.py", "no '::'"),
        ("::function", "names no file"),
        ("b.txt::f", "not one"),
        ("b.py::Class.", "dotted Python name"),
        ("b.py::1abc", "dotted Python name"),
    ],
)
def test_parse_spec_rejects_malformed(text: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        parse_spec(text)


def test_a_parse_kept_by_an_older_model_is_parsed_afresh(tmp_path: Path) -> None:
    """A kept parse (guard.truth.parsed) is a pickle of the model's objects: one that names a
    class this patchguard no longer has (the binding model's, before it left this module) is a
    miss, never an unpickling crash, even under this version's own key."""
    git(tmp_path, "init", "-q")
    module = tmp_path / "m.py"
    module.write_text("class Model:\n    def forward(self):\n        return 1\n")
    git(tmp_path, "add", "m.py")
    git(tmp_path, "commit", "-qm", "upstream")
    module.write_text(module.read_text() + "\n    def extra(self):\n        return 2\n")
    assert not hasattr(symbols, "_Class")  # the model's record of a class lives elsewhere now
    stale = b"\x80\x04cguard.truth.symbols\n_Class\n)\x81."  # `_Class()`, by its old home
    key = blob_id(module.read_bytes())  # in the cache's namespace of this patchguard's code
    Repo.discover(tmp_path).parse_cache.put(key, stale)
    result = patchguard("-C", tmp_path, "record", "p1", "m.py")
    assert result.exit_code == 0, result.output
    assert "requires m.py::Model.extra" in result.output
