#!/usr/bin/env bash
# bench_before_after.sh — the denoiser step of two builds side by side, alternating, in one run (the way
# docs/PERFORMANCE.md compares a change with the tree before it).
#
#   tools/bench_before_after.sh OLD_TARBALL [BACKEND] [SIZES]
#
# OLD_TARBALL: `git archive REV src include cmake CMakeLists.txt Makefile tests/header_check.c | gzip` of
# the tree before. The current tree builds in build-ba/new, the old one in build-ba/old (both Release; CUDA
# when BACKEND is cuda). Each size runs old, new, old, new; the step lines are printed with their labels.
set -u
tarball=${1:?usage: bench_before_after.sh OLD_TARBALL [BACKEND] [SIZES]}
backend=${2:-cpu}
sizes=${3:-1024 2048}
jobs=$(nproc)
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build-ba
mkdir -p "$out/oldsrc"
tar xzf "$tarball" -C "$out/oldsrc" || exit 1
cuda=OFF
[ "${backend%%:*}" = cuda ] && cuda=ON
flags="-DCMAKE_BUILD_TYPE=Release -DCORTIQ_CUDA=$cuda -DCORTIQ_WERROR=OFF -DCORTIQ_TESTS=OFF"
cmake -S "$root" -B "$out/new" $flags >/dev/null || exit 1
cmake -S "$out/oldsrc" -B "$out/old" $flags >/dev/null || exit 1
cmake --build "$out/new" -j "$jobs" >"$out/new.log" 2>&1 &
p1=$!
cmake --build "$out/old" -j "$jobs" --target cortiq >"$out/old.log" 2>&1 &
p2=$!
wait "$p1" || { tail -20 "$out/new.log"; exit 1; }
wait "$p2" || { tail -20 "$out/old.log"; exit 1; }
# The benchmarks moved into cortiq-bench; an older tree has them in cortiq itself.
run() {
    local dir=$1
    shift
    if [ -x "$dir/cortiq-bench" ]; then "$dir/cortiq-bench" "$@"; else "$dir/cortiq" bench "$@"; fi
}
for s in $sizes; do
    for w in old new old new; do
        printf '%-4s %5s: ' "$w" "$s"
        run "$out/$w" qi21 --backend "$backend" --size "$s" --no-verify 2>&1 | grep -E '^step' || echo "(failed)"
    done
done
