"""Record patches, add guards, drop them: what writes the manifest."""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from guard.errors import ConfigError, GuardFailure
from guard.git.eol import cannot_rebuild
from guard.git.lock import locked
from guard.git.process import STATUS, changed_tracked, run_git
from guard.git.repo import Repo, is_binary
from guard.store import history
from guard.store.derived import load_manifest
from guard.store.manifest import FileChange, Patch, Resolution, as_dict, now_utc, select_patches
from guard.store.spec import Spec, parse_spec
from guard.tree.assess import assess_patch, check_symbol, merge_labels, required_in, texts, versions
from guard.tree.verdicts import State
from guard.tree.worktree import Worktree
from guard.truth.slips import Slips, slips
from guard.truth.symbols import SourceSyntaxError, did_you_mean


class RecordOutcome(NamedTuple):
    patch: Patch
    replaced: bool
    skipped: list[str]
    slips: list[str]  # what looks typed by mistake (guard.truth.slips) and was recorded anyway
    grown: list[str]  # a re-record's lines that its previous version did not have


@locked("record", store=True)
def record(
    repo: Repo,
    name: str,
    paths: Sequence[str],
    *,
    requires: Sequence[str] = (),
    description: str | None = None,
    rebase: bool = False,
    strict: bool = False,
    as_typed: bool = False,
    choose_hunks: bool = False,
    cwd: Path,
) -> RecordOutcome:
    """Record the uncommitted changes of `paths` (default: every changed tracked file) as NAME."""
    head_commit = repo.head_commit_id()
    manifest = load_manifest(repo, missing_ok=True)
    previous = manifest.patch(name)
    if previous is not None and not rebase:
        _refuse_rebase(repo, previous, head_commit)
    if description is None:
        description = previous.description if previous is not None else ""
    skipped: list[str] = []
    if paths:
        repo_paths = sorted({repo.relpath(p, cwd) for p in paths})
    else:
        owned = {c.path for p in manifest.patches if p.name != name for c in p.files}
        # a name that is not UTF-8 comes as surrogates, refused by name below
        changed = changed_tracked(run_git(STATUS, repo.workdir).stdout.split("\0"))
        skipped = [p for p in changed if p in owned]
        repo_paths = [p for p in changed if p not in owned]
        if not repo_paths:
            raise ConfigError(
                "no tracked file has uncommitted changes"
                + (f" outside other patches ({', '.join(skipped)})" if skipped else "")
                + "; edit files first, or name the paths: patchguard record NAME PATH..."
            )
    for path in repo_paths:
        _refuse_non_utf8_name(path)
    tree = Worktree(repo)
    if choose_hunks:  # what the patch holds is what the user picked, not the whole file
        chosen = _chosen_hunks(repo, repo_paths)
        repo_paths = [p for p in repo_paths if chosen.get(p) != tree.head(p)]
        for path in repo_paths:
            tree.stage(path, chosen[path])
    below = [p for p in manifest.patches if p.name != name]
    recorded = [_record_file(repo, tree, path, below) for path in repo_paths]
    files = [change for change, _ in recorded]
    dedented = [slip for _, found in recorded for slip in found.dedented]
    misspelt = [slip for _, found in recorded for slip in found.misspelt]
    if dedented and not as_typed:
        here = " ".join(shlex.quote(os.path.relpath(repo.workdir / p, cwd)) for p in repo_paths)
        raise GuardFailure(
            f"not recorded: {'; '.join(dedented)}. Indent them into the class, then record "
            "again; or keep them at module level as typed: "
            f"patchguard record {shlex.quote(name)} {here} --as-typed"
        )
    if misspelt and strict:
        raise GuardFailure(
            f"not recorded (--strict): {'; '.join(misspelt)}. Fix the file, or record without "
            "--strict to keep it as typed."
        )
    specs = {f"{c.path}::{q}" for c in files for q in c.added_symbols}
    specs |= {str(_resolve_spec(repo, text, cwd)) for text in requires}
    _require_present(
        tree,
        sorted(specs),
        f"cannot record {name}: ",
        "Fix the file or the --require SPEC, then record again.",
    )
    patch = Patch(
        name=name,
        description=description,
        created_at=now_utc(),
        base_commit=head_commit,
        files=files,
        requires=sorted(specs),
    )
    from guard.store import schema  # pydantic: only where a new patch is checked

    schema.validate_data(schema.Patch, as_dict(patch), f"cannot record {name!r}")
    patches = [patch if p.name == name else p for p in manifest.patches]
    if previous is None:
        patches.append(patch)
    verb = "recorded" if previous is None else "re-recorded"
    history.save(
        repo, manifest._replace(patches=patches), f"{verb} {name} ({', '.join(repo_paths)})"
    )
    return RecordOutcome(
        patch=patch,
        replaced=previous is not None,
        skipped=skipped,
        slips=dedented + misspelt,
        grown=_grown(repo, previous, files) if previous is not None else [],
    )


def _grown(repo: Repo, previous: Patch, files: Sequence[FileChange]) -> list[str]:
    """The lines a re-record adds that the patch's previous version did not have ("FILE:N:
    text"): a debug line typed since would otherwise be swallowed into the patch unseen."""
    before = {c.path: c for c in previous.files}
    grown = []
    for change in files:
        old = before.get(change.path)
        if old is not None:
            old_text, new_text = repo.blob(old.patched_blob), repo.blob(change.patched_blob)
            grown += _added_lines(repo, old_text, new_text, change.path)
    return grown


def _added_lines(
    repo: Repo, old: bytes, new: bytes, path: str, known: frozenset[bytes] = frozenset()
) -> list[str]:
    """The non-blank lines `new` adds to `old`, less those in `known` (stripped): "FILE:N: text"."""
    lines = new.splitlines()
    found = []
    for number in sorted(repo.diff(old, new, path).added_lines):
        text = lines[number - 1].strip()
        if text and text not in known:
            found.append(f"{path}:{number}: {text.decode(errors='replace')}")
    return found


def _chosen_hunks(repo: Repo, paths: Sequence[str]) -> dict[str, bytes]:
    """git's own `add -p` (the terminal is git's) on a private index started as HEAD's: the
    worktree and the real index are left as they are."""
    with tempfile.TemporaryDirectory(prefix="patchguard-record-p-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        run_git(["read-tree", "HEAD"], repo.workdir, env=env)
        status = run_git(["add", "-p", "--", *paths], repo.workdir, passthrough=True, env=env)
        if status.returncode != 0:
            raise ConfigError(
                f"git add -p ended with status {status.returncode}; nothing was recorded"
            )
        listing = run_git(["ls-files", "-s", "-z", "--", *paths], repo.workdir, env=env).stdout
    chosen = {}
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        chosen[path] = repo.blob(meta.split()[1])
    if all(chosen.get(path) == repo.file_at("HEAD", path) for path in paths):
        raise ConfigError("no hunk was chosen; nothing was recorded")
    return chosen


def _refuse_rebase(repo: Repo, previous: Patch, head_commit: str) -> None:
    """Re-recording away from the base moves the patch's base here: only when asked to. Done to
    get out of a conflict mid-bisect, it would make the patch wrong on the user's branch."""
    operation = repo.operation_in_progress()
    if operation is None and repo.layout.bisect_start.exists():
        operation = "bisect"
    if operation is None and head_commit == previous.base_commit:
        return
    why = (
        f"a {operation} is in progress"
        if operation
        else f"HEAD is {head_commit[:10]}, not its base {previous.base_commit[:10]}"
    )
    raise ConfigError(
        f"recording {previous.name} again here would re-base it onto {head_commit[:10]} ({why}): "
        "the patch would then fit this commit, not the one it was recorded on. Nothing was "
        f"changed. If that is what you want, run the same record command with --rebase; to get "
        f"out of a conflict instead: patchguard apply {previous.name}"
    )


def _refuse_non_utf8_name(path: str) -> None:
    """git stores any bytes as a name; the manifest and libgit2's diff need UTF-8."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise ConfigError(
            f"{shown} is not a UTF-8 file name; patchguard records files with UTF-8 names "
            "only. Rename it, or name the other paths: patchguard record NAME PATH..."
        ) from None


def _record_file(
    repo: Repo, tree: Worktree, path: str, below: Sequence[Patch]
) -> tuple[FileChange, Slips]:
    """The change of `path` on top of HEAD, and on top of the other patches applied to it."""
    current = tree.read(path)
    head = tree.head(path)
    refusal = repo.conversion(path).refuses(current, head)
    if refusal is not None:
        raise ConfigError(
            cannot_rebuild(path, refusal) + "; patchguard records files whose stored form it "
            "can rebuild (line endings included). Leave it out."
        )
    if current is None:
        if head is None:
            raise ConfigError(f"{path} does not exist; name files that the patch edits or adds")
        raise ConfigError(
            f"{path} is deleted in the worktree; patchguard records edits and new files, "
            "not deletions. Restore it (git restore) or leave it out."
        )
    if current == head:
        raise ConfigError(
            f"{path} has no changes against HEAD; nothing to record for it. Leave it out, or "
            "edit it first."
        )
    if is_binary(current) or (head is not None and is_binary(head)):
        raise ConfigError(
            f"{path} is a binary file; patchguard records text patches only. Leave it out of "
            "the patch."
        )
    base, stacked = _with_patches_below(repo, tree, path, head, below)
    if current == base:
        raise ConfigError(
            f"{path} holds no change beyond patch {', '.join(stacked)}, already recorded on it; "
            "nothing new to record. Edit it first, or see: patchguard status"
        )
    added_symbols: list[str] = []
    diff = repo.diff(base or b"", current, path)
    if path.endswith(".py"):
        try:
            index = tree.symbols(current, path)
        except SourceSyntaxError as error:
            raise GuardFailure(
                f"cannot record: {error.path}:{error.lineno}: syntax error: {error.message}. "
                "Fix the file, then record again."
            ) from None
        added_symbols = index.defined_on_lines(diff.added_lines)
    found = slips(current, path, diff.added_lines) if path.endswith(".py") else Slips([], [])
    change = FileChange(
        path=path,
        base_blob=repo.store_blob(base) if base is not None else None,
        patched_blob=repo.store_blob(current),
        diff=diff.text,
        added_symbols=added_symbols,
        mode=repo.git_mode(path),
    )
    return change, found


def _with_patches_below(
    repo: Repo, tree: Worktree, path: str, head: bytes | None, below: Sequence[Patch]
) -> tuple[bytes | None, list[str]]:
    """HEAD's file with every other patch applied to it put on, in manifest order: a second
    patch on a file records only its own change, so `unapply SECOND` leaves the first."""
    base, stacked = head, []
    for patch in below:
        for recorded, verdict in zip(
            patch.files, assess_patch(repo, tree, patch).files, strict=True
        ):
            if recorded.path != path or verdict.state not in (State.APPLIED, State.EDITED):
                continue
            lower, patched = texts(repo, verdict.version or recorded)  # a resolution, if decided
            merged = repo.merge3(
                lower, base or b"", verdict.patched or patched, merge_labels(patch)
            )
            if merged.clean:
                base = merged.content
                stacked.append(patch.name)
    return base, stacked


def _resolve_spec(repo: Repo, text: str, cwd: Path, known: Sequence[str] = ()) -> Spec:
    """A SPEC from the command line, its path relative to cwd as git paths are; or a
    repository path (as patchguard prints SPECs) where that names nothing from cwd but a file
    (or, for `drop`, a guard in `known`) from the top."""
    try:
        spec = parse_spec(text)
    except ValueError as error:
        raise ConfigError(f"bad symbol spec: {error}") from None
    try:
        from_cwd: str | None = repo.relpath(spec.path, cwd)
    except ConfigError:  # outside the worktree from here: perhaps a repository path
        from_cwd = None
    if from_cwd is not None and (
        (repo.workdir / from_cwd).exists() or f"{from_cwd}::{spec.qualname}" in known
    ):
        return Spec(from_cwd, spec.qualname)
    if (repo.workdir / spec.path).exists() or text in known:
        return Spec(repo.relpath(spec.path, repo.workdir), spec.qualname)
    return Spec(from_cwd if from_cwd is not None else repo.relpath(spec.path, cwd), spec.qualname)


@locked("require", store=True)
def require(repo: Repo, specs: Sequence[str], *, cwd: Path) -> list[str]:
    """Guard symbols that are already committed; each must exist now. Returns the new guards."""
    manifest = load_manifest(repo, missing_ok=True)
    resolved = [str(_resolve_spec(repo, text, cwd)) for text in specs]
    tree = Worktree(repo)
    _require_present(
        tree,
        resolved,
        "cannot guard ",
        "A guard must exist when you add it; check the file and the SPEC.",
    )
    added = [text for text in dict.fromkeys(resolved) if text not in manifest.guards]
    history.save(
        repo, manifest._replace(guards=[*manifest.guards, *added]), f"guarding {', '.join(added)}"
    )
    return added


def _require_present(tree: Worktree, specs: Sequence[str], refused: str, advice: str) -> None:
    """Each SPEC must hold now. One naming nothing of that name in the file, or a class it
    does not define, is mistyped: a usage error (exit 2). One whose name is defined at another
    place (a method outside its class) is code not as required: a failed guard (exit 1)."""
    for text in specs:
        result = check_symbol(tree, text, None)
        if result.ok:
            continue
        spec = parse_spec(text)
        content = tree.read(spec.path)
        error: type[ConfigError] | type[GuardFailure] = ConfigError
        hint = ""
        if content is not None:
            try:
                index = tree.symbols(content, spec.path)
            except SourceSyntaxError:
                error = GuardFailure
            else:
                owner_name = spec.qualname.rpartition(".")[0]
                mistyped_owner = bool(owner_name) and owner_name not in index.by_qualname
                if not mistyped_owner and (
                    spec.qualname in index.by_qualname or index.elsewhere(spec.qualname)
                ):
                    error = GuardFailure  # the name is there, the code is not as required
                elif "did you mean" not in result.detail:
                    hint = did_you_mean(spec.qualname, index.by_qualname)
        raise error(f"{refused}{text}: {result.detail}{hint}. {advice}")


@locked("drop", store=True)
def drop(repo: Repo, target: str, *, cwd: Path) -> str:
    """Forget a patch (by name) or a guard (by SPEC); the worktree is not touched."""
    manifest = load_manifest(repo)
    if "::" in target:
        spec = str(_resolve_spec(repo, target, cwd, manifest.guards))
        if spec not in manifest.guards:
            raise ConfigError(
                f"{spec} is not a guard{did_you_mean(spec, manifest.guards)} (see `patchguard list`)"
            )
        kept = [g for g in manifest.guards if g != spec]
        history.save(repo, manifest._replace(guards=kept), f"dropped guard {spec}")
        return f"guard {spec}"
    select_patches(manifest, [target])
    remaining = manifest._replace(patches=[p for p in manifest.patches if p.name != target])
    history.save(repo, remaining, f"dropped {target}")  # `patchguard undo` brings it back
    return f"patch {target}"


class ResolveOutcome(NamedTuple):
    """What `resolve` kept: the paths given a new resolution (empty: nothing conflicts here)."""

    resolved: list[str]
    extra: list[str]  # kept lines neither the patch's nor HEAD's


class ExtraLines(GuardFailure):
    """A resolution would keep lines that are neither the patch's nor upstream's: not kept
    unless the user says so (a debug line left in the file would ride along in every move)."""

    def __init__(self, name: str, lines: list[str]) -> None:
        super().__init__(
            f"not resolved: the resolution of {name} adds {len(lines)} line(s) that are neither "
            "the patch's nor upstream's; take them out of the file and resolve again, or keep "
            f"them: patchguard resolve {name} --keep-extra"
        )
        self.lines = lines


@locked("resolve", store=True)
def resolve(
    repo: Repo,
    name: str,
    *,
    forget: int | None = None,
    keep_extra: bool | Sequence[str] = False,
) -> ResolveOutcome:
    """Keep each file of NAME as the user shaped it at this commit, beside the recording, where
    no kept version merges with HEAD's (see _resolve_here). Extra lines raise ExtraLines unless
    `keep_extra` is True or lists them. `forget` drops resolution N (as `show` numbers them)."""
    repo.refuse_mid_operation("resolve")
    manifest = load_manifest(repo)
    (patch,) = select_patches(manifest, [name])
    resolved: list[str] = []
    extra: list[str] = []
    if forget is not None:
        updated = _forget_resolution(patch, forget)
        change = f"forgot resolution {forget} of {name}"
    else:
        updated, resolved, extra = _resolve_here(repo, patch)
        if not resolved:
            return ResolveOutcome([], [])
        approved = set() if isinstance(keep_extra, bool) else set(keep_extra)
        if keep_extra is not True and not set(extra) <= approved:
            raise ExtraLines(name, extra)
        change = f"resolved {name} ({', '.join(resolved)})"
    # Unlike record's, no check of its own: a valid patch with a resolution more or less is valid
    after = manifest._replace(patches=[updated if p.name == name else p for p in manifest.patches])
    history.save(repo, after, change)  # `patchguard undo` takes it back
    return ResolveOutcome(resolved, extra)


def _resolve_here(repo: Repo, patch: Patch) -> tuple[Patch, list[str], list[str]]:
    if repo.unmerged():
        raise ConfigError(
            "the index has unmerged entries: finish what git stopped on first (patchguard "
            f"apply {patch.name} gets a patched file out of a conflict), then resolve"
        )
    head_commit = repo.head_commit_id()
    tree = Worktree(repo)
    verdict = assess_patch(repo, tree, patch)
    files, resolved, extra = [], [], []
    for change, file_verdict in zip(patch.files, verdict.files, strict=True):
        path = file_verdict.path
        current, head = tree.read(path), tree.head(path)
        if current is None or head is None:
            raise ConfigError(
                f"cannot resolve {patch.name}: {path} does not exist "
                f"{'in the worktree' if current is None else 'at HEAD'}; a resolution is the "
                "patched file on top of upstream's. Check out a commit that has it."
            )
        kept_edit = file_verdict.state is State.EDITED and file_verdict.keep_by_resolving
        required = required_in(patch, change.path)
        merged_at_head = list(_merged_at_head(repo, patch, change, head))
        if not kept_edit and any(  # a version kept merges with HEAD's, every symbol in place
            not tree.symbol_problems(merged, path, required, decided_only=True)
            for merged in merged_at_head
        ):
            files.append(change)  # nothing conflicts: the worktree's other edits stay the user's
            continue
        if current == head or current in merged_at_head:
            if file_verdict.state is State.CONFLICT:
                raise ConfigError(
                    f"cannot resolve {patch.name}: {path} does not carry the patch yet. Edit it "
                    f"into the shape the patch should have at this commit (patchguard apply "
                    f"--merge {patch.name} writes conflict markers to start from), then resolve"
                )
            files.append(change)
            continue
        problems = tree.symbol_problems(current, path, required)
        if problems:
            raise GuardFailure(
                f"cannot resolve {patch.name}: {path}: "
                + "; ".join(f"{q}: {why}" for q, why in problems.items())
                + ". A resolution must hold every symbol the patch requires; fix the file, then "
                "resolve again."
            )
        resolution = Resolution(
            base_blob=repo.store_blob(head),
            patched_blob=repo.store_blob(current),
            diff=repo.diff(head, current, path).text,
            commit=head_commit,
            created_at=now_utc(),
        )
        others = [r for r in change.resolutions if r.base_blob != resolution.base_blob]
        files.append(change._replace(resolutions=[*others, resolution]))
        resolved.append(path)
        extra += _extra_lines(repo, change, head, current, path)
    return patch._replace(files=files), resolved, extra


def _extra_lines(
    repo: Repo, change: FileChange, head: bytes, current: bytes, path: str
) -> list[str]:
    """The lines the resolution adds to HEAD's file that no version of the patch has and HEAD
    does not have elsewhere either ("FILE:N: text"): a debug line left while resolving."""
    known = {line.strip() for line in head.splitlines()}
    for version, _ in versions(change):
        known.update(line.strip() for line in repo.blob(version.patched_blob).splitlines())
    return _added_lines(repo, head, current, path, frozenset(known))


def _merged_at_head(repo: Repo, patch: Patch, change: FileChange, head: bytes) -> Iterator[bytes]:
    """What each version already kept (the recording, then each resolution) merges cleanly
    into on HEAD's file: what a move would put there."""
    for version, _ in versions(change):
        base, patched = texts(repo, version)
        merged = repo.merge3(base, head, patched, merge_labels(patch))
        if merged.clean:
            yield merged.content


def _forget_resolution(patch: Patch, number: int) -> Patch:
    """The patch without resolution `number` (1-based, in file order, as `show` lists them)."""
    numbered = [r for c in patch.files for r in c.resolutions]
    if not 1 <= number <= len(numbered):
        raise ConfigError(
            f"patch {patch.name} has no resolution {number} (it has {len(numbered)}); "
            f"see: patchguard show {patch.name}"
        )
    gone = numbered[number - 1]
    files = [
        c._replace(resolutions=[r for r in c.resolutions if r is not gone]) for c in patch.files
    ]
    return patch._replace(files=files)
