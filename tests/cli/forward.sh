#!/usr/bin/env bash
# forward.sh — `cortiq forward` as a user meets it: --help, usage errors
# (exit 2), the tiny golden denoiser converted with `cortiq convert` and run
# on one golden case both ways (cached and --no-cache), each output checked
# against the reference velocity (max |err| / RMS(ref) <= 1e-4, computed with
# od + awk from the raw safetensors bytes, independent of cortiq), the tiny
# Qwen-Image denoiser on its masked golden case (when tests/golden/qimage is
# there), and failures (exit 1) that name what is wrong.
# Usage: bash forward.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
GOLDEN=$(cd "$(dirname "$0")/../golden/qi21" && pwd)
CASE=$GOLDEN/cases/cond2_adjacent.safetensors # model tiny_a: 4 text, two adjacent condition images, 4x6 target
. "$(dirname "$0")/common.bash"

# floats FILE NAME: the f32 values of tensor NAME of a safetensors file, one per line
floats() {
    local f=$1 name=$2 hlen entry offs a b
    hlen=$(od -A n -t u8 -N 8 "$f" | tr -d ' ')
    entry=$(head -c $((8 + hlen)) "$f" | tail -c "$hlen" | grep -o "\"$name\":{[^}]*}")
    echo "$entry" | grep -q '"dtype":"F32"' || { echo "no F32 tensor $name in $f" >&2; return 1; }
    offs=$(echo "$entry" | grep -o '"data_offsets":\[[0-9]*,[0-9]*\]' | tr -dc '0-9,')
    a=${offs%,*}
    b=${offs#*,}
    od -A n -t f4 -v -j $((8 + hlen + a)) -N $((b - a)) "$f" | tr -s ' ' '\n' | grep -v '^$'
}

# check OUT [TENSOR CASE]: TENSOR (velocity) of OUT vs the same tensor of CASE (the Qwen-Image-2.1 case)
check() {
    local t=${2:-velocity} c=${3:-$CASE}
    floats "$1" "$t" >"$W/got" || { fail "$1 has no $t"; return; }
    floats "$c" "$t" >"$W/want"
    local n
    n=$(wc -l <"$W/want")
    [ "$(wc -l <"$W/got")" -eq "$n" ] || { fail "$1: $(wc -l <"$W/got") values, expected $n"; return; }
    paste "$W/got" "$W/want" | awk -v tol=1e-4 -v what="$1" '
        { d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d; if ($1 != $1) nan = 1; s += $2 * $2; n++ }
        END { r = sqrt(s / n); printf "%s: max|err|/RMS(ref) = %.3g\n", what, m / r;
              if (nan || !(m / r <= tol)) exit 1 }' || fail "$1 differs from the reference"
}

# ---- help and usage ----
expect 0 "$CQ" forward --help
has out "velocity"
has out "hidden_states"
has out "--no-cache"
expect 0 "$CQ" help forward
has out "img_mask"
expect 2 "$CQ" forward
has err "missing the model"
expect 2 "$CQ" forward m.cmf --output o.safetensors
has err "missing --inputs"
expect 2 "$CQ" forward m.cmf --inputs i.safetensors
has err "missing --output"
expect 2 "$CQ" forward m.cmf --inputs i --output o --threads 0
has err "--threads"
expect 2 "$CQ" forward m.cmf --inputs i --output o --backend gpu9
has err "unknown backend"
expect 2 "$CQ" forward m.cmf --inputs i --output o --frobnicate
has err "unknown option"

# ---- the golden denoiser both ways ----
expect 0 "$CQ" convert "$GOLDEN/tiny_a" -o "$W/tiny_a.cmf" --quant f32 -q
expect 0 "$CQ" forward "$W/tiny_a.cmf" --inputs "$CASE" --output "$W/cached.safetensors"
has out "velocity \[24, 12\]"
has out "cached"
check "$W/cached.safetensors"
expect 0 "$CQ" forward "$W/tiny_a.cmf" -i "$CASE" -o "$W/full.safetensors" --no-cache --threads 1
has out "no cache"
check "$W/full.safetensors"

# ---- failures name what is wrong ----
expect 1 "$CQ" forward "$W/tiny_a.cmf" --inputs "$W/absent.safetensors" --output "$W/x.safetensors"
has err "absent.safetensors"
expect 1 "$CQ" forward "$W/absent.cmf" --inputs "$CASE" --output "$W/x.safetensors"
has err "absent.cmf"
expect 0 "$CQ" convert "$GOLDEN/tiny_b" -o "$W/tiny_b.cmf" --quant f32 -q
expect 1 "$CQ" forward "$W/tiny_b.cmf" --inputs "$CASE" --output "$W/x.safetensors"
has err "encoder_hidden_states"
[ -e "$W/x.safetensors" ] && fail "a failed forward left an output file"
expect 1 "$CQ" forward "$W/tiny_a.cmf" --inputs "$W/tiny_a.cmf" --output "$W/x.safetensors"
has err "tiny_a.cmf"

# ---- Qwen-Image: a text mask with a hole ----
QG=$(dirname "$0")/../golden/qimage
if [ -d "$QG" ]; then
    QCASE=$QG/cases/mask.safetensors
    expect 0 "$CQ" convert "$QG/dit" -o "$W/qimage.cmf" --quant f32 -q
    expect 0 "$CQ" forward "$W/qimage.cmf" --inputs "$QCASE" --output "$W/qimage.safetensors"
    has out "out \[8, 64\]"
    check "$W/qimage.safetensors" out "$QCASE"
    expect 1 "$CQ" forward "$W/qimage.cmf" --inputs "$QCASE" --output "$W/x.safetensors" --no-cache
    has err "Qwen-Image-2.1 packs only"
    expect 1 "$CQ" forward "$W/qimage.cmf" --inputs "$CASE" --output "$W/x.safetensors"
    has err "encoder_hidden_states"
fi

finish "forward"
