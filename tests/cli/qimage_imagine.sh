#!/usr/bin/env bash
# qimage_imagine.sh — Qwen-Image from a diffusers folder to a picture through the command line: convert the
# tiny golden QwenImagePipeline (tests/golden/qimage_pipeline), info names its arch, imagine draws with and
# without guidance, the arch's defaults line and its guidance rule, and requests it cannot draw are refused
# before any weight is read. (Parity with diffusers is test_pipeline_qimage's.)
# Usage: bash qimage_imagine.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$HERE/../golden/qimage_pipeline/pipeline

expect 0 "$CQ" convert "$SRC" -o "$W/qimage.cmf" -q
expect 0 "$CQ" info "$W/qimage.cmf"
has out "qwen_image"
# the architecture's defaults, named on one line (the pack has none of its own)
expect 0 "$CQ" imagine "$W/qimage.cmf" "a red fox in the snow" --size 64x48 --steps 2 -o "$W/a.png"
has err "qwen_image's defaults"
has err "guidance is true CFG with --negative"
has err "guidance 4 needs a negative prompt"
has err "wrote $W/a.png (64x48, RGB, seed 0, 2 steps, guidance 4)"
[ -s "$W/a.png" ] || fail "no picture written"
# guided: the one-space negative prompt enables it, and draws another picture
expect 0 "$CQ" imagine "$W/qimage.cmf" "a red fox in the snow" --size 64x48 --steps 2 --negative " " -q -o "$W/b.png"
cmp -s "$W/a.png" "$W/b.png" && fail "guidance with a negative prompt drew the unguided picture"
# the same request draws the same bits
expect 0 "$CQ" imagine "$W/qimage.cmf" "a red fox in the snow" --size 64x48 --steps 2 --negative " " -q -o "$W/c.png"
cmp -s "$W/b.png" "$W/c.png" || fail "the same request drew another picture"
# refused before any work, nothing written
expect 2 "$CQ" imagine "$W/qimage.cmf" "x" --size 40x32 --steps 2 -o "$W/d.png"
has err "multiple"
expect 2 "$CQ" imagine "$W/qimage.cmf" "x" --size 32x32 --steps 1 -o "$W/d.png"
has err "one step"
expect 2 "$CQ" imagine "$W/qimage.cmf" "x" --size 32x32 --noise-dtype bf16 -o "$W/d.png"
has err "not an option of arch qwen_image"
[ -e "$W/d.png" ] && fail "a refused request wrote d.png"
finish qimage_imagine
