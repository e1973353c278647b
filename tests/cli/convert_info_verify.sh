#!/usr/bin/env bash
# convert_info_verify.sh — the `cortiq convert | info | verify` commands as a
# user meets them: --help texts, exit codes (0 ok, 1 bad file, 2 usage),
# converting a small diffusers-style tree (built here with printf) with
# defaults and with rules, info/verify on a good, a corrupted and a truncated
# file. Usage: bash convert_info_verify.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"

# ---- building safetensors files without any tool but bash ----
le64() { for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $((($1 >> (8 * i)) & 255)))"; done; }
floats() { # N little-endian f32 values from a fixed pattern of normal numbers
    local p=('\x00\x00\x80\x3f' '\x00\x00\x00\xbf' '\x00\x00\x80\x3e' '\xcd\xcc\x4c\x3d' '\x00\x00\x40\xc0'
        '\x9a\x99\x19\x3e' '\x00\x00\x00\x00' '\x66\x66\x66\xbf')
    local i
    for ((i = 0; i < $1; i++)); do printf "${p[$(((i * 7 + i / 5) % 8))]}"; done
}
mkst() { # FILE HEADER-JSON N-FLOATS
    local h=$2
    while ((${#h} % 8)); do h="$h "; done
    { le64 ${#h}; printf '%s' "$h"; floats "$3"; } >"$1"
}

SRC=$W/pipe
mkdir -p "$SRC/transformer" "$SRC/vae" "$SRC/tokenizer" "$SRC/scheduler"
cat >"$SRC/model_index.json" <<'EOF'
{"_class_name": "QwenImage21Pipeline", "transformer": ["diffusers", "QwenImage21Transformer2DModel"],
 "vae": ["diffusers", "AutoencoderKLQwenImage21"], "tokenizer": ["transformers", "Qwen2Tokenizer"],
 "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"]}
EOF
echo '{"shift": 1.0}' >"$SRC/scheduler/scheduler_config.json"
echo '{"_class_name": "QwenImage21Transformer2DModel", "num_layers": 1, "num_attention_heads": 2, "attention_head_dim": 32}' \
    >"$SRC/transformer/config.json"
echo '{"_class_name": "AutoencoderKLQwenImage21"}' >"$SRC/vae/config.json"
echo '{"version": "1.0", "added_tokens": [{"id": 3, "content": "<|im_end|>"}], "model": {"vocab": {}}}' \
    >"$SRC/tokenizer/tokenizer.json"
echo '{"eos_token": "<|im_end|>", "chat_template": "{{ messages }}"}' >"$SRC/tokenizer/tokenizer_config.json"
# proj.weight [4,64] at 0..1024, proj.bias [4] at 1024..1040, odd.weight [2,40] at 1040..1360
mkst "$SRC/transformer/diffusion_pytorch_model.safetensors" \
    '{"proj.weight":{"dtype":"F32","shape":[4,64],"data_offsets":[0,1024]},"proj.bias":{"dtype":"F32","shape":[4],"data_offsets":[1024,1040]},"odd.weight":{"dtype":"F32","shape":[2,40],"data_offsets":[1040,1360]}}' 340
mkst "$SRC/vae/diffusion_pytorch_model.safetensors" \
    '{"decoder.conv.weight":{"dtype":"F32","shape":[2,1,3,3],"data_offsets":[0,72]}}' 18

# ---- help and usage ----
expect 0 "$CQ" --help
has out "convert"
for c in convert info verify; do
    expect 0 "$CQ" $c --help
    has out "usage: cortiq $c"
    expect 0 "$CQ" help $c
    has out "usage: cortiq $c"
done
expect 2 "$CQ" convert
has err "missing the source folder"
expect 2 "$CQ" convert "$SRC"
has err "missing -o"
expect 2 "$CQ" convert "$SRC" -o "$W/x.cmf" --quant nope
has err "unknown codec 'nope'"
expect 2 "$CQ" convert "$SRC" -o "$W/x.cmf" --quant vbit
has err "cannot be written"
expect 2 "$CQ" convert "$SRC" -o "$W/x.cmf" --quant-rule 'dit.*'
has err "GLOB=CODEC"
expect 2 "$CQ" convert "$SRC" -o "$W/x.cmf" --bogus
expect 2 "$CQ" info
expect 2 "$CQ" info --bogus x.cmf
expect 2 "$CQ" verify a.cmf b.cmf
expect 2 "$CQ" nosuchcommand

# ---- convert with defaults; piped stderr stays quiet ----
expect 0 "$CQ" convert "$SRC" -o "$W/p.cmf"
has out "wrote $W/p.cmf: qwen_image21 pipeline"
has out "q8_2f"
[ -s "$W/err" ] && fail "convert wrote to a piped stderr: $(cat "$W/err")"
expect 0 "$CQ" info "$W/p.cmf"
has out "qwen_image21"
has out "dit.config_json"
has out "vae.config_json"
has out "chat template yes"
has out "eos ids 3"
expect 0 "$CQ" info "$W/p.cmf" --tensors
grep -q "^dit.proj.weight  *q8_2f  *\[4, 64\]" "$W/out" || fail "info --tensors: dit.proj.weight not q8_2f [4, 64]"
grep -q "^dit.proj.bias  *f32 " "$W/out" || fail "info --tensors: dit.proj.bias not f32"
grep -q "^vae.decoder.conv.weight  *f16  *\[2, 1, 3, 3\]" "$W/out" || fail "info --tensors: vae conv not f16 4-D"
expect 0 "$CQ" info "$W/p.cmf" --json
has out '"arch_name":	"qwen_image21"'
has out '"tokenizer":	true'
expect 0 "$CQ" verify "$W/p.cmf"
has out "OK"

# ---- rules: q4tp for the DiT, with a reported fallback for cols 40 ----
expect 0 "$CQ" convert "$SRC" -o "$W/r.cmf" --quant-rule 'dit.*=q4tp' --quant-rule 'vae.*=f32' --quiet
[ -s "$W/out" ] && fail "--quiet printed: $(cat "$W/out")"
expect 0 "$CQ" info "$W/r.cmf" --tensors
grep -q "^dit.proj.weight  *q4tp " "$W/out" || fail "rule: dit.proj.weight not q4tp"
grep -q "^dit.odd.weight  *q8_2f " "$W/out" || fail "rule: dit.odd.weight did not fall back to q8_2f"
grep -q "^vae.decoder.conv.weight  *f32 " "$W/out" || fail "rule: vae conv not f32"
expect 0 "$CQ" convert "$SRC" -o "$W/r.cmf" --quant-rule 'dit.*=q4tp'
has out "dit.odd.weight: q4tp -> q8_2f"
expect 0 "$CQ" verify "$W/r.cmf"

# ---- --drop leaves tensors out; a pattern that matches nothing is an error ----
expect 0 "$CQ" convert "$SRC" -o "$W/d.cmf" --drop 'dit.odd.*'
has out "left out (--drop): "
expect 0 "$CQ" info "$W/d.cmf" --tensors
grep -q "^dit.odd." "$W/out" && fail "--drop: dit.odd.* still in the file"
grep -q "^dit.proj.weight " "$W/out" || fail "--drop: dit.proj.weight went missing"
# a component left without any weights is no pack: refused, nothing written
expect 1 "$CQ" convert "$SRC" -o "$W/d3.cmf" --drop 'vae.decoder.*'
has err "leaves the component 'vae' without any of its 1 tensors"
expect 1 "$CQ" convert "$SRC" -o "$W/d3.cmf" --drop '*'
has err "without any of its"
[ -e "$W/d3.cmf" ] && fail "--drop '*': a file was written"
ls -A "$W" | grep -q cortiq- && fail "--drop: a temporary was left behind"
# the output must be a .cmf file, never standard output or a device
expect 2 "$CQ" convert "$SRC" -o "$W/d3.bin"
has err "name the output \\*.cmf"
expect 2 "$CQ" convert "$SRC" -o -
mkfifo "$W/fifo.cmf"
expect 1 timeout 10 "$CQ" convert "$SRC" -o "$W/fifo.cmf"
has err "is a FIFO (named pipe), not a file cortiq will replace"
[ -p "$W/fifo.cmf" ] || fail "convert replaced a FIFO"
expect 1 "$CQ" convert "$SRC" -o "$W/d2.cmf" --drop 'vae.nothing.*'
has err "matches no tensor"
[ -e "$W/d2.cmf" ] && fail "--drop typo: a file was written"
expect 2 "$CQ" convert "$SRC" -o "$W/d2.cmf" --drop

# ---- a lone component folder gets dit.* names ----
expect 0 "$CQ" convert "$SRC/transformer" -o "$W/c.cmf" --quant f16
expect 0 "$CQ" info "$W/c.cmf" --tensors
grep -q "^dit.proj.weight  *f16 " "$W/out" || fail "component: dit.proj.weight not f16"
has out "tokenizer:  no"

# ---- a corrupted tensor: info still opens it, verify names it ----
off=$("$CQ" info "$W/p.cmf" --json --tensors | awk '/"name":.*"dit.proj.weight"/{f=1} f&&/"offset"/{gsub(/[^0-9]/,"");print;exit}')
[ -n "$off" ] || fail "could not find dit.proj.weight's offset"
cp "$W/p.cmf" "$W/bad.cmf"
printf '\x5a' | dd of="$W/bad.cmf" bs=1 seek=$((off + 5)) conv=notrunc status=none
expect 0 "$CQ" info "$W/bad.cmf"
expect 1 "$CQ" verify "$W/bad.cmf"
has err "dit.proj.weight"
has err "CQ_ERR_HASH"

# ---- truncated, foreign and missing files ----
head -c 2000 "$W/p.cmf" >"$W/trunc.cmf"
expect 1 "$CQ" info "$W/trunc.cmf"
expect 1 "$CQ" verify "$W/trunc.cmf"
echo "not a model" >"$W/text.cmf"
expect 1 "$CQ" info "$W/text.cmf"
expect 1 "$CQ" verify "$W/missing.cmf"
expect 1 "$CQ" convert "$W/nowhere" -o "$W/n.cmf"
has err "nowhere"
expect 1 "$CQ" convert "$SRC" -o "$W/no/such/dir/n.cmf"
[ -e "$W/n.cmf" ] && fail "a failed convert left $W/n.cmf"

# ---- files from the format's reference Python writer (committed fixtures) ----
FIX=$(cd "$(dirname "$0")/../fixtures/pywriter" 2>/dev/null && pwd)
if [ -n "$FIX" ] && [ -f "$FIX/tiny-Q8_ROW.cmf" ]; then
    expect 0 "$CQ" info "$FIX/tiny-Q8_ROW.cmf"
    has out "tiny-qwen"
    has out "masks:      2"
    expect 0 "$CQ" verify "$FIX/tiny-Q8_ROW.cmf"
    expect 0 "$CQ" info "$FIX/tiny-F32-00002-of-00004.cmf" --json
    has out '"count":	4'
else
    fail "fixtures/pywriter not found"
fi

finish "convert, info and verify"
