#!/usr/bin/env python3
"""The peer of `cortiq bench ltx25 --backend cuda`: diffusers' LTX2VideoTransformer3DModel on the same shapes.

Builds the released LTX-2.5 configuration (48 blocks; video 32 heads x 128, FF 16384 without bias; audio 32 heads
x 64, FF 8192 with bias; gated attention, the prompt's adaLN, the keyframe row; src/cli/bench_pack.c writes the same
config for cortiq) with random weights in bf16 on the GPU (constructed in bf16, so the 22B never exists in float32),
with its default attention processor (SDPA), and times one forward for F frames of W x H pixels as LTX2Pipeline calls
it: (F-1)/8+1 latent frames of H/32 x W/32 video tokens, round(F/fps x 25) audio tokens, both prompts --text-rows
rows (the connectors' 1024), one timestep per stream and use_cross_timestep: a warm-up, then the median of --repeat
runs, each bracketed by torch.cuda.synchronize(). With --compile, the same through torch.compile (the first calls
compile; they are left out of the timing). With --cortiq PATH, the cortiq bench runs on the same machine and shapes
first, and both are printed side by side.

diffusers' forward runs the prompt-side work (the prompts' adaLN and the cross-attention keys and values) at every
call, which cortiq does once per prompt and grid (its `prepare`); the summary sets diffusers' forward against cortiq's
step + prepare and against its step alone. FLOPs are counted as src/cli/bench_ltx2.c counts them: every matmul and
both attention products, 2 per multiply-add.

Usage (on the GPU machine; needs torch with CUDA and diffusers' source):
    PYTHONPATH=ref/diffusers/src:tools python3 tools/bench_peer_ltx2.py --geometry 768x512x121 384x256x49 \\
        [--text-rows 1024] [--repeat 5] [--compile] [--layers 48] [--cortiq build-gpu/cortiq [--cortiq-quant bf16]]
"""
import argparse
import re
import sys

import torch

from diffusers import LTX2VideoTransformer3DModel

from peer_timing import run_cortiq_bench, timed

LAYERS, HEADS, HD, AHEADS, AHD, CH = 48, 32, 128, 32, 64, 128
DV, DA = HEADS * HD, AHEADS * AHD
CONFIG = dict(in_channels=CH, out_channels=CH, patch_size=1, patch_size_t=1, num_attention_heads=HEADS,
              attention_head_dim=HD, cross_attention_dim=DV, vae_scale_factors=(8, 32, 32), pos_embed_max_pos=20,
              base_height=2048, base_width=2048, gated_attn=True, cross_attn_mod=True, audio_in_channels=CH,
              audio_out_channels=CH, audio_patch_size=1, audio_patch_size_t=1, audio_num_attention_heads=AHEADS,
              audio_attention_head_dim=AHD, audio_cross_attention_dim=DA, audio_scale_factor=4,
              audio_pos_embed_max_pos=20, audio_sampling_rate=16000, audio_hop_length=160, audio_gated_attn=True,
              audio_cross_attn_mod=True, activation_fn="gelu-approximate", qk_norm="rms_norm_across_heads",
              norm_elementwise_affine=False, norm_eps=1e-6, caption_channels=3840, attention_bias=True,
              attention_out_bias=True, rope_theta=10000.0, rope_double_precision=True, causal_offset=1,
              timestep_scale_multiplier=1000, cross_attn_timestep_scale_multiplier=1000, rope_type="split",
              use_prompt_embeddings=False, perturbed_attn=True, ff_bias=False, audio_ff_bias=True,
              use_prompt_adaln_single=True, use_keyframes_abs_pos_embedding=True)


def geometry(s):
    w, h, f = (int(v) for v in s.split("x"))
    if w % 32 or h % 32 or (f - 1) % 8:
        sys.exit(f"--geometry {s}: want W and H multiples of 32 and F = 8k + 1")
    return w, h, f


def tokens(w, h, f, fps):
    lf, lh, lw = (f - 1) // 8 + 1, h // 32, w // 32
    return lf, lh, lw, round(f / fps * 25.0)


def flops_step(nv, na, lv, la, layers):
    """One step as src/cli/bench_ltx2.c counts it."""
    v = 4 * nv * DV * DV + 2 * nv * nv * DV
    v += 2 * nv * DV * DV + 2 * lv * DV * DV + 2 * nv * lv * DV
    v += nv * DV * DA + 2 * na * DA * DA + nv * DA * DV + 2 * nv * na * DA
    v += 8 * nv * DV * DV
    a = 4 * na * DA * DA + 2 * na * na * DA
    a += 2 * na * DA * DA + 2 * la * DA * DA + 2 * na * la * DA
    a += na * DA * DA + 2 * nv * DV * DA + na * DA * DA + 2 * na * nv * DA
    a += 8 * na * DA * DA
    g = 3 * nv * DV * HEADS + 3 * na * DA * AHEADS
    io = nv * 2 * CH * DV + na * 2 * CH * DA
    return 2.0 * (layers * (v + a + g) + io)


def run_peer(model, geo, fps, L, repeat, label):
    dev = "cuda"
    w, h, f = geo
    lf, lh, lw, na = tokens(w, h, f, fps)
    nv = lf * lh * lw
    g = torch.Generator(device="cpu").manual_seed(12345)
    rnd = lambda *s: (torch.rand(*s, generator=g) * 2 - 1).to(dev, torch.bfloat16)
    x, ax = rnd(1, nv, CH), rnd(1, na, CH)
    ctx, actx = rnd(1, L, DV), rnd(1, L, DA)
    vc = model.rope.prepare_video_coords(1, lf, lh, lw, torch.device(dev), fps=fps)
    ac = model.audio_rope.prepare_audio_coords(1, na, torch.device(dev))
    s = [1.0]

    def call():
        s[0] = s[0] * 0.99
        t = torch.tensor([1000.0 * s[0]], device=dev, dtype=torch.float32)
        model(hidden_states=x, audio_hidden_states=ax, encoder_hidden_states=ctx, audio_encoder_hidden_states=actx,
              timestep=t, audio_timestep=t, sigma=t, audio_sigma=t, video_coords=vc, audio_coords=ac,
              num_frames=lf, height=lh, width=lw, fps=fps, audio_num_frames=na, use_cross_timestep=True,
              return_dict=False)

    torch.cuda.reset_peak_memory_stats()
    sec = timed(call, repeat)
    fs = flops_step(nv, na, L, L, model.config.num_layers)
    peak = torch.cuda.max_memory_allocated()
    print(f"{label:24s} {w}x{h}x{f}: {nv} video + {na} audio tokens, forward {1e3 * sec:9.2f} ms "
          f"({fs * 1e-12 / sec:6.1f} TFLOP/s), peak memory {peak / 2**30:.1f} GiB", flush=True)
    return sec


def ms_of(out, label):
    """The row's first figure in ms: the table's column is "ms" on a device, "wall s" on the CPU."""
    m = re.search(r"^" + re.escape(label) + r" \(.*?\)\s+([0-9.]+)", out, re.M)
    if not m:
        return None
    return float(m.group(1)) * (1.0 if re.search(r"^\s+ms\s", out, re.M) else 1e3)


def run_cortiq(path, geo, fps, repeat, layers, L, quant):
    w, h, f = geo
    cmd = [path, "bench", "ltx25", "--backend", "cuda", "--width", str(w), "--height", str(h), "--frames", str(f),
           "--fps", str(fps), "--quant", quant, "--steps", str(repeat), "--layers", str(layers), "--text-rows",
           str(L)]
    out = run_cortiq_bench(cmd)
    if out is None:
        return None
    r = {"step": ms_of(out, "step"), "prepare": ms_of(out, "prepare")}
    return r if r["step"] is not None and r["prepare"] is not None else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--geometry", nargs="+", default=["768x512x121"], help="WxHxF in pixels and frames")
    ap.add_argument("--fps", type=float, default=24.0)
    ap.add_argument("--text-rows", type=int, default=1024, help="each prompt's rows (the connectors keep 1024)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs after the warm-up (median reported)")
    ap.add_argument("--layers", type=int, default=LAYERS, help="blocks to build (48 = the released model)")
    ap.add_argument("--compile", action="store_true", help="also time the forward through torch.compile")
    ap.add_argument("--cortiq", help="path of the cortiq binary: run its CUDA bench on the same shapes first")
    ap.add_argument("--cortiq-quant", default="bf16", help="codec of cortiq's random weights (bf16, q8_2f, q4tp)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    geos = [geometry(s) for s in args.geometry]
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, bf16, SDPA "
          f"(flash: {torch.backends.cuda.flash_sdp_enabled()})", flush=True)

    ours = {}
    if args.cortiq:
        for g in geos:
            ours[g] = run_cortiq(args.cortiq, g, args.fps, args.repeat, args.layers, args.text_rows,
                                 args.cortiq_quant)

    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = LTX2VideoTransformer3DModel(**dict(CONFIG, num_layers=args.layers))
    finally:
        torch.set_default_dtype(prev)
    model = model.to("cuda").eval()
    eager = {g: run_peer(model, g, args.fps, args.text_rows, args.repeat, "diffusers eager") for g in geos}
    compiled = {}
    if args.compile:
        cm = torch.compile(model)
        compiled = {g: run_peer(cm, g, args.fps, args.text_rows, args.repeat, "diffusers torch.compile")
                    for g in geos}

    fmt = lambda v: f"{v:9.2f}" if v else "        -"
    print(f"\nms per geometry ({args.layers} blocks, prompts {args.text_rows} rows): cortiq step | cortiq step + "
          "prepare | diffusers eager | diffusers compiled | eager / cortiq step | eager / (step + prepare)")
    for g in geos:
        o = ours.get(g)
        e = 1e3 * eager[g]
        c = 1e3 * compiled[g] if g in compiled else None
        r1 = f"{e / o['step']:6.2f}x" if o else "     -"
        r2 = f"{e / (o['step'] + o['prepare']):6.2f}x" if o else "     -"
        print(f"{g[0]}x{g[1]}x{g[2]}: {fmt(o['step'] if o else None)} | "
              f"{fmt(o['step'] + o['prepare'] if o else None)} | {fmt(e)} | {fmt(c)} | {r1} | {r2}")


if __name__ == "__main__":
    main()
