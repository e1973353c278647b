#!/usr/bin/env bash
# video_ltx2.sh — `cortiq video` as a user meets it, on the tiny LTX-2.5 pipeline of tests/golden/ltx2_pipe
# (tools/golden_ltx2_pipe.py) converted with `cortiq convert` (f32): the distilled case's prompt and settings
# written as an MP4, PNG frames and a WAV; the MP4 read back by ffprobe / ffmpeg (stream types, codecs, frame
# count and rate, both durations), its first decoded frame against the first PNG (H.264's loss, stated below),
# the PNG frames against diffusers' own frames for the same seed (8-bit rounding: at most 1 level apart), the
# WAV's format and length; --no-audio; then refusals (exit 2 before any work, or 1 for an unwritable output),
# each leaving no file behind and an existing target untouched. Without FFmpeg in the build it checks the
# fallback (frames, WAV and the mux hint). Skips (77) without the golden folder or python3.
# Usage: bash video_ltx2.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
HERE=$(cd "$(dirname "$0")" && pwd)
G=$HERE/../golden/ltx2_pipe
. "$HERE/common.bash"
if [ ! -f "$G/index.json" ] || [ ! -d "$G/model" ]; then
    echo "video_ltx2: skipped: no golden folder $G"
    exit 77
fi
if ! command -v python3 >/dev/null; then
    echo "video_ltx2: skipped: no python3 for the checks"
    exit 77
fi

expect 0 "$CQ" video --help
has out "--frames N"
has out "--stg-blocks"
expect 0 "$CQ" --help
has out "video"
expect 0 "$CQ" convert "$G/model" -o "$W/ltx.cmf" --quant f32 -q

ARGS=(--size 64x32 --frames 9 --fps 24 --prompt-tokens 32 --seed 42)
PROMPT="  a red fox runs, 2 birds sing  "
expect 0 "$CQ" video "$W/ltx.cmf" "$PROMPT" -o "$W/fox.mp4" "${ARGS[@]}" --frames-dir "$W/frames" --wav "$W/fox.wav"
has err "denoising"
has err "time: load"
has err "PNG frames into $W/frames"
[ -f "$W/frames/frame_00008.png" ] || fail "no ninth frame"
[ -e "$W/frames/frame_00009.png" ] && fail "a tenth frame"
ls "$W" | grep -q '\.tmp' && fail "a temporary was left: $(ls "$W")"

# the PNG frames against diffusers' frames (float in [0, 1]): 8-bit rounding apart, at most one level
if command -v ffmpeg >/dev/null; then
    for f in 0 4 8; do
        ffmpeg -v error -y -i "$W/frames/frame_0000$f.png" -f rawvideo -pix_fmt rgb24 "$W/f$f.rgb" ||
            fail "ffmpeg cannot read frame $f"
    done
    python3 - "$G/cases/distilled.safetensors" "$W" <<'EOF' || fail "the frames differ from diffusers' beyond rounding"
import json, struct, sys
path, w = sys.argv[1], sys.argv[2]
with open(path, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    head = json.loads(f.read(n))
    base = 8 + n
    meta = head["frames"]
    F, H, W, C = meta["shape"]
    f.seek(base + meta["data_offsets"][0])
    vals = struct.unpack("<%df" % (F * H * W * C), f.read(4 * F * H * W * C))
worst = 0
for k in (0, 4, 8):
    got = open(f"{w}/f{k}.rgb", "rb").read()
    assert len(got) == H * W * C, len(got)
    ref = vals[k * H * W * C:(k + 1) * H * W * C]
    worst = max(worst, max(abs(g - r * 255.0) for g, r in zip(got, ref)))
print(f"frames 0, 4, 8 against diffusers: max |png - 255 x ref| {worst:.3f} levels")
sys.exit(0 if worst <= 1.0 else 1)
EOF
fi

# the WAV: 16-bit PCM, 48 kHz stereo, the vocoder's 15840 samples
python3 - "$W/fox.wav" <<'EOF' || fail "the WAV is not 48 kHz stereo 16-bit with 15840 frames"
import struct, sys
d = open(sys.argv[1], "rb").read()
assert d[:4] == b"RIFF" and d[8:12] == b"WAVE"
i, fmt, n = 12, None, None
while i + 8 <= len(d):
    cid, size = d[i:i + 4], struct.unpack("<I", d[i + 4:i + 8])[0]
    if cid == b"fmt ":
        fmt = struct.unpack("<HHIIHH", d[i + 8:i + 24])
    if cid == b"data":
        n = size
    i += 8 + size + (size & 1)
print("wav", fmt, n)
assert fmt[0] == 1 and fmt[1] == 2 and fmt[2] == 48000 and fmt[5] == 16 and n == 15840 * 4
EOF

if [ -f "$W/fox.mp4" ]; then
    has err "wrote $W/fox.mp4 (64x32, 9 frames at 24 fps, 48 kHz stereo sound)"
    if command -v ffprobe >/dev/null; then
        ffprobe -v error -show_entries stream=codec_type,codec_name,nb_frames,r_frame_rate,sample_rate,channels,duration \
            -show_entries format_tags=comment,description -of default=nw=1 "$W/fox.mp4" >"$W/probe" 2>&1
        for want in "codec_type=video" "codec_type=audio" "codec_name=aac" "nb_frames=9" "r_frame_rate=24/1" \
            "sample_rate=48000" "channels=2" "duration=0.375000" "TAG:description=  a red fox runs, 2 birds sing  " \
            "TAG:comment=seed 42, model ltx.cmf"; do
            grep -qF -- "$want" "$W/probe" || fail "ffprobe lacks '$want': $(tr '\n' ' ' <"$W/probe")"
        done
        # the sound: 0.33 s (9 latent frames -> 33 mel frames -> 5280 samples at 16 kHz), give or take AAC's frames
        python3 - "$W/probe" <<'EOF' || fail "the sound's duration is not about 0.33 s"
import re, sys
d = [float(x) for x in re.findall(r"duration=([0-9.]+)", open(sys.argv[1]).read())]
assert any(abs(x - 0.33) < 0.03 for x in d), d
EOF
        # H.264's loss on the first frame, measured where the codec works: the decoded MP4's Y'CbCr 4:2:0 planes
        # against the first PNG converted as the writer converts it (BT.709, limited range, 4:2:0). In RGB the
        # comparison would mostly measure chroma subsampling of this random model's pixel-level noise.
        ffmpeg -v error -y -i "$W/fox.mp4" -frames:v 1 -f rawvideo -pix_fmt yuv420p "$W/m0.yuv" || fail "ffmpeg decode"
        ffmpeg -v error -y -i "$W/frames/frame_00000.png" -vf "scale=out_color_matrix=bt709:out_range=tv" \
            -f rawvideo -pix_fmt yuv420p "$W/p0.yuv" || fail "ffmpeg convert"
        python3 - "$W/m0.yuv" "$W/p0.yuv" <<'EOF' || fail "the MP4's first frame is further from the PNG than H.264 at crf 18 goes"
import sys
a, b = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
n = 64 * 32
assert len(a) == len(b) == n * 3 // 2
y = sum(abs(p - q) for p, q in zip(a[:n], b[:n])) / n
c = sum(abs(p - q) for p, q in zip(a[n:], b[n:])) / (n // 2)
print(f"first frame: MP4 against PNG mean |d| {y:.2f} levels (Y'), {c:.2f} (Cb, Cr)")
sys.exit(0 if y <= 6.0 and c <= 8.0 else 1)
EOF
    fi
    # --no-audio: a picture stream only
    expect 0 "$CQ" video "$W/ltx.cmf" "$PROMPT" -o "$W/quiet.mp4" "${ARGS[@]}" --no-audio -q
    if command -v ffprobe >/dev/null; then
        ffprobe -v error -show_entries stream=codec_type -of csv=p=0 "$W/quiet.mp4" >"$W/probe2"
        [ "$(tr '\n' ' ' <"$W/probe2")" = "video " ] || fail "--no-audio: streams $(cat "$W/probe2")"
    fi
else
    has err "this build has no FFmpeg libraries"
    has err "ffmpeg"
fi

# ---- image to video and two stages (the pack with tests/fixtures/ltx2_ups16's upscaler beside the golden's
# components, as a released folder carries latent_upsampler/) ----
mkdir -p "$W/m2"
for e in "$G/model"/*; do ln -sfn "$e" "$W/m2/$(basename "$e")"; done
[ -e "$W/m2/latent_upsampler" ] || ln -sfn "$HERE/../fixtures/ltx2_ups16" "$W/m2/latent_upsampler"
expect 0 "$CQ" convert "$W/m2" -o "$W/ltx2s.cmf" --quant f32 -q
FIRST=$HERE/../golden/resample_bilinear/down_80x40_in.png
expect 0 "$CQ" video "$W/ltx2s.cmf" "a fox runs" -o "$W/two.mp4" --size 128x64 --frames 9 --prompt-tokens 32 \
    --two-stage --image "$FIRST" --frames-dir "$W/two_frames"
has err "upscale"
has err "11/11"
has err "128x64, 9 frames"
[ -f "$W/two_frames/frame_00008.png" ] || fail "the two-stage run lacks its ninth frame"
if command -v ffprobe >/dev/null && [ -f "$W/two.mp4" ]; then
    ffprobe -v error -select_streams v:0 -show_entries stream=width,height,nb_read_frames -count_frames \
        -of csv=p=0 "$W/two.mp4" >"$W/two.txt" || fail "ffprobe cannot read the two-stage MP4"
    grep -qx "128,64,9" "$W/two.txt" || fail "the two-stage MP4 is $(cat "$W/two.txt"), not 128x64 with 9 frames"
fi
expect 0 "$CQ" video "$W/ltx2s.cmf" "a fox runs" --wav "$W/i2v.wav" --frames-dir "$W/i2v_frames" "${ARGS[@]}" \
    --image "$FIRST" -q
[ -f "$W/i2v_frames/frame_00008.png" ] || fail "the image-to-video run lacks its ninth frame"
# the first frame as given (no H.264 re-compression): another start, so other frames
expect 0 "$CQ" video "$W/ltx2s.cmf" "a fox runs" --frames-dir "$W/i2v0_frames" "${ARGS[@]}" --image "$FIRST" \
    --image-crf 0 -q
cmp -s "$W/i2v0_frames/frame_00000.png" "$W/i2v_frames/frame_00000.png" && fail "--image-crf 0 changed nothing"
expect 0 "$CQ" video "$W/ltx.cmf" "$PROMPT" --frames-dir "$W/anc_frames" "${ARGS[@]}" --sampler ancestral -q
[ -f "$W/anc_frames/frame_00008.png" ] || fail "the ancestral run lacks its ninth frame"
cmp -s "$W/anc_frames/frame_00004.png" "$W/frames/frame_00004.png" && fail "the ancestral sampler drew the Euler frames"

# ---- refusals: nothing written, an existing target kept ----
echo keep >"$W/keep.mp4"
refused "8k + 1" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" --size 64x32 --frames 10 --prompt-tokens 32
refused "multiple of 32" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" --size 48x32 --frames 9 --prompt-tokens 32
refused "at most 32" video "$W/ltx.cmf" "a long prompt that the tiny tokenizer turns into far more than thirty two tokens" \
    -o "$W/keep.mp4" --size 64x32 --frames 9 --prompt-tokens 32
refused "registers" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" --size 64x32 --frames 9 --prompt-tokens 36
refused "STG block 5" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" "${ARGS[@]}" --stg 1 --stg-blocks 5
refused "no block" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" "${ARGS[@]}" --stg 1
refused "ladder" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" "${ARGS[@]}" --steps 4 --sigmas ladder
refused "latent upsampler" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" "${ARGS[@]}" --two-stage
refused "multiple of 64" video "$W/ltx2s.cmf" "a fox" -o "$W/keep.mp4" --size 96x64 --frames 9 --prompt-tokens 32 \
    --two-stage
refused "no output" video "$W/ltx.cmf" "a fox" "${ARGS[@]}"
refused "--size wants WxH" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" --size 64
refused "--rescale wants" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" --rescale 2
refused "image-crf" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" "${ARGS[@]}" --image-crf 60
refused "--sampler wants" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" "${ARGS[@]}" --sampler heun
refused "unknown option" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" --bogus
[ "$(cat "$W/keep.mp4")" = keep ] || fail "a refused run changed the existing target"
# a first frame that cannot be read: a clear error before any work, nothing written
expect 1 "$CQ" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" "${ARGS[@]}" --image "$W/no-such.png"
has err "no-such.png"
expect 1 "$CQ" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" "${ARGS[@]}" --image "$W/ltx.cmf"
[ "$(cat "$W/keep.mp4")" = keep ] || fail "a run with a bad first frame changed the existing target"
expect 1 "$CQ" video "$W/ltx.cmf" "a fox" -o "$W/no/such/dir/x.mp4" "${ARGS[@]}"
has err "x.mp4"
mkdir -p "$W/adir"
expect 1 "$CQ" video "$W/ltx.cmf" "a fox" -o "$W/adir" "${ARGS[@]}"
expect 1 "$CQ" video "$W/no-such.cmf" "a fox" -o "$W/x.mp4" "${ARGS[@]}"
[ -e "$W/x.mp4" ] && fail "a failed run left $W/x.mp4"
# packs that are not an LTX-2 pipeline: the DiT alone, an image model
expect 1 "$CQ" video "$HERE/../../models/shapes.cmf" "a fox" -o "$W/x.mp4" "${ARGS[@]}"
has err "needs an LTX-2 video pipeline"
expect 0 "$CQ" convert "$HERE/../golden/ltx2_dit/model" -o "$W/dit.cmf" --quant f32 -q
expect 1 "$CQ" video "$W/dit.cmf" "a fox" -o "$W/x.mp4" "${ARGS[@]}"
has err "tokenizer"
ls "$W" | grep -q '\.tmp' && fail "a temporary was left: $(ls "$W")"

# ---- Ctrl-C: during the steps, and later (the decode or the writing): exit 130, no file, the old target kept ----
echo keep >"$W/keep.mp4"
for delay in 1 7; do
    "$CQ" video "$W/ltx.cmf" "a fox" -o "$W/keep.mp4" --size 512x512 --frames 65 --prompt-tokens 32 \
        --frames-dir "$W/intr_frames" >"$W/out" 2>"$W/err" &
    pid=$!
    sleep "$delay"
    kill -s INT $pid 2>/dev/null
    wait $pid
    rc=$?
    if [ "$rc" -eq 130 ]; then
        has err "interrupted by SIGINT"
        [ "$(cat "$W/keep.mp4")" = keep ] || fail "an interrupted run (after ${delay} s) replaced the target"
        [ -e "$W/intr_frames" ] && fail "an interrupted run (after ${delay} s) left its frame directory"
    elif [ "$rc" -eq 0 ]; then
        # finished before the signal: then the files are whole
        [ -f "$W/intr_frames/frame_00064.png" ] || fail "a finished run lacks its last frame"
        rm -rf "$W/intr_frames"
        echo keep >"$W/keep.mp4"
    else
        fail "interrupted after ${delay} s: exit $rc: $(head -c 300 "$W/err")"
    fi
    ls -a "$W" | grep -q 'cortiq-' && fail "a temporary was left after ${delay} s: $(ls -a "$W")"
done
finish video_ltx2
