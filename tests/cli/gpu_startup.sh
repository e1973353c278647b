#!/usr/bin/env bash
# gpu_startup.sh — the CUDA and Vulkan backends cost nothing until a command asks for the GPU: neither the
# cortiq executable nor libcortiq.so needs a CUDA or Vulkan library to load (DT_NEEDED), commands that do not use
# the GPU load none (glibc's LD_DEBUG=files lists every library a process maps, dlopen included), and `cortiq
# gpu` says plainly what it finds: with or without a backend built, with or without a GPU, with cuBLASLt missing.
# Usage: bash gpu_startup.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
unset CORTIQ_BACKEND CORTIQ_CUDA_CUBLASLT CORTIQ_VULKAN_DEVICE # the defaults, whatever the caller's environment says

if ! command -v readelf >/dev/null 2>&1; then
    echo "gpu_startup: skipped: readelf (binutils) is not installed"
    exit 77
fi
CUDA_LIB_RE='lib(cuda|cudart|cublas|cublasLt|nvrtc|nvJitLink|vulkan)\.so'

# ---- no CUDA library in DT_NEEDED, in either build ----
LIB=$(dirname "$CQ")/libcortiq.so
[ -e "$LIB" ] || fail "$LIB is missing (the cortiq_shared target builds it)"
for f in "$CQ" "$LIB"; do
    [ -e "$f" ] || continue
    needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    [ -n "$needed" ] || fail "readelf found no DT_NEEDED entry in $f"
    cuda=$(grep -E "^$CUDA_LIB_RE" <<<"$needed" | tr '\n' ' ')
    [ -z "$cuda" ] || fail "$f needs CUDA or Vulkan libraries at load time: $cuda"
done

# ---- commands that do not use the GPU load nothing of CUDA ----
loaded_cuda() { grep -Eo "file=[^ ]*${CUDA_LIB_RE}[^ ]*" "$W/err" | sort -u | tr '\n' ' '; }
LD_DEBUG=files "$CQ" --version >/dev/null 2>"$W/err"
if grep -q "file=" "$W/err"; then
    for args in "--version" "--help" "info $W/absent.cmf" "verify $W/absent.cmf"; do
        # shellcheck disable=SC2086 # the arguments split on purpose
        LD_DEBUG=files "$CQ" $args >/dev/null 2>"$W/err"
        l=$(loaded_cuda)
        [ -z "$l" ] || fail "'cortiq $args' loads CUDA or Vulkan libraries: $l"
    done
else
    echo "gpu_startup: the dynamic loader ignores LD_DEBUG (not glibc?): libraries loaded at start not checked"
fi

# ---- cortiq gpu: a clear report, never a crash ----
expect 0 "$CQ" gpu
has out "Vulkan backend"
has out "^default backend: auto picks "
has out "^backend used: "
if grep -q "^CUDA backend: not built" "$W/out"; then
    has out "^default backend: auto picks cpu — this build has no CUDA backend"
    has out "^backend used: cpu"
    expect 1 env CORTIQ_BACKEND=cuda "$CQ" gpu
    has err "no CUDA backend"
else
    has out "^CUDA backend: built; "
    has out "  cuBLASLt: "
    n=$(sed -n 's/^CUDA backend: built; \([0-9][0-9]*\) devices\{0,1\} visible.*/\1/p' "$W/out")
    if [ -z "$n" ]; then
        fail "cortiq gpu does not say how many devices are visible: $(head -c 400 "$W/out")"
    elif [ "$n" -eq 0 ]; then
        # the reason follows: no driver, no device
        grep -Eq "^CUDA backend: built; 0 devices visible: .{8,}" "$W/out" || fail "no reason given for 0 devices: $(head -n 1 "$W/out")"
        has out "^default backend: auto picks cpu — no CUDA device visible: "
        expect 1 env CORTIQ_BACKEND=cuda "$CQ" gpu
        has err "cuda backend: no usable GPU: "
    else
        has out "  cuda:0  "
        if grep -q "^  cuda:0  .*too old for this backend" "$W/out"; then
            has out "^default backend: auto picks cpu — CUDA device 0 (.*) is cc [0-7]\.[0-9], needs 8\.0"
        else
            # auto takes the GPU (cuBLASLt loaded above), and says how much of it is free
            has out "^default backend: auto picks cuda:0 — .*, .* free"
            has out "^backend used: cuda:0 (.*); device-memory budget "
            expect 0 env CORTIQ_BACKEND=cuda "$CQ" gpu
            has out "backend used: cuda:0"
        fi
    fi
    # cuBLASLt missing, or a library that is not cuBLASLt: reported by `gpu`, and by the backend's creation where
    # a GPU would otherwise be used
    expect 0 env CORTIQ_CUDA_CUBLASLT="$W/absent/libcublasLt.so.13" "$CQ" gpu
    has out "cuBLASLt: not loadable: cuda backend: cannot load $W/absent/libcublasLt.so.13: "
    has out "or use --backend cpu"
    if [ -n "$n" ] && [ "$n" -gt 0 ] && ! grep -q "^  cuda:0  .*too old" "$W/out"; then
        # a GPU without its library: auto falls back to the CPU and says why
        has out "^default backend: auto picks cpu — CUDA device 0 has no cuBLASLt: "
        has out "^backend used: cpu"
    fi
    expect 0 env CORTIQ_CUDA_CUBLASLT=libc.so.6 "$CQ" gpu
    has out "cuBLASLt: not loadable: cuda backend: the cuBLASLt library loaded lacks cublasLtGetVersion"
    if [ -n "$n" ] && [ "$n" -gt 0 ]; then
        expect 1 env CORTIQ_BACKEND=cuda CORTIQ_CUDA_CUBLASLT="$W/absent/libcublasLt.so.13" "$CQ" gpu
        has err "cannot load $W/absent/libcublasLt.so.13"
    fi
fi

# ---- Vulkan: listed with memory and features, the loader opened only here (or by a Vulkan backend) ----
expect 0 "$CQ" gpu
if grep -q "^Vulkan backend: not built" "$W/out"; then
    has out "no Vulkan headers or glslc"
    expect 1 env CORTIQ_BACKEND=vulkan "$CQ" gpu
    has err "no Vulkan backend"
else
    has out "^Vulkan backend: built; "
    vn=$(sed -n 's/^Vulkan backend: built; \([0-9][0-9]*\) devices\{0,1\} visible.*/\1/p' "$W/out")
    if [ -z "$vn" ]; then
        fail "cortiq gpu does not say how many Vulkan devices are visible: $(grep Vulkan "$W/out" | head -c 400)"
    elif [ "$vn" -eq 0 ]; then
        grep -Eq "^Vulkan backend: built; 0 devices visible: .{8,}" "$W/out" || fail "no reason given for 0 Vulkan devices"
        expect 1 env CORTIQ_BACKEND=vulkan "$CQ" gpu
        has err "vulkan backend: "
    else
        has out "  vulkan:0  .*device-local memory, Vulkan 1\.[0-9]"
        has out "  vulkan:0  .*16-bit storage \(yes\|no\), f16 arithmetic \(yes\|no\), cooperative matrices "
        if LD_DEBUG=files "$CQ" gpu >/dev/null 2>"$W/err" && grep -q "file=" "$W/err"; then
            grep -Eq "file=[^ ]*libvulkan\.so" "$W/err" || fail "cortiq gpu listed Vulkan devices without loading libvulkan"
        fi
        expect 0 env CORTIQ_BACKEND=vulkan "$CQ" gpu
        has out "backend used: vulkan:0"
        expect 1 env CORTIQ_BACKEND=vulkan:$vn "$CQ" gpu
        has err "vulkan backend: device $vn does not exist ($vn device"
    fi
fi

finish gpu_startup
