#!/usr/bin/env python3
"""The peer of `cortiq bench qi21 --backend cuda`: diffusers' QwenImage21Transformer2DModel on the same shapes.

Builds the released 7B configuration (32 layers, 32 heads x 128, context 4096, mlp_ratio 3, in/out 64, RoPE axes
16/56/56) with random weights in bf16 on the GPU, with the default SDPA attention processor, and times what cortiq
times: one prefill of an 18-token text prompt into the prefix KV cache (kv_cache_mode="extract") and the cached
denoising step for a SIZE x SIZE image ((SIZE/16)^2 target tokens, kv_cache_mode="cached"): a warm-up, then the
median of --repeat runs, each bracketed by torch.cuda.synchronize(). With --compile, the cached step again through
torch.compile (the first calls compile; they are left out of the timing). With --cortiq PATH, the cortiq bench runs
on the same machine on the same shapes first, and the script prints both and the ratio.

With --offload, the same timing under diffusers' offload modes, the peers of cortiq's device-memory budget
(`cortiq bench imagine --gpu-memory`):
  none   the model resident on the GPU (the default; what the paragraph above describes)
  model  enable_model_cpu_offload(): its hook moves the whole transformer to the GPU before the first forward of a
         generation and back to the CPU after it (then empties the cache). Timed per size: the move in, the prefill
         and step as above, the move out
  group  group offloading at leaf level with a CUDA stream (enable_group_offload / apply_group_offloading,
         offload_type="leaf_level", use_stream=True, record_stream=True): every Linear (and each norm's weight)
         onloaded from pinned CPU memory just before it runs, the next one prefetched on the side stream
  all    the three in that order, on one set of weights (built once; moved to the CPU after the resident runs)
Each mode's peak device memory is its own: torch.cuda.max_memory_allocated() after reset_peak_memory_stats(), and
the device's used bytes (torch.cuda.mem_get_info(): the caching allocator's reserve, the CUDA context, and any other
process) after the steps. A model the script builds only for offloading is built on the CPU. The last table projects
a --steps generation of the transformer: move in + prefill + steps x step + move out.

FLOPs are counted as cortiq's bench counts them: every matmul and both attention products, 2 per multiply-add.

Usage (on the GPU machine; needs torch with CUDA and diffusers' source with the Qwen-Image-2.1 files; --offload group
also needs accelerate, which diffusers' hooks use to move the forward's arguments):
    PYTHONPATH=ref/diffusers/src python3 tools/bench_peer_qi21.py --size 512 1024 2048 \\
        [--repeat 5] [--compile] [--cortiq build-gpu/cortiq [--cortiq-quant q8_2f|bf16]] [--layers 32]
    PYTHONPATH=ref/diffusers/src python3 tools/bench_peer_qi21.py --size 1024 --offload all [--steps 40]
"""
import argparse
import re
import sys
import time

import torch

from diffusers.models.transformers.transformer_qwenimage21 import (
    QwenImage21KVCache,
    QwenImage21Transformer2DModel,
)

from peer_offload import add_args, device_used, gib, modes_of, print_modes, run_modes, step_of
from peer_timing import run_cortiq_bench, timed

HEADS, HEAD_DIM, CTX, RATIO, CH, TEXT, TPROJ = 32, 128, 4096, 3, 64, 18, 256
D = HEADS * HEAD_DIM


def flops_step(T, P, layers):
    """The cached step, as src/cli/bench_qi21.c counts it."""
    M = D * RATIO
    mod = 2.0 * 2.0 * (TPROJ * D + D * D + D * 4 * D + D * D)
    per_layer = 2 * T * D * D * 4 + 2 * T * D * M * 3 + 4 * T * (P + T) * D
    return mod + 2 * T * CH * D + layers * per_layer + 2 * T * D * CH


def inputs(side, device):
    T = side * side
    g = torch.Generator(device="cpu").manual_seed(12345)
    hidden = (torch.rand(1, T, CH, generator=g) * 2 - 1).to(device, torch.bfloat16)
    ctx = (torch.rand(1, TEXT, CTX, generator=g) * 2 - 1).to(device, torch.bfloat16)
    mask = torch.zeros(1, TEXT + T // 4, dtype=torch.bool, device=device)
    mask[:, TEXT:] = True
    return hidden, ctx, [[(1, side, side)]], mask


def run_peer(model, side, repeat, label):
    """Times the prefill and the cached step; returns their medians (s) and the device memory they took (bytes)."""
    device = "cuda"
    torch.cuda.reset_peak_memory_stats()
    hidden, ctx, shapes, mask = inputs(side, device)
    layers = model.config.num_layers

    def call(t, mode, cache):
        return model(hidden_states=hidden, encoder_hidden_states=ctx, timestep=torch.tensor([t], device=device),
                     img_shapes=shapes, img_mask=mask, kv_cache=cache, kv_cache_mode=mode, return_dict=False)[0]

    def prefill():
        call(0.5, "extract", QwenImage21KVCache(layers))

    t_prefill = timed(prefill, repeat)
    cache = QwenImage21KVCache(layers)
    call(1.0, "extract", cache)
    step_t = [0.9]

    def step():
        step_t[0] = 0.9 - step_t[0] * 0.01
        call(step_t[0], "cached", cache)

    t_step = timed(step, repeat)
    peak, used = torch.cuda.max_memory_allocated(), device_used()
    T = side * side
    fs = flops_step(T, TEXT, layers)
    print(f"{label:34s} size {side * 16:4d}: prefill {1e3 * t_prefill:8.2f} ms, step {1e3 * t_step:8.2f} ms "
          f"({fs * 1e-12 / t_step:6.1f} TFLOP/s), peak memory {gib(peak):.1f} GiB (device used {gib(used):.1f} GiB)",
          flush=True)
    return {"prefill": t_prefill, "step": t_step, "peak": peak, "used": used}


def run_cortiq(path, size, repeat, layers, quant):
    cmd = [path, "bench", "qi21", "--backend", "cuda", "--size", str(size), "--quant", quant, "--repeat",
           str(repeat), "--layers", str(layers)]
    out = run_cortiq_bench(cmd)
    if out is None:
        return None
    m = re.search(r"^step \(.*?\)\s+([0-9.]+)", out, re.M)
    return float(m.group(1)) * 1e-3 if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, nargs="+", default=[512, 1024, 2048], help="image sides in pixels")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs after the warm-up (median reported)")
    ap.add_argument("--layers", type=int, default=32, help="layers to build (32 = the released model)")
    ap.add_argument("--compile", action="store_true", help="also time the step through torch.compile (resident)")
    add_args(ap, 40, "cortiq bench imagine projects 40")
    ap.add_argument("--cortiq", help="path of the cortiq binary: run its CUDA bench on the same shapes first")
    ap.add_argument("--cortiq-quant", default="q8_2f",
                    help="codec of cortiq's random weights (q8_2f: 7.5 GB to write; bf16: 15 GB). The device runs "
                         "the same f16 GEMMs either way")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    for s in args.size:
        if s % 32 or s < 256 or s > 2048:
            sys.exit(f"--size {s}: want a multiple of 32 in [256, 2048] (cortiq: 256, 512, 1024 or 2048)")
    modes = modes_of(args)
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, bf16, SDPA "
          f"(torch.backends.cuda flash: {torch.backends.cuda.flash_sdp_enabled()})", flush=True)

    ours = {}
    if args.cortiq:
        for s in args.size:
            ours[s] = run_cortiq(args.cortiq, s, args.repeat, args.layers, args.cortiq_quant)

    def run(m, size, label):
        return run_peer(m, size // 16, args.repeat, label)

    def make():
        return QwenImage21Transformer2DModel(num_layers=args.layers)

    eager, compiled, offloaded = run_modes(make, modes, args.size, args.compile, run)

    if "none" in modes or ours:
        print("\nstep ms per size: cortiq cuda | diffusers eager | diffusers compiled | eager / cortiq")
        for s in args.size:
            o = ours.get(s)
            e, c = step_of(eager, s), step_of(compiled, s)
            fmt = lambda v: f"{1e3 * v:9.2f}" if v else "        -"
            ratio = f"{e / o:6.2f}x" if o and e else "     -"
            print(f"{s:4d}^2: {fmt(o)} | {fmt(e)} | {fmt(c)} | {ratio}")

    print_modes(eager, offloaded, args.size, args.steps)


if __name__ == "__main__":
    main()
