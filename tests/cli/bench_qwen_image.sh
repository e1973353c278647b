#!/usr/bin/env bash
# bench_qwen_image.sh — `cortiq bench qwen_image` as a user meets it: the dispatcher's list, --help, usage
# errors (exit 2), and the whole benchmark on the CPU at a narrow shape (2 heads, 2 of the 60 blocks, a 256 px
# image): weights written, mapped, loaded, both prompts prepared, the step and the step with true CFG timed,
# the report's lines there. The real 20B shape is not run here (see docs/PERFORMANCE.md).
# Usage: bash bench_qwen_image.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"

expect 0 "$CQ" bench --help
has out "qwen_image"
expect 0 "$CQ" bench qwen_image --help
has out "--text-rows"
has out "--cfg"
has out "--neg-rows"
has out "cuda"
refused "256, 512, 1024 or 2048" bench qwen_image --size 300
refused "--layers" bench qwen_image --layers 61
refused "--heads" bench qwen_image --heads 25
refused "--text-rows" bench qwen_image --text-rows 0
refused "--text-rows" bench qwen_image --text-rows 5000
refused "--neg-rows needs --cfg" bench qwen_image --neg-rows 8
refused "q8_2f, q4tp or bf16" bench qwen_image --quant f16
refused "unknown argument" bench qwen_image extra
"$CQ" gpu >"$W/gpu" 2>&1
if ! grep -q "cuda:0 " "$W/gpu"; then
    expect 1 "$CQ" bench qwen_image --backend cuda --layers 1
    has err "creating the backend"
fi
for q in q8_2f bf16; do
    TMPDIR=$W expect 0 "$CQ" bench qwen_image --heads 2 --layers 2 --size 256 --text-rows 40 --cfg --neg-rows 12 \
        --steps 2 --threads 2 --quant $q
    has out "narrowed shape (2 blocks of 60 built, 2 heads x 128 = 256, MLP 1024, text rows 3584 wide)"
    has out "prepare (40 text rows)"
    has out "prepare, negative (12 text rows)"
    has out "step (256x256 px, 256+40 rows)"
    has out "step with true CFG (2 passes, +12 rows)"
    has out "scaled to 60 blocks by FLOPs"
    has out "peak resident memory"
    if grep -q "non-finite" "$W/err"; then fail "the output holds non-finite values ($q)"; fi
    # nothing outlives the run
    if ls "$W"/cortiq-bench-qimage-* >/dev/null 2>&1; then fail "a temporary pack was left in $W"; fi
done
# without --cfg: one prompt, no CFG row
TMPDIR=$W expect 0 "$CQ" bench qwen_image --heads 1 --layers 1 --size 256 --text-rows 8 --steps 1 --threads 2
has out "step (256x256 px, 256+8 rows)"
if grep -q "true CFG" "$W/out"; then fail "a CFG row without --cfg"; fi

finish "bench_qwen_image"
