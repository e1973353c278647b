#!/usr/bin/env bash
# integrity.sh — a damaged pack never draws a different picture. Copies of models/shapes.cmf with one
# byte flipped: inside a tensor the DiT reads (imagine refuses it naming the tensor and writes nothing;
# --no-verify draws anyway), in a directory record's offset (moves a tensor onto other bytes: refused at
# open naming the directory, by imagine, info and verify alike), in the header, and at 40 random offsets
# plus a few chosen envelope and directory bytes: each copy is either refused or draws exactly the
# intact file's PNG bytes. Also `cortiq bench hash` on an intact and a damaged copy, and the --help
# texts of --no-verify.
# Skipped (77) without the model. Usage: bash integrity.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
MODEL=$(cd "$(dirname "$0")/../.." && pwd)/models/shapes.cmf
[ -f "$MODEL" ] || { echo "skipped: $MODEL is absent"; exit 77; }
. "$(dirname "$0")/common.bash"

PROMPT="a red circle"
draw() { expect "$1" "$CQ" imagine "$2" "$PROMPT" --size 64x64 --steps 2 -q -o "$3" "${@:4}"; }

# flip FILE OFFSET MASK: XOR one byte in place
flip() {
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "\\x$(printf %02x $((b ^ $3)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
u64_at() { od -An -tu8 -j "$2" -N8 "$1" | tr -d ' '; } # little-endian hosts

"$CQ" info "$MODEL" --tensors --json >"$W/info.json" || fail "info --json failed"
# tensor_field NAME FIELD: a field of one tensor from info --json; tensor_index NAME: its directory position
tensor_field() {
    awk -v n="\"$1\"," -v f="\"$2\":" '/"tensors":\t\[/{t=1} t&&$1=="\"name\":"{hit=($2==n)} t&&hit&&$1==f{gsub(/[^0-9]/,"",$2);print $2;exit}' "$W/info.json"
}
tensor_index() {
    awk -v n="\"$1\"," '/"tensors":\t\[/{t=1} t&&$1=="\"name\":"{if($2==n){print i;exit} i++}' "$W/info.json"
}

# ---- the intact file: its picture is the reference ----
mkdir -p "$W/ok" "$W/d"
cp "$MODEL" "$W/ok/shapes.cmf"
draw 0 "$W/ok/shapes.cmf" "$W/ref.png"
[ -s "$W/ref.png" ] || fail "the intact model drew nothing"

# ---- one flipped byte inside a tensor the DiT reads ----
T=dit.transformer_blocks.0.attn.to_q.weight
off=$(tensor_field $T offset)
len=$(tensor_field $T bytes)
[ -n "$off" ] && [ -n "$len" ] || fail "could not find $T in info --json"
cp "$MODEL" "$W/d/shapes.cmf"
flip "$W/d/shapes.cmf" $((off + len / 2)) 4
rm -f "$W/x.png"
draw 1 "$W/d/shapes.cmf" "$W/x.png"
has err "tensor '$T' is damaged"
has err "cortiq verify"
has err "CQ_ERR_HASH"
[ -e "$W/x.png" ] && fail "a damaged tensor still wrote x.png"
draw 0 "$W/d/shapes.cmf" "$W/x.png" --no-verify
[ -s "$W/x.png" ] || fail "--no-verify: no picture"
expect 0 "$CQ" info "$W/d/shapes.cmf" # info does not read payloads
expect 1 "$CQ" verify "$W/d/shapes.cmf"
has err "$T"
expect 1 "$CQ" bench hash "$W/d/shapes.cmf" --runs 1 # hashes every tensor as loading checks it
has err "$T"
expect 0 "$CQ" bench hash "$W/ok/shapes.cmf" --runs 1
has out "every tensor matches"
expect 0 "$CQ" bench hash --mib 8 --runs 1 --threads 2
has out "2 threads:"
for c in imagine run forward; do
    expect 0 "$CQ" $c --help
    has out "--no-verify"
done

# ---- a directory record's offset moved by 16 KiB (onto another tensor's bytes) ----
idx=$(tensor_index $T)
[ -n "$idx" ] || fail "no directory index for $T"
dir_off=$(u64_at "$MODEL" 32)
cp "$MODEL" "$W/d/shapes.cmf"
flip "$W/d/shapes.cmf" $((dir_off + 16 + 56 * idx + 32 + 1)) 0x40
rm -f "$W/x.png"
draw 1 "$W/d/shapes.cmf" "$W/x.png"
has err "directory section is damaged"
has err "cortiq verify"
[ -e "$W/x.png" ] && fail "a moved directory entry still wrote x.png"
draw 1 "$W/d/shapes.cmf" "$W/x.png" --no-verify # the directory is checked all the same
has err "directory section is damaged"
expect 1 "$CQ" info "$W/d/shapes.cmf"
has err "directory section is damaged"
expect 1 "$CQ" verify "$W/d/shapes.cmf"
has err "section 'dir'"
expect 1 "$CQ" forward "$W/d/shapes.cmf" --inputs "$W/none.safetensors" --output "$W/o.safetensors"
has err "directory section is damaged"

# ---- a directory too damaged to parse: verify leads with the hash that failed ----
cp "$MODEL" "$W/d/shapes.cmf"
flip "$W/d/shapes.cmf" $((dir_off + 1)) 0x10 # the tensor count
expect 1 "$CQ" verify "$W/d/shapes.cmf"
has err "directory section is damaged"
has err "does not parse either"

# ---- a header byte ----
hdr_off=$(u64_at "$MODEL" 16)
cp "$MODEL" "$W/d/shapes.cmf"
flip "$W/d/shapes.cmf" $((hdr_off + 40)) 1
draw 1 "$W/d/shapes.cmf" "$W/x.png"
has err "header section is damaged"

# ---- never a different picture: random flips (fixed seed) and chosen envelope / directory bytes ----
size=$(stat -c %s "$MODEL")
seed=20240917
offsets=()
for ((k = 0; k < 40; k++)); do
    seed=$(((seed * 1103515245 + 12345) % 2147483648)) # 31 bits: no overflow in bash arithmetic
    hi=$((seed >> 7))
    seed=$(((seed * 1103515245 + 12345) % 2147483648))
    offsets+=("$(((hi * 128 + (seed >> 24)) % size)):$((1 << ((seed >> 20) % 8)))")
done
# envelope: flags, a known feature bit, data_off, data_len, vocab_off, vocab_len, header_hash, dir_hash;
# directory: a record's dtype, a shape dim, nbytes and hash, and the tensor count
for spec in 8:1 12:4 17:0x20 56:1 80:0x80 88:1 115:8 126:2; do offsets+=("$spec"); done
r=$((dir_off + 16 + 56 * idx))
for spec in $((r + 6)):1 $((r + 8)):1 $((r + 40)):1 $((r + 50)):0x10 $dir_off:1; do offsets+=("$spec"); done
refused=0 same=0
for spec in "${offsets[@]}"; do
    at=${spec%%:*} mask=${spec##*:}
    cp "$MODEL" "$W/d/shapes.cmf"
    flip "$W/d/shapes.cmf" "$at" $((mask))
    rm -f "$W/d/x.png"
    "$CQ" imagine "$W/d/shapes.cmf" "$PROMPT" --size 64x64 --steps 2 -q -o "$W/d/x.png" >"$W/out" 2>"$W/err"
    rc=$?
    if [ $rc -eq 0 ]; then
        if cmp -s "$W/d/x.png" "$W/ref.png"; then
            same=$((same + 1))
        else
            fail "flip at $at (mask $mask) was accepted and drew a different picture"
        fi
    elif [ $rc -eq 1 ]; then
        refused=$((refused + 1))
        [ -e "$W/d/x.png" ] && fail "flip at $at (mask $mask): refused but x.png was written"
        grep -q "error:" "$W/err" || fail "flip at $at: exit 1 without an error message"
    else
        fail "flip at $at (mask $mask): exit $rc: $(head -c 300 "$W/err")"
    fi
done
echo "single-byte flips: ${#offsets[@]}, refused $refused, drew the intact picture $same"

finish "integrity on load"
