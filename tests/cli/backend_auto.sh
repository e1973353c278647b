#!/usr/bin/env bash
# backend_auto.sh — the backend `cortiq imagine` and `run` choose by default (auto: a usable CUDA GPU, else the
# CPU), the line on standard error that says which and why, what --backend and CORTIQ_BACKEND change, and
# --gpu-memory / CORTIQ_GPU_MEMORY: a bad size is a usage error (exit 2) naming it, on imagine, run and
# bench imagine. In a build without CUDA auto must say so; with CUDA it must agree with `cortiq gpu`.
# Skipped (77) without the shipped model (models/shapes.cmf).
# Usage: bash backend_auto.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
HERE=$(cd "$(dirname "$0")" && pwd)
MODEL=$HERE/../../models/shapes.cmf
[ -f "$MODEL" ] || { echo "skipped: $MODEL is absent"; exit 77; }
unset CORTIQ_BACKEND CORTIQ_GPU_MEMORY CORTIQ_CUDA_DEVICE # the defaults themselves are under test
IM=(imagine "$MODEL" "a red circle on a blue background" --size 64x64 --steps 2 -o "$W/out.png")

# ---- cortiq gpu names what auto picks, and why ----
expect 0 "$CQ" gpu
has out "^default backend: auto picks "
pick=$(sed -n 's/^default backend: auto picks \([^ ]*\) — .*/\1/p' "$W/out")
why=$(sed -n 's/^default backend: auto picks [^ ]* — \(.*\)/\1/p' "$W/out")
[ -n "$pick" ] && [ -n "$why" ] || fail "cortiq gpu gives no pick or no reason: $(grep '^default' "$W/out")"
if grep -q "^CUDA backend: not built" "$W/out"; then
    [ "$pick" = cpu ] || fail "a build without CUDA picks '$pick'"
    [ "$why" = "this build has no CUDA backend" ] || fail "unexpected reason: $why"
fi

# ---- imagine: auto by default, the choice on stderr ----
expect 0 "$CQ" "${IM[@]}"
has err "^backend: $pick (auto: "
grep -qF "backend: $pick (auto: $why)" "$W/err" || fail "imagine's reason differs from cortiq gpu's ($why): $(grep '^backend' "$W/err")"
[ -s "$W/out.png" ] || fail "no picture written"
# the same choice named explicitly
expect 0 "$CQ" "${IM[@]}" --backend auto
has err "^backend: $pick (auto from --backend: "
# -q: no summary
expect 0 "$CQ" "${IM[@]}" -q
grep -q "^backend: " "$W/err" && fail "-q still prints the backend line"
# --backend cpu forces the CPU, and CORTIQ_BACKEND does so too; --backend wins over CORTIQ_BACKEND
expect 0 "$CQ" "${IM[@]}" --backend cpu
has err "^backend: cpu (from --backend)"
has err " on cpu/"
expect 0 env CORTIQ_BACKEND=cpu "$CQ" "${IM[@]}"
has err "^backend: cpu (from CORTIQ_BACKEND)"
expect 0 env CORTIQ_BACKEND=nosuch "$CQ" "${IM[@]}" --backend cpu
has err "^backend: cpu (from --backend)"
# a bad name fails before any work, naming the choices (auto among them)
expect 2 "$CQ" "${IM[@]}" --backend nosuch
has err "unknown backend 'nosuch' (have: cpu, ref, cuda\[:N\], vulkan\[:N\], auto"
expect 2 env CORTIQ_BACKEND=nosuch "$CQ" "${IM[@]}"
has err "CORTIQ_BACKEND: unknown backend 'nosuch'"
# a budget on the CPU is accepted and said not to apply
expect 0 "$CQ" "${IM[@]}" --backend cpu --gpu-memory 7.5
has err "^backend: cpu (from --backend); --gpu-memory 7.5 GiB does not apply to it"

# ---- --gpu-memory: a positive decimal in GiB; anything else is a usage error ----
for v in 0 -1 abc 1e9999 inf "" 1.2.3 0x10 65537; do
    expect 2 "$CQ" "${IM[@]}" --gpu-memory "$v"
    has err "--gpu-memory: '$v' is not a device-memory size: want GiB as a positive decimal such as 7.5"
    expect 2 "$CQ" run "$W/absent.cmf" --prompt hi --gpu-memory "$v"
    has err "--gpu-memory: '$v' is not a device-memory size"
    expect 2 "$CQ" bench imagine --gpu-memory "$v"
    has err "--gpu-memory: '$v' is not a device-memory size"
done
expect 2 "$CQ" "${IM[@]}" --gpu-memory
has err "--gpu-memory needs a size in GiB"
expect 2 env CORTIQ_GPU_MEMORY=abc "$CQ" "${IM[@]}"
has err "CORTIQ_GPU_MEMORY: 'abc' is not a device-memory size"
expect 2 env CORTIQ_GPU_MEMORY=0 "$CQ" run "$W/absent.cmf" --prompt hi
has err "CORTIQ_GPU_MEMORY: '0' is not a device-memory size"
# the option wins over the variable
expect 0 env CORTIQ_GPU_MEMORY=abc "$CQ" "${IM[@]}" --backend cpu --gpu-memory 24
has err "; --gpu-memory 24.0 GiB does not apply to it"
# the help texts name the default and the option
expect 0 "$CQ" imagine --help
has out "auto (default), cpu, ref, cuda\[:N\] or vulkan\[:N\]"
has out "--gpu-memory GiB"
expect 0 "$CQ" run --help
has out "auto (default), cpu"
has out "--gpu-memory GiB"
expect 0 "$CQ" bench imagine --help
has out "--gpu-memory GiB"

finish backend_auto
