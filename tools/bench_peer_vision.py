#!/usr/bin/env python3
"""The peer of `cortiq bench vision --backend cuda`: transformers' Qwen2_5_VisionTransformerPretrainedModel.

Builds the Qwen2.5-VL-7B vision tower (depth 32, hidden 1280, 16 heads, intermediate 3420, out 3584, patch 14,
temporal patch 2, spatial merge 2, window 112, full attention in blocks 7/15/23/31) from a config made in code (no
file, no network) with random weights in bf16 on the GPU, and times its forward on one SIZE x SIZE picture as the
Qwen-Image Edit pipelines give it to the tower: a random RGB picture through transformers' Qwen2VLImageProcessor
with its class defaults (smart_resize to multiples of 28 within 3136 .. 1003520 pixels, bicubic, CLIP mean/std;
timed on its own, on the CPU), then the tower on its pixel_values and image_grid_thw: a warm-up, then the median of
--repeat runs, each bracketed by torch.cuda.synchronize(). Each attention implementation the installed packages
allow is timed: eager, sdpa (per window, as transformers runs it), and flash_attention_2 when flash_attn is
installed (one varlen call per block). With --cortiq PATH, the cortiq bench runs on the same machine and sizes
first, and both are printed side by side.

FLOPs are counted as src/cli/bench_vision.c counts them: every matmul and both attention products (each window's
over its own rows), 2 per multiply-add.

Usage (on the GPU machine; needs torch with CUDA and transformers; PIL for the processor):
    PYTHONPATH=tools python3 tools/bench_peer_vision.py --size 384 1024 [--repeat 5] [--layers 32] \\
        [--attn eager,sdpa,flash_attention_2] [--cortiq build-gpu/cortiq [--cortiq-quant q8_2f]]
"""
import argparse
import importlib.util
import math
import re
import sys
import time

import torch

from peer_timing import run_cortiq_bench, timed

VISION = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584, patch_size=14,
              temporal_patch_size=2, spatial_merge_size=2, window_size=112, fullatt_block_indexes=[7, 15, 23, 31],
              in_channels=3, hidden_act="silu", tokens_per_second=2)
MIN_PIXELS, MAX_PIXELS, FACTOR = 56 * 56, 28 * 28 * 1280, 28


def smart_resize(h, w):
    """Qwen2-VL's smart_resize with the class defaults (the fallback when the processor cannot be built)."""
    hb, wb = max(FACTOR, round(h / FACTOR) * FACTOR), max(FACTOR, round(w / FACTOR) * FACTOR)
    if hb * wb > MAX_PIXELS:
        beta = math.sqrt(h * w / MAX_PIXELS)
        hb = max(FACTOR, math.floor(h / beta / FACTOR) * FACTOR)
        wb = max(FACTOR, math.floor(w / beta / FACTOR) * FACTOR)
    elif hb * wb < MIN_PIXELS:
        beta = math.sqrt(MIN_PIXELS / (h * w))
        hb, wb = math.ceil(h * beta / FACTOR) * FACTOR, math.ceil(w * beta / FACTOR) * FACTOR
    return hb, wb


def window_lengths(gh, gw):
    """Patch rows of each window (4 x 4 merge units, the partial last row/column included, empty ones dropped)."""
    ws, uh, uw = VISION["window_size"] // 28, gh // 2, gw // 2
    sides = lambda u: [min(ws, u - k * ws) for k in range(u // ws + 1) if u - k * ws > 0]
    return [a * b * 4 for a in sides(uh) for b in sides(uw)]


def flops(gh, gw, layers):
    D, I, O = VISION["hidden_size"], VISION["intermediate_size"], VISION["out_hidden_size"]
    n = gh * gw
    seg2 = sum(x * x for x in window_lengths(gh, gw))
    f = 2.0 * n * 1176 * D
    for b in range(layers):
        full = b in VISION["fullatt_block_indexes"]
        f += 2 * n * D * 3 * D + 2 * n * D * D + 2 * n * D * I * 3 + 4 * D * (n * n if full else seg2)
    return f + 2.0 * (n / 4) * (4 * D) ** 2 + 2.0 * (n / 4) * 4 * D * O


def picture(side):
    """The processor's pixel_values and grid for a random side x side picture, and the processor's seconds."""
    g = torch.Generator().manual_seed(12345)
    rgb = (torch.rand(side, side, 3, generator=g) * 255).to(torch.uint8)
    try:
        from PIL import Image
        from transformers import Qwen2VLImageProcessor

        proc = Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)  # the class defaults, said
        img = Image.fromarray(rgb.numpy(), "RGB")
        out = proc(images=[img], return_tensors="pt")
        t0 = time.perf_counter()
        reps = 3
        for _ in range(reps):
            proc(images=[img], return_tensors="pt")
        sec = (time.perf_counter() - t0) / reps
        return out["pixel_values"], out["image_grid_thw"], sec, type(proc).__name__
    except Exception as e:  # no PIL or a processor API this script does not know: the same grid, random rows
        print(f"(the image processor did not run: {e}; random pixel rows of the same grid instead)", flush=True)
        h, w = smart_resize(side, side)
        grid = torch.tensor([[1, h // 14, w // 14]])
        return torch.randn(int(grid.prod()), 1176, generator=g), grid, None, None


def build(impl, layers):
    from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import Qwen2_5_VLVisionConfig
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel

    vc = dict(VISION, depth=layers, fullatt_block_indexes=[b for b in VISION["fullatt_block_indexes"] if b < layers])
    cfg = Qwen2_5_VLVisionConfig(**vc)
    torch.manual_seed(0)
    with torch.device("cuda"):
        try:
            model = Qwen2_5_VisionTransformerPretrainedModel._from_config(cfg, attn_implementation=impl,
                                                                           dtype=torch.bfloat16)
        except TypeError:  # transformers 4.x spells the dtype torch_dtype
            model = Qwen2_5_VisionTransformerPretrainedModel._from_config(cfg, attn_implementation=impl,
                                                                           torch_dtype=torch.bfloat16)
    model = model.to(torch.bfloat16).eval()
    # weights of unit-variance maps (whatever the constructor's init did): norms 1, biases 0
    for name, p in model.named_parameters():
        if p.ndim >= 2:
            p.normal_(0.0, p[0].numel() ** -0.5)
        elif "norm" in name or "ln_q" in name:
            p.fill_(1.0)
        else:
            p.zero_()
    return model


def run_peer(impl, pixels, grid, layers, repeat):
    try:
        model = build(impl, layers)
    except Exception as e:
        print(f"{impl:18s}: not available here ({type(e).__name__}: {e})", flush=True)
        return None
    px, g = pixels.to("cuda", torch.bfloat16), grid.to("cuda")
    torch.cuda.reset_peak_memory_stats()

    def call():
        model(px, grid_thw=g)

    sec = timed(call, repeat)
    peak = torch.cuda.max_memory_allocated()
    gh, gw = int(grid[0, 1]), int(grid[0, 2])
    f = flops(gh, gw, layers)
    print(f"transformers {impl:18s} grid {gh}x{gw}: forward {1e3 * sec:8.2f} ms ({f * 1e-12 / sec:6.1f} TFLOP/s), "
          f"peak memory {peak / 2**30:.2f} GiB", flush=True)
    del model
    torch.cuda.empty_cache()
    return sec


def run_cortiq(path, size, repeat, layers, quant):
    cmd = [path, "bench", "vision", "--backend", "cuda", "--size", str(size), "--quant", quant, "--repeat",
           str(repeat), "--layers", str(layers)]
    out = run_cortiq_bench(cmd)
    if out is None:
        return None
    m = re.search(r"^forward \(.*?\)\s+([0-9.]+)", out, re.M)
    return float(m.group(1)) * 1e-3 if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, nargs="+", default=[384, 1024], help="picture sides in pixels")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs after the warm-up (median reported)")
    ap.add_argument("--layers", type=int, default=32, help="blocks to build (32 = the released tower)")
    ap.add_argument("--attn", default="eager,sdpa,flash_attention_2",
                    help="attention implementations to time (those not installed are skipped)")
    ap.add_argument("--cortiq", help="path of the cortiq binary: run its CUDA bench on the same sizes first")
    ap.add_argument("--cortiq-quant", default="q8_2f", help="codec of cortiq's random weights (q8_2f or bf16)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    if not 1 <= args.layers <= 32:
        sys.exit("--layers: want 1 .. 32")
    import transformers

    torch.set_grad_enabled(False)
    impls = [a for a in args.attn.split(",") if a]
    if "flash_attention_2" in impls and importlib.util.find_spec("flash_attn") is None:
        print("flash_attention_2: skipped (the flash_attn package is not installed)", flush=True)
        impls.remove("flash_attention_2")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name()}, "
          f"bf16; attention: {', '.join(impls)}", flush=True)

    ours = {s: run_cortiq(args.cortiq, s, args.repeat, args.layers, args.cortiq_quant) for s in args.size} \
        if args.cortiq else {}
    rows = {}
    for s in args.size:
        pixels, grid, t_proc, proc_name = picture(s)
        gh, gw = int(grid[0, 1]), int(grid[0, 2])
        print(f"picture {s}x{s} -> {gw * 14}x{gh * 14}: grid 1 x {gh} x {gw}, {gh * gw} patch rows in "
              f"{len(window_lengths(gh, gw))} windows, {gh * gw // 4} tokens out"
              + (f"; {proc_name} {1e3 * t_proc:.1f} ms" if t_proc is not None else ""), flush=True)
        rows[s] = {impl: run_peer(impl, pixels, grid, args.layers, args.repeat) for impl in impls}

    fmt = lambda v: f"{1e3 * v:9.2f}" if v else "        -"
    print(f"\nforward ms per picture side ({args.layers} blocks): cortiq cuda | "
          + " | ".join(f"transformers {i}" for i in impls) + " | best transformers / cortiq")
    for s in args.size:
        o = ours.get(s)
        best = min((v for v in rows[s].values() if v), default=None)
        ratio = f"{best / o:6.2f}x" if o and best else "     -"
        print(f"{s:4d}: {fmt(o)} | " + " | ".join(fmt(rows[s][i]) for i in impls) + f" | {ratio}")


if __name__ == "__main__":
    main()
