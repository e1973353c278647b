#!/usr/bin/env python3
"""Golden data for the Qwen-Image-2.1 VAE (AutoencoderKLQwenImage21), single-frame images.

Tiny random configurations of diffusers' reference autoencoder (weights re-randomised, RMS-norm gammas away
from one, non-zero biases), run in float32 on the CPU. Per configuration it writes a diffusers folder and
`golden.safetensors` with:
    z_<k>        f32 [z_dim, h, w]          a random latent (the VAE's own space, i.e. after the pipeline's
                                            latents * std + mean)
    image_<k>    f32 [C, 16h, 16w]          decode(z), clamped to [-1, 1] as the reference does
                                            (C = out_channels / patch_size^2)
    x_<k>        f32 [C, H, W]              a random image in [-1, 1]
    moments_<k>  f32 [2*z_dim, H/16, W/16]  the encoder output before the posterior (mean | logvar)
A large-ish case exercises tiled decoding in our implementation against an untiled reference.

Usage (needs torch + diffusers' source with the Qwen-Image-2.1 files):
    PYTHONPATH=ref/diffusers/src python3 tools/golden_vae.py --out tests/golden/vae
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file

from diffusers.models.autoencoders.autoencoder_kl_qwenimage21 import AutoencoderKLQwenImage21

CONFIGS = {
    # the real model's structure (5 levels, 16x without patching, RGBA), tiny widths
    "vae_a": dict(base_dim=4, decoder_base_dim=6, z_dim=16, dim_mult=[1, 2, 4, 8, 8], num_res_blocks=2,
                  attn_scales=[], temperal_downsample=[False, True, True, True], in_channels=4, out_channels=4,
                  patch_size=None, is_residual=True),
    # the config's other branch: 2x2 patching + 3 levels, RGB, same base widths
    "vae_b": dict(base_dim=8, decoder_base_dim=8, z_dim=4, dim_mult=[1, 2, 4, 4], num_res_blocks=1,
                  attn_scales=[], temperal_downsample=[False, True, True], in_channels=12, out_channels=12,
                  patch_size=2, is_residual=True),  # with patching, channels count after the 2x2 fold (RGB x 4)
}
# latent (h, w) sizes per case; images are 16x larger
SIZES = {"s": (2, 3), "m": (4, 4), "l": (9, 7)}


def randomise(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("gamma"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel()
                p.copy_(torch.randn(p.shape, generator=gen) / fan_in ** 0.5)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/vae")
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    summary = {}
    for i, (name, cfg) in enumerate(CONFIGS.items()):
        gen = torch.Generator().manual_seed(args.seed + i)
        z_dim = cfg["z_dim"]
        cfg = dict(cfg, latents_mean=[0.1 * k for k in range(z_dim)], latents_std=[1.0 + 0.25 * k for k in range(z_dim)])
        model = AutoencoderKLQwenImage21(**cfg).float().eval()
        randomise(model, gen)
        d = os.path.join(args.out, name)
        model.save_pretrained(d, safe_serialization=True)
        tensors = {}
        for key, (h, w) in SIZES.items():
            z = torch.randn(1, z_dim, 1, h, w, generator=gen)
            img = model.decode(z, return_dict=False)[0]
            tensors[f"z_{key}"] = z[0, :, 0].contiguous()
            tensors[f"image_{key}"] = img[0, :, 0].contiguous()
            p = cfg["patch_size"] or 1
            x = torch.rand(1, cfg["in_channels"] // (p * p), 1, 16 * h, 16 * w, generator=gen) * 2 - 1
            moments = model._encode(x)
            tensors[f"x_{key}"] = x[0, :, 0].contiguous()
            tensors[f"moments_{key}"] = moments[0, :, 0].contiguous()
        save_file(tensors, os.path.join(d, "golden.safetensors"))
        summary[name] = {k: list(v.shape) for k, v in tensors.items()}
        print(name, {k: tuple(v.shape) for k, v in tensors.items()})
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump({"torch": torch.__version__, "configs": summary}, f, indent=1)


if __name__ == "__main__":
    main()
