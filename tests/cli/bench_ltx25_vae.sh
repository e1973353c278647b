#!/usr/bin/env bash
# bench_ltx25_vae.sh — `cortiq bench ltx25-vae` as a user meets it: the dispatcher's list, --help, usage errors
# (exit 2), the refusal of a decode that cannot fit (exit 1, with the estimate), and the whole benchmark on the
# CPU with --tiny (small widths, the released factors) in each video mode: the pack written, mapped, the three
# decoders loaded and timed, the report's lines there with positive numbers. The released widths are not run
# here (see docs/PERFORMANCE.md).
# Usage: bash bench_ltx25_vae.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"

expect 0 "$CQ" bench --help
has out "ltx25-vae"
expect 0 "$CQ" bench ltx25-vae --help
has out "--size WxH"
has out "stream|untiled|tiled"
has out "timestep_conditioning false"
has out "cuda"
refused "multiple of 32" bench ltx25-vae --size 100x64
refused "WxH" bench ltx25-vae --size 512
refused "WxH" bench ltx25-vae --size 512x
refused "8k + 1" bench ltx25-vae --frames 10
refused "stream, untiled or tiled" bench ltx25-vae --mode fast
refused "FxHxW" bench ltx25-vae --mode tiled --tile 1x2
refused "option of --mode tiled" bench ltx25-vae --tile 1x2x2
refused "--iters" bench ltx25-vae --iters 0
refused "--warmup" bench ltx25-vae --warmup 11
refused "--fps" bench ltx25-vae --fps 0
refused "unknown backend" bench ltx25-vae --backend nope
refused "unknown argument" bench ltx25-vae extra
"$CQ" gpu >"$W/gpu" 2>&1
if ! grep -q "cuda:0 " "$W/gpu"; then
    expect 1 "$CQ" bench ltx25-vae --backend cuda --tiny
    has err "creating the backend"
fi
# 8192 x 8192 x 1025 frames is 0.8 TB of frames alone: refused before any decode, the stream's need given
TMPDIR=$W expect 1 "$CQ" bench ltx25-vae --tiny --size 8192x8192 --frames 1025 --mode untiled --threads 2
has err "needs about"
has err "--mode stream needs about"

# positive: "NAME: 12.34 ms (median of ...)"
positive_ms() {
    local v
    v=$(grep -E "^$1" "$W/out" | sed -nE 's/.*: ([0-9]+\.[0-9]+) ms \(median of .*/\1/p' | head -1)
    if [ -z "$v" ] || ! awk -v x="$v" 'BEGIN { exit !(x > 0) }'; then fail "no positive ms on the '$1' line"; fi
}
for mode in stream untiled tiled; do
    extra=()
    [ "$mode" = tiled ] && extra=(--tile 1x1x2)
    TMPDIR=$W expect 0 "$CQ" bench ltx25-vae --tiny --size 96x64 --frames 17 --mode "$mode" "${extra[@]}" \
        --iters 2 --threads 2
    has out "TINY widths"
    has out "96x64 px, 17 frames at 24 fps: 3 latent frames of 3x2 x 8 channels; 18 audio latent frames"
    has out "video decode 3x2x3 latents (FxHxW) -> 17 frames of 96x64 ($mode)"
    has out "audio decode 18 latent frames -> mel 2x69x16"
    has out "vocoder 69 mel frames -> 33120 samples x 2 at 48000 Hz (with BWE)"
    has out "median of 2 after 1 warm-up"
    has out "peak resident"
    positive_ms "video decode"
    positive_ms "audio decode"
    positive_ms "vocoder"
    grep -qE "^total \(video \+ audio \+ vocoder\): [0-9.]+ ms" "$W/out" || fail "no total line"
    if grep -q "non-finite" "$W/err"; then fail "$mode: the output holds non-finite values"; fi
done
has out "tiled: 12 boxes of 1x1x2 latents"
if ls "$W"/cortiq-bench-* >/dev/null 2>&1; then fail "a temporary pack was left in $W"; fi

finish "bench_ltx25_vae"
