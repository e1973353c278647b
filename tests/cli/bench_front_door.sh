#!/usr/bin/env bash
# bench_front_door.sh — the benchmarks live in cortiq-bench, apart from the shipped cortiq: `cortiq bench`
# runs the cortiq-bench beside the cortiq binary with the same arguments (its exit code and output), and a
# cortiq with no cortiq-bench beside it says how to get it; cortiq links neither OpenBLAS nor oneDNN (the
# benchmarks' peers; zlib is the library's own, for gzipped side files), while cortiq-bench has every benchmark.
# Usage: bash bench_front_door.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
BENCH=$(dirname "$CQ")/cortiq-bench
[ -x "$BENCH" ] || fail "no cortiq-bench beside $CQ"

expect 0 "$CQ" bench --help
has out "gemm"
has out "hash"
expect 0 "$BENCH" --help
has out "gemm"
expect 2 "$CQ" bench nosuch
has err "unknown benchmark 'nosuch'"
expect 2 "$CQ" bench
expect 0 "$CQ" bench hash --help
expect 0 "$CQ" --help
has out "cortiq-bench"

# a cortiq alone (as installed): the front door explains
mkdir -p "$W/alone"
cp "$CQ" "$W/alone/cortiq"
expect 1 "$W/alone/cortiq" bench gemm --quick
has err "cortiq-bench"
has err "cmake --build build --target cortiq-bench"
expect 0 "$W/alone/cortiq" bench --help
has out "cortiq-bench"

if command -v readelf >/dev/null; then
    readelf -d "$CQ" >"$W/needed" || fail "readelf -d $CQ failed"
    for lib in openblas dnnl; do
        grep -q "NEEDED.*$lib" "$W/needed" && fail "cortiq links $lib: $(grep NEEDED "$W/needed" | tr -s ' ')"
    done
    command -v nm >/dev/null && nm "$CQ" | grep -q ' cq_bench_' && fail "cortiq holds benchmark code (cq_bench_*)"
fi
finish bench_front_door
