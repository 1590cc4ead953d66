#!/bin/sh
# `make demo`: the EAGLE-3 story on a small sglang-shaped repository, by hand and then with hooks.
# Every step shows the command and its output, and checks the exit status the story expects.
set -u
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/patchguard-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
repo="$work/sglang"
kimi=python/sglang/srt/models/kimi_k25.py
export GIT_AUTHOR_NAME=demo GIT_AUTHOR_EMAIL=demo@example.invalid
export GIT_COMMITTER_NAME=demo GIT_COMMITTER_EMAIL=demo@example.invalid
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=advice.detachedHead GIT_CONFIG_VALUE_0=false

bold='' plain=''
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then bold=$(printf '\033[1m') plain=$(printf '\033[0m'); fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }

# expect STATUS COMMAND...: run it in the repository, show it, and stop the demo if the status differs.
expect() {
    want=$1
    shift
    printf '$ %s\n' "$*"
    (cd "$repo" && sh -c "$*" 2>&1)
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "demo: expected exit $want from '$*', got $got" >&2
        exit 1
    fi
    [ "$want" -eq 0 ] || echo "(exit $got, as expected)"
}

step "A sample sglang checkout: main, an older commit 'old', and 'no-kimi' without kimi_k25.py"
python "$here/sample_repo.py" "$repo" >/dev/null || exit 1
expect 0 "git log --oneline --decorate main"

step "The local patch: three EAGLE-3 delegation methods inside KimiK25ForConditionalGeneration"
python -c "import sys; sys.path.insert(0, sys.argv[1]); import sample_repo, pathlib; sample_repo.add_eagle3_methods(pathlib.Path(sys.argv[2]))" "$here" "$repo" || exit 1
expect 0 "git diff --stat"
expect 0 "patchguard record eagle3 $kimi -m 'EAGLE-3 delegation methods'"

step "Act 1, by hand: git stash && git checkout old silently removes the methods"
expect 0 "git stash -q && git checkout -q old"
expect 1 "patchguard check"
expect 0 "patchguard apply"
expect 0 "patchguard apply"
expect 0 "grep -n 'def ' $kimi"
expect 0 "patchguard check"

step "At a commit where the file does not exist, check fails loudly"
expect 0 "patchguard unapply && git checkout -q no-kimi"
expect 1 "patchguard check"

step "Act 2, with hooks: patches come back by themselves"
expect 0 "git checkout -q main && patchguard install"
expect 0 "git stash -q && git checkout -q old"
expect 0 "grep -n 'def ' $kimi"
expect 0 "patchguard check"

step "And git checkout itself fails when the file is gone"
expect 0 "patchguard git checkout -q main"
expect 1 "git stash -q && git checkout -q no-kimi"

step "Act 3, a regression hunt: upstream edits kimi_k25.py (c2), absorbs the methods (c3), then c4 regresses"
python "$here/sample_repo.py" "$work/upstream" --hunt >/dev/null || exit 1
git clone -q "$work/upstream" "$work/hunt" || exit 1
repo="$work/hunt"
python -c "import sys; sys.path.insert(0, sys.argv[1]); import sample_repo; open(sys.argv[2], 'w').write(sample_repo.HUNT_BENCH_TEXT)" "$here" "$work/bench.py" || exit 1
expect 0 "git log --oneline --decorate"
expect 0 "git reset -q --hard c0"
python -c "import sys; sys.path.insert(0, sys.argv[1]); import sample_repo, pathlib; sample_repo.add_eagle3_methods(pathlib.Path(sys.argv[2]))" "$here" "$repo" || exit 1
expect 0 "patchguard record eagle3 $kimi >/dev/null && patchguard install >/dev/null"
step "Plain git refuses to move over the patched file; patchguard git lifts the patch, moves, puts it back"
expect 1 "git checkout -q c2"
expect 0 "patchguard git checkout -q c2"
expect 0 "grep -c 'def get_embed_and_head' $kimi"
expect 0 "patchguard git checkout -q main"
step "patchguard git pull: upstream absorbed the methods, so the file is exactly upstream's"
expect 0 "patchguard git pull -q --ff-only"
expect 0 "git status --short && patchguard check"
step "patchguard bisect run: the patch at every commit, so the benchmark blames the real regression"
expect 0 "patchguard git bisect start c4 c0"
expect 0 "patchguard bisect run --log ../hunt.jsonl python ../bench.py"
expect 0 "patchguard git bisect reset"
expect 0 "patchguard check"

printf '\n%sdemo: every step behaved as the story says.%s\n' "$bold" "$plain"
