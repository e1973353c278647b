#!/usr/bin/env bash
# qimage_edit.sh — Qwen-Image editing through the command line: convert the tiny golden Edit-Plus (2511) and
# Edit pipelines (tests/golden/qimage_edit_pipeline), info names the arch, imagine edits one and two pictures
# (the size from the last one, an RGBA file read as its RGB), and what it cannot do is refused before any weight
# is read with nothing written: --image to a text-to-image pack, no picture, a missing or corrupt file, too many
# pictures, an option of the other edit arch. (Parity with diffusers is test_pipeline_qimage_edit's.)
# Usage: bash qimage_edit.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
HERE=$(cd "$(dirname "$0")" && pwd)
G=$HERE/../golden/qimage_edit_pipeline
if [ ! -d "$G" ]; then
    echo "qimage_edit: skipped: tests/golden/qimage_edit_pipeline is absent"
    exit 77
fi
IMG=$G/images
AREAS=(--vae-area 9216 --vl-area 6400)

expect 0 "$CQ" convert "$G/pipeline_2511" -o "$W/plus.cmf" -q
expect 0 "$CQ" convert "$G/pipeline_edit" -o "$W/edit.cmf" -q
expect 0 "$CQ" info "$W/plus.cmf"
has out "qwen_image_edit_plus"
has out "processor.config_json"
# two pictures: the output takes the last one's size (96x56 -> 128x64 at the 96^2 area)
expect 0 "$CQ" imagine "$W/plus.cmf" "put the cat of picture 2 on the sofa of picture 1" --image "$IMG/e_56x88.png" \
    --image "$IMG/c_96x56.png" "${AREAS[@]}" --steps 2 --negative " " -o "$W/a.png"
has err "the last input picture's size"
has err "wrote $W/a.png (128x64, RGB, seed 0, 2 steps, guidance 4)"
[ -s "$W/a.png" ] || fail "no picture written"
# the same request draws the same bits; a given size wins
expect 0 "$CQ" imagine "$W/plus.cmf" "put the cat of picture 2 on the sofa of picture 1" --image "$IMG/e_56x88.png" \
    --image "$IMG/c_96x56.png" "${AREAS[@]}" --steps 2 --negative " " -q -o "$W/b.png"
cmp -s "$W/a.png" "$W/b.png" || fail "the same request drew another picture"
expect 0 "$CQ" imagine "$W/plus.cmf" "add snow" --image "$IMG/d_72x72_rgba.png" "${AREAS[@]}" --steps 2 \
    --size 48x32 -o "$W/c.png"
has err "wrote $W/c.png (48x32"
# Edit: one picture, the VAE area only
expect 0 "$CQ" imagine "$W/edit.cmf" "make the sky purple" --image "$IMG/a_80x64.png" --vae-area 9216 --steps 2 \
    -q -o "$W/d.png"
[ -s "$W/d.png" ] || fail "no Edit picture written"
# refused before any work, nothing written
expect 0 "$CQ" convert "$HERE/../golden/qimage_pipeline/pipeline" -o "$W/t2i.cmf" -q
expect 2 "$CQ" imagine "$W/t2i.cmf" "x" --image "$IMG/a_80x64.png" --size 32x32 --steps 2 -o "$W/x.png"
has err "draws from text alone and takes no input picture"
expect 2 "$CQ" imagine "$W/plus.cmf" "x" "${AREAS[@]}" --steps 2 -o "$W/x.png"
has err "edits pictures: give the input picture (--image FILE"
expect 2 "$CQ" imagine "$W/plus.cmf" "x" --image "$W/missing.png" "${AREAS[@]}" --steps 2 -o "$W/x.png"
has err "input picture 1"
has err "missing.png"
printf 'not a picture' > "$W/bad.png"
expect 2 "$CQ" imagine "$W/plus.cmf" "x" --image "$IMG/a_80x64.png" --image "$W/bad.png" "${AREAS[@]}" --steps 2 \
    -o "$W/x.png"
has err "input picture 2"
NINE=()
for i in 1 2 3 4 5 6 7 8 9; do NINE+=(--image "$IMG/a_80x64.png"); done
expect 2 "$CQ" imagine "$W/plus.cmf" "x" "${NINE[@]}" "${AREAS[@]}" --steps 2 -o "$W/x.png"
has err "at most 8 input pictures (got 9)"
expect 2 "$CQ" imagine "$W/edit.cmf" "x" --image "$IMG/a_80x64.png" --image "$IMG/a_80x64.png" --vae-area 9216 \
    --steps 2 -o "$W/x.png"
has err "at most 1 input picture (got 2)"
expect 2 "$CQ" imagine "$W/edit.cmf" "x" --image "$IMG/a_80x64.png" --vl-area 6400 --steps 2 -o "$W/x.png"
has err "not an option of arch qwen_image_edit"
expect 2 "$CQ" imagine "$W/plus.cmf" "a <|image_pad|>" --image "$IMG/a_80x64.png" "${AREAS[@]}" --steps 2 -o "$W/x.png"
has err "placeholders of the input pictures"
[ -e "$W/x.png" ] && fail "a refused request wrote x.png"
finish qimage_edit
