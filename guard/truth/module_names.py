"""Which module a checkout file imports as, and from which sys.path entry: the import rule the
runtime probe follows (guard.truth.probe) and a stamp records (guard.ops.provenance). A module
of its own, so that a stamp does not import the probe's process machinery for ten lines."""

from __future__ import annotations

from pathlib import Path


def module_of(workdir: Path, path: str) -> tuple[str, Path]:
    """The module name a checkout file imports as, and the sys.path entry it imports from:
    the file's packages (directories with `__init__.py`) up to the first that is not one."""
    file = workdir / path
    parts = [file.stem] if file.name != "__init__.py" else []
    directory = file.parent
    while (directory / "__init__.py").is_file() and directory != workdir:
        parts.insert(0, directory.name)
        directory = directory.parent
    return ".".join(parts) or file.stem, directory
