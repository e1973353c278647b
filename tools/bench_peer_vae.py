#!/usr/bin/env python3
"""The peer of `cortiq bench vae --backend cuda`: diffusers' AutoencoderKLQwenImage21 on the same sizes.

Builds the released configuration (AutoencoderKLQwenImage21's defaults: base 96/144, z 64, dim_mult 1-2-4-8-8,
2 residual blocks per level) with random weights on the GPU, in bf16 (as the diffusers pipeline runs it) and with
--f32 also in float32, untiled, and times what cortiq times: decoding random latents [1, 64, 1, SIZE/16, SIZE/16]
into a SIZE x SIZE image (and with --encode, encoding an image of that size): a warm-up, then the median of
--repeat runs, each bracketed by torch.cuda.synchronize(). With --cortiq PATH, the cortiq bench runs on the same
machine on the same sizes first, and the script prints both and the ratio.

Usage (on the GPU machine; needs torch with CUDA and diffusers' source with the Qwen-Image-2.1 files):
    PYTHONPATH=ref/diffusers/src python3 tools/bench_peer_vae.py --size 512 1024 2048 \\
        [--repeat 5] [--encode] [--f32] [--cortiq build-gpu/cortiq]
"""
import argparse
import re
import subprocess
import sys

import torch

from diffusers.models.autoencoders.autoencoder_kl_qwenimage21 import AutoencoderKLQwenImage21

from peer_timing import timed


def run_peer(model, dtype, size, repeat, encode, label):
    g = torch.Generator(device="cpu").manual_seed(4242)
    z = torch.randn(1, model.config.z_dim, 1, size // 16, size // 16, generator=g).to("cuda", dtype)
    x = (torch.rand(1, model.config.in_channels, 1, size, size, generator=g) * 2 - 1).to("cuda", dtype)
    torch.cuda.reset_peak_memory_stats()
    dec = timed(lambda: model.decode(z, return_dict=False), repeat)
    enc = timed(lambda: model.encode(x, return_dict=False), repeat) if encode else None
    peak = torch.cuda.max_memory_allocated() / 2**30
    extra = f", encode {enc:8.4f} s" if enc else ""
    print(f"{label:28s} size {size:4d}: decode {dec:8.4f} s{extra}, peak memory {peak:.1f} GiB", flush=True)
    return dec, enc


def run_cortiq(path, size, repeat, encode):
    cmd = [path, "bench", "vae", "--backend", "cuda", "--size", str(size), "--repeat", str(repeat)]
    if encode:
        cmd.append("--encode")
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        sys.stdout.write(p.stderr)
        print(f"cortiq bench failed (exit {p.returncode})", flush=True)
        return None, None
    d = re.search(r"^decode .*?: ([0-9.]+) s", p.stdout, re.M)
    e = re.search(r"^encode .*?: ([0-9.]+) s", p.stdout, re.M)
    return (float(d.group(1)) if d else None), (float(e.group(1)) if e else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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

    ours = {s: run_cortiq(args.cortiq, s, args.repeat, args.encode) for s in args.size} if args.cortiq else {}

    peers = {}
    for dtype in [torch.bfloat16] + ([torch.float32] if args.f32 else []):
        name = "bf16" if dtype == torch.bfloat16 else "f32"
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = AutoencoderKLQwenImage21().to(dtype).eval()
        peers[name] = {s: run_peer(model, dtype, s, args.repeat, args.encode, f"diffusers {name}") for s in args.size}
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
