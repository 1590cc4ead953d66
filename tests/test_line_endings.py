"""Line-ending conversion: patches are what `git diff` shows, files are written as git would.

Each story runs on the regression hunt's history (scripts/sample_repo.py, build_hunt) with a
CRLF checkout made the ways users get one: core.autocrlf=true, a `.gitattributes` with
eol=crlf, text=auto with core.eol=crlf, and core.autocrlf=input with an editor that writes
CRLF. The user's edit is made in CRLF, as their editor would. Then every move of the hunt
must round-trip: record, stash, checkout, apply, unapply, undo, check.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import sample_repo
from conftest import git
from helpers import run_patchguard

from guard.git.objects import blob_id
from guard.git.repo import Repo
from guard.store.fastpath import is_verified

KIMI = sample_repo.KIMI
CRLF_METHODS = sample_repo.EAGLE3_METHODS.replace("\n", "\r\n").encode()

# name -> (git config, .gitattributes, does `git checkout` write CRLF)
SETUPS = {
    "autocrlf": ({"core.autocrlf": "true"}, "", True),
    "gitattributes-eol-crlf": ({}, "*.py eol=crlf\n", True),
    "text-auto-core-eol": ({"core.eol": "crlf"}, "* text=auto\n", True),
    "autocrlf-input-crlf-editor": ({"core.autocrlf": "input"}, "", False),
}


class Checkout:
    def __init__(self, root: Path, env: dict[str, str], crlf: bool) -> None:
        self.root = root
        self.env = env
        self.crlf = crlf

    @property
    def kimi(self) -> Path:
        return self.root / KIMI

    def pg(self, *args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
        return run_patchguard(self.root, self.env, args, check)

    def git(self, *args: str) -> subprocess.CompletedProcess[str]:
        return git(self.root, *args, env=self.env)

    def as_checked_out(self, data: bytes) -> bytes:
        """What git writes for this content (under autocrlf=input, LF whatever the editor did)."""
        return data if self.crlf else data.replace(b"\r\n", b"\n")

    def head_text(self) -> bytes:
        return self.git("show", f"HEAD:{KIMI}").stdout.encode()

    def diff(self) -> str:
        return self.git("diff", "--no-color", "--", KIMI).stdout

    def changed(self) -> list[str]:
        return self.git("status", "--porcelain", "--untracked-files=no").stdout.splitlines()


def set_attributes(root: Path, text: str) -> None:
    """Attributes for this checkout only (.git/info/attributes), the same across commits."""
    info = root / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text(text)


def add_methods_in_crlf(path: Path) -> None:
    """The user's edit, as an editor on a CRLF file makes it: every line ends in CRLF."""
    data = path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    path.write_bytes(data.replace(b"\r\n\r\nEntryClass", CRLF_METHODS + b"\r\n\r\nEntryClass", 1))


@pytest.fixture(params=list(SETUPS))
def checkout(request: pytest.FixtureRequest, tmp_path: Path, clean_env: dict[str, str]) -> Checkout:
    config, attributes, crlf = SETUPS[request.param]
    root = tmp_path / "sglang"
    sample_repo.build_hunt(root)
    result = Checkout(root, clean_env, crlf)
    for key, value in config.items():
        result.git("config", key, value)
    if attributes:
        set_attributes(root, attributes)
    result.git("checkout", "-q", "-b", "work", "c0")
    result.kimi.unlink()
    result.git("checkout", "--", KIMI)  # checked out again, under the new settings
    assert (b"\r\n" in result.kimi.read_bytes()) == crlf
    add_methods_in_crlf(result.kimi)
    result.pg("record", "eagle3")
    result.pg("install")
    return result


def test_record_takes_the_change_git_diff_shows(checkout: Checkout) -> None:
    shown = checkout.pg("show", "eagle3").stdout
    added = [
        line for line in shown.splitlines() if line.startswith("+") and line != "+++ b/" + KIMI
    ]
    removed = [line for line in shown.splitlines() if line.startswith("-") and "---" not in line]
    assert removed == []
    assert len(added) == sample_repo.EAGLE3_METHODS.count("\n")
    assert all("\r" not in line for line in added)
    for method in sample_repo.METHODS:
        assert f"requires: {KIMI}::{sample_repo.CLASS}.{method}\n" in shown
    assert checkout.pg("status").stdout.startswith("eagle3: applied")


def test_hunt_round_trips_without_a_conflict(checkout: Checkout) -> None:
    patched = checkout.kimi.read_bytes()
    git_diff = checkout.diff()
    checkout.pg("check")
    for commit in ("c2", "c4", "c1", "c0"):
        checkout.pg("git", "checkout", "-q", commit)
        checkout.pg("check")
        text = checkout.kimi.read_bytes()
        assert (b"\r\n" in text) == checkout.crlf, commit
        assert text.count(b"def set_embed_and_head(") == 1, commit
        if commit == "c4":  # upstream has the methods: the file is HEAD's, as git writes it
            assert checkout.changed() == []
    checkout.git("checkout", "-q", "work")
    assert checkout.kimi.read_bytes() == checkout.as_checked_out(patched)
    assert checkout.diff() == git_diff

    # Plain git: stash, a checkout the hooks re-apply after, and the stash back.
    checkout.git("stash")
    checkout.git("checkout", "-q", "c2")  # git moves: the file is unchanged after the stash
    assert checkout.pg("status").stdout.startswith("eagle3: applied")
    checkout.pg("check")
    checkout.pg("git", "checkout", "-q", "work")
    checkout.pg("git", "stash", "pop", "-q")
    assert checkout.kimi.read_bytes() == checkout.as_checked_out(patched)
    assert checkout.changed() == [f" M {KIMI}"]
    assert "<<<<<<<" not in checkout.kimi.read_text()


def test_bisect_finds_the_regression_on_a_crlf_checkout(checkout: Checkout, tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(sample_repo.HUNT_BENCH_TEXT)
    patched = checkout.kimi.read_bytes()
    checkout.pg("git", "bisect", "start", "c4", "c0")
    run = checkout.pg("bisect", "run", "python", str(bench))
    c4 = checkout.git("rev-parse", "c4").stdout.strip()
    assert f"{c4} is the first bad commit" in run.stdout  # every step measured the patched code
    assert "skip" not in run.stdout + run.stderr
    checkout.pg("git", "bisect", "reset")
    assert checkout.kimi.read_bytes() == checkout.as_checked_out(patched)


def test_unapply_apply_undo_are_exact(checkout: Checkout) -> None:
    patched = checkout.kimi.read_bytes()
    checkout.pg("unapply", "eagle3")
    assert checkout.changed() == []  # exactly HEAD's file, in the checkout's line endings
    unapplied = checkout.kimi.read_bytes()
    assert unapplied.replace(b"\r\n", b"\n") == checkout.head_text()
    checkout.pg("apply", "eagle3")
    assert checkout.kimi.read_bytes().replace(b"\r\n", b"\n") == patched.replace(b"\r\n", b"\n")
    checkout.pg("check")
    checkout.pg("undo")
    assert checkout.kimi.read_bytes() == unapplied
    checkout.pg("undo")  # the unapply: back to the very bytes the user had
    assert checkout.kimi.read_bytes() == patched


def test_a_line_the_user_ended_differently_is_kept_by_undo(checkout: Checkout) -> None:
    data = checkout.kimi.read_bytes().replace(b"nn.Module):\r\n", b"nn.Module):  # mine\n", 1)
    checkout.kimi.write_bytes(data)
    checkout.pg("unapply", "eagle3")
    assert b"# mine" in checkout.kimi.read_bytes()
    checkout.pg("undo")
    assert checkout.kimi.read_bytes() == data


def test_stamp_names_the_file_as_git_does(checkout: Checkout) -> None:
    stamp = json.loads(checkout.pg("stamp").stdout)
    assert stamp["files"][KIMI] == checkout.git("hash-object", KIMI).stdout.strip()
    assert stamp["dirty"] == [KIMI] and stamp["ok"]


def test_the_fast_path_knows_a_crlf_tree(checkout: Checkout) -> None:
    checkout.pg("check")
    assert is_verified(str(checkout.root))
    checkout.kimi.write_bytes(
        checkout.kimi.read_bytes().replace(b"def get_embed_and_head", b"def x")
    )
    assert not is_verified(str(checkout.root))
    checkout.pg("check", check=1)


# --- the rules, held to git's own conversions ---------------------------------------------------

CONTENTS = [
    b"",
    b"one line, no newline",
    b"a\nb\n",
    b"a\r\nb\r\n",
    b"a\r\nb\n",  # mixed
    b"a\rb\r\n",  # a lone CR: not text to git
    b"a\0b\r\n",  # a NUL: binary
    b"a\r\r\nb\r\n",
    b"x" * 200 + b"\x01\r\n",  # one control byte per 128 printable ones: still text
    b"x" * 200 + b"\x01\x02\r\n",  # more: binary
    b"text\r\n\x1a",  # a DOS end-of-file mark
]
ATTRIBUTE_LINES = [
    "",
    "text",
    "-text",
    "text=auto",
    "eol=crlf",
    "eol=lf",
    "text eol=crlf",
    "text=auto eol=crlf",
    "text=auto eol=lf",
    "-text eol=crlf",
    "crlf",
    "-crlf",
    "crlf=input",
    "binary",
]
CONFIGS = [{}, {"core.autocrlf": "true"}, {"core.autocrlf": "input"}, {"core.eol": "crlf"}]


@pytest.mark.parametrize(
    "config", CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())
)
def test_conversions_equal_gits(tmp_path: Path, config: dict[str, str]) -> None:
    """For every attribute line and content: what git stores from the working file (with and
    without CRs in the index) and what `git checkout` writes, compared with guard.git.eol."""
    root = tmp_path / "r"
    git(tmp_path, "init", "-q", str(root))
    for key, value in config.items():
        git(root, "config", key, value)
    git(root, "config", "core.safecrlf", "false")
    names = {}
    for a, line in enumerate(ATTRIBUTE_LINES):
        for c, content in enumerate(CONTENTS):
            for with_cr in (False, True):
                names[f"a{a}/c{c}-{int(with_cr)}.txt"] = (line, content, with_cr)
    set_attributes(
        root, "".join(f"a{a}/* {line}\n" for a, line in enumerate(ATTRIBUTE_LINES) if line)
    )
    # The index holds an earlier version with or without CRs (git's "safer autocrlf" reads it).
    earlier = {}
    for with_cr, data in ((False, b"old\n"), (True, b"old\r\n")):
        stored_earlier = git(
            root, "hash-object", "-w", "--no-filters", "--stdin", input=data.decode()
        )
        earlier[with_cr] = stored_earlier.stdout.strip()
    index_info = "".join(
        f"100644 {earlier[with_cr]}\t{name}\n" for name, (_, _, with_cr) in names.items()
    )
    git(root, "update-index", "--add", "--index-info", input=index_info)
    repo = Repo.discover(root)
    expected_stored = {}
    for name, (_, content, _) in names.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_bytes(content)
        expected_stored[name] = blob_id(repo.to_git(name, content))
    listing = "".join(name + "\n" for name in names)
    raw_ids = git(root, "hash-object", "-w", "--no-filters", "--stdin-paths", input=listing)
    git(root, "add", "--", *names)
    stored = {}
    for entry in git(root, "ls-files", "-s").stdout.splitlines():
        mode_id_stage, name = entry.split("\t")
        stored[name] = mode_id_stage.split()[1]
    assert stored == expected_stored

    # Checkout: each content as the stored blob, written out by git.
    index_info = "".join(
        f"100644 {oid}\t{name}\n" for oid, name in zip(raw_ids.stdout.split(), names, strict=True)
    )
    git(root, "update-index", "--index-info", input=index_info)
    git(root, "checkout-index", "--all", "--force")
    for name, (line, content, _) in names.items():
        assert repo.to_worktree(name, content) == (root / name).read_bytes(), (line, content)
