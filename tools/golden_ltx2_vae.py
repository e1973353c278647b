#!/usr/bin/env python3
"""Golden data for LTX-2.3 / 2.5's conv video VAE (src/models/ltx2_vae.h): a tiny random diffusers
AutoencoderKLLTX2Video (models/autoencoders/autoencoder_kl_ltx2.py at commit 58eb52c0) with LTX-2.5's block
structure (diffusers' converter, get_ltx2_video_vae_config("2.3"), which 2.5 reuses: four up blocks
spatiotemporal, spatiotemporal, temporal, spatial with factors (2, 2, 1, 2), no residual upsampler, no noise, no
timestep conditioning, zero padding, a non-causal decoder and a causal encoder) at small widths and patch 2, run on
the CPU in float32 with TF32 off, untiled (use_tiling and framewise decoding off), plus the pipeline's
normalisation (LTX2Pipeline._denormalize_latents before decoding, _normalize_latents after encoding; the same
formulas written out when pipeline_ltx2 does not import, e.g. a transformers without Gemma-4, noted in index.json).

Model (every parameter re-randomised from a fixed generator: kernels randn / sqrt(fan_in), biases 0.1 randn,
rounded to bf16 with no f16 subnormals; latents_mean 0.3 randn, latents_std 0.5 + U(0, 1); stored as a bf16
diffusers folder, the float32 run reads the folder back):
    tiny   latent 8; decoder_block_out_channels (4, 8, 8, 16) -> decode widths 16 | 8, 8, 4, 2;
           block_out_channels (8, 16, 32, 32); one ResBlock everywhere

Cases (decode: latent frames x height x width, z randn with uneven channel scales; encode: frames x H x W, x in
[-1, 1]):
    d_f1_1x2   1 latent frame of 1 x 2 (non-square)          -> 1 frame of 16 x 32
    d_f2_2x1   2 latent frames of 2 x 1                       -> 9 frames of 32 x 16
    d_f3_1x1   3 latent frames of 1 x 1                       -> 17 frames of 16 x 16
    e_f1_16x32 1 frame of 16 x 32                             -> 1 x 1 x 2 latents
    e_f9_16x16 9 frames of 16 x 16                            -> 2 x 1 x 1 latents
Each case also runs the same folder in bfloat16 (the input cast to bf16) with the same taps; index.json stores per
output and tap the reference's own bf16 error (a device path must stay within a quarter of it):
    max_rel = max|ref_bf16 - ref_f32| / rms(ref_f32),   rms_rel = rms(ref_bf16 - ref_f32) / rms(ref_f32)

Writes (under --out, normally tests/golden/ltx2_vae):
    tiny/                  the diffusers folder (config.json, diffusion_pytorch_model.safetensors, bf16)
    index.json             versions, seed, the model's config and cases: kind, frames, height, width, taps, output
                           RMS, bf16 errors, which normalisation was used
    cases/<case>.safetensors (batch dimension dropped, all f32)
        decode:  z [C, F, h, w] (VAE space: the decoder's input), z_norm [C, F, h, w] (the DiT's normalised
                 latent it comes from), frames [3, Fo, Ho, Wo] (the decoder's output, not clamped);
                 taps channels-last [T*H*W, C]: dec_conv_in, dec_mid, dec_up<i>, dec_conv_out (before the
                 un-patchify)
        encode:  x [3, F, H, W], mean [C, Fo, Ho, Wo] (the posterior's mode), mean_norm (normalised);
                 taps channels-last: enc_conv_in, enc_down<i>, enc_mid, enc_conv_out (latent + 1 channels)

Usage, from the repository root (torch on the machine; diffusers' source at commit 58eb52c0 on PYTHONPATH):
    PYTHONPATH=$DSRC:tools python3 tools/golden_ltx2_vae.py --out tests/golden/ltx2_vae
"""
import argparse
import inspect
import json
import os
import sys

import torch
from safetensors.torch import save_file

from diffusers import AutoencoderKLLTX2Video

DIFFUSERS_COMMIT = "58eb52c0"
SIZE_BUDGET = 1 << 20  # bytes under --out

MODEL = dict(
    in_channels=3, out_channels=3, latent_channels=8,
    block_out_channels=(8, 16, 32, 32),
    down_block_types=("LTX2VideoDownBlock3D",) * 4,
    decoder_block_out_channels=(4, 8, 8, 16),
    layers_per_block=(1, 1, 1, 1, 1), decoder_layers_per_block=(1, 1, 1, 1, 1),
    spatio_temporal_scaling=(True, True, True, True),
    decoder_spatio_temporal_scaling=(True, True, True, True),
    decoder_inject_noise=(False, False, False, False, False),
    downsample_type=("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
    upsample_type=("spatiotemporal", "spatiotemporal", "temporal", "spatial"),
    upsample_residual=(False, False, False, False), upsample_factor=(2, 2, 1, 2),
    timestep_conditioning=False, patch_size=2, patch_size_t=1, resnet_norm_eps=1e-6, scaling_factor=1.0,
    encoder_causal=True, decoder_causal=False,
    encoder_spatial_padding_mode="zeros", decoder_spatial_padding_mode="zeros",
    spatial_compression_ratio=16, temporal_compression_ratio=8,
)

# name: kind, frames, height, width (latents for a decode, pixels for an encode)
CASES = {
    "d_f1_1x2": ("decode", 1, 1, 2),
    "d_f2_2x1": ("decode", 2, 2, 1),
    "d_f3_1x1": ("decode", 3, 1, 1),
    "e_f1_16x32": ("encode", 1, 16, 32),
    "e_f9_16x16": ("encode", 9, 16, 16),
}


def fail(msg):
    sys.exit(f"golden_ltx2_vae: {msg}")


def normalisers():
    """LTX2Pipeline's _denormalize_latents / _normalize_latents when pipeline_ltx2 imports (it imports the Gemma-4
    classes at load), else the same formulas: y * std / scaling + mean and (y - mean) * scaling / std."""
    try:
        from diffusers.pipelines.ltx2.pipeline_ltx2 import LTX2Pipeline
        return LTX2Pipeline._denormalize_latents, LTX2Pipeline._normalize_latents, "LTX2Pipeline"
    except Exception as e:  # noqa: BLE001 - any import failure means the fallback
        print(f"note: pipeline_ltx2 does not import ({type(e).__name__}: {e}); normalising with the formulas")

        def view(t, like):
            return t.view(1, -1, 1, 1, 1).to(like.device, like.dtype)

        def denorm(latents, latents_mean, latents_std, scaling_factor=1.0):
            return latents * view(latents_std, latents) / scaling_factor + view(latents_mean, latents)

        def norm(latents, latents_mean, latents_std, scaling_factor=1.0):
            return (latents - view(latents_mean, latents)) * scaling_factor / view(latents_std, latents)
        return denorm, norm, "formulas y * std / scaling + mean, (y - mean) * scaling / std"


def check_api():
    params = inspect.signature(AutoencoderKLLTX2Video.__init__).parameters
    missing = [k for k in MODEL if k not in params]
    if missing:
        fail(f"AutoencoderKLLTX2Video.__init__ lacks {missing}: not diffusers {DIFFUSERS_COMMIT}?")


def expected_names(cfg):
    """Every state-dict name the C tensor table (src/models/ltx2_vae_tensors.c) lists for cfg."""
    names = {"latents_mean", "latents_std"}

    def conv(stem):
        names.update({stem + ".conv.weight", stem + ".conv.bias"})

    def res(stem, n):
        for j in range(n):
            conv(f"{stem}.resnets.{j}.conv1")
            conv(f"{stem}.resnets.{j}.conv2")

    dl = cfg["decoder_layers_per_block"][::-1]
    conv("decoder.conv_in")
    res("decoder.mid_block", dl[0])
    for i in range(len(cfg["decoder_block_out_channels"])):
        conv(f"decoder.up_blocks.{i}.upsamplers.0.conv")
        res(f"decoder.up_blocks.{i}", dl[i + 1])
    conv("decoder.conv_out")
    el = cfg["layers_per_block"]
    conv("encoder.conv_in")
    for i in range(len(cfg["block_out_channels"])):
        res(f"encoder.down_blocks.{i}", el[i])
        conv(f"encoder.down_blocks.{i}.downsamplers.0.conv")
    res("encoder.mid_block", el[-1])
    conv("encoder.conv_out")
    return names


def randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def bf16_exact(v):
    v = v.to(torch.bfloat16).double()
    v[v.abs() < 2.0 ** -14] = 0
    return v


def randomise(vae, gen):
    with torch.no_grad():
        for name, p in vae.named_parameters():
            if p.ndim >= 2:
                v = randn(gen, *p.shape) / p[0].numel() ** 0.5
            else:
                v = 0.1 * randn(gen, *p.shape)
            p.copy_(bf16_exact(v).to(p.dtype))
        C = vae.latents_mean.numel()
        vae.latents_mean.copy_(bf16_exact(0.3 * randn(gen, C)).to(vae.latents_mean.dtype))
        vae.latents_std.copy_(bf16_exact(0.5 + torch.rand(C, generator=gen, dtype=torch.float64))
                              .to(vae.latents_std.dtype))


def last(t):
    """[1, C, T, H, W] -> [T*H*W, C] float32 (the C side's channels-last layout)."""
    if t.ndim != 5 or t.shape[0] != 1:
        fail(f"expected a [1, C, T, H, W] tensor, got {tuple(t.shape)}")
    return t[0].permute(1, 2, 3, 0).reshape(-1, t.shape[1]).detach().to(torch.float32).contiguous().clone()


def planar(t):
    """[1, C, T, H, W] -> [C, T, H, W] float32."""
    if t.ndim != 5 or t.shape[0] != 1:
        fail(f"expected a [1, C, T, H, W] tensor, got {tuple(t.shape)}")
    return t[0].detach().to(torch.float32).contiguous().clone()


def rel_errs(ref, got):
    ref = ref.double()
    got = got.double()
    rms = ref.pow(2).mean().sqrt().item()
    if not rms > 0:
        fail("a reference tensor is all zeros")
    d = got - ref
    return d.abs().max().item() / rms, d.pow(2).mean().sqrt().item() / rms, rms


def add_taps(vae, kind):
    taps, hooks = {}, []

    def put(name):
        def f(mod, args, out):
            taps[name] = last(out)
        return f

    if kind == "decode":
        d = vae.decoder
        hooks.append(d.conv_in.register_forward_hook(put("dec_conv_in")))
        hooks.append(d.mid_block.register_forward_hook(put("dec_mid")))
        for i, blk in enumerate(d.up_blocks):
            hooks.append(blk.register_forward_hook(put(f"dec_up{i}")))
        hooks.append(d.conv_out.register_forward_hook(put("dec_conv_out")))
    else:
        e = vae.encoder
        hooks.append(e.conv_in.register_forward_hook(put("enc_conv_in")))
        for i, blk in enumerate(e.down_blocks):
            hooks.append(blk.register_forward_hook(put(f"enc_down{i}")))
        hooks.append(e.mid_block.register_forward_hook(put("enc_mid")))
        hooks.append(e.conv_out.register_forward_hook(put("enc_conv_out")))
    return taps, hooks


def run(vae, kind, x5, dtype):
    """The decoder's frames or the encoder's posterior mode, float32, with the taps."""
    taps, hooks = add_taps(vae, kind)
    if kind == "decode":
        y = vae.decode(x5.to(dtype), return_dict=True).sample
    else:
        y = vae.encode(x5.to(dtype), return_dict=True).latent_dist.mode()
    for hk in hooks:
        hk.remove()
    return taps, y.to(torch.float32)


def dir_size(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/ltx2_vae")
    ap.add_argument("--seed", type=int, default=20261205)
    args = ap.parse_args()
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        fail(f"--out {args.out} exists and is not a folder")
    check_api()
    denormalise, normalise, norm_how = normalisers()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(os.path.join(args.out, "cases"), exist_ok=True)
    gen = torch.Generator().manual_seed(args.seed)

    m = AutoencoderKLLTX2Video(**MODEL).float().eval()
    have = set(m.state_dict().keys())
    want = expected_names(MODEL)
    if have != want:
        fail(f"state dict differs from the C table: extra {sorted(have - want)}, missing {sorted(want - have)}")
    randomise(m, gen)
    path = os.path.join(args.out, "tiny")
    m.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
    f32 = AutoencoderKLLTX2Video.from_pretrained(path, torch_dtype=torch.float32).eval()
    b16 = AutoencoderKLLTX2Video.from_pretrained(path, torch_dtype=torch.bfloat16).eval()
    for k, v in f32.named_parameters():
        if v.dtype != torch.float32:
            fail(f"{k} loaded as {v.dtype}, not float32")
    for vae in (f32, b16):
        if vae.use_tiling or vae.use_framewise_decoding or vae.use_framewise_encoding:
            fail("the model loaded with tiling or framewise coding on")
        if vae.decoder.is_causal or not vae.encoder.is_causal:
            fail("the decoder should be non-causal and the encoder causal")
        if vae.decoder.time_embedder is not None:
            fail("the decoder loaded with timestep conditioning")
    mean, std = f32.latents_mean.float().clone(), f32.latents_std.float().clone()
    sf = float(f32.config.scaling_factor)

    C = MODEL["latent_channels"]
    n_up, n_down = len(MODEL["decoder_block_out_channels"]), len(MODEL["block_out_channels"])
    index = dict(torch=torch.__version__, diffusers=DIFFUSERS_COMMIT, seed=args.seed, normalise=norm_how,
                 models={"tiny": dict(config=MODEL, cases=[])})
    for cname, (kind, F, H, W) in CASES.items():
        tensors = {}
        if kind == "decode":
            scales = 0.5 + torch.rand(C, generator=gen, dtype=torch.float64)
            zn5 = (randn(gen, 1, C, F, H, W) * scales.view(1, C, 1, 1, 1)).float()
            z5 = denormalise(zn5, mean, std, sf)
            ref, y32 = run(f32, kind, z5, torch.float32)
            got, y16 = run(b16, kind, z5, torch.bfloat16)
            ref["frames"], got["frames"] = planar(y32), planar(y16)
            tensors["z"], tensors["z_norm"] = planar(z5), planar(zn5)
            names = {"frames", "dec_conv_in", "dec_mid", "dec_conv_out"} | {f"dec_up{i}" for i in range(n_up)}
            Fo, Ho, Wo = 8 * (F - 1) + 1, 16 * H, 16 * W
            if tuple(ref["frames"].shape) != (3, Fo, Ho, Wo):
                fail(f"case {cname}: frames {tuple(ref['frames'].shape)}, expected {(3, Fo, Ho, Wo)}")
        else:
            x5 = randn(gen, 1, 3, F, H, W).clamp(-1, 1).float()
            ref, m32 = run(f32, kind, x5, torch.float32)
            got, m16 = run(b16, kind, x5, torch.bfloat16)
            ref["mean"], got["mean"] = planar(m32), planar(m16)
            ref["mean_norm"] = planar(normalise(m32, mean, std, sf))
            got["mean_norm"] = planar(normalise(m16, mean, std, sf))
            tensors["x"] = planar(x5)
            names = {"mean", "mean_norm", "enc_conv_in", "enc_mid", "enc_conv_out"} | \
                {f"enc_down{i}" for i in range(n_down)}
            Fo, Ho, Wo = (F - 1) // 8 + 1, H // 16, W // 16
            if tuple(ref["mean"].shape) != (C, Fo, Ho, Wo):
                fail(f"case {cname}: mean {tuple(ref['mean'].shape)}, expected {(C, Fo, Ho, Wo)}")
            if ref["enc_conv_out"].shape[1] != C + 1:
                fail(f"case {cname}: enc_conv_out has {ref['enc_conv_out'].shape[1]} channels, not {C + 1}")
        if set(ref) != names or set(got) != names:
            fail(f"case {cname}: taps {sorted(ref)}, expected {sorted(names)}")
        bf16, rms = {}, {}
        for k, r in ref.items():
            if tuple(got[k].shape) != tuple(r.shape):
                fail(f"case {cname}: {k} is {tuple(r.shape)} in f32 but {tuple(got[k].shape)} in bf16")
            mx, rr, rm = rel_errs(r, got[k])
            bf16[k] = dict(max_rel=mx, rms_rel=rr)
            rms[k] = rm
        tensors.update(ref)
        save_file(tensors, os.path.join(args.out, "cases", cname + ".safetensors"),
                  metadata={"diffusers": DIFFUSERS_COMMIT, "case": cname, "kind": kind})
        taps = sorted(k for k in names if k.startswith(("dec_", "enc_")))
        index["models"]["tiny"]["cases"].append(dict(name=cname, kind=kind, frames=F, height=H, width=W,
                                                     scaling_factor=sf, taps=taps, rms=rms, bf16=bf16))
        out = "frames" if kind == "decode" else "mean"
        print(f"{cname}: {out} rms {rms[out]:.4f} bf16 max {bf16[out]['max_rel']:.3e} "
              f"rms {bf16[out]['rms_rel']:.3e}")
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as fh:
        json.dump(index, fh, indent=1)
    size = dir_size(args.out)
    print(f"{args.out}: {size} bytes")
    if size > SIZE_BUDGET:
        fail(f"{args.out} holds {size} bytes, over the {SIZE_BUDGET}-byte budget")


if __name__ == "__main__":
    main()
