#!/usr/bin/env bash
# defaults.sh — a pack's generation defaults and the guidance options: convert writes a model's recipe
# (Z-Image-Turbo: 1024x1024, 8 steps, guidance 0, shift 3) and takes --default overrides, also when copying a
# .cmf; info shows them; imagine draws with them when not told, says so on one line, and draws exactly what
# the same settings given by hand draw; --guidance and each architecture's own options are checked against
# the pack's architecture before any weight is read.
# Usage: bash defaults.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
HERE=$(cd "$(dirname "$0")" && pwd)
SHAPES=$HERE/../../models/shapes.cmf
ZIMAGE=$HERE/../golden/zimage/pipeline

# ---- a .cmf copied with new defaults, tensors as stored ----
mkdir -p "$W/a" "$W/b"
expect 0 "$CQ" convert "$SHAPES" -o "$W/a/shapes.cmf" --default size=128x128 --default steps=6
has out "generation defaults: 128x128, 6 steps"
has out "copied"
expect 0 "$CQ" verify "$W/a/shapes.cmf"
expect 0 "$CQ" info "$W/a/shapes.cmf"
has out "defaults:   128x128, 6 steps"
expect 0 "$CQ" info "$W/a/shapes.cmf" --json
has out '"generation_defaults"'
has out '"steps":[[:space:]]*6'
# imagine without settings: the pack's size, steps and guidance (the shipped pack was converted from its pipeline
# folder, so it carries qwen_image21's recipe guidance 1 besides the overrides), one line saying so
expect 0 "$CQ" imagine "$W/a/shapes.cmf" "a red circle on a blue background" -o "$W/a/x.png"
has err "imagine: the pack's defaults 128x128, 6 steps, guidance 1; guidance is true CFG"
has err "wrote $W/a/x.png (128x128, RGB, seed 0, 6 steps, guidance 1)"
# the same settings by hand draw the same picture (the same file name: the PNG records it), and no defaults line
cp "$SHAPES" "$W/b/shapes.cmf"
expect 0 "$CQ" imagine "$W/b/shapes.cmf" "a red circle on a blue background" --size 128x128 --steps 6 --guidance 1 \
    -o "$W/b/x.png"
grep -q "imagine: the pack" "$W/err" && fail "settings given by hand still printed the defaults line"
cmp -s "$W/a/x.png" "$W/b/x.png" || fail "the pack's defaults drew another picture than the same settings by hand"
# a given setting wins over the pack's
expect 0 "$CQ" imagine "$W/a/shapes.cmf" "a red circle" --steps 2 -q -o "$W/a/y.png"
expect 0 "$CQ" convert "$W/a/shapes.cmf" -o "$W/a/again.cmf" --default steps=3 -q
expect 0 "$CQ" info "$W/a/again.cmf"
has out "defaults:   128x128, 3 steps"

# ---- bad defaults are refused, naming the setting ----
expect 2 "$CQ" convert "$SHAPES" -o "$W/bad.cmf" --default steps=0
has err "steps is 0; it must be a whole number in \[1, 1000\]"
expect 2 "$CQ" convert "$SHAPES" -o "$W/bad.cmf" --default size=100x100
has err "multiple of 16"
expect 2 "$CQ" convert "$SHAPES" -o "$W/bad.cmf" --default seed=1
has err "unknown key"
expect 2 "$CQ" convert "$SHAPES" -o "$W/bad.cmf" --default guidance
has err "KEY=VALUE"
expect 1 "$CQ" convert "$SHAPES" -o "$W/bad.cmf" --quant f16
has err "copied as they are stored"
[ -e "$W/bad.cmf" ] && fail "a refused conversion wrote bad.cmf"

# ---- guidance and the architectures' own options, checked against the pack's ----
expect 2 "$CQ" imagine "$SHAPES" "x" --guidance -1
has err "\[0, 100\]"
expect 2 "$CQ" imagine "$SHAPES" "x" --cfg-normalization -q
has err "not an option of arch qwen_image21"
expect 2 "$CQ" imagine "$SHAPES" "x" --cfg-truncation x
has err "--cfg-truncation wants a number"
expect 2 "$CQ" imagine "$SHAPES" "x" --size 48x48
has err "multiples of 32"
expect 2 "$CQ" imagine "$SHAPES" "x" --steps 1 --size 64x64
has err "steps must be in \[2, 1000\]"
expect 0 "$CQ" imagine --help
has out "pos + G (pos - neg)"
has out "true CFG, neg + G (pos - neg) with --negative; 1 = off"
has out "--cfg-normalization"

# ---- Z-Image: the recipe from the scheduler's shift, the options, a pack without the tower's unread layer ----
# (its tokenizer is stored gzipped: a build without zlib says so and this part is left out)
"$CQ" convert "$ZIMAGE" -o "$W/z.cmf" --quant f32 >"$W/out" 2>"$W/err"
if grep -q "this build has no zlib" "$W/err"; then
    echo "defaults: the Z-Image part is skipped: this build has no zlib (the golden tokenizer is tokenizer.json.gz)"
    finish "generation defaults and guidance options"
    exit 0
fi
expect 0 "$CQ" convert "$ZIMAGE" -o "$W/z.cmf" --quant f32
has out "generation defaults: 1024x1024, 8 steps, guidance 0, shift 3"
expect 0 "$CQ" info "$W/z.cmf"
has out "arch:       z_image"
has out "defaults:   1024x1024, 8 steps, guidance 0, shift 3"
expect 2 "$CQ" imagine "$W/z.cmf" "a cat" --size 40x32
has err "multiples of 16"
expect 2 "$CQ" imagine "$W/z.cmf" "a cat" --noise-dtype bf16
has err "not an option of arch z_image"
expect 2 "$CQ" imagine "$W/z.cmf" "a cat" --shift 0
has err "--shift wants a number in (0, 100]"
mkdir -p "$W/z1" "$W/z2"
expect 0 "$CQ" convert "$W/z.cmf" -o "$W/z1/z.cmf" --default size=32x32 --default steps=2 -q
expect 0 "$CQ" imagine "$W/z1/z.cmf" "a red fox" -o "$W/z1/x.png"
has err "imagine: the pack's defaults 32x32, 2 steps, guidance 0, shift 3; guidance is pos + G (pos - neg)"
# the text tower's last layer and final norm are never read: a pack without them draws the same picture
expect 0 "$CQ" convert "$W/z1/z.cmf" -o "$W/z2/z.cmf" --drop 'te.layers.2.*' --drop te.norm.weight -q
expect 0 "$CQ" imagine "$W/z2/z.cmf" "a red fox" -q -o "$W/z2/x.png"
cmp -s "$W/z1/x.png" "$W/z2/x.png" || fail "dropping the unread text-tower layer changed the picture"
# guidance: the empty negative prompt by default; a negative prompt without guidance is ignored, with a warning
expect 0 "$CQ" imagine "$W/z1/z.cmf" "a red fox" --guidance 4 --cfg-normalization --cfg-truncation 0.5 -q \
    -o "$W/z1/g.png"
cmp -s "$W/z1/x.png" "$W/z1/g.png" && fail "guidance 4 drew the unguided picture"
expect 0 "$CQ" imagine "$W/z1/z.cmf" "a red fox" --negative "blurry" -q -o "$W/z1/n.png"
has err "a negative prompt is used only with guidance > 0"

finish "generation defaults and guidance options"
