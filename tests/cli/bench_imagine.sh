#!/usr/bin/env bash
# bench_imagine.sh — `cortiq bench imagine` as a user meets it: the
# dispatcher's list, --help, and usage errors (exit 2), plus a missing input
# file (exit 1, before anything is written). The benchmark itself writes a
# 15 GB model and is not run here (see docs/PERFORMANCE.md).
# Usage: bash bench_imagine.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"

expect 0 "$CQ" bench --help
has out "imagine"
expect 2 "$CQ" bench
has err "imagine"
expect 0 "$CQ" bench imagine --help
has out "--steps"
has out "q4tp"
has out "TMPDIR"
has out "qwen3.json.gz"
expect 2 "$CQ" bench imagine --size 1000
has err "256, 512, 1024 or 2048"
expect 2 "$CQ" bench imagine --backend gpu
has err "unknown backend 'gpu' (have: cpu, ref, cuda"
expect 2 "$CQ" bench imagine --size 25x
has err "--size"
expect 2 "$CQ" bench imagine --steps 1
has err "--steps"
expect 2 "$CQ" bench imagine --steps 101
has err "--steps"
expect 2 "$CQ" bench imagine --quant f16
has err "q8_2f or q4tp"
expect 2 "$CQ" bench imagine --threads 0
has err "--threads"
expect 2 "$CQ" bench imagine --layers 33
has err "--layers"
expect 2 "$CQ" bench imagine --tokenizer
has err "--tokenizer needs a file name"
expect 2 "$CQ" bench imagine --prompt
has err "--prompt needs a value"
expect 2 "$CQ" bench imagine extra
has err "unknown argument"

# A missing input fails before the temporary model is written: nothing appears in TMPDIR.
mkdir -p "$W/tmp"
# (the default tokenizer is gzipped: a build without zlib reads a gunzipped copy below)
bench_tokenizer
TMPDIR="$W/tmp" expect 1 "$CQ" bench imagine --tokenizer "$W/no-such-tokenizer.json"
has err "no-such-tokenizer.json"
TMPDIR="$W/tmp" expect 1 "$CQ" bench imagine "${TOK[@]}" --chat-template "$W/no-such-template.jinja"
has err "chat template"
TMPDIR="$W/no-such-dir" expect 1 "$CQ" bench imagine "${TOK[@]}" --layers 1
has err "writing the temporary model"
[ -z "$(ls -A "$W/tmp")" ] || fail "files were left in TMPDIR: $(ls -A "$W/tmp")"

finish "bench_imagine"
