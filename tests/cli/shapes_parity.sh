#!/usr/bin/env bash
# shapes_parity.sh — the shipped model against the reference pipeline: the four sample prompts of
# tools/train_shapes.py drawn by `cortiq imagine` from models/shapes.cmf match diffusers'
# QwenImage21Pipeline in float32 (tests/golden/shapes/reference_outputs.npz, rendered on the CPU by
# `tools/train_shapes.py --render-reference`) within 2/255 in every RGBA value.
# Skipped (77) without the model or python3.
# Usage: bash shapes_parity.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$HERE/../..
MODEL=$ROOT/models/shapes.cmf
REF=$ROOT/tests/golden/shapes/reference_outputs.npz
[ -f "$MODEL" ] || { echo "skipped: $MODEL is absent"; exit 77; }
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
rm -rf "$W" && mkdir -p "$W"
# on the CPU unless the caller names a backend (imagine would otherwise take a GPU by default), as common.bash does
export CORTIQ_BACKEND="${CORTIQ_BACKEND:-cpu}"
python3 "$ROOT/tools/compare_reference_outputs.py" "$CQ" "$MODEL" "$REF" --max-diff 2 --keep "$W"
