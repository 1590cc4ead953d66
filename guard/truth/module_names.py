"""Which module a checkout file imports as, and from which sys.path entry: the rule the runtime
probe (guard.truth.probe) and the import guard (guard.ops.attest) follow.

The name is the path below the import root, not where the `__init__.py` files stop: packages
need none (PEP 420: sglang's `srt/` and `srt/models/` have none). The root is the one the
layout names: the parent of the highest regular package (`python/` above
`python/sglang/__init__.py`), or a project's directory (`pyproject.toml`, `setup.py`,
`setup.cfg`; its `src/`) above packages that all are namespace ones.
"""

from __future__ import annotations

from pathlib import Path

_PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


def module_of(workdir: Path, path: str) -> tuple[str, Path]:
    """The module name a checkout file imports as, and the sys.path entry it imports from."""
    file = workdir / path
    folders = [file.parent, *file.parent.parents]
    folders = folders[: folders.index(workdir) + 1] if workdir in folders else [file.parent]
    packages = [i for i, folder in enumerate(folders[:-1]) if (folder / "__init__.py").is_file()]
    projects = (
        i
        for i, folder in enumerate(folders[:-1])
        if any((folder / name).is_file() for name in _PROJECT_FILES)
    )
    root = folders[0]  # no package around it
    if packages:
        root = folders[packages[-1] + 1]  # at or above the packages around the file
    elif (index := next(projects, None)) is not None:  # all namespace packages: a project's dir
        below = folders[index - 1] if index else None
        root = folders[index] / "src" if below == folders[index] / "src" else folders[index]
    parts = list(file.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or file.stem, root
