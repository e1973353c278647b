#!/usr/bin/env python3
"""The peer of `cortiq bench qwen_image --backend cuda`: diffusers' QwenImageTransformer2DModel on the same shapes.

Builds the released 20B configuration (60 dual-stream blocks, 24 heads x 128, joint_attention_dim 3584, in 64,
out 16, RoPE axes 16/56/56) with random weights in bf16 on the GPU (constructed in bf16, so the 20B never exists in
float32 on the device), with its default attention processor (SDPA), and times one forward for a SIZE x SIZE image
((SIZE/16)^2 image tokens) beside a prompt of --text-rows rows: a warm-up, then the median of --repeat runs, each
bracketed by torch.cuda.synchronize(). With --cfg, also the step with true CFG as QwenImagePipeline runs it: two
calls (the positive prompt, then a negative prompt of --neg-rows rows, each with its mask None as the pipeline
passes an all-valid mask), then neg + 4 (pos - neg) rescaled per token to the positive's norm. The pipeline does
not batch the two prompts, so neither does this script. With --compile, the same through torch.compile (the first
calls compile; they are left out of the timing). With --cortiq PATH, the cortiq bench runs on the same machine and
shapes first, and both are printed side by side.

diffusers' forward runs txt_norm and txt_in at every call, which cortiq does once per prompt (its `prepare`); the
summary sets diffusers' forward against cortiq's step + prepare and against its step alone. FLOPs are counted as
src/cli/bench_qimage.c counts them: every matmul and both attention products, 2 per multiply-add.

--offload none|model|group|all times the same under diffusers' offload modes (tools/peer_offload.py, the semantics
of tools/bench_peer_qi21.py); a model built only for offloading is built on the CPU (slow for 20B).

Usage (on the GPU machine; needs torch with CUDA and diffusers' source):
    PYTHONPATH=ref/diffusers/src:tools python3 tools/bench_peer_qimage.py --size 1024 [--text-rows 64] [--cfg] \\
        [--neg-rows N] [--repeat 5] [--compile] [--layers 60] [--cortiq build-gpu/cortiq [--cortiq-quant q8_2f]]
"""
import argparse
import re
import sys

import torch

from diffusers import QwenImageTransformer2DModel

from peer_offload import add_args, device_used, gib, modes_of, print_modes, run_modes, step_of
from peer_timing import run_cortiq_bench, timed

HEADS, HEAD_DIM, LAYERS, JOINT, IN_CH, OUT_DIM, TPROJ, CFG_SCALE = 24, 128, 60, 3584, 64, 64, 256, 4.0
D = HEADS * HEAD_DIM
MLP = 4 * D


def flops_step(n, l, layers):
    """One forward on n image tokens and l text rows, as src/cli/bench_qimage.c counts it (txt_in apart)."""
    r = n + l
    t = 2.0 * (TPROJ * D + D * D) + 2.0 * D * 2 * D
    block = 2.0 * 2 * D * 6 * D + 2 * r * D * D * 4 + 2 * r * D * MLP * 2 + 4 * r * r * D
    return t + 2.0 * n * IN_CH * D + layers * block + 2.0 * n * D * OUT_DIM


def flops_prepare(l):
    return 2.0 * l * JOINT * D


def run_peer(model, side, L, neg, cfg, repeat, label):
    device = "cuda"
    g = torch.Generator(device="cpu").manual_seed(12345)
    n = side * side
    x = (torch.rand(1, n, IN_CH, generator=g) * 2 - 1).to(device, torch.bfloat16)
    pos = (torch.rand(1, L, JOINT, generator=g) * 2 - 1).to(device, torch.bfloat16)
    negt = (torch.rand(1, neg, JOINT, generator=g) * 2 - 1).to(device, torch.bfloat16)
    shapes = [[(1, side, side)]]
    t = [0.9]

    def forward(txt):
        return model(hidden_states=x, timestep=torch.tensor([t[0]], device=device, dtype=torch.bfloat16),
                     encoder_hidden_states=txt, encoder_hidden_states_mask=None, img_shapes=shapes,
                     return_dict=False)[0]

    def call():
        t[0] = 0.9 - t[0] * 0.01
        forward(pos)

    def call_cfg():
        # QwenImagePipeline: two calls, the combination, each token rescaled to the positive's norm
        t[0] = 0.9 - t[0] * 0.01
        p, q = forward(pos), forward(negt)
        comb = q + CFG_SCALE * (p - q)
        comb * (torch.norm(p, dim=-1, keepdim=True) / torch.norm(comb, dim=-1, keepdim=True))

    torch.cuda.reset_peak_memory_stats()
    layers = model.config.num_layers
    sec = timed(call, repeat)
    fs, fp = flops_step(n, L, layers), flops_prepare(L)
    line = f"{label:30s} size {side * 16:4d}: forward {1e3 * sec:8.2f} ms ({(fs + fp) * 1e-12 / sec:6.1f} TFLOP/s)"
    row = {"prefill": 0.0, "step": sec}
    if cfg:
        sc = timed(call_cfg, repeat)
        fc = fs + fp + flops_step(n, neg, layers) + flops_prepare(neg)
        line += f", true CFG step {1e3 * sc:8.2f} ms ({fc * 1e-12 / sc:6.1f} TFLOP/s)"
        row["cfg"] = sc
    peak, used = torch.cuda.max_memory_allocated(), device_used()
    print(f"{line}, peak memory {gib(peak):.1f} GiB (device used {gib(used):.1f} GiB)", flush=True)
    row.update(peak=peak, used=used)
    return row


def ms_of(out, label):
    m = re.search(r"^" + re.escape(label) + r" \(.*?\)\s+([0-9.]+)", out, re.M)
    return float(m.group(1)) * 1e-3 if m else None


def run_cortiq(path, size, repeat, layers, L, neg, cfg, quant):
    cmd = [path, "bench", "qwen_image", "--backend", "cuda", "--size", str(size), "--quant", quant, "--steps",
           str(repeat), "--layers", str(layers), "--text-rows", str(L)]
    if cfg:
        cmd += ["--cfg", "--neg-rows", str(neg)]
    out = run_cortiq_bench(cmd)
    if out is None:
        return None
    r = {"step": ms_of(out, "step"), "prepare": ms_of(out, "prepare"),
         "cfg": ms_of(out, "step with true CFG"), "neg_prepare": ms_of(out, "prepare, negative")}
    return r if r["step"] is not None and r["prepare"] is not None else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, nargs="+", default=[1024], help="image sides in pixels")
    ap.add_argument("--text-rows", type=int, default=64, help="the prompt's text rows (cortiq's default)")
    ap.add_argument("--cfg", action="store_true", help="also time the step with true CFG (two calls)")
    ap.add_argument("--neg-rows", type=int, help="the negative prompt's text rows (default: as --text-rows)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs after the warm-up (median reported)")
    ap.add_argument("--layers", type=int, default=LAYERS, help="blocks to build (60 = the released model)")
    ap.add_argument("--compile", action="store_true", help="also time the forward through torch.compile (resident)")
    add_args(ap, 50, "QwenImagePipeline's default is 50")
    ap.add_argument("--cortiq", help="path of the cortiq binary: run its CUDA bench on the same shapes first")
    ap.add_argument("--cortiq-quant", default="q8_2f", help="codec of cortiq's random weights (q8_2f, q4tp, bf16)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    for s in args.size:
        if s not in (256, 512, 1024, 2048):
            sys.exit(f"--size {s}: want 256, 512, 1024 or 2048 (as cortiq's bench)")
    if not 1 <= args.text_rows <= 2048:
        sys.exit("--text-rows: want 1 .. 2048 (as cortiq's bench)")
    neg = args.neg_rows if args.neg_rows is not None else args.text_rows
    if args.neg_rows is not None and not args.cfg:
        sys.exit("--neg-rows needs --cfg")
    modes = modes_of(args)
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, bf16, SDPA "
          f"(torch.backends.cuda flash: {torch.backends.cuda.flash_sdp_enabled()}); true CFG as two calls "
          f"(QwenImagePipeline)", flush=True)

    ours = {}
    if args.cortiq:
        for s in args.size:
            ours[s] = run_cortiq(args.cortiq, s, args.repeat, args.layers, args.text_rows, neg, args.cfg,
                                 args.cortiq_quant)

    def run(m, size, label):
        return run_peer(m, size // 16, args.text_rows, neg, args.cfg, args.repeat, label)

    def make():
        # constructed in bf16: a float32 20B (82 GB) would not leave room for its bf16 copy on one device
        prev = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            return QwenImageTransformer2DModel(num_layers=args.layers)
        finally:
            torch.set_default_dtype(prev)

    eager, compiled, offloaded = run_modes(make, modes, args.size, args.compile, run)

    if "none" in modes or ours:
        fmt = lambda v: f"{1e3 * v:9.2f}" if v else "        -"
        print(f"\nms per size (text {args.text_rows} rows, {args.layers} blocks): cortiq step | cortiq step + prepare "
              "| diffusers eager forward | diffusers compiled forward | eager / (cortiq step + prepare)")
        for s in args.size:
            o = ours.get(s)
            e, c = step_of(eager, s), step_of(compiled, s)
            ratio = f"{e / (o['step'] + o['prepare']):6.2f}x" if o and e else "     -"
            print(f"{s:4d}^2: {fmt(o['step'] if o else None)} | {fmt(o['step'] + o['prepare'] if o else None)} | "
                  f"{fmt(e)} | {fmt(c)} | {ratio}")
        if args.cfg:
            print(f"\nms per size, the step with true CFG (negative {neg} rows): cortiq (2 passes + combination) | "
                  "cortiq + both prepares | diffusers eager (2 calls) | diffusers compiled | eager / (cortiq + "
                  "prepares)")
            for s in args.size:
                o = ours.get(s)
                oc = o["cfg"] if o else None
                op = oc + o["prepare"] + (o["neg_prepare"] or 0) if o and oc else None
                e, c = eager.get(s, {}).get("cfg"), compiled.get(s, {}).get("cfg")
                ratio = f"{e / op:6.2f}x" if op and e else "     -"
                print(f"{s:4d}^2: {fmt(oc)} | {fmt(op)} | {fmt(e)} | {fmt(c)} | {ratio}")

    print_modes(eager, offloaded, args.size, args.steps)


if __name__ == "__main__":
    main()
