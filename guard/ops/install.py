"""Install, uninstall and diagnose the git hooks, in the directory git really runs hooks from.

Unlike pre-commit we follow `core.hooksPath`, and a foreign hook already in place is kept
as `NAME.patchguard-legacy` and chained: it runs first with the same arguments and stdin.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from guard.errors import ConfigError
from guard.git.atomic import atomic_write
from guard.git.gitdir import Layout
from guard.git.process import run_git

HOOK_TYPES = (
    "post-checkout",
    "post-merge",
    "post-rewrite",
    "post-commit",
    "reference-transaction",
)
# What a whole install wrote before post-commit existed: such a record means "every hook".
_WHOLE_BEFORE_POST_COMMIT = {"post-checkout", "post-merge", "post-rewrite", "reference-transaction"}
MARKER = "patchguard-managed-hook"
LEGACY_SUFFIX = ".patchguard-legacy"
TEMPLATE_NAME = "patchguard-hook.sh"
LAUNCHER_NAME = "patchguard_entry.py"
_RECORD = "hooks.json"  # in the store: where install put the hooks, with which Python
# The values `install` writes into a hook, each on a line `NAME='VALUE'` (sh-quoted), where the
# template holds @NAME@ (upper case).
_BAKED = ("hook_name", "install_python", "launcher", "reinstall")
# How doctor starts patchguard as the hooks do, without running a hook: the hook's module and
# the libraries a re-apply may need (a manifest seen first is validated, a merge may need libgit2).
_PROBE = (
    "import runpy, sys; runpy.run_path(sys.argv[1])['load_guard'](); "
    "import guard.cli.hookrun, pydantic, pygit2"
)


PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the `guard` package: this is guard/ops/


def packaged(name: str) -> Path | None:
    """A file of hooks/: packaged in the wheel, or beside the sources in a checkout."""
    for hooks in (PACKAGE_DIR / "_data" / "hooks", PACKAGE_DIR.parent / "hooks"):
        if (hooks / name).is_file():
            return hooks / name
    return None


def _missing(what: object) -> ConfigError:
    return ConfigError(
        f"{what} is missing from this installation; reinstall patchguard ({reinstall_command()})"
    )


def reinstall_command() -> str:
    """The command that installs this copy again, from the source pip recorded (PEP 610,
    `direct_url.json`; none for one from the index): a hint naming the index for a copy from a
    clone would send the user to a package that may not be there."""
    import shlex
    from importlib.metadata import PackageNotFoundError, distribution
    from urllib.parse import unquote, urlparse

    try:
        recorded = distribution("git-patchguard").read_text("direct_url.json")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return f"pip install -e {shlex.quote(str(PACKAGE_DIR.parent))}"
    if not recorded:
        return "pip install --force-reinstall git-patchguard"
    source = json.loads(recorded)
    url = str(source.get("url", ""))
    if "vcs_info" in source:
        vcs = source["vcs_info"]
        return f"pip install {vcs.get('vcs', 'git')}+{url}@{vcs.get('commit_id', '')}"
    if url.startswith("file:"):
        path = shlex.quote(unquote(urlparse(url).path))
        editable = source.get("dir_info", {}).get("editable", False)
        return f"pip install {'-e ' if editable else '--force-reinstall '}{path}"
    return f"pip install --force-reinstall {shlex.quote(url)}"


def launcher() -> str:
    """patchguard_entry.py, installed beside the `guard` package (in a wheel and in a checkout)."""
    path = PACKAGE_DIR.parent / LAUNCHER_NAME
    if not path.is_file():
        raise _missing(path)
    return str(path)


def _render(values: dict[str, str]) -> str:
    template = packaged(TEMPLATE_NAME)
    if template is None:
        raise _missing(f"the hook template {TEMPLATE_NAME}")
    text = template.read_text()
    for name in _BAKED:
        text = text.replace(f"@{name.upper()}@", values[name].replace("'", "'\\''"))  # sh-quoted
    return text


def git_hooks_dir(layout: Layout) -> Path:
    """Ask git itself, so core.hooksPath (absolute, relative, per worktree) is honoured exactly."""
    result = run_git(["rev-parse", "--git-path", "hooks"], layout.workdir)
    return (layout.workdir / result.stdout.strip()).resolve()


def hooks_installed(layout: Layout) -> bool:
    """Are patchguard's hooks where git runs them? (For advice; asks git once.)"""
    return is_ours(git_hooks_dir(layout) / "post-checkout")


def is_ours(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return MARKER.encode() in handle.read(256)
    except OSError:
        return False


def baked_values(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text(errors="replace").splitlines():
        name, quote, value = line.partition("='")
        if quote and name in _BAKED and name not in found and value.endswith("'"):
            found[name] = value[:-1].replace("'\\''", "'")
    return found


@contextmanager
def _writing_hooks(command: str, lines: list[str]) -> Iterator[None]:
    """A user who may read the repository but not write it: one line, saying what was done."""
    try:
        yield
    except OSError as error:
        where = f" in {Path(error.filename).parent}" if error.filename else ""
        raise ConfigError(
            f"cannot write{where}: {error.strerror} ({'; '.join(lines) or 'nothing was changed'}"
            f"). Run patchguard {command} as a user who can write there (the repository's owner)."
        ) from None


def install(layout: Layout, hook_types: tuple[str, ...], force: bool) -> list[str]:
    """Write the hooks; re-running changes nothing. Returns one line per hook."""
    lines: list[str] = []
    with _writing_hooks("install", lines):
        hooks_dir = git_hooks_dir(layout)
        if hooks_dir.exists() and not hooks_dir.is_dir():
            raise ConfigError(
                f"git runs hooks from {hooks_dir} (core.hooksPath), which is not a directory, so "
                "git runs no hooks at all. Point core.hooksPath at a directory, or unset it: "
                "git config --unset core.hooksPath"
            )
        if not hooks_dir.is_dir():
            default = hooks_dir == (layout.common_dir / "hooks").resolve()  # git init --template=
            if not (force or default):
                raise ConfigError(
                    f"git runs hooks from {hooks_dir} (core.hooksPath), which does not exist, so "
                    "git runs no hooks at all. Create it, or pass --force to let patchguard create "
                    "it."
                )
            hooks_dir.mkdir(parents=True)
        baked = {"install_python": sys.executable, "launcher": launcher()}
        baked["reinstall"] = reinstall_command()
        for hook_type in hook_types:
            path = hooks_dir / hook_type
            legacy = hooks_dir / (hook_type + LEGACY_SUFFIX)
            wanted = _render({**baked, "hook_name": hook_type})
            if is_ours(path):
                if path.read_text() == wanted and os.access(path, os.X_OK):
                    lines.append(f"{hook_type}: already installed at {path}")
                    continue
            elif os.path.lexists(path):
                if os.path.lexists(legacy):
                    raise ConfigError(
                        f"{path} is not patchguard's, and {legacy} already exists: patchguard will "
                        "not overwrite either. Merge them by hand, then run patchguard install "
                        "again."
                    )
                os.replace(path, legacy)
                lines.append(f"{hook_type}: existing hook kept as {legacy.name}, runs first")
            atomic_write(path, wanted.encode(), mode=0o755)
            path.chmod(0o755)
            lines.append(f"{hook_type}: installed at {path}")
        recorded = _read_record(layout).get("hooks")
        _write_record(
            layout, hooks_dir, {*(recorded if isinstance(recorded, list) else []), *hook_types}
        )
    return lines


def _write_record(layout: Layout, hooks_dir: Path, hook_types: set[str]) -> None:
    layout.store_dir.mkdir(parents=True, exist_ok=True)
    record = {"hooks_dir": str(hooks_dir), "python": sys.executable, "hooks": sorted(hook_types)}
    atomic_write(layout.store_dir / _RECORD, (json.dumps(record, indent=2) + "\n").encode())


def _expected_hooks(record: dict[str, object]) -> set[str]:
    """The hooks `install` was asked for: every one, unless `--hook` chose some. A whole install
    by an earlier patchguard lacks the hooks added since, and `doctor` says so."""
    recorded = record.get("hooks")
    if not isinstance(recorded, list) or set(recorded) >= _WHOLE_BEFORE_POST_COMMIT:
        return set(HOOK_TYPES)
    return {str(hook) for hook in recorded}


def _read_record(layout: Layout) -> dict[str, object]:
    try:
        data = json.loads((layout.store_dir / _RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def uninstall(layout: Layout, hook_types: tuple[str, ...]) -> list[str]:
    """Remove our hooks and put back exactly what was there before."""
    lines: list[str] = []
    with _writing_hooks("uninstall", lines):
        hooks_dir = Path(str(_read_record(layout).get("hooks_dir") or git_hooks_dir(layout)))
        for hook_type in hook_types:
            path = hooks_dir / hook_type
            legacy = hooks_dir / (hook_type + LEGACY_SUFFIX)
            if not is_ours(path):
                lines.append(f"{hook_type}: not installed at {path}; left alone")
                continue
            if legacy.exists() or legacy.is_symlink():
                os.replace(legacy, path)
                lines.append(f"{hook_type}: removed; previous hook restored")
            else:
                path.unlink()
                lines.append(f"{hook_type}: removed")
        if any(is_ours(hooks_dir / t) for t in HOOK_TYPES):
            _write_record(
                layout, hooks_dir, _expected_hooks(_read_record(layout)) - set(hook_types)
            )
        else:
            (layout.store_dir / _RECORD).unlink(missing_ok=True)
    return lines


def _cannot_import_patchguard(interpreter: str) -> str | None:
    """Why `interpreter` cannot run the hooks' code (as the hooks run it: -I), or None."""
    try:
        probe = subprocess.run(
            [interpreter, "-I", "-c", _PROBE, launcher()],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    lines = probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"]
    return None if probe.returncode == 0 else lines[-1]


def doctor(layout: Layout) -> tuple[list[str], list[str]]:
    """What was found, line by line, and the problems (none: all is well)."""
    hooks_dir = git_hooks_dir(layout)
    lines, problems = [f"git runs hooks from {hooks_dir}"], []
    if not hooks_dir.is_dir():
        problems.append(
            f"{hooks_dir} does not exist, so git runs no hooks (core.hooksPath?); "
            "run: patchguard install --force"
        )
        return lines, problems
    record = _read_record(layout)
    recorded_dir = record.get("hooks_dir")
    if recorded_dir and Path(str(recorded_dir)) != hooks_dir:
        problems.append(
            f"hooks were installed in {recorded_dir}, but git now runs hooks from {hooks_dir} "
            "(core.hooksPath changed?); run: patchguard install"
        )
    expected = _expected_hooks(record)
    cannot_import = functools.cache(_cannot_import_patchguard)  # one probe per interpreter
    for hook_type in HOOK_TYPES:
        path = hooks_dir / hook_type
        if not is_ours(path):
            if hook_type not in expected:
                continue
            why = " (this patchguard re-applies with it when a merge that stopped is committed)"
            problems.append(
                f"{hook_type}: not installed{why if hook_type == 'post-commit' else ''}; "
                "run: patchguard install"
            )
            continue
        baked = baked_values(path)
        interpreter = baked.get("install_python", "?")
        lines.append(f"{hook_type}: installed at {path}, calls {interpreter}")
        # not this template, whatever it was baked with: a hook from before an upgrade may
        # decide in sh what this one leaves to Python (the interpreter is checked below)
        if set(baked) != set(_BAKED) or path.read_text(errors="replace") != _render(baked):
            problems.append(
                f"{hook_type}: {path} was written by another version of patchguard and may "
                "trust what this one no longer would; run: patchguard install"
            )
        if not os.access(path, os.X_OK):
            problems.append(
                f"{hook_type}: {path} is not executable, so git skips it; run: chmod +x {path}"
            )
        if not os.access(interpreter, os.X_OK):
            problems.append(
                f"{hook_type}: interpreter {interpreter} is missing; reinstall: patchguard install"
            )
        elif reason := cannot_import(interpreter):
            problems.append(
                f"{hook_type}: {interpreter} cannot import patchguard ({reason}), so the hook "
                "checks nothing; run patchguard install with the patchguard you use"
            )
        legacy = hooks_dir / (hook_type + LEGACY_SUFFIX)
        if legacy.exists():
            lines.append(f"{hook_type}: chains the previous hook {legacy.name} first")
    return lines, problems
