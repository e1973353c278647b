#!/usr/bin/env bash
# bench_qi21.sh — `cortiq bench qi21` as a user meets it: the dispatcher's
# list, --help, and usage errors (exit 2). The benchmark itself builds a 7B
# model and is not run here (see docs/PERFORMANCE.md).
# Usage: bash bench_qi21.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"

expect 0 "$CQ" bench --help
has out "qi21"
expect 2 "$CQ" bench
has err "qi21"
expect 2 "$CQ" bench no-such-bench
has err "unknown benchmark"
expect 0 "$CQ" bench qi21 --help
has out "--layers"
has out "q4tp"
has out "cuda"
expect 2 "$CQ" bench qi21 --size 300
has err "256, 512, 1024 or 2048"
expect 2 "$CQ" bench qi21 --quant f16
has err "q8_2f, q4tp or bf16"
expect 2 "$CQ" bench qi21 --layers 33
has err "--layers"
expect 2 "$CQ" bench qi21 --backend metal
has err "unknown backend 'metal' (have: cpu, ref, cuda"
# Without a usable GPU the CUDA run fails at once, before any weights are
# written (with one, it would be the real benchmark: not run here).
"$CQ" gpu >"$W/gpu" 2>&1
if ! grep -q "cuda:0 " "$W/gpu"; then
    expect 1 "$CQ" bench qi21 --backend cuda --layers 1
    has err "creating the backend"
fi
expect 2 "$CQ" bench qi21 extra
has err "unknown argument"

finish "bench_qi21"
