#!/usr/bin/env python3
"""Golden data for Qwen-Image's VAE (diffusers AutoencoderKLQwenImage, the Wan-2.1 layout), single-frame images.

One tiny random configuration with the real model's structure (4 levels, dim_mult [1, 2, 4, 4],
temperal_downsample [False, True, True], two residual blocks a level, 16 latent channels, RGB), every parameter
re-randomised from a fixed generator (RMS-norm gammas 1 + 0.2 randn, kernels randn / sqrt(fan_in), biases
0.15 randn; each value rounded to bfloat16 and values below 2^-14 flushed to zero, so the bf16 folder and an f16
conversion hold them exactly), random per-channel latents_mean / latents_std. Run on the CPU in float32 with TF32
off, and again with the model and the input in bfloat16, whose error against float32 is stored per case (a GPU
path must stay within a quarter of it):

    bf16_max_rel = max|ref_bf16 - ref_f32| / rms(ref_f32),   bf16_rms_rel = rms(ref_bf16 - ref_f32) / rms(ref_f32)

Writes (under --out, normally tests/golden/qimage_vae):
    index.json               versions, the config, per case: kind, shapes, out_rms, bf16 errors, taps
    vae/                     the diffusers AutoencoderKLQwenImage folder (bf16 weights)
    cases/<case>.safetensors
        decode:   z [16,h,w] (what vae.decode receives) -> image [3,8h,8w] (decode(z), clamped to [-1, 1])
        pipeline: latents [16,h,w] (the denoiser's space), z [16,h,w] = latents / (1 / latents_std) + latents_mean
                  as pipeline_qwenimage.py computes it (f32), image [3,8h,8w] = decode(z)
        encode:   x [3,H,W] in [-1, 1] -> moments [32,H/8,W/8] (quant_conv's output: mean | logvar),
                  mean [16,H/8,W/8] (posterior.mode()), latents [16,H/8,W/8] = (mean - latents_mean) / latents_std
                  as the edit pipeline normalises them
        taps (f32, [C,H,W], only those of at most TAP_MAX values): tap.<module> = that module's output, for
                  post_quant_conv, decoder.conv_in, decoder.mid_block, decoder.up_blocks.<i> (decode) and
                  encoder.conv_in, encoder.down_blocks.<k>, encoder.mid_block, encoder.conv_out, quant_conv (encode)

Usage (torch on the machine; diffusers' source at commit 58eb52c0), from the repository root:
    PYTHONPATH=ref/diffusers/src python3 tools/golden_qwenimage_vae.py --out tests/golden/qimage_vae
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file

from diffusers import AutoencoderKLQwenImage
from golden_zimage import c32, randn, rel_errs  # the house helpers (tools/ is on the path when run as a script)

DIFFUSERS_COMMIT = "58eb52c0"
Z_DIM = 16
CONFIG = dict(base_dim=4, z_dim=Z_DIM, dim_mult=[1, 2, 4, 4], num_res_blocks=2, attn_scales=[],
              temperal_downsample=[False, True, True], dropout=0.0, input_channels=3)
# name: (kind, h, w): decode / pipeline sizes in latent pixels, encode sizes in image pixels
CASES = {
    "dec_s": ("decode", 8, 8),
    "dec_odd": ("decode", 6, 10),
    "pipe": ("pipeline", 4, 6),
    "enc_s": ("encode", 32, 32),
    "enc_odd": ("encode", 48, 80),
}
TAP_MAX = 4096


def randomise(model, gen):
    """Every parameter from gen, each value exact in bf16 and in f16 (no f16 subnormals)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("gamma"):  # RMS_norm weights
                v = 1.0 + 0.2 * randn(gen, *p.shape)
            else:
                v = randn(gen, *p.shape) / p[0].numel() ** 0.5 if p.ndim >= 2 else 0.15 * randn(gen, *p.shape)
            v = v.to(torch.bfloat16).double()
            p.copy_(torch.where(v.abs() < 2.0 ** -14, 0.0, v).to(p.dtype))


def frame(t):
    """[1, C, 1, H, W] -> [C, H, W] f32."""
    return c32(t[0, :, 0])


def tap_modules(model):
    mods = {"post_quant_conv": model.post_quant_conv, "decoder.conv_in": model.decoder.conv_in,
            "decoder.mid_block": model.decoder.mid_block, "encoder.conv_in": model.encoder.conv_in,
            "encoder.mid_block": model.encoder.mid_block, "encoder.conv_out": model.encoder.conv_out,
            "quant_conv": model.quant_conv}
    for i, b in enumerate(model.decoder.up_blocks):
        mods[f"decoder.up_blocks.{i}"] = b
    for k, b in enumerate(model.encoder.down_blocks):
        mods[f"encoder.down_blocks.{k}"] = b
    return mods


class Taps:
    def __init__(self, model):
        self.got, self.hooks = {}, []
        for name, mod in tap_modules(model).items():
            self.hooks.append(mod.register_forward_hook(self.hook(name)))

    def hook(self, name):
        def f(mod, args, out):
            assert name not in self.got, f"{name} ran twice"
            self.got[name] = frame(out)
        return f

    def take(self):
        got, self.got = self.got, {}
        return {f"tap.{k}": v for k, v in got.items() if v.numel() <= TAP_MAX}

    def remove(self):
        for h in self.hooks:
            h.remove()


def stats(vae, dtype):
    mean = torch.tensor(vae.config.latents_mean).view(1, Z_DIM, 1, 1, 1).to(dtype)
    std = torch.tensor(vae.config.latents_std).view(1, Z_DIM, 1, 1, 1).to(dtype)
    return mean, std


def denormalize(vae, latents):
    """pipeline_qwenimage.py's order: latents / (1 / std) + mean, in the latents' dtype."""
    mean = torch.tensor(vae.config.latents_mean).view(1, Z_DIM, 1, 1, 1).to(latents.dtype)
    std_inv = 1.0 / torch.tensor(vae.config.latents_std).view(1, Z_DIM, 1, 1, 1).to(latents.dtype)
    return latents / std_inv + mean


def run_case(m, mb, taps, gen, kind, h, w):
    """(tensors, reference output, the bf16 reference's output)."""
    if kind in ("decode", "pipeline"):
        if kind == "decode":
            z = randn(gen, 1, Z_DIM, 1, h, w).float()
            zb = z.bfloat16()
            t = {"z": frame(z)}
        else:
            lat = randn(gen, 1, Z_DIM, 1, h, w).float()
            z = denormalize(m, lat)
            zb = denormalize(mb, lat.bfloat16())
            t = {"latents": frame(lat), "z": frame(z)}
        ref = m.decode(z, return_dict=False)[0]
        t.update(taps.take())
        got = mb.decode(zb, return_dict=False)[0].float()
        t["image"] = frame(ref)
        return t, ref, got
    x = (torch.rand(1, 3, 1, h, w, generator=gen, dtype=torch.float64) * 2 - 1).float()
    ref = m._encode(x)
    t = {"x": frame(x)}
    t.update(taps.take())
    mode = m.encode(x).latent_dist.mode()
    taps.take()
    assert torch.equal(mode, ref[:, :Z_DIM]), "posterior.mode() is not the moments' first half"
    mean, std = stats(m, mode.dtype)
    t.update(moments=frame(ref), mean=frame(mode), latents=frame((mode - mean) / std))
    got = mb._encode(x.bfloat16()).float()
    return t, ref, got


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/qimage_vae")
    ap.add_argument("--seed", type=int, default=20261215)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    gen = torch.Generator().manual_seed(args.seed)
    os.makedirs(os.path.join(args.out, "cases"), exist_ok=True)

    # per-channel statistics: rounded to 4 decimals, as the real config writes them; std in [0.5, 3]
    lmean = [round(v, 4) for v in (0.6 * randn(gen, Z_DIM)).tolist()]
    lstd = [round(v, 4) for v in (0.5 + 2.5 * torch.rand(Z_DIM, generator=gen, dtype=torch.float64)).tolist()]
    cfg = dict(CONFIG, latents_mean=lmean, latents_std=lstd)
    model = AutoencoderKLQwenImage(**cfg).float().eval()
    randomise(model, gen)
    path = os.path.join(args.out, "vae")
    model.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
    m = AutoencoderKLQwenImage.from_pretrained(path, torch_dtype=torch.float32).eval()
    mb = AutoencoderKLQwenImage.from_pretrained(path, torch_dtype=torch.bfloat16).eval()
    taps = Taps(m)

    index = dict(torch=torch.__version__, diffusers=DIFFUSERS_COMMIT, seed=args.seed, config=cfg, tap_max=TAP_MAX,
                 cases={})
    for name, (kind, h, w) in CASES.items():
        tensors, ref, got = run_case(m, mb, taps, gen, kind, h, w)
        mx, rm, rms = rel_errs(ref, got)
        save_file(tensors, os.path.join(args.out, "cases", name + ".safetensors"),
                  metadata={"kind": kind, "diffusers": DIFFUSERS_COMMIT})
        index["cases"][name] = dict(kind=kind, size=[h, w], out_rms=rms, bf16_max_rel=mx, bf16_rms_rel=rm,
                                    shapes={k: list(v.shape) for k, v in tensors.items()})
        print(f"{name} ({kind} {h}x{w}): rms {rms:.4f}, bf16 max {mx:.3e} rms {rm:.3e}, "
              f"{sum(k.startswith('tap.') for k in tensors)} taps")
    taps.remove()
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)


if __name__ == "__main__":
    main()
