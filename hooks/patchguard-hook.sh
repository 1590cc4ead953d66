#!/bin/sh
# patchguard-managed-hook: written by `patchguard install`; `patchguard uninstall` removes it
# and puts back the hook that was here before (kept beside it as @HOOK_NAME@.patchguard-legacy).
hook_name='@HOOK_NAME@'
install_python='@INSTALL_PYTHON@'
case "$0" in
*/*) legacy="${0%/*}/$hook_name.patchguard-legacy" ;;
*) legacy="./$hook_name.patchguard-legacy" ;;
esac

# Hooks with input get it once; keep a copy so the chained hook and patchguard both see it.
# Every other hook reads /dev/null, never the terminal.
input=/dev/null
case "$hook_name" in
post-rewrite | reference-transaction)
    input=$(mktemp "${TMPDIR:-/tmp}/patchguard-stdin.XXXXXX") || exit 1
    trap 'rm -f "$input"' EXIT
    trap 'rm -f "$input"; exit 130' INT TERM HUP
    cat >"$input"
    ;;
esac

status=0
if [ -x "$legacy" ]; then
    "$legacy" "$@" <"$input"
    status=$?
    if [ "$status" -ne 0 ]; then
        echo "patchguard: the chained $hook_name hook ($legacy) exited $status" >&2
    fi
fi

# reference-transaction fires on every ref update: only a committed stash concerns us.
if [ "$hook_name" = reference-transaction ]; then
    [ "$1" = committed ] && grep -q ' refs/stash$' "$input" || exit "$status"
fi

if [ "${PATCHGUARD_SKIP:-}" = 1 ]; then
    echo "patchguard: PATCHGUARD_SKIP=1, $hook_name hook did nothing" >&2
    exit "$status"
fi

# Fast path: if HEAD and every guarded file (by content) are as they were when patchguard last
# verified them, there is nothing to do. Same key as guard/fastpath.py; any doubt falls through.
# Builtins only, beyond two git calls: this runs on every checkout.
if [ "$hook_name" != reference-transaction ] &&
    found=$(git rev-parse --absolute-git-dir --git-common-dir HEAD 2>/dev/null); then
    cache="${found%%
*}/patchguard-cache"
    rest="${found#*
}"
    common="${rest%%
*}"
    key="${rest#*
} "
    # Nothing recorded in this repository yet: nothing to guard.
    [ -f "$common/patchguard/manifest.json" ] || exit "$status"
    if [ -f "$cache/verified" ] && [ -f "$cache/paths" ]; then
        for blob in $(git hash-object --no-filters --stdin-paths <"$cache/paths" 2>/dev/null); do
            key="$key$blob "
        done
        while IFS= read -r line; do
            [ "$line" = "$key" ] && exit "$status"
        done <"$cache/verified"
    fi
fi

if [ -x "$install_python" ]; then
    "$install_python" -m guard hook "$hook_name" "$@" <"$input"
elif command -v patchguard >/dev/null 2>&1; then
    patchguard hook "$hook_name" "$@" <"$input"
else
    echo "patchguard: $install_python is gone and patchguard is not on PATH: patches were NOT checked (reinstall with: pip install git-patchguard && patchguard install)" >&2
    [ "$hook_name" = post-checkout ] && exit 1
    exit "$status"
fi
guard_status=$?
[ "$status" -ne 0 ] && exit "$status"
exit "$guard_status"
