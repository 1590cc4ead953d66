"""Real sglang model files stay green from reading (at most 1% of the methods Python
certainly finds not green), measured by benchmarks/sglang_green.py over every model file of
the sglang 0.5.10 wheel. The test itself downloads nothing: `make test` (and `make bench`)
fetch the wheel once into benchmarks/work/wheels (PATCHGUARD_SGLANG_WHEELS names another
directory), and where the package index could not be reached the test is skipped, saying so."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WHEEL_DIRS = [
    ROOT / "benchmarks/work/wheels",
    *map(Path, filter(None, [os.environ.get("PATCHGUARD_SGLANG_WHEELS")])),
]


def _wheel() -> Path | None:
    found = sorted(w for d in WHEEL_DIRS for w in d.glob("sglang-0.5.10-*.whl"))
    return found[0] if found else None


@pytest.mark.skipif(
    _wheel() is None, reason="no sglang 0.5.10 wheel here (make test and make bench fetch it)"
)
def test_real_model_files_stay_green_from_reading(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import sglang_green
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    wheel = _wheel()
    assert wheel is not None
    sglang_green.checkout(wheel, tmp_path)
    figures = sglang_green.one_pass(tmp_path, sorted((tmp_path / sglang_green.MODELS).glob("*.py")))
    assert int(figures["methods"]) > 2000  # type: ignore[call-overload]
    assert float(figures["share_not_green"]) <= 0.01, figures["which"]  # type: ignore[arg-type]
