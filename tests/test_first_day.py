"""Issue 21: what a new user trips over on the first day, repeated as it was written."""

from __future__ import annotations

from conftest import Sample, patchguard


def test_a_git_command_typed_after_patchguard_names_the_command_that_works(
    sample: Sample,
) -> None:
    result = sample.pg("checkout", "old", "--", "it's.py")
    assert result.exit_code == 2
    assert "`patchguard git checkout old -- 'it'\"'\"'s.py'`" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_typo_of_a_patchguard_command_still_gets_did_you_mean() -> None:
    result = patchguard("chek")
    assert result.exit_code == 2
    assert "Did you mean 'check'?" in result.stderr
