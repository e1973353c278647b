#!/usr/bin/env bash
# bench_vision.sh — `cortiq bench vision` as a user meets it: the dispatcher's list, --help, usage errors
# (exit 2), and the whole benchmark on the CPU at the real width with 2 of the 32 blocks on a 256 px picture
# (252 x 252 after smart_resize: 324 patch rows in 9 windows): weights written, mapped, loaded, the picture
# through the image processor and the tower, the report's lines there. The whole tower is not run here (see
# docs/PERFORMANCE.md).
# Usage: bash bench_vision.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"

expect 0 "$CQ" bench --help
has out "vision"
expect 0 "$CQ" bench vision --help
has out "--model"
has out "smart_resize"
has out "cuda"
refused "--size" bench vision --size 20
refused "--size" bench vision --size 5000
refused "--model must be qwen25vl" bench vision --model siglip
refused "--layers" bench vision --layers 33
refused "q4tp cannot hold" bench vision --quant q4tp
refused "unknown argument" bench vision extra
"$CQ" gpu >"$W/gpu" 2>&1
if ! grep -q "cuda:0 " "$W/gpu"; then
    expect 1 "$CQ" bench vision --backend cuda --layers 1
    has err "creating the backend"
fi
TMPDIR=$W expect 0 "$CQ" bench vision --model qwen25vl --layers 2 --size 256 --repeat 1 --threads 2
has out "2 blocks of 32 built, hidden 1280 = 16 heads x 80, MLP 3420, out 3584"
has out "picture 256x256 -> smart_resize 252x252: grid 1 x 18 x 18, 324 patch rows in 9 windows, 81 tokens out"
has out "processor (256x256 -> 252x252)"
has out "forward (324 rows -> 81 tokens)"
has out "scaled to 32 blocks by FLOPs"
has out "peak resident memory"
if grep -q "non-finite" "$W/err"; then fail "the output holds non-finite values"; fi
if ls "$W"/cortiq-bench-vision-* >/dev/null 2>&1; then fail "a temporary pack was left in $W"; fi

finish "bench_vision"
