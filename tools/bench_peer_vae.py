#!/usr/bin/env python3
"""The peer of `cortiq bench vae --backend cuda`: diffusers' VAE of the same model on the same sizes.

--model qi21 (the default): AutoencoderKLQwenImage21 at its released configuration (its defaults: base 96/144,
z 64, dim_mult 1-2-4-8-8, 2 residual blocks per level); latents [1, 64, 1, SIZE/16, SIZE/16].
--model flux: AutoencoderKL as Z-Image and Flux ship it (block_out_channels 128-256-512-512, 2 layers per
block, 32 groups, 16 latent channels, no quant convs); latents [1, 16, SIZE/8, SIZE/8]; cortiq's side runs
`cortiq bench vae --model flux` (its memory plan at the default budget; --budget MIB passes one).

Random weights on the GPU, in bf16 (as the diffusers pipelines run them) and with --f32 also in float32,
untiled and eager, timing what cortiq times: decoding random latents into a SIZE x SIZE image (and with
--encode, encoding an image of that size): a warm-up, then the median of --repeat runs, each bracketed by
torch.cuda.synchronize(). With --cortiq PATH, the cortiq bench runs on the same machine on the same sizes first,
and the script prints both and the ratio.

Usage (on the GPU machine; needs torch with CUDA and diffusers' source):
    PYTHONPATH=ref/diffusers/src python3 tools/bench_peer_vae.py [--model qi21|flux] --size 512 1024 2048 \\
        [--repeat 5] [--encode] [--f32] [--budget MIB] [--cortiq build-gpu/cortiq]
"""
import argparse
import re
import sys

import torch

from peer_timing import run_cortiq_bench, timed

# The Flux VAE as Z-Image ships it (its vae/config.json).
FLUX_VAE = dict(in_channels=3, out_channels=3, latent_channels=16, block_out_channels=[128, 256, 512, 512],
                layers_per_block=2, norm_num_groups=32, act_fn="silu", down_block_types=["DownEncoderBlock2D"] * 4,
                up_block_types=["UpDecoderBlock2D"] * 4, scaling_factor=0.3611, shift_factor=0.1159,
                use_quant_conv=False, use_post_quant_conv=False, mid_block_add_attention=True, force_upcast=True,
                sample_size=1024)


def make_model(name):
    """The model on the GPU (random weights, float32)."""
    if name == "flux":
        from diffusers.models.autoencoders.autoencoder_kl import AutoencoderKL

        with torch.device("cuda"):
            return AutoencoderKL(**FLUX_VAE).eval()
    from diffusers.models.autoencoders.autoencoder_kl_qwenimage21 import AutoencoderKLQwenImage21

    with torch.device("cuda"):
        return AutoencoderKLQwenImage21().eval()


def inputs(model, name, dtype, size, g):
    """Latents and an image of `size` pixels: 5-D (a single frame) for qi21, 4-D for flux."""
    if name == "flux":
        z = torch.randn(1, model.config.latent_channels, size // 8, size // 8, generator=g)
        x = torch.rand(1, model.config.in_channels, size, size, generator=g) * 2 - 1
    else:
        z = torch.randn(1, model.config.z_dim, 1, size // 16, size // 16, generator=g)
        x = torch.rand(1, model.config.in_channels, 1, size, size, generator=g) * 2 - 1
    return z.to("cuda", dtype), x.to("cuda", dtype)


def run_peer(model, name, dtype, size, repeat, encode, label):
    g = torch.Generator(device="cpu").manual_seed(4242)
    z, x = inputs(model, name, dtype, size, g)
    torch.cuda.reset_peak_memory_stats()
    dec = timed(lambda: model.decode(z, return_dict=False), repeat)
    enc = timed(lambda: model.encode(x, return_dict=False), repeat) if encode else None
    peak = torch.cuda.max_memory_allocated() / 2**30
    extra = f", encode {enc:8.4f} s" if enc else ""
    print(f"{label:28s} size {size:4d}: decode {dec:8.4f} s{extra}, peak memory {peak:.1f} GiB", flush=True)
    return dec, enc


def run_cortiq(path, name, size, repeat, encode, budget):
    cmd = [path, "bench", "vae", "--model", name, "--backend", "cuda", "--size", str(size), "--repeat", str(repeat)]
    if encode:
        cmd.append("--encode")
    if budget:
        cmd += ["--budget", str(budget)]
    out = run_cortiq_bench(cmd)
    if out is None:
        return None, None
    d = re.search(r"^decode .*?: ([0-9.]+) s", out, re.M)
    e = re.search(r"^encode .*?: ([0-9.]+) s", out, re.M)
    return (float(d.group(1)) if d else None), (float(e.group(1)) if e else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["qi21", "flux"], default="qi21", help="which VAE (default qi21)")
    ap.add_argument("--budget", type=int, help="flux: cortiq's activation budget in MiB (default: its own)")
    ap.add_argument("--size", type=int, nargs="+", default=[512, 1024, 2048], help="image sides in pixels")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs after the warm-up (median reported)")
    ap.add_argument("--encode", action="store_true", help="also time the encoder")
    ap.add_argument("--f32", action="store_true", help="also run diffusers in float32")
    ap.add_argument("--cortiq", help="path of the cortiq binary: run its CUDA bench on the same sizes first")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    for s in args.size:
        if s not in (256, 512, 1024, 2048):
            sys.exit(f"--size {s}: want 256, 512, 1024 or 2048 (the sizes cortiq's bench takes)")
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)

    if args.budget and args.model != "flux":
        sys.exit("--budget is an option of --model flux")
    ours = ({s: run_cortiq(args.cortiq, args.model, s, args.repeat, args.encode, args.budget) for s in args.size}
            if args.cortiq else {})

    peers = {}
    for dtype in [torch.bfloat16] + ([torch.float32] if args.f32 else []):
        name = "bf16" if dtype == torch.bfloat16 else "f32"
        torch.manual_seed(0)
        model = make_model(args.model).to(dtype)
        peers[name] = {s: run_peer(model, args.model, dtype, s, args.repeat, args.encode, f"diffusers {name}")
                       for s in args.size}
        del model
        torch.cuda.empty_cache()

    print("\nseconds per size: cortiq cuda | " + " | ".join(f"diffusers {n}" for n in peers) + " | bf16 / cortiq")
    fmt = lambda v: f"{v:9.4f}" if v else "        -"
    for what, i in (("decode", 0), ("encode", 1)):
        if i == 1 and not args.encode:
            continue
        for s in args.size:
            o = ours.get(s, (None, None))[i]
            row = " | ".join(fmt(peers[n][s][i]) for n in peers)
            b = peers["bf16"][s][i]
            ratio = f"{b / o:6.2f}x" if o and b else "     -"
            print(f"{what} {s:4d}^2: {fmt(o)} | {row} | {ratio}")


if __name__ == "__main__":
    main()
