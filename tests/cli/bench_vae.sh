#!/usr/bin/env bash
# bench_vae.sh — `cortiq bench vae` as a user meets it: the dispatcher's
# list, --help, usage errors (exit 2), a temporary directory that cannot take
# the model (exit 1, nothing left behind), and without a GPU a CUDA run that
# fails before anything is written; the Flux VAE's memory plan (--plan: a
# 160 MB model, no compute). The benchmark itself writes 0.7 GB and decodes
# for seconds to minutes on a CPU: not run here (docs/PERFORMANCE.md).
# Usage: bash bench_vae.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"

expect 0 "$CQ" bench --help
has out "vae"
expect 0 "$CQ" bench vae --help
has out "--encode"
has out "TMPDIR"
has out "CORTIQ_CUDA_PROFILE"
expect 2 "$CQ" bench vae --size 300
has err "256, 512, 1024 or 2048"
expect 2 "$CQ" bench vae --repeat 0
has err "--repeat"
expect 2 "$CQ" bench vae --threads 0
has err "--threads"
expect 2 "$CQ" bench vae --backend metal
has err "unknown backend 'metal' (have: cpu, ref, cuda"
expect 2 "$CQ" bench vae extra
has err "unknown argument"
expect 2 "$CQ" bench vae --model sd3
has err "--model must be qi21, qimage or flux"
expect 2 "$CQ" bench vae --plan
has err "options of --model flux"
expect 2 "$CQ" bench vae --model flux --budget 0
has err "--budget"

# The Flux VAE's plan: every size, the 1024^2 decode streaming its top level within the default budget.
mkdir -p "$W/plan"
TMPDIR="$W/plan" expect 0 "$CQ" bench vae --model flux --plan
has out "decode 1024x1024  whole image   2.55 GiB  plan   1.74 GiB   7 statistics passes"
has out "decode 2048x2048"
[ -z "$(ls -A "$W/plan")" ] || fail "files were left in TMPDIR: $(ls -A "$W/plan")"

# A directory that does not exist cannot take the temporary model: a clear failure, nothing written.
TMPDIR="$W/no-such-dir" expect 1 "$CQ" bench vae --size 256
has err "writing the temporary model"
[ ! -e "$W/no-such-dir" ] || fail "the missing TMPDIR was created"
"$CQ" gpu >"$W/gpu" 2>&1
if ! grep -q "cuda:0 " "$W/gpu"; then
    mkdir -p "$W/tmp"
    TMPDIR="$W/tmp" expect 1 "$CQ" bench vae --backend cuda
    has err "creating the backend"
    [ -z "$(ls -A "$W/tmp")" ] || fail "files were left in TMPDIR: $(ls -A "$W/tmp")"
fi

finish "bench_vae"
