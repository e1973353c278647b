#!/usr/bin/env bash
# vulkan_imagine.sh — `cortiq imagine --backend vulkan` draws with the shipped model (models/shapes.cmf), and
# its picture is the CPU's within 1/255 per channel: the Vulkan backend computes in f32 (its native ops and
# the ones that fall back to the CPU), so the two differ by float rounding alone, which moves a channel by at
# most one step where a value sits on a rounding boundary. Skipped (77) without the model, python3, the
# backend in this build, or a Vulkan device (lavapipe, Mesa's driver on the CPU, is one).
# Usage: bash vulkan_imagine.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$HERE/../..
MODEL=$ROOT/models/shapes.cmf
unset CORTIQ_BACKEND CORTIQ_VULKAN_DEVICE
[ -f "$MODEL" ] || { echo "vulkan_imagine: skipped: $MODEL is absent"; exit 77; }
command -v python3 >/dev/null || { echo "vulkan_imagine: skipped: no python3"; exit 77; }
mkdir -p "$W"
"$CQ" gpu >"$W/gpu" 2>&1
if ! grep -Eq "^Vulkan backend: built; [1-9][0-9]* devices? visible" "$W/gpu"; then
    echo "vulkan_imagine: skipped: $(grep '^Vulkan backend' "$W/gpu")"
    exit 77
fi

PROMPT="a red circle on a blue background"
expect 0 "$CQ" imagine "$MODEL" "$PROMPT" --backend cpu --size 64x64 --steps 2 --rgba -o "$W/cpu.png"
expect 0 "$CQ" imagine "$MODEL" "$PROMPT" --backend vulkan --size 64x64 --steps 2 --rgba -o "$W/vulkan.png"
has err "wrote $W/vulkan.png (64x64, RGBA, seed 0, 2 steps, guidance 1)"
has err "on vulkan:0 "
# the stated bound, and that the picture is not flat (a backend writing nothing would still match a flat one)
python3 - "$ROOT/tools" "$W/cpu.png" "$W/vulkan.png" >"$W/cmp" 2>&1 <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from compare_reference_outputs import read_png_rgba
(wa, ha, a), (wb, hb, b) = read_png_rgba(sys.argv[2]), read_png_rgba(sys.argv[3])
if (wa, ha) != (wb, hb) or (wa, ha) != (64, 64):
    sys.exit(f"sizes differ: {wa}x{ha} and {wb}x{hb}")
worst = [max(abs(a[i] - b[i]) for i in range(c, len(a), 4)) for c in range(4)]
spread = max(a) - min(a)
print("max |diff| per channel (RGBA):", worst, "value spread", spread)
if max(worst) > 1:
    sys.exit(f"the Vulkan picture differs from the CPU's by {max(worst)}/255 (bound 1/255)")
if spread < 32:
    sys.exit(f"the CPU picture is nearly flat (values span {spread}/255): nothing to compare")
PY
[ $? -eq 0 ] || fail "$(cat "$W/cmp")"
cat "$W/cmp"

finish vulkan_imagine
