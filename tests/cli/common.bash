# common.bash — helpers the CLI tests (tests/cli/*.sh) source after setting CQ (the cortiq binary) and W (their
# scratch directory, emptied here):
#   expect CODE CMD...   run CMD with stdout/stderr in $W/out, $W/err (stdin from $EXPECT_STDIN when set); a
#                        check fails unless it exits CODE
#   has out|err TEXT     the last command's stdout/stderr holds TEXT
#   fail MESSAGE         count a failed check
#   finish NAME          exit 1 if any check failed, else print that NAME passed
#   refused TEXT ARGS... `cortiq ARGS...` is a usage error (exit 2) whose stderr holds TEXT
#   need_free GIB NAME   unless $W's disk has GIB GiB free: say NAME's run is skipped and exit 77 (1 when a check
#                        already failed)
#   bench_tokenizer      TOK=(): the option `bench imagine` needs for the Qwen tokenizer of tests/fixtures (none
#                        with zlib; a build without it reads a gunzipped copy)
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
refused() {
    local text=$1
    shift
    expect 2 "$CQ" "$@"
    has err "$text"
}
need_free() {
    local free_kib
    free_kib=$(df -Pk "$W" | awk 'NR == 2 {print $4}')
    if [ -z "$free_kib" ] || [ "$free_kib" -lt $(($1 * 1024 * 1024)) ]; then
        echo "$2: the run skipped: less than $1 GiB free under $W"
        [ "$fails" -eq 0 ] || finish "$2"
        exit 77
    fi
}
bench_tokenizer() {
    local gz
    gz="$(dirname "${BASH_SOURCE[0]}")/../fixtures/tokenizers/qwen3.json.gz"
    TOK=()
    # a missing template stops the run right after the tokenizer is read
    if "$CQ" bench imagine --model zimage --tokenizer "$gz" --chat-template "$W/no-such-template.jinja" 2>&1 |
        grep -q "this build has no zlib"; then
        gzip -dc "$gz" >"$W/qwen3.json" || fail "gzip -dc failed"
        TOK=(--tokenizer "$W/qwen3.json")
    fi
}
