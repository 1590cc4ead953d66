"""Repository access: HEAD's files, the worktree, the object store, and git's merge of a file."""

from __future__ import annotations

import os
import stat
import subprocess
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from guard.errors import ConfigError
from guard.git.atomic import atomic_write, remove_stale_temporaries
from guard.git.content_cache import ContentCache
from guard.git.gitdir import Layout, locate, read_manifest_bytes
from guard.git.gitpaths import HISTORY_REF
from guard.git.index_file import IndexFile
from guard.git.index_file import checksum as index_checksum
from guard.git.lock import exclusive
from guard.git.objects import EXECUTABLE_MODE, REGULAR_MODE, blob_id
from guard.git.process import cannot_run, run_git, run_git_bytes

if TYPE_CHECKING:
    from typing import IO

    import pygit2

    from guard.git.eol import Conversion
    from guard.git.worktree_paths import UnsafePath

MERGE_CACHE_DIR = "patchguard-cache/merges"  # in the worktree's git dir
PARSE_CACHE_DIR = "patchguard-cache/parsed"
_BATCH = 128  # cat-file names per round trip; git reads all before answering: they must fit a pipe


class MergeResult(NamedTuple):
    """A 3-way merge of one file; `content` has conflict markers when not `clean`."""

    clean: bool
    content: bytes


class FileDiff(NamedTuple):
    """A diff's text, and the line numbers (in the new file) of the lines it adds."""

    text: str
    added_lines: set[int]


def _record_instead(path: str, refusal: UnsafePath) -> str:
    """What to record instead of a path patchguard could not write back."""
    if refusal.link_target is not None:
        target = os.path.normpath(os.path.join(os.path.dirname(path), refusal.link_target))
        return f"record the file it points to: patchguard record NAME {target}"
    if refusal.repository is not None:
        inner = path[len(refusal.repository) + 1 :]
        return f"record it from there, as git add would: cd {refusal.repository} && patchguard record NAME {inner}"
    return "record a file git checks out in this worktree"


def is_binary(data: bytes) -> bool:
    """git's own heuristic: a NUL byte in the first 8000."""
    return b"\0" in data[:8000]


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the reader: its input closes, and so does its output, whose answers nobody will read
    now (a batch cut off by Ctrl-C): git, blocked writing them, would never see the end."""
    with suppress(OSError):
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
        process.wait()  # it ends at once on end of input; a timeout would poll with sleeps


class Repo:
    """One worktree of a git repository. Reads go through `git cat-file` (the hooks stay
    light); libgit2 is loaded on first use of `git`, for diffs and writes."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.workdir = layout.workdir
        self.manifest_bytes = b""
        self._reader: subprocess.Popen[bytes] | None = None  # git cat-file --batch (read_objects)
        self._blobs: dict[str, bytes] = {}
        self._index: IndexFile | None = None  # see index_file

    @cached_property
    def git(self) -> pygit2.Repository:
        import pygit2

        try:
            return pygit2.Repository(str(self.layout.git_dir))
        except pygit2.GitError as error:
            raise ConfigError(
                f"cannot open the git repository at {self.layout.git_dir}: {error}. Check it "
                "with `git status` there."
            ) from None

    @classmethod
    def discover(cls, start: Path) -> Repo:
        return cls(locate(start))

    def store_blob(self, data: bytes) -> str:
        with self.writing_objects():
            return str(self.git.create_blob(data))

    @contextmanager
    def writing_objects(self) -> Iterator[None]:
        """libgit2 reports a store it cannot write (another user's `.git/objects`, a full disk)
        as GitError or OSError; callers write objects before anything else, so nothing changed."""
        import pygit2

        try:
            yield
        except (pygit2.GitError, OSError) as error:
            raise ConfigError(
                f"cannot write to the object store of {self.layout.common_dir}: {error}; nothing "
                "was changed. Run patchguard as a user who can write the repository (or free "
                "space there), then run the command again."
            ) from None

    def prefetch(self, oids: Iterable[str]) -> None:
        """Read every blob a command will need in one batch (see blob)."""
        wanted = sorted({oid for oid in oids if oid not in self._blobs})
        for oid, found in zip(wanted, self.read_objects(wanted), strict=True):
            if found is not None and found[1] == "blob":
                self._blobs[oid] = found[2]

    def holds(self, oid: str, content: bytes) -> None:
        """`content` is blob `oid` (its blob id says so): `blob` need not ask git for it."""
        self._blobs.setdefault(oid, content)

    def blob(self, oid: str) -> bytes:
        """A blob by id, read once per command: an id names the same bytes forever."""
        if oid in self._blobs:
            return self._blobs[oid]
        found = self.read_object(oid)
        if found is None:
            raise ConfigError(
                f"blob {oid} is missing from the object store of {self.layout.common_dir} "
                f"(was {HISTORY_REF} deleted?). Re-import the patch with `patchguard import`."
            )
        if found[1] != "blob":
            raise ConfigError(
                f"object {oid} is not a blob; the manifest is damaged. Re-import the patch "
                "(`patchguard import`) or record it again."
            )
        self._blobs[oid] = found[2]
        return found[2]

    @contextmanager
    def lock(self, operation: str, store: bool = False) -> Iterator[None]:
        """This worktree's writer lock (another worktree's hook takes only its own); with
        `store` (a change of the patches every worktree shares), the store's lock too, always
        second (one order, no deadlock; guard.store.history.save refuses to write without it).
        Only the writers that may start a store run without a manifest: any other refuses
        before creating anything."""
        starts_a_store = operation in ("record", "require", "import", "fetch")
        if not starts_a_store and not self.layout.has_patches():
            read_manifest_bytes(self.layout.manifest_path)  # says "no manifest ..."
        shared = exclusive(self.layout.store_lock_path, operation) if store else nullcontext()
        with exclusive(self.layout.worktree_lock_path, operation), shared:
            yield

    def refuse_mid_operation(self, action: str) -> None:
        """Writing patches into the tree mid-rebase/merge would break the next step."""
        operation = self.operation_in_progress()
        if operation:
            raise ConfigError(
                f"a {operation} is in progress in {self.workdir}: {action} would get in its way. "
                f"Finish it (git {operation} --continue) or abort it, then run patchguard {action}."
            )

    def commit_id(self, rev: str) -> str | None:
        return self.object_id(rev, "commit")

    def tree_id(self, rev: str) -> str | None:
        return self.object_id(f"{rev}^{{tree}}", "tree")

    def read_object(self, name: str) -> tuple[str, str, bytes] | None:
        """(id, type, content) of what `name` names: `HEAD`, `HEAD:path`, `<commit>:path`, an id."""
        return self.read_objects([name])[0]

    def read_objects(self, names: Sequence[str]) -> list[tuple[str, str, bytes] | None]:
        """One round trip per batch to one long-lived `git cat-file --batch`, not one per object."""
        process = self._reader or self._start_reader()
        assert process.stdin is not None and process.stdout is not None
        found: list[tuple[str, str, bytes] | None] = []
        for start in range(0, len(names), _BATCH):
            batch = names[start : start + _BATCH]
            try:
                process.stdin.write(
                    b"".join(name.encode("utf-8", "surrogateescape") + b"\0" for name in batch)
                )
                process.stdin.flush()
            except BrokenPipeError:  # git is gone: not a reader of our output that had enough
                raise self._reader_stopped(batch[0]) from None
            found += [self._answer(process.stdout, name) for name in batch]
        return found

    def _answer(self, output: IO[bytes], name: str) -> tuple[str, str, bytes] | None:
        line = output.readline()
        if not line:
            raise self._reader_stopped(name)
        header = line.split()
        if len(header) != 3 or not header[2].isdigit():
            return None  # "<name> missing" or "ambiguous"
        content = output.read(int(header[2]))
        if len(content) != int(header[2]) or output.read(1) != b"\n":  # git ended halfway
            raise self._reader_stopped(name)
        return header[0].decode(), header[1].decode(), content

    def _reader_stopped(self, name: str) -> ConfigError:
        return ConfigError(
            f"`git cat-file` stopped while reading {name} in {self.workdir}; run "
            "`git status` there to see what is wrong with the repository"
        )

    def _start_reader(self) -> subprocess.Popen[bytes]:
        command = ["git", "cat-file", "--batch", "-z"]
        try:
            self._reader = subprocess.Popen(
                command,
                cwd=self.workdir,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C meant for git must not end our reader
            )
        except OSError as error:
            raise cannot_run(command, error) from None
        weakref.finalize(self, _stop, self._reader)
        return self._reader

    def object_id(self, rev: str, kind: str) -> str | None:
        found = self.read_object(rev)
        return found[0] if found is not None and found[1] == kind else None

    def head_commit_id(self) -> str:
        head = self.commit_id("HEAD")
        if head is None:
            raise ConfigError(
                f"{self.workdir} has no commits yet; commit once, then record patches on top."
            )
        return head

    def head_commit_paths(self) -> set[str]:
        """The paths HEAD's own commit changed (against its first parent, or the empty tree)."""
        against = ["--root", "--diff-merges=first-parent", "--no-commit-id"]
        listing = run_git(["diff-tree", "-r", "--name-only", "-z", *against, "HEAD"], self.workdir)
        return {path for path in listing.stdout.split("\0") if path}

    def head_is_published(self) -> bool:
        """Is HEAD in a remote-tracking branch or a tag: upstream's, not ours to rewrite?"""
        command = ["for-each-ref", "--contains=HEAD", "--count=1", "--format=%(refname)"]
        found = run_git([*command, "refs/remotes/", "refs/tags/"], self.workdir)
        return bool(found.stdout.strip())

    def head_summary(self) -> str:
        """HEAD's short id and subject, as `git log --oneline` shows it."""
        import pygit2

        commit = self.git.head.peel(pygit2.Commit)
        return f"{commit.short_id} {commit.message.splitlines()[0] if commit.message else ''}"

    def files_at(self, commit: str, paths: Sequence[str]) -> dict[str, bytes | None]:
        """Blobs kept by id (a recorded base is most often HEAD's file). When git's index is
        that commit's tree (after a commit or checkout), its ids spare a tree walk: 1/3 the cost."""
        index, ids = self.index_file, None
        found = index.tree_entries(str(self.layout.common_dir), commit, paths) if index else None
        if found is not None:
            ids = {path: oid for _, kind, oid, path in found if kind == "blob"}
        wanted = [path for path in paths if ids is None or path in ids]
        names = [f"{commit}:{path}" if ids is None else ids[path] for path in wanted]
        files: dict[str, bytes | None] = dict.fromkeys(paths)
        for path, item in zip(wanted, self.read_objects(names), strict=True):
            if item is not None and item[1] == "blob":
                self._blobs[item[0]] = files[path] = item[2]
        return files

    @property
    def index_file(self) -> IndexFile | None:
        """git's index file, read again only when its checksum changed (after `patchguard git`
        moved, the new index answers where the old would be silent); its answers hold for the
        bytes read, so a read that git replaced meanwhile is never wrong."""
        git_dir = str(self.layout.git_dir)
        now = index_checksum(git_dir)
        if self._index is None or now is None or self._index.checksum != now:
            self._index = IndexFile.read(git_dir)
        return self._index

    def file_at(self, commit: str, path: str) -> bytes | None:
        found = self.read_object(f"{commit}:{path}")
        return found[2] if found is not None and found[1] == "blob" else None

    def stash_paths(self) -> list[str]:
        """The tracked files stash@{0} changes (against the commit it was made on)."""
        if self.read_object("refs/stash") is None:
            return []
        listing = run_git(
            ["diff", "--no-renames", "--name-only", "-z", "stash@{0}^1", "stash@{0}"], self.workdir
        )
        return [path for path in listing.stdout.split("\0") if path]

    def commit_with_files(self, commit: str, files: Mapping[str, bytes]) -> str:
        """A copy of `commit` (parents, author, message) whose tree holds `files` instead of
        its own versions of them; written to the object store, referenced by nothing."""
        import pygit2

        original = self.git.revparse_single(commit).peel(pygit2.Commit)
        index = pygit2.Index()
        index.read_tree(original.tree)
        for path, data in files.items():
            index.add(pygit2.IndexEntry(path, self.git.create_blob(data), index[path].mode))
        tree = index.write_tree(self.git)
        copy = self.git.create_commit(
            None, original.author, original.committer, original.message, tree, original.parent_ids
        )
        return str(copy)

    def unmerged(self) -> dict[str, dict[int, str]]:
        """The paths git left unmerged, with their stage entries' blob ids (1 base, 2 ours,
        3 theirs; a side that deleted the file has none), without libgit2."""
        index = self.index_file
        if index is not None and index.cache_tree_root() is not None:
            return {}
        listing = run_git(["ls-files", "--unmerged", "-z", "--full-name"], self.workdir).stdout
        stages: dict[str, dict[int, str]] = {}
        for entry in listing.split("\0"):
            if entry:
                info, _, path = entry.partition("\t")
                _mode, oid, stage = info.split()
                stages.setdefault(path, {})[int(stage)] = oid
        return stages

    def worktree_path(self, path: str) -> Path:
        """The absolute path of a repository path, where git itself would write it; UnsafePath
        where git would not (guard.git.worktree_paths)."""
        from guard.git.worktree_paths import checked_path

        git_dirs = (str(self.layout.git_dir), str(self.layout.common_dir))
        return Path(checked_path(str(self.workdir), path, git_dirs))

    def read_file(self, path: str) -> bytes | None:
        """The file as git sees it (what `git diff` compares): line endings converted back."""
        raw = self.read_raw(path)
        return None if raw is None else self.to_git(path, raw)

    def read_raw(self, path: str) -> bytes | None:
        """The file's bytes on disk; UnsafePath when it is not a regular file (a FIFO there
        would hang every command that reads the patches' files)."""
        from guard.git.worktree_paths import UnsafePath, read_if_regular

        try:
            kind, content = read_if_regular(self.worktree_path(path))
        except (FileNotFoundError, NotADirectoryError):
            return None
        if content is not None:
            return content
        what = "a directory" if stat.S_ISDIR(kind) else "not a regular file (a FIFO or a device)"
        # upstream made it a directory, or someone put a pipe there: a state, as a link is
        raise UnsafePath(
            f"{path} is {what} in the worktree, not a file; patchguard never writes over it "
            "(check out a commit where it is a file, or stop guarding it with `patchguard drop "
            "NAME`)"
        )

    def to_git(self, path: str, raw: bytes) -> bytes:
        """A working file's bytes as git would store them; without a CR there is nothing to ask."""
        if b"\r" not in raw:
            return raw
        return self.conversion(path).to_git(raw, lambda: self._index_has_cr(path))

    def to_worktree(self, path: str, data: bytes, on_disk: bytes | None = None) -> bytes:
        """Content as git stores it, as `git checkout` would write it. A file whose bytes on
        disk hold no CR keeps its LF endings: git reads it back the same either way, and the
        common case asks git nothing."""
        if on_disk is not None and b"\r" not in on_disk:
            return data
        return self.conversion(path).to_worktree(data)

    def write_raw(self, path: str, data: bytes, mode: int | None = None) -> None:
        """Atomic replacement; callers hold the repository lock, so older temp files are stale.
        Not flushed, as git never flushes what it checks out: the journal's one flushed mark
        (guard.store.journal) makes a set of files whole or not at all."""
        full = self.worktree_path(path)
        full.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(full)
        atomic_write(full, data, mode, durable=False)

    def permissions(self, path: str) -> int | None:
        try:
            return stat.S_IMODE(self.worktree_path(path).stat().st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def git_mode(self, path: str) -> str:
        """The mode `git add` would record for the file: executable when its owner may run it."""
        permissions = self.permissions(path) or 0
        return EXECUTABLE_MODE if permissions & stat.S_IXUSR else REGULAR_MODE

    def conversion(self, path: str) -> Conversion:
        """git's line-ending conversion for this path, asked each time: a checkout in between
        can bring another .gitattributes."""
        from guard.git.eol import ATTRIBUTES, decide

        listing = run_git(["check-attr", "-z", *ATTRIBUTES, "--", path], self.workdir).stdout
        fields = listing.split("\0")  # path, attribute, value, path, ...
        attributes = {fields[i + 1]: fields[i + 2] for i in range(0, len(fields) - 2, 3)}
        return decide(attributes, self._config)

    @cached_property
    def _config(self) -> dict[str, str]:
        """`git config -z --list` (keys as git spells them, a driver's name kept): a later
        value wins, a bare key means true."""
        found = {}
        for entry in run_git(["config", "-z", "--list"], self.workdir).stdout.split("\0"):
            if entry:
                key, newline, value = entry.partition("\n")
                found[key] = value if newline else "true"
        return found

    def _index_has_cr(self, path: str) -> bool:
        """git leaves a CRLF file alone when the index holds it with CRs ("safer autocrlf")."""
        found = self.read_object(f":{path}")
        return found is not None and b"\r" in found[2]

    def relpath(self, user_path: str, cwd: Path) -> str:
        """A user's path (relative to their cwd, like git's) as a repository path. The
        directories it goes through are resolved (a checkout reached through a symlink), the
        last component is not; as `git add`, a file patchguard could not write back is refused."""
        from guard.git.worktree_paths import UnsafePath

        absolute = Path(os.path.normpath(cwd / user_path))
        for candidate in (absolute, Path(os.path.realpath(absolute.parent)) / absolute.name):
            with suppress(ValueError):
                relative = candidate.relative_to(self.workdir).as_posix()
                try:
                    self.worktree_path(relative)
                except UnsafePath as error:
                    raise UnsafePath(f"{error}; {_record_instead(relative, error)}") from None
                return relative
        raise ConfigError(
            f"{user_path} is outside the worktree {self.workdir}; name a path inside it"
        )

    def outside_sparse_checkout(self) -> set[str]:
        """Tracked paths a sparse checkout leaves out of the worktree (skip-worktree)."""
        listing = run_git(["ls-files", "-t", "-z"], self.workdir).stdout
        return {entry[2:] for entry in listing.split("\0") if entry.startswith("S ")}

    def follow_rename(self, path: str, base_commit: str) -> str | None:
        """The path `path` was renamed to between `base_commit` and HEAD, by git's detection."""
        import pygit2

        try:
            base = self.git.get(base_commit)
            if base is None:
                return None
            base_tree = base.peel(pygit2.Tree)
            head_tree = self.git.head.peel(pygit2.Tree)
        except (KeyError, ValueError, pygit2.GitError):
            return None
        diff = base_tree.diff_to_tree(head_tree)
        diff.find_similar()
        for delta in diff.deltas:
            if delta.status_char() == "R" and delta.old_file.path == path:
                return str(delta.new_file.path)
        return None

    def operation_in_progress(self) -> str | None:
        """The name of a rebase, merge, cherry-pick, revert or am under way, if any."""
        markers = {  # as git status tells them apart: `git am` alone leaves `applying`
            "rebase-apply/applying": "am",
            "rebase-merge": "rebase",
            "rebase-apply": "rebase",
            "MERGE_HEAD": "merge",
            "CHERRY_PICK_HEAD": "cherry-pick",
            "REVERT_HEAD": "revert",
        }
        for marker, name in markers.items():
            if (self.layout.git_dir / marker).exists():
                return name
        return None

    def diff(self, old: bytes, new: bytes, path: str) -> FileDiff:
        import pygit2

        patch = pygit2.Patch.create_from(old, new, old_as_path=path, new_as_path=path)
        added = {
            line.new_lineno for hunk in patch.hunks for line in hunk.lines if line.origin == "+"
        }
        return FileDiff(text=patch.text or "", added_lines=added)

    def merge3(
        self,
        base: bytes,
        ours: bytes,
        theirs: bytes,
        labels: tuple[str, str, str],
        union: bool = False,
    ) -> MergeResult:
        """A 3-way merge of one file, `git merge-file` run only for one not seen before (by
        content). `union`: both sides of a conflict, ours first (`git merge-file --union`)."""
        if ours == theirs or theirs == base:
            return MergeResult(clean=True, content=ours)
        if ours == base:
            return MergeResult(clean=True, content=theirs)
        parts = [*map(blob_id, (base, ours, theirs)), *labels, *(["union"] if union else [])]
        key = blob_id("\0".join(parts).encode())
        known = self.merge_cache.get(key)
        if known is not None:
            return MergeResult(clean=known[:1] == b"1", content=known[1:])
        result = merge_file(base, ours, theirs, labels, union)
        self.merge_cache.put(key, (b"1" if result.clean else b"0") + result.content)
        return result

    @cached_property
    def merge_cache(self) -> ContentCache:
        return ContentCache(self.layout.git_dir / MERGE_CACHE_DIR, keep=256)

    @cached_property
    def parse_cache(self) -> ContentCache:
        """Parsed files by content (guard.truth.parsed)."""
        return ContentCache(self.layout.git_dir / PARSE_CACHE_DIR, keep=512)


def merge_file(
    base: bytes, ours: bytes, theirs: bytes, labels: tuple[str, str, str], union: bool = False
) -> MergeResult:
    """`git merge-file -p`, its conflict markers named by `labels` (base, ours, theirs). The
    inputs go to a private temporary directory, not the repository (a `check` on a read-only
    object store merges too). The conflict style is fixed: a user's merge.conflictStyle=diff3
    would change the content a merge is kept by."""
    import tempfile

    try:
        with tempfile.TemporaryDirectory(prefix="patchguard-merge-") as directory:
            names = [os.path.join(directory, name) for name in ("ours", "base", "theirs")]
            for name, data in zip(names, (ours, base, theirs), strict=True):
                Path(name).write_bytes(data)
            asked = ["-L", labels[1], "-L", labels[0], "-L", labels[2]]
            found = run_git_bytes(
                ["-c", "merge.conflictStyle=merge", "merge-file", "-p", *asked]
                + (["--union"] if union else [])
                + ["--", *names],
                directory,
            )
    except OSError as error:  # a full disk, a file-size limit (git's own failure is said below)
        raise ConfigError(
            f"cannot write the inputs of `git merge-file` in {tempfile.gettempdir()}: "
            f"{error.strerror}; nothing was changed. Free space there (or set TMPDIR to a "
            "place with room), then run the command again"
        ) from None
    if not 0 <= found.returncode < 128:  # git: negative on an error, else the conflicts
        said = found.stderr.decode(errors="replace").strip().splitlines()
        reason = said[-1] if said else f"exit {found.returncode}"
        for name, label in zip(names, (labels[1], labels[0], labels[2]), strict=True):
            reason = reason.replace(name, label)  # the inputs' names, gone with the directory
        raise ConfigError(
            f"`git merge-file` could not merge {labels[1]} ({reason}); leave the file as it "
            "is and run `patchguard status` to see which patch is involved"
        )
    return MergeResult(clean=found.returncode == 0, content=found.stdout)
