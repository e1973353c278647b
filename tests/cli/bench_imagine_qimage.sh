#!/usr/bin/env bash
# bench_imagine_qimage.sh — `cortiq bench imagine --model qimage`: its usage errors (exit 2), then the whole
# benchmark on the CPU at its smallest settings (the released widths with one denoiser layer and one text
# layer, a 256 px image, two steps): the pack written to TMPDIR, mapped and removed, the Qwen-Image pipeline
# loaded and run, and the report's phase table there with finite values. The file is 1.2 GiB (the 152064-row
# embedding and the VAE are there at full size); the run takes about 15 s on two cores. Skipped (77) when the
# scratch directory's disk has less than 3 GiB free.
# Usage: bash bench_imagine_qimage.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"

expect 0 "$CQ" bench imagine --help
has out "qimage"
has out "Qwen2.5-VL-7B"
has out "qimage_edit_plus  Qwen-Image-Edit-2511"
has out "--images N"
B=(bench imagine --model qimage)
refused "--model wants one of qi21, zimage, qimage, qimage_edit_plus, got 'qimage2'" bench imagine --model qimage2
refused "--layers wants an integer in \[1, 60\]" "${B[@]}" --layers 61
refused "--layers wants an integer in \[1, 60\]" bench imagine --layers 0 --model qimage
# the pipeline refuses one step: so does the benchmark, before anything is written
refused "--steps wants an integer in \[2, 100\]" "${B[@]}" --steps 1
refused "--steps" "${B[@]}" --steps 101
refused "q8_2f or q4tp" "${B[@]}" --quant bf16
# the pipeline's template is its own
refused "--chat-template: Qwen-Image's pipeline uses its own fixed template" "${B[@]}" --chat-template "$W/any.jinja"
# Qwen-Image-Edit-2511's edit: its input pictures' count checked with the line (a run is not made here: its VAE
# encodes each picture at 1024x1024, about a minute on two cores)
refused "--images: Qwen-Image draws from text alone" "${B[@]}" --images 2
refused "--images: Qwen-Image-2.1 draws from text alone" bench imagine --images 1
refused "--images wants an integer in \[1, 8\]" bench imagine --model qimage_edit_plus --images 9
refused "--images wants an integer in \[1, 8\]" bench imagine --model qimage_edit_plus --images 0
refused "--layers wants an integer in \[1, 60\]" bench imagine --model qimage_edit_plus --layers 61
# a missing tokenizer fails before anything is written
mkdir -p "$W/tmp"
TMPDIR="$W/tmp" expect 1 "$CQ" bench imagine --model qimage --tokenizer "$W/no-such-tokenizer.json"
has err "tokenizer"
[ -z "$(ls -A "$W/tmp")" ] || fail "files were left in TMPDIR: $(ls -A "$W/tmp")"
TMPDIR="$W/tmp" expect 1 "$CQ" bench imagine --model qimage_edit_plus --images 1 --tokenizer "$W/no-such-tokenizer.json"
has err "tokenizer"
[ -z "$(ls -A "$W/tmp")" ] || fail "files were left in TMPDIR: $(ls -A "$W/tmp")"

need_free 3 bench_imagine_qimage
bench_tokenizer
TMPDIR="$W/tmp" expect 0 "$CQ" bench imagine --model qimage "${TOK[@]}" --layers 1 --size 256 --threads 2
has out "ONLY 1 of the 28 text tower layers and 1 of the 60 denoiser layers are built (--layers)"
has out "Qwen-Image text to image, real configuration, random weights"
has out "Qwen2.5-VL-7B language model (28 layers"
has out "58 tokens, 24 rows after the system turn"
has out "text tower (58 tokens)"
has out "prefill (24 text rows)"
has out "step 1/2 (256x256, 256 tokens)"
has out "step 2/2 (256x256, 256 tokens)"
has out "VAE decode (256x256)"
has out "50 steps projected"
has out "values finite throughout"
[ -z "$(ls -A "$W/tmp")" ] || fail "files were left in TMPDIR: $(ls -A "$W/tmp")"

finish "bench_imagine_qimage"
