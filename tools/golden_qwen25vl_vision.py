#!/usr/bin/env python3
"""Golden data for the Qwen2.5-VL vision tower (the `visual` part of Qwen2_5_VLForConditionalGeneration, which
Qwen-Image's Edit pipelines run on condition images), tiny and random, on the CPU in float32.

The tiny configuration: depth 4, hidden 32, 2 heads, intermediate 48, out_hidden_size 24, patch 14, spatial merge 2,
temporal patch 2, window_size 56 (windows of 2 x 2 merge units, so a grid has several windows) and full attention
in blocks 1 and 3. Every vision parameter is re-randomised from a fixed generator (norm weights 1 + 0.2 randn,
matrices and the patch kernel randn / sqrt(fan_in), biases 0.1 randn), rounded to values bf16 holds exactly. The
text tower is a minimal one (it is not part of this data).

Writes (under --out, normally tests/golden/qwen25vl_vision):
    model/                     the Hugging Face folder (config.json, model.safetensors in bf16: exact)
    golden.safetensors         per case c:
        <c>.grid         i32 [n_img, 3]   image_grid_thw
        <c>.window_index i32 [N/4]        the reference's window permutation of the merge units
        <c>.cu_window    i32 [W+1]        the window boundaries (patch rows, after dropping empty windows)
        <c>.pre_merger   f32 [N, 32]      the last block's output, in the input's patch order (un-permuted)
        <c>.block_<i>    f32 [N, 32]      block i's output (i < depth - 1), in the input's patch order
        <c>.out          f32 [N/4, 24]    the tower's output (after the merger and the un-permutation)
      and per image i (a, b):
        <i>.pixels_q     i8  [N_i, 1176]  pixel_values = pixels_q / 32 (every value exact in bf16 and f32)
      The two-image case "ab" runs a's pixels followed by b's (its pixel_values are not stored again).
    index.json                 versions, per-case shapes, output RMS and the reference's own bf16 error:
        bf16_max_rel = max|ref_bf16 - ref_f32| / rms(ref_f32),   bf16_rms_rel = rms(ref_bf16 - ref_f32) / rms(ref_f32)

Usage (needs torch and transformers), from the repository root:
    PYTHONPATH=ref/diffusers/src:tools python3 tools/golden_qwen25vl_vision.py --out tests/golden/qwen25vl_vision
"""
import argparse
import copy
import json
import os

import torch
import transformers
from safetensors.torch import save_file
from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

VISION = dict(depth=4, hidden_size=32, intermediate_size=48, num_heads=2, out_hidden_size=24, patch_size=14,
              spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1, 3],
              in_channels=3, hidden_act="silu")
TEXT = dict(vocab_size=64, hidden_size=24, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=1, max_position_embeddings=256, rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "mrope", "rope_theta": 1000000.0, "mrope_section": [2, 2, 2]})
IMAGES = {"a": (1, 8, 12), "b": (1, 12, 16)}
CASES = {"a": ["a"], "b": ["b"], "ab": ["a", "b"]}
PIX_SCALE = 32.0


def randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def randomise(vis, gen):
    norms = {f"{mn}.{pn}" if mn else pn for mn, mod in vis.named_modules() if "Norm" in type(mod).__name__
             for pn, _ in mod.named_parameters(recurse=False) if pn == "weight"}
    with torch.no_grad():
        for name, p in vis.named_parameters():
            if name in norms:
                v = 1.0 + 0.2 * randn(gen, *p.shape)
            elif p.ndim >= 2:
                v = randn(gen, *p.shape) / p[0].numel() ** 0.5
            else:
                v = 0.1 * randn(gen, *p.shape)
            v = v.to(torch.bfloat16).double()
            v[v.abs() < 2.0 ** -14] = 0
            p.copy_(v.to(p.dtype))


def window_index(grid, merge, win_units):
    """The merge units of each image, window by window (windows of win_units x win_units units in raster order,
    units raster within a window), and the window boundaries in patch rows (empty windows dropped)."""
    idx, cu, base = [], [0], 0
    for t, h, w in grid:
        gh, gw = h // merge, w // merge
        nwh, nww = (gh + win_units - 1) // win_units + (gh % win_units == 0), \
            (gw + win_units - 1) // win_units + (gw % win_units == 0)
        for f in range(t):
            for wy in range(nwh):
                for wx in range(nww):
                    n = 0
                    for y in range(wy * win_units, min((wy + 1) * win_units, gh)):
                        for x in range(wx * win_units, min((wx + 1) * win_units, gw)):
                            idx.append(base + f * gh * gw + y * gw + x)
                            n += 1
                    if n:
                        cu.append(cu[-1] + n * merge * merge)
        base += t * gh * gw
    return torch.tensor(idx, dtype=torch.int64), torch.tensor(cu, dtype=torch.int32)


def rel_errs(ref, got):
    ref, got = ref.double(), got.double()
    rms = ref.pow(2).mean().sqrt().item()
    d = got - ref
    return d.abs().max().item() / rms, d.pow(2).mean().sqrt().item() / rms, rms


def c32(t):
    return t.detach().to(torch.float32).contiguous().clone()


def visual_of(model):
    inner = getattr(model, "model", None)
    vis = getattr(inner, "visual", None) if inner is not None else None
    return vis if vis is not None else model.visual


def run(vis, pixels, grid):
    """Merged output (input order) and every block's output and the merger's input (window order)."""
    taps, merger_in = [], []
    hooks = [b.register_forward_hook(lambda m, a, o: taps.append(o[0] if isinstance(o, tuple) else o))
             for b in vis.blocks]
    hooks.append(vis.merger.register_forward_hook(lambda m, a, o: merger_in.append(a[0])))
    try:
        res = vis(pixels, grid_thw=grid)
    finally:
        for h in hooks:
            h.remove()
    out = res if torch.is_tensor(res) else getattr(res, "pooler_output", None)
    if out is None:
        raise SystemExit("the vision tower returned neither a tensor nor pooler_output")
    return out, taps, merger_in[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/golden/qwen25vl_vision")
    ap.add_argument("--seed", type=int, default=2507)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gen = torch.Generator().manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)

    config = Qwen2_5_VLConfig(text_config=dict(TEXT), vision_config=dict(VISION), tie_word_embeddings=False,
                              image_token_id=60, video_token_id=61, vision_start_token_id=62,
                              vision_end_token_id=63)
    model = Qwen2_5_VLForConditionalGeneration(config).float().eval()
    vis = visual_of(model)
    randomise(vis, gen)
    mdir = os.path.join(args.out, "model")
    model.to(torch.bfloat16).save_pretrained(mdir, safe_serialization=True)
    # the weights are bf16 values: the f32 model and the bf16 one hold exactly what the folder does
    vis_b = copy.deepcopy(visual_of(model)).eval()
    model.float()
    vis = visual_of(model)

    merge = VISION["spatial_merge_size"]
    unit = merge * merge
    win_units = VISION["window_size"] // merge // VISION["patch_size"]
    dim = VISION["in_channels"] * VISION["temporal_patch_size"] * VISION["patch_size"] ** 2
    tensors, pix = {}, {}
    for name, (t, h, w) in IMAGES.items():
        q = torch.randint(-64, 65, (t * h * w, dim), generator=gen, dtype=torch.int64).to(torch.int8)
        tensors[f"{name}.pixels_q"] = q.contiguous()
        pix[name] = q.to(torch.float32) / PIX_SCALE

    index = dict(transformers=transformers.__version__, torch=torch.__version__, seed=args.seed, vision=VISION,
                 pixel_scale=1.0 / PIX_SCALE, cases={})
    with torch.no_grad():
        for case, imgs in CASES.items():
            grid = torch.tensor([IMAGES[i] for i in imgs], dtype=torch.int64)
            pixels = torch.cat([pix[i] for i in imgs], 0)
            n = pixels.shape[0]
            widx, cu = window_index(grid.tolist(), merge, win_units)
            if hasattr(vis, "get_window_index"):
                ref_idx, ref_cu = vis.get_window_index(grid)
                ref_cu = torch.unique_consecutive(torch.tensor(ref_cu, dtype=torch.int32))
                assert torch.equal(ref_idx.to(torch.int64), widx), "window index differs from the reference's"
                assert torch.equal(ref_cu, cu), "window boundaries differ from the reference's"
            rev = torch.argsort(widx)

            def unperm(x):
                return x.reshape(n // unit, unit, -1)[rev].reshape(n, -1)

            out, taps, pre = run(vis, pixels, grid)
            assert len(taps) == VISION["depth"]
            assert torch.equal(taps[-1], pre)
            merged = vis.merger(pre)[rev]
            d = (merged - out).abs().max().item()
            assert d <= 1e-6 * max(1.0, out.abs().max().item()), f"merger recomputation differs by {d}"
            out_b, _, pre_b = run(vis_b, pixels.to(torch.bfloat16), grid)
            mx, rm, rms = rel_errs(out, out_b.float())
            pmx, prm, prms = rel_errs(unperm(pre), unperm(pre_b.float()))
            tensors[f"{case}.grid"] = grid.to(torch.int32).contiguous()
            tensors[f"{case}.window_index"] = widx.to(torch.int32).contiguous()
            tensors[f"{case}.cu_window"] = cu.contiguous()
            tensors[f"{case}.pre_merger"] = c32(unperm(pre))
            tensors[f"{case}.out"] = c32(out)
            if case != "ab":  # the two-image case keeps only its outputs (size)
                for i in range(VISION["depth"] - 1):
                    tensors[f"{case}.block_{i}"] = c32(unperm(taps[i]))
            index["cases"][case] = dict(images=imgs, grid=grid.tolist(), patches=n, windows=len(cu) - 1,
                                        out=list(out.shape), out_rms=rms, bf16_max_rel=mx, bf16_rms_rel=rm,
                                        pre_merger_rms=prms, pre_merger_bf16_max_rel=pmx,
                                        pre_merger_bf16_rms_rel=prm)
            print(f"{case}: grid {grid.tolist()}, {len(cu) - 1} windows, out {list(out.shape)} rms {rms:.4f}, "
                  f"bf16 max {mx:.3e} rms {rm:.3e}; pre-merger bf16 max {pmx:.3e} rms {prm:.3e}")

    save_file(tensors, os.path.join(args.out, "golden.safetensors"),
              metadata={"transformers": transformers.__version__})
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
