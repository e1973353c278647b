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
import gc
import importlib.util
import inspect
import re
import subprocess
import sys
import time

import torch

from diffusers.models.transformers.transformer_qwenimage21 import (
    QwenImage21KVCache,
    QwenImage21Transformer2DModel,
)

from peer_timing import timed

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


def gib(nbytes):
    return nbytes / 2**30


def device_used():
    """Bytes in use on the device as the driver sees them: the caching allocator's reserve, the context, others."""
    free, total = torch.cuda.mem_get_info()
    return total - free


def free_device():
    """Give the device back everything the last mode left, so that the next mode's peak is its own."""
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


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


def build_model(layers, device):
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.device(device):
        model = QwenImage21Transformer2DModel(num_layers=layers).to(torch.bfloat16).eval()
    if device == "cuda":
        # The fp32 weights the constructor made are freed by the cast but stay in the allocator's reserve: give
        # them back, or the device's used bytes would count them (a bf16 from_pretrained never holds them).
        free_device()
    print(f"diffusers model built on the {device} in {time.perf_counter() - t0:.1f} s "
          f"({sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters)", flush=True)
    return model


def run_resident(model, sizes, repeat, compile_too):
    """--offload none: the model on the GPU, eager and (with --compile) through torch.compile."""
    eager = {s: run_peer(model, s // 16, repeat, "diffusers eager") for s in sizes}
    compiled = {}
    if compile_too:
        cmodel = torch.compile(model)
        for s in sizes:
            t0 = time.perf_counter()
            compiled[s] = run_peer(cmodel, s // 16, repeat, "diffusers torch.compile")
            print(f"  (compile + timing took {time.perf_counter() - t0:.0f} s)", flush=True)
        del cmodel
        torch._dynamo.reset()
    return eager, compiled


def run_model_offload(model, sizes, repeat):
    """--offload model: what enable_model_cpu_offload()'s hook does to the transformer in each generation.

    accelerate's CpuOffload hook moves the whole module to the GPU (module.to(device), from pageable memory) before
    its first forward, and the next model's hook in the pipeline (the VAE's) moves it back (module.to("cpu")) and
    empties the device cache. The model arrives here on the CPU and leaves on it.
    """
    rows = {}
    for s in sizes:
        free_device()
        t0 = time.perf_counter()
        model.to("cuda")
        torch.cuda.synchronize()
        t_in = time.perf_counter() - t0
        r = run_peer(model, s // 16, repeat, "diffusers model cpu offload")
        t0 = time.perf_counter()
        model.to("cpu")
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        r["out"] = time.perf_counter() - t0
        r["in"] = t_in
        print(f"  move to the GPU {t_in:.2f} s, back to the CPU {r['out']:.2f} s", flush=True)
        rows[s] = r
    return rows


def enable_group_offload(model):
    """Leaf-level group offloading with a CUDA stream, as diffusers recommends it for speed; returns its setup time.

    record_stream=True lets the side stream's copies be freed without a synchronisation (faster, a little more
    memory); low_cpu_mem_usage=False keeps the CPU copies pinned from the start rather than pinning them on every
    onload, which is what lets the stream overlap the copies with compute. Both are passed only where this
    diffusers has them.
    """
    try:
        from diffusers.hooks.group_offloading import apply_group_offloading
    except ImportError as e:
        sys.exit(f"--offload group: this diffusers has no group offloading (diffusers.hooks.group_offloading."
                 f"apply_group_offloading): {e}")
    if importlib.util.find_spec("accelerate") is None:
        sys.exit("--offload group: diffusers' group offloading moves the forward's arguments with "
                 "accelerate.utils.send_to_device, and accelerate is not installed")
    # ModelMixin.enable_group_offload forwards to apply_group_offloading and also checks the model supports it.
    fn = getattr(model, "enable_group_offload", None)
    params = inspect.signature(fn if fn is not None else apply_group_offloading).parameters
    missing = [k for k in ("onload_device", "offload_device", "offload_type", "use_stream") if k not in params]
    if missing:
        sys.exit(f"--offload group: this diffusers' group offloading takes no {', '.join(missing)}")
    kw = {"onload_device": torch.device("cuda"), "offload_device": torch.device("cpu"),
          "offload_type": "leaf_level", "use_stream": True}
    for k, v in (("record_stream", True), ("low_cpu_mem_usage", False)):
        if k in params:
            kw[k] = v
    print("group offloading: " + ", ".join(f"{k}={v}" for k, v in kw.items()), flush=True)
    t0 = time.perf_counter()
    if fn is not None:
        fn(**kw)
    else:
        apply_group_offloading(model, **kw)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def run_group_offload(model, sizes, repeat):
    """--offload group: the model arrives on the CPU; its hooks stay on it (this mode runs last)."""
    free_device()
    t_setup = enable_group_offload(model)
    print(f"group offloading set up in {t_setup:.1f} s (CPU copies pinned; the first forward records the layer "
          f"order for prefetching and is part of the warm-up)", flush=True)
    return {s: run_peer(model, s // 16, repeat, "diffusers group offload (leaf)") for s in sizes}


def run_cortiq(path, size, repeat, layers, quant):
    cmd = [path, "bench", "qi21", "--backend", "cuda", "--size", str(size), "--quant", quant, "--repeat",
           str(repeat), "--layers", str(layers)]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        sys.stdout.write(p.stderr)
        print(f"cortiq bench failed (exit {p.returncode})", flush=True)
        return None
    m = re.search(r"^step \(.*?\)\s+([0-9.]+)", p.stdout, re.M)
    return float(m.group(1)) * 1e-3 if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, nargs="+", default=[512, 1024, 2048], help="image sides in pixels")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs after the warm-up (median reported)")
    ap.add_argument("--layers", type=int, default=32, help="layers to build (32 = the released model)")
    ap.add_argument("--compile", action="store_true", help="also time the step through torch.compile (resident)")
    ap.add_argument("--offload", choices=["none", "group", "model", "all"], default="none",
                    help="diffusers' offload mode to time (all: none, model, group in that order)")
    ap.add_argument("--steps", type=int, default=40,
                    help="denoising steps of the projected generation in the last table (cortiq bench imagine "
                         "projects 40)")
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
    if args.steps < 1:
        sys.exit(f"--steps {args.steps}: want at least 1")
    modes = ["none", "model", "group"] if args.offload == "all" else [args.offload]
    if args.compile and "none" not in modes:
        sys.exit("--compile times the resident model: use it with --offload none or all")
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, bf16, SDPA "
          f"(torch.backends.cuda flash: {torch.backends.cuda.flash_sdp_enabled()})", flush=True)

    ours = {}
    if args.cortiq:
        for s in args.size:
            ours[s] = run_cortiq(args.cortiq, s, args.repeat, args.layers, args.cortiq_quant)

    # One set of weights for every mode: built on the GPU for the resident runs (as fast as that is), else on the
    # CPU, where the offload modes keep it.
    model = build_model(args.layers, "cuda" if "none" in modes else "cpu")
    eager, compiled, offloaded = {}, {}, {}
    if "none" in modes:
        eager, compiled = run_resident(model, args.size, args.repeat, args.compile)
        if len(modes) > 1:
            model.to("cpu")
            free_device()
    if "model" in modes:
        offloaded["model"] = run_model_offload(model, args.size, args.repeat)
    if "group" in modes:
        offloaded["group"] = run_group_offload(model, args.size, args.repeat)

    if "none" in modes or ours:
        print("\nstep ms per size: cortiq cuda | diffusers eager | diffusers compiled | eager / cortiq")
        for s in args.size:
            o = ours.get(s)
            e = eager[s]["step"] if s in eager else None
            c = compiled[s]["step"] if s in compiled else None
            fmt = lambda v: f"{1e3 * v:9.2f}" if v else "        -"
            ratio = f"{e / o:6.2f}x" if o and e else "     -"
            print(f"{s:4d}^2: {fmt(o)} | {fmt(e)} | {fmt(c)} | {ratio}")

    rows = [("none", eager), ("model", offloaded.get("model", {})), ("group", offloaded.get("group", {}))]
    print(f"\nmode  | size | step ms | move-in s | move-out s | peak GiB (allocator) | used GiB (device) | "
          f"{args.steps}-step s")
    for mode, per_size in rows:
        for s in args.size:
            r = per_size.get(s)
            if r is None:
                continue
            t_in, t_out = r.get("in"), r.get("out")
            total = (t_in or 0) + r["prefill"] + args.steps * r["step"] + (t_out or 0)
            sec = lambda v: f"{v:9.2f}" if v is not None else "        -"
            print(f"{mode:5s} | {s:4d} | {1e3 * r['step']:7.2f} | {sec(t_in)} | {sec(t_out):>10s} | "
                  f"{gib(r['peak']):20.2f} | {gib(r['used']):17.2f} | {total:8.2f}")


if __name__ == "__main__":
    main()
