#!/usr/bin/env bash
# bench_imagine_zimage.sh — `cortiq bench imagine --model zimage`: its usage errors (exit 2), then the whole
# benchmark on the CPU at its smallest settings (the released widths with one denoiser layer and two text
# layers, a 256 px image, one step): the pack written to TMPDIR, mapped and removed, the Z-Image pipeline
# loaded and run, and the report's phase table there with finite values. The file is 1.6 GiB (the 151936-row
# embedding, the four refiner blocks and the VAE are there at full size); the run takes about 15 s on two
# cores. Skipped (77) when the scratch directory's disk has less than 3 GiB free.
# Usage: bash bench_imagine_zimage.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"

expect 0 "$CQ" bench imagine --help
has out "--model"
has out "zimage"
has out "qwen3.jinja"
expect 2 "$CQ" bench imagine --model
has err "--model needs a value"
expect 2 "$CQ" bench imagine --model flux
has err "--model wants one of qi21, zimage, qimage, qimage_edit_plus, got 'flux'"
expect 2 "$CQ" bench imagine --model zimage --layers 31
has err "--layers wants an integer in \[1, 30\]"
expect 2 "$CQ" bench imagine --layers 31 --model zimage
has err "--layers wants an integer in \[1, 30\]"
expect 2 "$CQ" bench imagine --model zimage --steps 0
has err "--steps wants an integer in \[1, 100\]"
expect 2 "$CQ" bench imagine --model zimage --steps 101
has err "--steps"
expect 2 "$CQ" bench imagine --model zimage --steps
has err "--steps needs a value"
# Qwen-Image-2.1's own bounds stay its own
expect 2 "$CQ" bench imagine --steps 1 --model qi21
has err "--steps wants an integer in \[2, 100\]"
expect 2 "$CQ" bench imagine --model zimage --quant bf16
has err "q8_2f or q4tp"
# a missing template fails before anything is written
mkdir -p "$W/tmp"
TMPDIR="$W/tmp" expect 1 "$CQ" bench imagine --model zimage --chat-template "$W/no-such-template.jinja"
has err "chat template"
[ -z "$(ls -A "$W/tmp")" ] || fail "files were left in TMPDIR: $(ls -A "$W/tmp")"

need_free 3 bench_imagine_zimage
bench_tokenizer
TMPDIR="$W/tmp" expect 0 "$CQ" bench imagine --model zimage "${TOK[@]}" --layers 1 --steps 1 --size 256 --threads 2
has out "ONLY 2 of the 36 text tower layers and 1 of the 30 denoiser layers are built (--layers)"
has out "Z-Image Turbo text to image, real configuration, random weights"
has out "Qwen3-4B (36 layers, the first 35 run"
has out "27 tokens, 27 caption rows"
has out "text tower (27 tokens)"
has out "caption prepare (27 rows)"
has out "step 1/1 (256x256, 256 tokens)"
has out "VAE decode (256x256)"
has out "8 steps projected"
has out "values finite throughout"
[ -z "$(ls -A "$W/tmp")" ] || fail "files were left in TMPDIR: $(ls -A "$W/tmp")"

finish "bench_imagine_zimage"
