# common.bash — helpers the CLI tests (tests/cli/*.sh) source after setting CQ (the cortiq binary) and W (their
# scratch directory, emptied here):
#   expect CODE CMD...   run CMD with stdout/stderr in $W/out, $W/err (stdin from $EXPECT_STDIN when set); a
#                        check fails unless it exits CODE
#   has out|err TEXT     the last command's stdout/stderr holds TEXT
#   fail MESSAGE         count a failed check
#   finish NAME          exit 1 if any check failed, else print that NAME passed
rm -rf "$W" && mkdir -p "$W"
# `cortiq imagine` and `run` take a usable GPU by default (--backend auto): the CLI tests run on the CPU unless
# the caller names a backend, so that their results and times do not depend on the machine having a GPU
export CORTIQ_BACKEND="${CORTIQ_BACKEND:-cpu}"
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
expect() {
    local want=$1
    shift
    "$@" <"${EXPECT_STDIN:-/dev/null}" >"$W/out" 2>"$W/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want; stderr: $(head -c 400 "$W/err")"
}
has() { grep -q -- "$2" "$W/$1" || fail "$1 of the last command lacks '$2': $(head -c 400 "$W/$1")"; }
finish() {
    if [ "$fails" -ne 0 ]; then
        echo "$fails check(s) failed" >&2
        exit 1
    fi
    echo "$1: all checks passed"
}
