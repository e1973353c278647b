#!/usr/bin/env bash
# forward_ltx2.sh — `cortiq forward` on LTX-2.5's audio-video denoiser: the tiny golden model
# (tests/golden/ltx2_dit, tools/golden_ltx2_dit.py) converted with `cortiq convert` (f32), run on every golden
# case's inputs, both outputs (`sample`, `audio_sample`) checked against the reference's within 1e-4 of its RMS,
# then refusals (exit 1, a message naming the tensor, no output file left behind). The golden case files hold
# the reference's inputs and outputs but not the grid (num_frames, height, width, fps, ...: plain ints in the
# reference's call, recorded in index.json), so ltx2_st.py writes each IN: the case's input tensors plus the
# grid and flags as scalars. (cortiq forward ignores tensors of other names, so the outputs could stay; they
# are left out to show the inputs alone suffice.) Skips (77) without the golden folder or python3.
# Usage: bash forward_ltx2.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
HERE=$(cd "$(dirname "$0")" && pwd)
G=$HERE/../golden/ltx2_dit
. "$HERE/common.bash"
if [ ! -f "$G/index.json" ] || [ ! -d "$G/model" ]; then
    echo "forward_ltx2: skipped: no golden folder $G"
    exit 77
fi
if ! command -v python3 >/dev/null; then
    echo "forward_ltx2: skipped: no python3 for the safetensors helper"
    exit 77
fi
ST() { python3 "$HERE/ltx2_st.py" "$@"; }

expect 0 "$CQ" forward --help
has out "audio_encoder_hidden_states"
has out "audio_sample"

expect 0 "$CQ" convert "$G/model" -o "$W/ltx2.cmf" --quant f32 -q

# ---- every golden case against the reference ----
for c in t2v sigmas f1a1 f1a9 stg isolate pertoken legacy; do
    ST inputs "$G/cases/$c.safetensors" "$G/index.json" "$c" "$W/$c.in.safetensors" ||
        { fail "$c: no inputs"; continue; }
    expect 0 "$CQ" forward "$W/ltx2.cmf" --inputs "$W/$c.in.safetensors" --output "$W/$c.out.safetensors"
    has out "sample \["
    ST compare "$W/$c.out.safetensors" "$G/cases/$c.safetensors" 1e-4 sample audio_sample ||
        fail "$c differs from the reference"
done
# the golden file whole (outputs and taps too: unknown names are ignored), no coords, the defaults
ST inputs "$G/cases/t2v.safetensors" "$G/index.json" t2v "$W/t2v.min.safetensors" all=1 drop=video_coords \
    drop=audio_coords drop=audio_timestep drop=audio_sigma drop=fps drop=audio_num_frames \
    drop=use_cross_timestep drop=isolate_modalities
expect 0 "$CQ" forward "$W/ltx2.cmf" -i "$W/t2v.min.safetensors" -o "$W/t2v.min.out.safetensors" --threads 1
ST compare "$W/t2v.min.out.safetensors" "$G/cases/t2v.safetensors" 1e-4 sample audio_sample ||
    fail "t2v with the defaults differs from the reference"

# ---- refusals ----
# refuse TEXT EDIT...: IN is the sigmas case with EDITs; forward exits 1 naming TEXT, leaving no output
refuse() {
    local text=$1
    shift
    rm -f "$W/x.safetensors"
    ST inputs "$G/cases/sigmas.safetensors" "$G/index.json" sigmas "$W/bad.safetensors" "$@" ||
        { fail "edit $*"; return; }
    expect 1 "$CQ" forward "$W/ltx2.cmf" --inputs "$W/bad.safetensors" --output "$W/x.safetensors"
    has err "$text"
    [ -e "$W/x.safetensors" ] && fail "a refused forward ($*) left an output file"
}
refuse "'hidden_states' is missing" drop=hidden_states
refuse "'audio_encoder_hidden_states' is missing" drop=audio_encoder_hidden_states
refuse "'sigma' is missing" drop=sigma
refuse "'num_frames' is missing" drop=num_frames
refuse "'encoder_hidden_states' is \[6, 63\]; the model takes \[L, 64\]" narrow=encoder_hidden_states
refuse "'audio_hidden_states' is \[9, 11\]" narrow=audio_hidden_states
refuse "'hidden_states' has 17 tokens" short=hidden_states
refuse "num_frames x height x width" int=num_frames:4
refuse "audio_num_frames is 8" int=audio_num_frames:8
refuse "'hidden_states' holds a non-finite value" nan=hidden_states
refuse "'audio_timestep' holds a non-finite value" nan=audio_timestep
refuse "'video_coords'" int=fps:25
refuse "'spatio_temporal_guidance_blocks' names block 2" int=spatio_temporal_guidance_blocks:2
refuse "'use_cross_timestep' is 2" int=use_cross_timestep:2
refuse "'encoder_attention_mask' masks row 0" int=encoder_attention_mask:0
refuse "'hidden_states' is F16" f16=hidden_states
ST inputs "$G/cases/pertoken.safetensors" "$G/index.json" pertoken "$W/bad.safetensors" drop=audio_timestep
expect 1 "$CQ" forward "$W/ltx2.cmf" --inputs "$W/bad.safetensors" --output "$W/x.safetensors"
has err "'audio_timestep' is missing"
[ -e "$W/x.safetensors" ] && fail "a refused forward left an output file"
expect 1 "$CQ" forward "$W/ltx2.cmf" --inputs "$W/t2v.in.safetensors" --output "$W/x.safetensors" --no-cache
has err "Qwen-Image-2.1 packs only"

finish "forward_ltx2"
