#!/usr/bin/env python3
"""Golden data for LTX-2's token positions and "split" RoPE tables (src/models/ltx2_rope.h): diffusers'
LTX2AudioVideoRotaryPosEmbed (transformer_ltx2.py at commit 58eb52c0) on the CPU, as LTX2VideoTransformer3DModel
builds its four instances (video self-attention, audio self-attention, and the two time-only tables of the
audio<->video attentions).

Cases: video grids of 1 and 3 latent frames (fps 24, 25 and 24/1.001) at inner widths 64 (2 heads), 256 (2 heads)
and 4096 (32 heads: the real model, pad 2); audio runs of 1, 9 and 13 latent frames (shift 0 and 3) at widths 32
(2 heads) and 2048 (32 heads); the cross tables (width 2048, one axis, largest position 20) from the video and audio
time midpoints; one video case with the float32 ladder (rope_double_precision False).

Writes (under --out, normally tests/golden/ltx2_rope):
    index.json         per case: kind, geometry, fps, dim, heads, axes, max_pos, f64, rows, file keys
    golden.safetensors per case c: pos_<c> f32 [T, axes] (the midpoints the table reads), cos_<c> / sin_<c>
                       f32 [T, dim/2] (heads side by side, as the model's [B, H, T, dim/2/H] tables laid back)

Usage, from the repository root (torch on the machine; diffusers' source at commit 58eb52c0):
    PYTHONPATH=ref/diffusers/src python3 tools/golden_ltx2_rope.py --out tests/golden/ltx2_rope
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file

from diffusers.models.transformers.transformer_ltx2 import LTX2AudioVideoRotaryPosEmbed

DIFFUSERS_COMMIT = "58eb52c0"


def video_rope(dim, heads, f64=True, base=20):
    return LTX2AudioVideoRotaryPosEmbed(dim=dim, patch_size=1, patch_size_t=1, base_num_frames=base,
                                        base_height=2048, base_width=2048, scale_factors=(8, 32, 32), theta=10000.0,
                                        causal_offset=1, modality="video", double_precision=f64, rope_type="split",
                                        num_attention_heads=heads)


def audio_rope(dim, heads, base=20):
    return LTX2AudioVideoRotaryPosEmbed(dim=dim, patch_size=1, patch_size_t=1, base_num_frames=base,
                                        sampling_rate=16000, hop_length=160, scale_factors=[4], theta=10000.0,
                                        causal_offset=1, modality="audio", double_precision=True, rope_type="split",
                                        num_attention_heads=heads)


def laid_back(tab):
    b, h, t, r = tab.shape  # (B, H, T, D/2/H) -> (T, D/2)
    return tab[0].permute(1, 0, 2).reshape(t, h * r).contiguous()


def midpoints(coords):
    start, end = coords.chunk(2, dim=-1)
    return ((start + end) / 2.0).squeeze(-1)[0].transpose(0, 1).contiguous()  # [T, axes]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/ltx2_rope")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    os.makedirs(args.out, exist_ok=True)
    tensors, index = {}, {"diffusers": DIFFUSERS_COMMIT, "torch": torch.__version__, "cases": {}}

    def put(name, meta, rope, coords):
        cos, sin = rope(coords, device="cpu")
        tensors[f"pos_{name}"] = midpoints(coords).float()
        tensors[f"cos_{name}"] = laid_back(cos).float()
        tensors[f"sin_{name}"] = laid_back(sin).float()
        meta.update(rows=int(tensors[f"pos_{name}"].shape[0]), cols=int(tensors[f"cos_{name}"].shape[1]))
        index["cases"][name] = meta
        print(name, meta)

    videos = [("v64_f1", 64, 2, (1, 2, 3), 24.0, True), ("v64_f3", 64, 2, (3, 4, 6), 25.0, True),
              ("v256_f3", 256, 2, (3, 2, 5), 24.0 / 1.001, True), ("v4096", 4096, 32, (2, 2, 3), 24.0, True),
              ("v64_f32", 64, 2, (3, 4, 6), 24.0, False)]
    for name, dim, heads, (f, h, w), fps, f64 in videos:
        rope = video_rope(dim, heads, f64)
        coords = rope.prepare_video_coords(1, f, h, w, "cpu", fps=fps)
        put(name, dict(kind="video", dim=dim, heads=heads, frames=f, h=h, w=w, fps=fps, f64=f64, axes=3,
                       max_pos=[20, 2048, 2048]), rope, coords)
        if name in ("v64_f3", "v4096"):
            cross = video_rope(2048 if name == "v4096" else 32, heads, True, base=20)
            put(f"x_{name}", dict(kind="cross_video", dim=cross.dim, heads=heads, frames=f, h=h, w=w, fps=fps,
                                  f64=True, axes=1, max_pos=[20]), cross, coords[:, 0:1])
    audios = [("a32_1", 32, 2, 1, 0), ("a32_9", 32, 2, 9, 0), ("a32_13s3", 32, 2, 13, 3), ("a2048_9", 2048, 32, 9, 0)]
    for name, dim, heads, n, shift in audios:
        rope = audio_rope(dim, heads)
        coords = rope.prepare_audio_coords(1, n, "cpu", shift=shift)
        put(name, dict(kind="audio", dim=dim, heads=heads, frames=n, shift=shift, f64=True, axes=1, max_pos=[20]),
            rope, coords)
        if name in ("a32_9", "a2048_9"):
            cross = audio_rope(32 if dim == 32 else 2048, heads)
            put(f"x_{name}", dict(kind="cross_audio", dim=cross.dim, heads=heads, frames=n, shift=shift, f64=True,
                                  axes=1, max_pos=[20]), cross, coords[:, 0:1])
    save_file(tensors, os.path.join(args.out, "golden.safetensors"))
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)


if __name__ == "__main__":
    main()
