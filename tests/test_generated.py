"""Files derived from the code must match it: a stale one fails here (fix: `make generate`)."""

from __future__ import annotations

import generate
import pytest
from conftest import ROOT


@pytest.mark.parametrize("path", sorted(generate.outputs()), ids=lambda p: p.name)
def test_generated_file_is_current(path) -> None:
    expected = generate.outputs()[path]
    assert path.read_text() == expected, f"{path.relative_to(ROOT)} is stale: run `make generate`"
