#!/bin/sh
# patchguard-managed-hook: written by `patchguard install`; `patchguard uninstall` removes it
# and puts back the hook that was here before (kept beside it as @HOOK_NAME@.patchguard-legacy).
hook_name='@HOOK_NAME@'
install_python='@INSTALL_PYTHON@'
launcher='@LAUNCHER@'
reinstall='@REINSTALL@'
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
# runs on every ref update, whatever TMPDIR is) when a chained hook needs a copy, or to see
# whether a ref update concerns us; else Python reads it. Every other hook reads /dev/null,
# never the terminal.
has_input=
input=
case "$hook_name" in
reference-transaction) has_input=1 ;;
post-rewrite) [ -x "$legacy" ] && has_input=1 ;;
esac
if [ -n "$has_input" ]; then
    while IFS= read -r line || [ -n "$line" ]; do
        input="$input$line
"
    done
fi

# Runs "$@" with the hook's input on stdin.
with_input() {
    if [ -n "$has_input" ]; then
        printf '%s' "$input" | "$@"
    elif [ "$hook_name" = post-rewrite ]; then
        "$@"
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

# The installed patchguard by its path, isolated (-I): no `guard` on PYTHONPATH, in the user's
# site or in this worktree can stand in for it (see patchguard_entry.py). It alone decides
# whether the content is as last verified (guard.store.fastpath), and what to do if not. With
# no chained hook's status to keep, it takes this hook's place.
if [ -x "$install_python" ] && [ -f "$launcher" ]; then
    if [ ! -x "$legacy" ] && [ -z "$has_input" ]; then
        [ "$hook_name" = post-rewrite ] || exec </dev/null
        exec "$install_python" -I "$launcher" hook "$hook_name" "$@"
    fi
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
