#!/usr/bin/env bash
# bench_zimage.sh — `cortiq bench zimage` as a user meets it: the dispatcher's
# list, --help, usage errors (exit 2), and the whole benchmark on the CPU at a
# narrow shape (2 heads, 2 layers, a 256 px image): weights written, mapped,
# loaded, the caption prepared and the steps timed, the report's lines there.
# The real 6B shape is not run here (see docs/PERFORMANCE.md).
# Usage: bash bench_zimage.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"

expect 0 "$CQ" bench --help
has out "zimage"
expect 0 "$CQ" bench zimage --help
has out "--caption"
has out "--heads"
has out "cuda"
expect 2 "$CQ" bench zimage --size 300
has err "256, 512, 1024 or 2048"
expect 2 "$CQ" bench zimage --layers 31
has err "--layers"
expect 2 "$CQ" bench zimage --caption 5000
has err "--caption"
expect 2 "$CQ" bench zimage --quant f16
has err "q8_2f, q4tp or bf16"
expect 2 "$CQ" bench zimage extra
has err "unknown argument"
"$CQ" gpu >"$W/gpu" 2>&1
if ! grep -q "cuda:0 " "$W/gpu"; then
    expect 1 "$CQ" bench zimage --backend cuda --layers 1
    has err "creating the backend"
fi
for q in q8_2f bf16; do
    TMPDIR=$W expect 0 "$CQ" bench zimage --heads 2 --layers 2 --size 256 --caption 40 --steps 2 --threads 2 --quant $q
    has out "narrowed shape (dim 256 = 2 heads x 128, 2 layers of 30 built"
    has out "prepare (40 caption rows)"
    has out "step (256x256 px, 256+64 rows)"
    has out "scaled to 30 layers by FLOPs"
    has out "peak resident memory"
    if grep -q "non-finite" "$W/err"; then fail "the output holds non-finite values ($q)"; fi
    # nothing outlives the run
    if ls "$W"/cortiq-bench-zimage-* >/dev/null 2>&1; then fail "a temporary pack was left in $W"; fi
done

finish "bench_zimage"
