"""What a new user trips over on the first day, repeated as it was written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import sample_repo
from conftest import Sample, git, patchguard
from helpers import run_patchguard


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


def test_export_of_one_patch_goes_to_stdout_and_never_to_a_file_named_after_it(
    sample: Sample, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """`patchguard export eagle3 > e.json` wrote a file named eagle3 and left e.json empty."""
    sample.record_eagle3()
    other = sample.root / "python/sglang/srt/models/deepseek_v2.py"
    other.write_text(other.read_text() + "# another patch\n")
    assert sample.pg("record", "other", str(other)).exit_code == 0
    shell = subprocess.run(
        "patchguard export eagle3 > e.json",
        shell=True,
        cwd=sample.root,
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert shell.returncode == 0, shell.stderr
    assert not (sample.root / "eagle3").exists()
    names = [
        p["name"] for p in json.loads((sample.root / "e.json").read_text())["manifest"]["patches"]
    ]
    assert names == ["eagle3"]


def test_export_and_import_paths_are_relative_to_dash_c_as_git_s_are(
    sample: Sample, tmp_path: Path
) -> None:
    sample.record_eagle3()
    assert patchguard("-C", sample.root, "export", "-o", "all.json").exit_code == 0
    assert (sample.root / "all.json").exists()
    node2 = tmp_path / "node2"
    git(tmp_path, "clone", "-q", str(sample.root), str(node2))
    (node2 / "all.json").write_text((sample.root / "all.json").read_text())
    imported = patchguard("-C", node2, "import", "all.json")
    assert imported.exit_code == 0, imported.output + imported.stderr
    assert "imported patch eagle3" in imported.output


def test_export_of_an_unknown_name_suggests_dash_o(sample: Sample) -> None:
    sample.record_eagle3()
    result = sample.pg("export", "eagle3.bundle.json")
    assert result.exit_code == 2
    assert "to write the bundle to a file: patchguard export -o eagle3.bundle.json" in result.stderr


def test_a_class_name_typo_in_require_is_a_usage_error(sample: Sample) -> None:
    spec = f"{sample_repo.KIMI}::KimiK25ForConditionalGeneratio.forward"
    result = sample.pg("require", spec)
    assert result.exit_code == 2, result.output + result.stderr
    assert f"did you mean {sample_repo.CLASS}." in result.stderr
    assert "?." not in result.stderr


def test_list_with_nothing_recorded_says_so(sample: Sample) -> None:
    sample.record_eagle3()
    assert sample.pg("drop", "eagle3").exit_code == 0
    listed = sample.pg("list")
    assert listed.exit_code == 0
    assert "nothing recorded" in listed.output


def test_a_plain_bisect_is_pointed_to_the_commands_that_work(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """`git stash; git bisect start NEW OLD`: the hook re-applies the patch at the first commit
    and says, in one line, how to move on from there."""
    root = tmp_path / "sglang"
    sample_repo.build_hunt(root)
    git(root, "reset", "-q", "--hard", "c0")
    sample_repo.add_eagle3_methods(root)
    assert patchguard("-C", root, "record", "eagle3", sample_repo.KIMI).exit_code == 0
    assert patchguard("-C", root, "install").exit_code == 0
    git(root, "stash")
    started = git(root, "bisect", "start", "c4", "c0", env=clean_env)
    assert "re-applied eagle3" in started.stderr
    assert "patchguard bisect good|bad|skip" in started.stderr
    moved = patchguard("-C", root, "bisect", "good")
    assert moved.exit_code == 0, moved.output + moved.stderr


def test_a_checkout_git_refuses_over_another_edit_names_checkout_m(sample: Sample) -> None:
    """A debug line of the user's in the patched file; git refuses the move
    (the file differs between the commits); the one line names the command that works."""
    sample.record_eagle3()
    text = sample.kimi.read_text()
    sample.kimi.write_text(
        text.replace("    def forward(", "    # debug: print shapes\n    def forward(")
    )
    patched = sample.kimi.read_bytes()
    refused = sample.pg("git", "checkout", "-q", "old")
    assert refused.exit_code != 0
    hint = "to carry them along, as git checkout -m does: patchguard git checkout -m -q old"
    assert hint in refused.stderr
    assert sample.kimi.read_bytes() == patched  # nothing lost, nothing moved
    carried = sample.pg("git", "checkout", "-m", "-q", "old")
    assert carried.exit_code == 0, carried.output + carried.stderr
    moved = sample.kimi.read_text()
    assert "# debug: print shapes" in moved
    assert all(moved.count(f"def {m}(") == 1 for m in sample_repo.METHODS)


def test_a_spec_printed_in_a_subdirectory_works_when_pasted_there(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """The banner prints repository paths; pasted in the subdirectory it
    was printed in, `require` and `drop` take them as such (and cwd-relative ones as git does)."""
    models = sample.root / "python/sglang/srt/models"
    spec = f"{sample_repo.KIMI}::{sample_repo.CLASS}.forward"
    result = run_patchguard(models, clean_env, ("require", spec), 0)
    assert spec in result.stdout + result.stderr
    relative = f"kimi_k25.py::{sample_repo.CLASS}.load_weights"
    run_patchguard(models, clean_env, ("require", relative), 0)
    listed = run_patchguard(sample.root, clean_env, ("list",), 0).stdout
    assert f"guard {sample_repo.KIMI}::{sample_repo.CLASS}.load_weights" in listed
    dropped = run_patchguard(models, clean_env, ("drop", spec), 0)
    assert f"dropped guard {spec}" in dropped.stdout


def test_slips_are_caught_at_record(sample: Sample) -> None:
    """A method typed at module level after its class, and a misspelt name
    that delegates to the right one: the first refused (--as-typed records it), the second a
    warning (--strict refuses it)."""
    text = sample.kimi.read_text()
    typed = text.replace(
        "\n\nEntryClass",
        "\n\ndef set_embed_and_head(self, embed, head):\n"
        "    self.language_model.set_embed_and_head(embed, head)\n"
        "\n\nEntryClass",
    ).replace(
        "    def load_weights(",
        "    def get_embed_and_haed(self):\n"
        "        return self.language_model.get_embed_and_head()\n\n"
        "    def load_weights(",
    )
    sample.kimi.write_text(typed)
    strict = sample.pg("record", "eagle3", sample_repo.KIMI, "--strict")
    assert strict.exit_code == 1
    assert "nothing recorded" in sample.pg("list").output
    refused = sample.pg("record", "eagle3", sample_repo.KIMI)
    assert refused.exit_code == 1
    assert "probably meant inside class KimiK25ForConditionalGeneration (indentation)" in (
        refused.stderr
    )
    recorded = sample.pg("record", "eagle3", sample_repo.KIMI, "--as-typed")
    assert recorded.exit_code == 0, recorded.output + recorded.stderr
    assert "get_embed_and_haed is one letter away from get_embed_and_head" in recorded.stderr


def test_the_real_patch_has_no_slips(sample: Sample) -> None:
    recorded = sample.record_eagle3()
    assert "warning" not in recorded.stderr


def test_bisect_run_ends_git_s_last_line_before_its_own(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """Git prints "bisect found first bad commit" without a newline; the
    next line of patchguard's must not be glued to it."""
    root = tmp_path / "sglang"
    sample_repo.build_hunt(root)
    git(root, "reset", "-q", "--hard", "c0")
    sample_repo.add_eagle3_methods(root)
    assert patchguard("-C", root, "record", "eagle3", sample_repo.KIMI).exit_code == 0
    (root / "bench.py").write_text(sample_repo.HUNT_BENCH_TEXT)
    assert patchguard("-C", root, "git", "bisect", "start", "c4", "c0").exit_code == 0
    both = subprocess.run(
        "patchguard bisect run python3 bench.py 2>&1",
        shell=True,
        cwd=root,
        env=clean_env,
        capture_output=True,
        text=True,
    )
    assert "bisect found first bad commit\n" in both.stdout, both.stdout
    # one short line per step from git, one from patchguard
    assert "running  'patchguard-step' 'python3' 'bench.py'" in both.stdout
    assert "-m' 'guard'" not in both.stdout and "patchguard_entry.py" not in both.stdout
    assert "patches in place; the command exited 0 (good)" in both.stdout


def test_a_re_record_says_which_lines_it_adds_to_the_patch(sample: Sample) -> None:
    """A debug line typed since the recording is named, not swallowed unseen."""
    sample.record_eagle3()
    text = sample.kimi.read_text()
    sample.kimi.write_text(
        text.replace("    def forward(", '    # print("shapes")\n    def forward(')
    )
    again = sample.pg("record", "eagle3", sample_repo.KIMI)
    assert again.exit_code == 0
    assert "the re-record adds 1 line(s) that patch eagle3 did not have before" in again.stderr
    assert f"+ {sample_repo.KIMI}:" in again.stderr and '# print("shapes")' in again.stderr
    same = sample.pg("record", "eagle3", sample_repo.KIMI)
    assert "the re-record adds" not in same.stderr


def test_record_p_chooses_hunks_through_a_terminal(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """`record -p` is git's own `add -p`, answered on a real terminal (a pty):
    the methods are recorded, the debug line is left out and stays in the file."""
    import pty
    import select
    import time

    sample_repo.add_eagle3_methods(sample.root)
    text = sample.kimi.read_text()
    debug = '# print("shapes")\n'
    sample.kimi.write_text(text.replace("from torch import nn\n", "from torch import nn\n" + debug))
    pid, terminal = pty.fork()
    if pid == 0:  # the child: patchguard on the terminal, as a user runs it
        os.chdir(sample.root)
        os.execvpe(
            "patchguard", ["patchguard", "record", "-p", "eagle3", sample_repo.KIMI], clean_env
        )
    said, answered = b"", 0
    answers = [b"n\n", b"y\n"]  # the debug line's hunk comes first, then the methods'
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not select.select([terminal], [], [], 1)[0]:
            continue
        if (chunk := _read_on(terminal)) is None:
            break
        said += chunk
        if said.count(b"Stage this hunk") > answered:
            os.write(terminal, answers[answered] if answered < len(answers) else b"q\n")
            answered += 1
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, said.decode(errors="replace")
    assert answered == 2
    listed = json.loads(sample.pg("list", "--json").output)
    (change,) = listed["patches"][0]["files"]
    assert "def get_embed_and_head" in change["diff"]
    assert "shapes" not in change["diff"]
    assert debug in sample.kimi.read_text()  # still the user's own edit
    assert sample.pg("check").exit_code == 0


def test_show_on_a_terminal_says_when_nothing_is_recorded(
    sample: Sample, clean_env: dict[str, str]
) -> None:
    """Paged on a terminal as git pages: with no patch left, a line saying so, not an empty
    pager."""
    import pty

    sample.record_eagle3()
    assert sample.pg("drop", "eagle3").exit_code == 0
    pid, terminal = pty.fork()
    if pid == 0:
        os.chdir(sample.root)
        os.execvpe("patchguard", ["patchguard", "show"], {**clean_env, "PAGER": "cat"})
    said = b""
    while (chunk := _read_on(terminal)) is not None:
        said += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, said
    assert b"no patches recorded" in said


def _read_on(terminal: int) -> bytes | None:
    """What a pty says next; None once the child closed it (it ended)."""
    try:
        return os.read(terminal, 4096) or None
    except OSError:
        return None
