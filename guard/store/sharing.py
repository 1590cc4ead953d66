"""The patches between clones: a bundle file (export, import), or any git remote (push and
fetch the history ref with plain git, so whatever reaches the code reaches the patches).

A fetch merges patch by patch against the merge base, as git merges files: a patch changed on
both sides is refused by name unless the user chose a side, and the merge commit keeps both
parents, so nothing either side had is lost and the next fetch or push starts from there.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from guard.errors import ConfigError, GuardFailure
from guard.git.atomic import atomic_write
from guard.git.eol import cannot_rebuild
from guard.git.gitpaths import HISTORY_REF
from guard.git.objects import blob_id
from guard.git.process import run_git
from guard.git.repo import Repo
from guard.store import history
from guard.store.derived import MANIFEST_ENTRY, load_manifest
from guard.store.manifest import Manifest, Patch, as_dict, changed_patches, select_patches

THEIRS = "theirs"
OURS = "ours"


class Came(NamedTuple):
    """One thing a fetch changed here: a patch or a guard, and how."""

    kind: str  # "new", "updated", "dropped", "took-theirs", "kept-ours", "new-guard", ...
    name: str  # the patch's name, or the guard's spec

    def line(self) -> str:
        return {
            "new": "new patch {}",
            "updated": "updated patch {}",
            "dropped": "dropped {}",
            "took-theirs": "took theirs of {}",
            "kept-ours": "kept ours of {}",
            "new-guard": "new guard {}",
            "dropped-guard": "dropped guard {}",
        }[self.kind].format(self.name)


class Fetched(NamedTuple):
    """What `fetch` did: the changes it brought, patch by patch (none: already up to date)."""

    remote: str
    up_to_date: bool
    changes: list[Came] = []  # noqa: RUF012

    def lines(self) -> list[str]:
        if self.up_to_date:
            return [f"already up to date with {self.remote}"]
        return [c.line() for c in self.changes] or [f"fetched from {self.remote}: nothing new"]

    @property
    def patches(self) -> list[str]:
        """The patches whose recording changed here (the worktree may not hold them as now)."""
        return [
            c.name for c in self.changes if c.kind in ("new", "updated", "dropped", "took-theirs")
        ]


def push(repo: Repo, remote: str, *, take_back: bool = False) -> str:
    """Refused when `remote` has changes we lack, and when it would take back a change of the
    remote's (an undo here of a fetch from it) unless `take_back`, which the history records."""
    tip = history.current(repo)
    if tip is None:
        raise ConfigError(
            "nothing to push: no patch has been recorded in this repository yet "
            "(patchguard record NAME)"
        )
    taken = _taken_back(repo, _remote_tip(repo, remote), tip)
    if taken and not take_back:
        them = "it" if len(taken) == 1 else "them"
        raise GuardFailure(
            f"pushing would take back {remote}'s {', '.join(taken)}: this clone undid the "
            f"change that brought {them} in, and the push would make that undo everyone's. "
            f"Nothing was pushed. To take {them} back for everyone: patchguard push "
            f"--take-back {remote}; to keep {remote}'s: patchguard fetch {remote} --theirs"
        )
    if taken:
        choice = f"chose to take back {remote}'s {', '.join(taken)} (pushed from here)"
        if next(history.walk(repo, tip)).subject != choice:  # a retry adds no second one
            with repo.lock("push", store=True):
                history.save(repo, load_manifest(repo), choice, note=True)
            tip = history.current(repo) or tip
    try:  # the commit checked above, not the ref: an undo made meanwhile is not carried along
        run_git(["push", "-q", remote, f"{tip}:{HISTORY_REF}"], repo.workdir)
    except ConfigError:
        if _remote_has_more(repo, remote, tip):
            raise ConfigError(
                f"{remote} has changes to the patches that this clone has not fetched; nothing "
                f"was pushed. Run patchguard fetch {remote}, then push again."
            ) from None
        raise
    return f"pushed the patches to {remote} ({tip[:10]})"


def _remote_tip(repo: Repo, remote: str) -> str | None:
    listed = run_git(["ls-remote", remote, HISTORY_REF], repo.workdir).stdout.split()
    return listed[0] if listed else None


def _taken_back(repo: Repo, theirs: str | None, tip: str) -> list[str]:
    """The patches of the remote's state (`theirs`) that pushing `tip` would take back: an
    undo since then of a change that brought them, where our version is not the remote's."""
    import pygit2

    if theirs is None or theirs == tip or not isinstance(repo.git.get(theirs), pygit2.Commit):
        return []  # none, not fetched here, or not a commit: git's push says what it makes of it
    if not repo.git.descendant_of(tip, theirs):
        return []  # not a fast-forward: git refuses, and _remote_has_more says why
    remote_state = history.manifest_at(repo, theirs)
    ours = history.manifest_at(repo, tip)
    taken: list[str] = []
    for change in history.walk(repo, tip):
        if change.commit == theirs or repo.git.descendant_of(theirs, change.commit):
            break
        if change.undoes is None:
            continue
        before_it = history.manifest_at(repo, next(history.walk(repo, change.undoes)).parent)
        after_it = history.manifest_at(repo, change.undoes)
        for name in changed_patches(before_it, after_it):
            if remote_state.patch(name) != ours.patch(name) and name not in taken:
                taken.append(name)
    return taken


def _remote_has_more(repo: Repo, remote: str, tip: str) -> bool:
    import pygit2

    listed = _remote_tip(repo, remote)
    if listed is None or listed == tip:
        return False
    theirs = pygit2.Oid(hex=listed)
    return theirs not in repo.git or not repo.git.descendant_of(tip, theirs)


def fetch(repo: Repo, remote: str, keep: str | None = None) -> Fetched:
    """Bring `remote`'s patches in, patch by patch; `keep` (THEIRS/OURS) settles both-sided ones."""
    with repo.lock("fetch", store=True):
        theirs = _fetch_tip(repo, remote)
        ours_manifest = load_manifest(repo, missing_ok=True)
        ours = history.current(repo)
        second: str | None = theirs  # the merge's second parent
        if ours is not None and (ours == theirs or repo.git.descendant_of(ours, theirs)):
            taken = _taken_back(repo, theirs, ours) if keep == THEIRS else []
            if not taken:
                return Fetched(remote, up_to_date=True)
            # --theirs after an undo here took back a change fetched from `remote`: its version
            # of those patches again, as a change of its own (what the push refusal offers)
            remote_state, second = history.manifest_at(repo, theirs), None
            patches = [p for p in ours_manifest.patches if p.name not in taken]
            patches += [p for p in remote_state.patches if p.name in taken]
            merged = ours_manifest._replace(patches=patches)
            changes = [Came("took-theirs", name) for name in taken]
        else:
            base = str(repo.git.merge_base(ours, theirs) or "") if ours is not None else ""
            theirs_manifest = _validated_state(repo, remote, theirs)
            base_manifest = history.manifest_at(repo, base or None)
            merged, changes = _merge(base_manifest, ours_manifest, theirs_manifest, remote, keep)
            incoming = [p for p in merged.patches if p not in ours_manifest.patches]
            _refuse_unimportable(repo, incoming, repo.blob)
        summary = ", ".join(c.line() for c in changes) or "nothing new"
        history.save(repo, merged, f"fetched from {remote}: {summary}", merged=second)
        return Fetched(remote, up_to_date=False, changes=changes)


def _fetch_tip(repo: Repo, remote: str) -> str:
    """The commit `remote` holds under the history ref, fetched into this object store."""
    try:
        run_git(["fetch", "-q", "--no-tags", remote, HISTORY_REF], repo.workdir)
    except ConfigError as error:
        if "couldn't find remote ref" in str(error):
            raise ConfigError(
                f"{remote} has no patches yet ({HISTORY_REF} is not there); push them from a "
                f"clone that has them: patchguard push {remote}"
            ) from None
        raise
    try:
        return run_git(
            ["rev-parse", "--verify", "FETCH_HEAD^{commit}"], repo.workdir
        ).stdout.strip()
    except ConfigError:
        raise ConfigError(
            f"{HISTORY_REF} of {remote} is not a commit, so it holds no patches; nothing was "
            "changed here. Push the patches there again from a clone that has them."
        ) from None


def _validated_state(repo: Repo, remote: str, oid: str) -> Manifest:
    """The fetched manifest, held to the schema, with every blob it needs in its tree."""
    import pygit2

    from guard.store.schema import validate_manifest

    tree = repo.git[oid].peel(pygit2.Commit).tree
    where = f"{HISTORY_REF} of {remote}"
    if MANIFEST_ENTRY not in tree:
        raise ConfigError(f"{where} holds no manifest.json; nothing was changed here")
    raw = tree[MANIFEST_ENTRY].peel(pygit2.Blob).data
    manifest = Manifest.from_dict(validate_manifest(raw, Path(where)))
    held = tree[history.BLOBS_ENTRY].peel(pygit2.Tree) if history.BLOBS_ENTRY in tree else None
    missing = [oid for oid in manifest.blob_ids() if held is None or oid not in held]
    if missing:
        raise ConfigError(
            f"{where} lacks {len(missing)} blob(s) its manifest refers to; nothing was changed "
            "here. Record the patches again on the node that pushed them, and push again."
        )
    return manifest


def _merge(
    base: Manifest, ours: Manifest, theirs: Manifest, remote: str, keep: str | None
) -> tuple[Manifest, list[Came]]:
    """A 3-way merge of manifests, by patch name (and by guard)."""
    names = list(dict.fromkeys([p.name for p in (*ours.patches, *theirs.patches)]))
    patches: list[Patch] = []
    lines: list[Came] = []
    both: list[str] = []
    for name in names:
        b, o, t = base.patch(name), ours.patch(name), theirs.patch(name)
        if o == t or t == b:
            chosen = o
        elif o == b or keep == THEIRS:
            chosen = t
            came = "new" if o is None else "dropped" if t is None else "updated"
            lines.append(Came(came if o == b else "took-theirs", name))  # else: --theirs chose
        else:
            chosen = o
            if keep == OURS:
                lines.append(Came("kept-ours", name))
            else:
                both.append(name)
        if chosen is not None:
            patches.append(chosen)
    if both:
        listed = ", ".join(both)
        raise GuardFailure(
            f"not fetched: patch {listed} changed both here and on {remote} since their last "
            f"common version; nothing was changed here. Take theirs: patchguard fetch {remote} "
            f"--theirs (yours stays in patchguard log {both[0]}), or keep yours: "
            f"patchguard fetch {remote} --ours, then patchguard push {remote}"
        )
    guards = []
    for spec in dict.fromkeys([*ours.guards, *theirs.guards]):
        in_ours, in_theirs = spec in ours.guards, spec in theirs.guards
        if in_theirs if in_ours == (spec in base.guards) else in_ours:
            guards.append(spec)
        if in_ours != (spec in guards):
            lines.append(Came("new-guard" if spec in guards else "dropped-guard", spec))
    return ours._replace(patches=patches, guards=guards), lines


def export_bundle(repo: Repo, names: Sequence[str] = ()) -> str:
    """Every patch and guard, or only the patches named (their guards are the patches' own)."""
    manifest = load_manifest(repo)
    if names:
        hint = "; to write the bundle to a file: patchguard export -o {}"
        manifest = manifest._replace(patches=select_patches(manifest, names, hint), guards=[])
    blobs = {oid: base64.b64encode(repo.blob(oid)).decode() for oid in sorted(manifest.blob_ids())}
    from guard.store.schema import SCHEMA_VERSION, Bundle  # pydantic: only for bundles

    bundle = Bundle.model_validate(
        {
            "format": "patchguard.bundle",
            "schema_version": SCHEMA_VERSION,
            "manifest": as_dict(manifest),
            "blobs": blobs,
        }
    )
    return bundle.model_dump_json(indent=2) + "\n"


def write_bundle(path: Path, text: str) -> None:
    try:
        atomic_write(path, text.encode())
    except OSError as error:
        raise ConfigError(f"cannot write the bundle to {path}: {error.strerror}") from None


def read_bundle(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"no bundle at {path}; name the file `patchguard export` wrote") from None
    except OSError as error:
        raise ConfigError(f"cannot read the bundle {path}: {error.strerror}") from None


def _parse_bundle(source: str, raw: bytes) -> tuple[Manifest, dict[str, bytes]]:
    """Everything is validated before anything is written: schema, blob ids, completeness."""
    from guard.store.schema import Bundle, parse_versioned

    bundle = parse_versioned(
        raw, f"bundle {source}", Bundle, "export it again with `patchguard export`"
    )
    blobs = {}
    for oid, encoded in bundle.blobs.items():
        try:
            blobs[oid] = base64.b64decode(encoded, validate=True)
            damage = "" if blob_id(blobs[oid]) == oid else "does not match its id"
        except binascii.Error as error:
            damage = f"is not base64 ({error})"
        if damage:
            raise ConfigError(
                f"bundle {source}: the content of blob {oid} {damage}; the bundle is damaged, "
                "export it again with `patchguard export`"
            )
    manifest = Manifest.from_dict(bundle.manifest.model_dump(mode="json"))
    missing = manifest.blob_ids() - set(blobs)
    if missing:
        raise ConfigError(
            f"bundle {source} lacks the content of {len(missing)} blob(s); export it again "
            "with `patchguard export`"
        )
    return manifest, blobs


def import_bundle(repo: Repo, source: str, raw: bytes) -> tuple[list[str], list[str]]:
    """Same-named patches are replaced. Returns what it did, line by line, and the patches
    whose recording it changed."""
    bundled, blobs = _parse_bundle(source, raw)
    with repo.lock("import", store=True):
        _refuse_unimportable(repo, bundled.patches, blobs.__getitem__)
        for content in blobs.values():
            repo.store_blob(content)
        current = load_manifest(repo, missing_ok=True)
        incoming = {p.name: p for p in bundled.patches}
        lines = [_import_line(current.patch(name), patch) for name, patch in incoming.items()]
        renewed = [n for n, p in incoming.items() if current.patch(n) != p]
        patches = [incoming.pop(p.name, p) for p in current.patches] + list(incoming.values())
        guards = list(dict.fromkeys([*current.guards, *bundled.guards]))
        lines += [f"imported guard {g}" for g in bundled.guards if g not in current.guards]
        changed = current._replace(patches=patches, guards=guards)
        if changed != current:  # the same bundle twice: nothing to write, nothing to undo
            history.save(repo, changed, f"imported from {source}: {', '.join(lines)}")
        return lines, renewed


def _refuse_unimportable(
    repo: Repo, patches: Sequence[Patch], content: Callable[[str], bytes]
) -> None:
    """Before patches from elsewhere (a bundle, a fetch) are written: every path must be one
    git would write here, and every file one this checkout's conversions can rebuild."""
    for patch in patches:
        for change in patch.files:
            repo.worktree_path(change.path)  # refuses paths that escape through symlinks
            oids = [oid for oid in (change.base_blob, change.patched_blob) if oid]
            refusal = repo.conversion(change.path).refuses(*map(content, oids))
            if refusal is not None:
                raise ConfigError(
                    f"cannot import patch {patch.name}: "
                    + cannot_rebuild(change.path, refusal)
                    + " in this checkout; nothing was imported. Import it where that "
                    "attribute is not set."
                )


def _import_line(held: Patch | None, incoming: Patch) -> str:
    if held is None:
        return f"imported patch {incoming.name}"
    if held == incoming:
        return f"kept patch {incoming.name} (the bundle's is the same)"
    return f"replaced patch {incoming.name}"
