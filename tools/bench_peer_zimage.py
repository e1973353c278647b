#!/usr/bin/env python3
"""The peer of `cortiq bench zimage --backend cuda`: diffusers' ZImageTransformer2DModel on the same shapes.

Builds the released configuration (dim 3840, 30 heads, 30 layers, 2 refiner layers, caption width 2560, RoPE axes
32/48/48) with random weights in bf16 on the GPU, with the default SDPA attention processor, and times one forward
for a SIZE x SIZE image ((SIZE/16)^2 image tokens) and a caption of --caption rows (512 by default, the pipeline's
maximum): a warm-up, then the median of --repeat runs, each bracketed by torch.cuda.synchronize(). With --compile,
the same through torch.compile (the first calls compile; they are left out of the timing). With --cortiq PATH, the
cortiq bench runs on the same machine and shapes first, and both are printed side by side.

diffusers' forward runs the caption embedder and the context refiner at every call, which cortiq does once per
prompt (its `prepare`); the comparison line therefore sets diffusers' forward against cortiq's step + prepare and
against its step alone. FLOPs are counted as src/cli/bench_zimage.c counts them: every matmul and both attention
products, 2 per multiply-add, pad rows included.

With --offload none|model|group|all, the same timing under diffusers' offload modes, the peers of cortiq's
device-memory budget (`cortiq bench imagine --model zimage --gpu-memory`), with the semantics and the last table of
tools/bench_peer_qi21.py (the code is shared: tools/peer_offload.py): the model resident (none, the default);
enable_model_cpu_offload(), the whole transformer moved to the GPU before a generation and back after it, the moves
timed per size (model); leaf-level group offloading with a CUDA stream and record_stream, every Linear onloaded from
pinned CPU memory just before it runs (group); the three in that order on one set of weights (all).
Each mode's peak device memory is its own: torch.cuda.max_memory_allocated() after reset_peak_memory_stats(), and
the device's used bytes (torch.cuda.mem_get_info(): the caching allocator's reserve, the CUDA context, and any other
process) after the forwards. A model the script builds only for offloading is built on the CPU. The last table
projects a --steps generation of the transformer (8 by default, Turbo's): move in + steps x forward + move out
(diffusers' forward prepares the caption at every step, so there is no once-per-prompt part to add).

Usage (on the GPU machine; needs torch with CUDA and diffusers' source; --offload group also needs accelerate,
which diffusers' hooks use to move the forward's arguments):
    PYTHONPATH=ref/diffusers/src python3 tools/bench_peer_zimage.py --size 512 1024 2048 \\
        [--repeat 5] [--compile] [--caption 512] [--layers 30] [--cortiq build-gpu/cortiq [--cortiq-quant q8_2f]]
    PYTHONPATH=ref/diffusers/src python3 tools/bench_peer_zimage.py --size 1024 --offload all [--steps 8]
"""
import argparse
import re
import sys
import time

import torch

from diffusers import ZImageTransformer2DModel

from peer_offload import add_args, device_used, gib, modes_of, print_modes, run_modes, step_of
from peer_timing import run_cortiq_bench, timed

DIM, HEADS, LAYERS, REFINERS, CAP, CH = 3840, 30, 30, 2, 2560, 16
FFN = int(DIM / 3 * 8)
ADALN = min(DIM, 256)


def ceil32(n):
    return -(-n // 32) * 32


def flops_block(n):
    return 2 * n * DIM * DIM * 4 + 2 * n * DIM * FFN * 3 + 4 * n * n * DIM


def flops(side, L, layers):
    """(step, prepare) as src/cli/bench_zimage.c counts them; side = tokens per image side."""
    N, Np, Lp = side * side, ceil32(side * side), ceil32(L)
    t = 2.0 * (256 * 1024 + 1024 * ADALN)
    mod = 2.0 * ADALN * 4 * DIM * (REFINERS + layers) + 2.0 * ADALN * DIM
    step = t + mod + 2.0 * N * 4 * CH * DIM + REFINERS * flops_block(Np) + layers * flops_block(Np + Lp) \
        + 2.0 * N * DIM * 4 * CH
    prepare = 2.0 * L * CAP * DIM + REFINERS * flops_block(Lp)
    return step, prepare


def run_peer(model, side, L, repeat, label):
    device = "cuda"
    g = torch.Generator(device="cpu").manual_seed(12345)
    x = [(torch.rand(CH, 1, 2 * side, 2 * side, generator=g) * 2 - 1).to(device, torch.bfloat16)]
    cap = [(torch.rand(L, CAP, generator=g) * 2 - 1).to(device, torch.bfloat16)]
    t = [0.9]

    def call():
        t[0] = 0.9 - t[0] * 0.01
        model(x, torch.tensor([t[0]], device=device, dtype=torch.bfloat16), cap, return_dict=False)

    torch.cuda.reset_peak_memory_stats()
    sec = timed(call, repeat)
    peak, used = torch.cuda.max_memory_allocated(), device_used()
    fs, fp = flops(side, L, model.config.n_layers)
    print(f"{label:30s} size {side * 16:4d}: forward {1e3 * sec:8.2f} ms ({(fs + fp) * 1e-12 / sec:6.1f} TFLOP/s), "
          f"peak memory {gib(peak):.1f} GiB (device used {gib(used):.1f} GiB)", flush=True)
    # the forward is the whole step (the caption's preparation included): nothing once per prompt
    return {"prefill": 0.0, "step": sec, "peak": peak, "used": used}


def run_cortiq(path, size, repeat, layers, L, quant):
    cmd = [path, "bench", "zimage", "--backend", "cuda", "--size", str(size), "--quant", quant, "--steps",
           str(repeat), "--layers", str(layers), "--caption", str(L)]
    out = run_cortiq_bench(cmd)
    if out is None:
        return None
    st = re.search(r"^step \(.*?\)\s+([0-9.]+)", out, re.M)
    pr = re.search(r"^prepare \(.*?\)\s+([0-9.]+)", out, re.M)
    return (float(st.group(1)) * 1e-3, float(pr.group(1)) * 1e-3) if st and pr else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, nargs="+", default=[512, 1024, 2048], help="image sides in pixels")
    ap.add_argument("--caption", type=int, default=512, help="caption rows (the pipeline's maximum is 512)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs after the warm-up (median reported)")
    ap.add_argument("--layers", type=int, default=LAYERS, help="main layers to build (30 = the released model)")
    ap.add_argument("--compile", action="store_true", help="also time the forward through torch.compile (resident)")
    add_args(ap, 8, "Z-Image Turbo runs 8; cortiq bench imagine --model zimage projects 8")
    ap.add_argument("--cortiq", help="path of the cortiq binary: run its CUDA bench on the same shapes first")
    ap.add_argument("--cortiq-quant", default="q8_2f", help="codec of cortiq's random weights (q8_2f, q4tp, bf16)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    for s in args.size:
        if s not in (256, 512, 1024, 2048):
            sys.exit(f"--size {s}: want 256, 512, 1024 or 2048 (as cortiq's bench)")
    modes = modes_of(args)
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, bf16, SDPA "
          f"(torch.backends.cuda flash: {torch.backends.cuda.flash_sdp_enabled()})", flush=True)

    ours = {}
    if args.cortiq:
        for s in args.size:
            ours[s] = run_cortiq(args.cortiq, s, args.repeat, args.layers, args.caption, args.cortiq_quant)

    def run(m, size, label):
        return run_peer(m, size // 16, args.caption, args.repeat, label)

    def make():
        return ZImageTransformer2DModel(n_layers=args.layers, axes_lens=[1536, 512, 512])

    eager, compiled, offloaded = run_modes(make, modes, args.size, args.compile, run)

    if "none" in modes or ours:
        print(f"\nms per size (caption {args.caption} rows, {args.layers} layers): cortiq step | cortiq step + "
              "prepare | diffusers eager forward | diffusers compiled forward | eager / (cortiq step + prepare)")
        for s in args.size:
            o = ours.get(s)
            e, c = step_of(eager, s), step_of(compiled, s)
            fmt = lambda v: f"{1e3 * v:9.2f}" if v else "        -"
            ratio = f"{e / (o[0] + o[1]):6.2f}x" if o and e else "     -"
            print(f"{s:4d}^2: {fmt(o[0] if o else None)} | {fmt(o[0] + o[1] if o else None)} | {fmt(e)} | {fmt(c)} | "
                  f"{ratio}")

    print_modes(eager, offloaded, args.size, args.steps)


if __name__ == "__main__":
    main()
