#!/usr/bin/env bash
# qi21_cond.sh — Qwen-Image-2.1 with condition pictures through the command line, on the tiny golden pack
# (tests/golden/pipeline_qi21) and the golden's pictures (tests/golden/pipeline_qi21_cond): one and two pictures
# (the size from the last one at the output resolution's area, an RGBA file), the same bits twice, a given size
# winning, and what it cannot do refused before any weight is read with nothing written: a picture the processor
# would enlarge, a missing or corrupt file, nine pictures, a placeholder in the prompt, bad option values, a pack
# without its vision tower or without its VAE encoder. (Parity with diffusers is test_pipeline_qi21_cond's.)
# Usage: bash qi21_cond.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
HERE=$(cd "$(dirname "$0")" && pwd)
PACK=$HERE/../golden/pipeline_qi21/tiny_pipeline.cmf.gz
G=$HERE/../golden/pipeline_qi21_cond
if [ ! -f "$G/cond_rgb.png" ]; then
    echo "qi21_cond: skipped: tests/golden/pipeline_qi21_cond is absent"
    exit 77
fi
gzip -dc "$PACK" > "$W/qi21.cmf" || fail "could not unpack $PACK"
RGB=$G/cond_rgb.png
RGBA=$G/cond_rgba.png
SMALL=(--output-resolution 64 --vl-min-pixels 1024)

# one picture: the output takes its size (80x48 -> 96x64 at the 64^2 area)
expect 0 "$CQ" imagine "$W/qi21.cmf" "make the sky purple" --image "$RGB" "${SMALL[@]}" --steps 2 -o "$W/a.png"
has err "the last input picture's size"
has err "wrote $W/a.png (96x64, RGB, seed 0, 2 steps, guidance 1)"
[ -s "$W/a.png" ] || fail "no picture written"
expect 0 "$CQ" imagine "$W/qi21.cmf" "make the sky purple" --image "$RGB" "${SMALL[@]}" --steps 2 -q -o "$W/b.png"
cmp -s "$W/a.png" "$W/b.png" || fail "the same request drew another picture"
# without pictures the same pack draws from text alone
expect 0 "$CQ" imagine "$W/qi21.cmf" "make the sky purple" --size 96x64 --steps 2 -q -o "$W/t.png"
cmp -s "$W/a.png" "$W/t.png" && fail "the picture changed nothing"
# two pictures with guidance: the last one's size (40x72 -> 32x96); a given size wins
expect 0 "$CQ" imagine "$W/qi21.cmf" "put the shape into the first" --image "$RGB" --image "$RGBA" "${SMALL[@]}" \
    --steps 2 --guidance 4 --negative " " --rgba -o "$W/c.png"
has err "wrote $W/c.png (32x96, RGBA, seed 0, 2 steps, guidance 4)"
expect 0 "$CQ" imagine "$W/qi21.cmf" "the same on green" --image "$RGBA" "${SMALL[@]}" --size 64x64 --steps 2 \
    -o "$W/d.png"
has err "wrote $W/d.png (64x64"

# refused before any work, nothing written
expect 2 "$CQ" imagine "$W/qi21.cmf" "x" --image "$RGBA" --output-resolution 64 --steps 2 -o "$W/x.png"
has err "lower the bound with --vl-min-pixels"
expect 2 "$CQ" imagine "$W/qi21.cmf" "x" --image "$W/missing.png" "${SMALL[@]}" --steps 2 -o "$W/x.png"
has err "condition picture 1"
has err "missing.png"
printf 'not a picture' > "$W/bad.png"
expect 2 "$CQ" imagine "$W/qi21.cmf" "x" --image "$RGB" --image "$W/bad.png" "${SMALL[@]}" --steps 2 -o "$W/x.png"
has err "condition picture 2"
NINE=()
for i in 1 2 3 4 5 6 7 8 9; do NINE+=(--image "$RGB"); done
expect 2 "$CQ" imagine "$W/qi21.cmf" "x" "${NINE[@]}" "${SMALL[@]}" --steps 2 -o "$W/x.png"
has err "at most 8 input pictures (got 9)"
expect 2 "$CQ" imagine "$W/qi21.cmf" "a <|image_pad|>" --image "$RGB" "${SMALL[@]}" --steps 2 -o "$W/x.png"
has err "placeholders of the condition pictures"
expect 2 "$CQ" imagine "$W/qi21.cmf" "x" --image "$RGB" --output-resolution 20 --steps 2 -o "$W/x.png"
has err "output-resolution wants"
expect 2 "$CQ" imagine "$W/qi21.cmf" "x" --image "$RGB" --vl-min-pixels -3 --steps 2 -o "$W/x.png"
has err "vl-min-pixels wants"
# a pack without the vision tower, one without the VAE's encoder
expect 0 "$CQ" convert "$W/qi21.cmf" -o "$W/novis.cmf" --drop 'te.model.visual.*' -q
expect 2 "$CQ" imagine "$W/novis.cmf" "x" --image "$RGB" "${SMALL[@]}" --steps 2 -o "$W/x.png"
has err "has no vision tower"
expect 0 "$CQ" imagine "$W/novis.cmf" "x" --size 64x64 --steps 2 -q -o "$W/e.png"
expect 0 "$CQ" convert "$W/qi21.cmf" -o "$W/noenc.cmf" --drop 'vae.encoder.*' --drop 'vae.quant_conv.*' -q
expect 2 "$CQ" imagine "$W/noenc.cmf" "x" --image "$RGB" "${SMALL[@]}" --steps 2 -o "$W/x.png"
has err "VAE has no encoder"
[ -e "$W/x.png" ] && fail "a refused request wrote x.png"
finish qi21_cond
