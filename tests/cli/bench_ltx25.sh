#!/usr/bin/env bash
# bench_ltx25.sh — `cortiq bench ltx25` as a user meets it: the dispatcher's
# list, --help, usage errors (exit 2), and the whole benchmark on the CPU with
# one of the 48 blocks at the real widths on a tiny clip (64x64 px, 9 frames):
# weights written, mapped, loaded, the prompts prepared and the step timed,
# the report's lines there. The real 22B step is not run here (see
# docs/PERFORMANCE.md).
# Usage: bash bench_ltx25.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"

expect 0 "$CQ" bench --help
has out "ltx25"
expect 0 "$CQ" bench ltx25 --help
has out "--frames F"
has out "8k + 1"
has out "cuda"
expect 2 "$CQ" bench ltx25 --width 100
has err "multiple of 32"
expect 2 "$CQ" bench ltx25 --frames 10
has err "8k + 1"
expect 2 "$CQ" bench ltx25 --fps 0
has err "--fps"
expect 2 "$CQ" bench ltx25 --layers 49
has err "--layers"
expect 2 "$CQ" bench ltx25 --size 512
has err "--width and --height"
expect 2 "$CQ" bench ltx25 --quant f16
has err "q8_2f, q4tp or bf16"
expect 2 "$CQ" bench ltx25 extra
has err "unknown argument"
"$CQ" gpu >"$W/gpu" 2>&1
if ! grep -q "cuda:0 " "$W/gpu"; then
    expect 1 "$CQ" bench ltx25 --backend cuda --layers 1
    has err "creating the backend"
fi
TMPDIR=$W expect 0 "$CQ" bench ltx25 --layers 1 --width 64 --height 64 --frames 9 --text-rows 16 --steps 1 --threads 2
has out "1 block of 48 built; video 32 heads x 128 = 4096, audio 32 x 64 = 2048"
has out "2 latent frames of 2x2 = 8 video tokens, 9 audio tokens, 16 prompt rows per stream"
has out "prepare (16 + 16 prompt rows)"
has out "step (8 video + 9 audio tokens)"
has out "scaled to 48 blocks by FLOPs"
has out "peak resident memory"
if grep -q "non-finite" "$W/err"; then fail "the output holds non-finite values"; fi
if ls "$W"/cortiq-bench-* >/dev/null 2>&1; then fail "a temporary pack was left in $W"; fi

finish "bench_ltx25"
