#!/bin/sh
# patchguard-managed-hook: written by `patchguard install`; `patchguard uninstall` removes it
# and puts back the hook that was here before (kept beside it as @HOOK_NAME@.patchguard-legacy).
hook_name='@HOOK_NAME@'
install_python='@INSTALL_PYTHON@'
launcher='@LAUNCHER@'
reinstall='@REINSTALL@'
# guard.store.fastpath.model_namespace() of the installed patchguard: a key verified by another
# Python or another version of patchguard is not this hook's to trust.
model='@MODEL_NAMESPACE@'
# The SHA-1 tool found at install (sha1sum, else shasum; empty: none): the verified key holds
# the SHA-1 of each file's bytes, which a tool this small prints cheaper than git would.
sha1sum='@SHA1SUM@'
case "$0" in
*/*) legacy="${0%/*}/$hook_name.patchguard-legacy" ;;
*) legacy="./$hook_name.patchguard-legacy" ;;
esac

# reference-transaction runs twice on every ref update (every commit, fetch and rebase step):
# only a committed stash concerns us, and with no chained hook nothing else needs its input.
if [ "$hook_name" = reference-transaction ] && [ "$1" != committed ] && [ ! -x "$legacy" ]; then
    exit 0
fi

# This worktree's git dir and the common one, found as git finds them for the hook it runs
# (in the top of the worktree, GIT_DIR exported when set), with builtins only: this runs on
# every checkout and commit. The Python side (guard.git.gitpaths) decides anything odd.
git_dir=${GIT_DIR:-.git}
if [ -f "$git_dir" ]; then
    IFS= read -r line <"$git_dir"
    git_dir=${line#gitdir: }
fi
common=${GIT_COMMON_DIR:-$git_dir}
if [ -z "${GIT_COMMON_DIR:-}" ] && [ -f "$git_dir/commondir" ]; then
    IFS= read -r line <"$git_dir/commondir"
    case "$line" in
    /*) common=$line ;;
    *) common=$git_dir/$line ;;
    esac
fi

# The hooks of every commit, with no chained hook to run, end here unless there is something
# to do: a stash can only have been pushed if its ref is a file (a push writes it loose; the
# reftable format has no ref files, so there the input is read), and a merge or rebase that
# left the patches out marks it in this worktree's git dir. Reading the input costs sh a
# system call per byte; this costs a few.
if [ ! -x "$legacy" ]; then
    case "$hook_name" in
    reference-transaction)
        [ -f "$common/refs/stash" ] || [ -d "$common/reftable" ] || exit 0
        ;;
    post-commit)
        [ -f "$git_dir/patchguard-pending" ] || exit 0
        ;;
    esac
fi

# Hooks with input get it once, read by the shell itself (no temporary file, no process: this
# runs on every ref update, whatever TMPDIR is); the chained hook and patchguard get a copy.
# Every other hook reads /dev/null, never the terminal.
has_input=
input=
case "$hook_name" in
post-rewrite | reference-transaction)
    has_input=1
    while IFS= read -r line || [ -n "$line" ]; do
        input="$input$line
"
    done
    ;;
esac

# Runs "$@" with the hook's input on stdin.
with_input() {
    if [ -n "$has_input" ]; then
        printf '%s' "$input" | "$@"
    else
        "$@" </dev/null
    fi
}

status=0
if [ -x "$legacy" ]; then
    with_input "$legacy" "$@"
    status=$?
    if [ "$status" -ne 0 ]; then
        echo "patchguard: the chained $hook_name hook ($legacy) exited $status" >&2
    fi
fi

# reference-transaction fires on every ref update: only a committed stash concerns us.
if [ "$hook_name" = reference-transaction ]; then
    [ "$1" = committed ] || exit "$status"
    case "$input" in
    *" refs/stash
"*) ;;
    *) exit "$status" ;;
    esac
fi

# Nothing recorded in this repository yet: nothing to guard. (A history ref without
# manifest.json: Python derives the file again.)
[ -f "$common/patchguard/manifest.json" ] || [ -f "$common/refs/patchguard/history" ] ||
    exit "$status"

if [ "${PATCHGUARD_SKIP:-}" = 1 ]; then
    echo "patchguard: PATCHGUARD_SKIP=1, $hook_name hook did nothing" >&2
    exit "$status"
fi
# `patchguard git` and `patchguard bisect run` have lifted the patches of the worktree whose
# lock they hold, and put them back themselves when git is done: there, stand aside, quietly.
# A hook of another worktree (one `git worktree add` creates) or repository does its own work.
# The name is Layout.worktree_lock_path's; a path spelled otherwise is decided in Python.
if [ -n "${PATCHGUARD_LOCK_HELD:-}" ] &&
    held_git_dir=$(git rev-parse --absolute-git-dir 2>/dev/null) &&
    [ "$PATCHGUARD_LOCK_HELD" = "$held_git_dir/patchguard-lock" ]; then
    exit "$status"
fi

# post-commit fires on every commit; it matters only when patches were left out for a merge or
# rebase that this commit concludes, which a marker in this worktree's git dir says.
if [ "$hook_name" = post-commit ]; then
    [ -f "$git_dir/patchguard-pending" ] || exit "$status"
    # Each pick of a rebase commits too; the rebase's own post-rewrite puts the patches back.
    [ -d "$git_dir/rebase-merge" ] || [ -d "$git_dir/rebase-apply" ] && exit "$status"
fi

# True when the manifest, every guarded file (by content) and HEAD's entries for those files
# are as they were when patchguard last verified them: the key of guard/store/fastpath.py. The
# cache is sourced (it only assigns the patchguard_* lists of guard/store/fastpath.py's SECTIONS);
# `command` keeps a damaged one from ending the hook. Any doubt is false, and Python decides.
verified() {
    # Lists split on newlines only, never globbed; the shell's own settings come back after.
    set -f
    saved_ifs=$IFS
    IFS='
'
    verified_in_cache
    found=$?
    IFS=$saved_ifs
    set +f
    return "$found"
}
verified_in_cache() {
    # A change to the patches was cut off (guard/store/history.py): manifest.json may lag the
    # history ref, and Python derives it again before anything is decided.
    [ -e "$common/patchguard/transaction" ] && return 1
    # manifest.json derived from another commit than the ref holds (a push into this
    # checkout): Python derives it again. A packed ref is left to the next slow path.
    if [ -f "$common/refs/patchguard/history" ]; then
        IFS= read -r tip <"$common/refs/patchguard/history" || return 1
        IFS= read -r derived_from <"$common/patchguard/manifest.from" || return 1
        [ "$tip" = "$derived_from" ] || return 1
    fi
    cache="$git_dir/patchguard-cache/verified.sh"
    [ -f "$cache" ] && command . "$cache" 2>/dev/null || return 1
    [ "$patchguard_model" = "
$model
" ] || return 1
    # Paths the verdict looked up without reading them stay as they were (a package that
    # would shadow a module, an __init__.py above the top, a base module elsewhere).
    for path in $patchguard_absent; do
        [ -e "$path" ] || [ -L "$path" ] && return 1
    done
    for path in $patchguard_present; do
        [ -e "$path" ] || return 1
    done
    # No guarded file may now be a link or lie beyond one, or in a nested repository
    # (guard/git/worktree_paths.py): the full path refuses those.
    hashed= # each path as ./PATH: sha1sum reads a file named "-" as its stdin
    for path in $patchguard_paths; do
        [ -L "$path" ] || [ ! -f "$path" ] && return 1 # a link, gone, or not a file to read
        hashed="$hashed./$path
"
        while case "$path" in */*) true ;; *) false ;; esac; do
            path=${path%/*}
            [ -L "$path" ] || [ -e "$path/.git" ] && return 1
        done
    done
    [ -n "$sha1sum" ] && [ -x "$sha1sum" ] || return 1
    key=
    # This checkout's own manifest first (never named in the cache: a copy has its own),
    # then the guarded files, relative to the worktree root. Each line is the digest, then
    # the name (never escaped: patchguard refuses a backslash in a path, the cache a newline).
    # LC_ALL=C: the digests are the same, and sha1sum then loads no locale (a third fewer
    # system calls).
    for line in $(LC_ALL=C "$sha1sum" -- "$common/patchguard/manifest.json" $hashed 2>/dev/null); do
        key="$key${line%% *} "
    done
    # HEAD's entries: kept in the cache for a commit it has seen (the id from the ref files,
    # as guard.git.gitpaths.read_head reads them), else from git.
    IFS= read -r head <"$git_dir/HEAD" || return 1
    case "$head" in
    "ref: "*)
        head=${head#ref: }
        if [ -f "$git_dir/$head" ]; then
            IFS= read -r head <"$git_dir/$head"
        elif [ -f "$common/$head" ]; then
            IFS= read -r head <"$common/$head"
        else
            head= # packed: git knows
        fi
        ;;
    esac
    entries=
    case "$head" in
    "" | *[!0-9a-f]*) ;;
    *)
        # Line by line: a pattern like ${heads#*"$head "} costs sh time quadratic in its size.
        for line in $patchguard_heads; do
            case "$line" in
            "$head "*)
                entries=${line#"$head "}
                break
                ;;
            esac
        done
        ;;
    esac
    if [ -z "$entries" ]; then
        listing=$(git --literal-pathspecs ls-tree --full-tree HEAD -- $patchguard_paths 2>/dev/null) ||
            return 1
        for line in $listing; do
            entries="$entries$line "
        done
    fi
    case "$patchguard_keys" in
    *"
$key$entries
"*) return 0 ;;
    esac
    return 1
}
if [ "$hook_name" != reference-transaction ] && verified; then
    exit "$status"
fi

# The installed patchguard by its path, isolated (-I): no `guard` on PYTHONPATH, in the user's
# site or in this worktree can stand in for it (see patchguard_entry.py).
if [ -x "$install_python" ] && [ -f "$launcher" ]; then
    with_input "$install_python" -I "$launcher" hook "$hook_name" "$@"
elif command -v patchguard >/dev/null 2>&1; then
    with_input patchguard hook "$hook_name" "$@"
else
    echo "patchguard: $install_python or $launcher is gone and patchguard is not on PATH: patches were NOT checked (reinstall with: $reinstall && patchguard install)" >&2
    [ "$hook_name" = post-checkout ] && exit 1
    exit "$status"
fi
guard_status=$?
[ "$status" -ne 0 ] && exit "$status"
exit "$guard_status"
