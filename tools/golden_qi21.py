#!/usr/bin/env python3
"""Golden data for the Qwen-Image-2.1 denoiser (QwenImage21Transformer2DModel).

Builds tiny random configurations of diffusers' reference transformer, re-randomises every weight (so no
norm weight is the identity and every path matters), runs the reference forward in float32 on the CPU for a
set of sequence layouts, and writes per case:

    tests/golden/qi21/<model>/                      diffusers folder (config.json + safetensors), float32
    tests/golden/qi21/cases/<case>.safetensors      inputs in the `cortiq forward` contract + the expected
                                                    `velocity` (target rows only)

The inputs follow `cortiq forward`: hidden_states f32 [N_image_tokens, in_channels] (condition images first,
target last), encoder_hidden_states f32 [vlm_len - target_slots, context_in_dim], timestep f32 [1],
img_shapes i32 [k, 3] (frame, height, width; target last), img_mask u8 [vlm_len] (1 at image slots, the
target's slots included).

The reference is run twice per case, once over the whole joint sequence and once through its own prefix KV
cache ("extract" on a first timestep, then "cached" at the case's timestep), and the two must agree before
anything is written.

Usage (needs torch + diffusers' source with the Qwen-Image-2.1 files; not needed at run time):
    PYTHONPATH=ref/diffusers/src python3 tools/golden_qi21.py --out tests/golden/qi21
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file

from diffusers.models.transformers.transformer_qwenimage21 import (
    QwenImage21KVCache,
    QwenImage21Transformer2DModel,
)

MODELS = {
    # name: config
    "tiny_a": dict(patch_size=1, in_channels=8, out_channels=12, num_layers=3, attention_head_dim=16,
                   num_attention_heads=4, context_in_dim=40, mlp_ratio=2, axes_dims_rope=(4, 6, 6), eps=1e-6,
                   causal_condition=True),
    "tiny_b": dict(patch_size=1, in_channels=16, out_channels=16, num_layers=2, attention_head_dim=32,
                   num_attention_heads=2, context_in_dim=24, mlp_ratio=3, axes_dims_rope=(8, 12, 12), eps=1e-6,
                   causal_condition=True),
}

# Layouts: a list of segments, ("text", n) or ("image", h, w); the target image is appended last.
CASES = {
    "t2i_square": ("tiny_a", [("text", 7)], (4, 4), 0.6),
    "t2i_odd": ("tiny_a", [("text", 5)], (3, 4), 0.35),
    "t2i_wide": ("tiny_b", [("text", 9)], (2, 6), 0.8),
    "cond1": ("tiny_a", [("text", 3), ("image", 4, 4), ("text", 5)], (4, 4), 0.5),
    "cond2_adjacent": ("tiny_a", [("text", 4), ("image", 2, 4), ("image", 4, 2), ("text", 2)], (4, 6), 0.7),
    "cond_first": ("tiny_b", [("image", 4, 4), ("text", 6)], (4, 4), 0.25),
    "long_prompt": ("tiny_a", [("text", 150)], (6, 8), 0.45),
    "t_near0": ("tiny_a", [("text", 6)], (4, 4), 0.001),
    "t_near1": ("tiny_b", [("text", 6), ("image", 2, 2), ("text", 1)], (4, 4), 0.999),
}


def randomise(model, gen):
    """Every parameter gets fresh random values: linears ~ N(0, 1/fan_in), norm weights away from identity."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2:
                p.copy_(torch.randn(p.shape, generator=gen) / (p.shape[1] ** 0.5))
            elif "text_norm" in name:  # zero-centred: effective weight is w + 1
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            else:  # q/k RMSNorm weights
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))


def build_inputs(cfg, segments, target_hw, gen):
    vlm_mask = []
    img_shapes = []
    n_img_tokens = 0
    for seg in segments:
        if seg[0] == "text":
            vlm_mask += [0] * seg[1]
        else:
            h, w = seg[1], seg[2]
            assert (h * w) % 4 == 0
            vlm_mask += [1] * (h * w // 4)
            img_shapes.append((1, h, w))
            n_img_tokens += h * w
    th, tw = target_hw
    assert (th * tw) % 4 == 0
    target_slots = th * tw // 4
    n_ctx = len(vlm_mask)  # encoder rows: every vlm position before the target's slots
    vlm_mask += [1] * target_slots
    img_shapes.append((1, th, tw))
    n_img_tokens += th * tw
    hidden = torch.randn(n_img_tokens, cfg["in_channels"], generator=gen)
    ctx = torch.randn(n_ctx, cfg["context_in_dim"], generator=gen)
    return hidden, ctx, torch.tensor(img_shapes, dtype=torch.int32), torch.tensor(vlm_mask, dtype=torch.uint8)


def run(model, hidden, ctx, t, img_shapes, img_mask, mode=None, cache=None):
    shapes = [[tuple(int(v) for v in row) for row in img_shapes.tolist()]]
    out = model(
        hidden_states=hidden[None],
        encoder_hidden_states=ctx[None],
        timestep=torch.tensor([t], dtype=torch.float32),
        img_shapes=shapes,
        img_mask=img_mask.bool()[None],
        kv_cache=cache,
        kv_cache_mode=mode,
        return_dict=False,
    )[0][0]
    th, tw = shapes[0][-1][1], shapes[0][-1][2]
    return out[-th * tw:].contiguous()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/qi21")
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    os.makedirs(os.path.join(args.out, "cases"), exist_ok=True)

    models = {}
    for i, (name, cfg) in enumerate(MODELS.items()):
        gen = torch.Generator().manual_seed(args.seed + i)
        model = QwenImage21Transformer2DModel(**cfg).float().eval()
        randomise(model, gen)
        model.save_pretrained(os.path.join(args.out, name), safe_serialization=True)
        models[name] = model

    index = {}
    for j, (case, (mname, segments, target_hw, t)) in enumerate(CASES.items()):
        model = models[mname]
        cfg = MODELS[mname]
        gen = torch.Generator().manual_seed(args.seed * 31 + j)
        hidden, ctx, img_shapes, img_mask = build_inputs(cfg, segments, target_hw, gen)
        full = run(model, hidden, ctx, t, img_shapes, img_mask)
        cache = QwenImage21KVCache(cfg["num_layers"])
        run(model, hidden, ctx, 0.5 * t + 0.1, img_shapes, img_mask, mode="extract", cache=cache)
        cached = run(model, hidden, ctx, t, img_shapes, img_mask, mode="cached", cache=cache)
        rms = full.pow(2).mean().sqrt().item()
        err = (full - cached).abs().max().item() / rms
        if err > 1e-5:
            sys.exit(f"{case}: reference cached and uncached paths disagree ({err:.3g} of RMS)")
        save_file(
            {
                "hidden_states": hidden.contiguous(),
                "encoder_hidden_states": ctx.contiguous(),
                "timestep": torch.tensor([t], dtype=torch.float32),
                "img_shapes": img_shapes.contiguous(),
                "img_mask": img_mask.contiguous(),
                "velocity": full,
            },
            os.path.join(args.out, "cases", case + ".safetensors"),
            metadata={"model": mname},
        )
        index[case] = {"model": mname, "target": list(target_hw), "timestep": t,
                       "segments": [list(s) for s in segments], "velocity_rms": rms,
                       "ref_cached_vs_full": err}
        print(f"{case:16s} model={mname} tokens={hidden.shape[0]:4d} ctx={ctx.shape[0]:4d} rms={rms:.4f} "
              f"cached-vs-full={err:.2e}")
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump({"torch": torch.__version__, "seed": args.seed, "cases": index}, f, indent=1)


if __name__ == "__main__":
    main()
