#!/usr/bin/env bash
# interrupt.sh — SIGINT, SIGTERM and SIGHUP stop `cortiq convert` and `cortiq imagine` cleanly:
# at several points of a conversion of a source large enough to take seconds, and of a drawing,
# the command exits 128 + the signal number with one line saying what was interrupted, finishes
# its progress line, and leaves no file and no temporary behind; a run the signal reached only
# after it finished must have written a complete file.
# Usage: bash interrupt.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
HERE=$(cd "$(dirname "$0")" && pwd)
M=$HERE/../../models/shapes.cmf

# ---- a 512 MiB component folder of zeros: eight [4096, 4096] f32 matrices ----
SRC=$W/big
mkdir -p "$SRC"
echo '{"_class_name": "QwenImage21Transformer2DModel"}' >"$SRC/config.json"
hdr='{'
for i in 0 1 2 3 4 5 6 7; do
    [ $i -gt 0 ] && hdr="$hdr,"
    hdr="$hdr\"w$i.weight\":{\"dtype\":\"F32\",\"shape\":[4096,4096],\"data_offsets\":[$((i * 67108864)),$(((i + 1) * 67108864))]}"
done
hdr="$hdr}"
while ((${#hdr} % 8)); do hdr="$hdr "; done
le64() { for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $((($1 >> (8 * i)) & 255)))"; done; }
{ le64 ${#hdr}; printf '%s' "$hdr"; head -c $((8 * 67108864)) /dev/zero; } >"$SRC/diffusion_pytorch_model.safetensors"

interrupted=0
# run CMD in the background, send SIG after DELAY seconds, check what it left
try() { # SIG DELAY OUT CMD...
    local sig=$1 delay=$2 out=$3
    shift 3
    rm -f "$out"
    "$@" >"$W/out" 2>"$W/err" &
    local pid=$!
    sleep "$delay"
    kill -s "$sig" $pid 2>/dev/null
    wait $pid
    local rc=$?
    local want=$((128 + $(kill -l "$sig")))
    if [ $rc -eq 0 ]; then # finished before the signal: the file must be whole
        [ -s "$out" ] || fail "$* finished (rc 0) without $out"
    elif [ $rc -eq $want ]; then
        interrupted=$((interrupted + 1))
        grep -q "interrupted by SIG$sig" "$W/err" || fail "$sig at ${delay}s: no 'interrupted by SIG$sig' line: $(tail -c 300 "$W/err")"
        [ "$(grep -c 'interrupted by' "$W/err")" = 1 ] || fail "$sig at ${delay}s: more than one line about it"
        [ -e "$out" ] && fail "$sig at ${delay}s: $out was left behind"
    else
        fail "$sig at ${delay}s: '$*' exited $rc (expected 0 or $want): $(tail -c 300 "$W/err")"
    fi
    ls -A "$(dirname "$out")" | grep -q 'cortiq-' && fail "$sig at ${delay}s: a temporary was left: $(ls -A "$(dirname "$out")")"
}

for d in 0.2 0.6 1.2 2.5; do
    try INT $d "$W/big.cmf" "$CQ" convert "$SRC" -o "$W/big.cmf" --quant q8_2f
done
try TERM 0.8 "$W/big.cmf" "$CQ" convert "$SRC" -o "$W/big.cmf" --quant q8_2f
try HUP 0.8 "$W/big.cmf" "$CQ" convert "$SRC" -o "$W/big.cmf" --quant q8_2f
[ $interrupted -ge 3 ] || fail "only $interrupted conversions were interrupted: the source is too small to test this"

n=$interrupted
if [ -f "$M" ]; then
    for d in 0.3 0.9; do
        try INT $d "$W/pic.png" "$CQ" imagine "$M" "a red circle" --size 256x256 --steps 40 -o "$W/pic.png"
    done
    try TERM 0.5 "$W/pic.png" "$CQ" imagine "$M" "a red circle" --size 256x256 --steps 40 -o "$W/pic.png"
    [ $interrupted -gt $n ] || fail "no drawing was interrupted"
fi
# an interrupted drawing says where it stopped: the signal goes once the progress shows 10 % of the steps
if [ -f "$M" ]; then
    rm -f "$W/pic.png"
    "$CQ" imagine "$M" "a red circle" --size 256x256 --steps 200 -o "$W/pic.png" >"$W/out" 2>"$W/err" &
    pid=$!
    for _ in $(seq 1 600); do grep -q "denoising: *10%" "$W/err" && break; sleep 0.1; done
    kill -INT $pid
    wait $pid
    rc=$?
    [ $rc -eq 130 ] || fail "SIGINT during the steps: exit $rc, expected 130"
    grep -q "stopped after step [0-9]* of 200; no file was written" "$W/err" || fail "no step count: $(tail -c 300 "$W/err")"
    [ -e "$W/pic.png" ] && fail "an interrupted drawing left pic.png"
fi
finish "interrupts"
