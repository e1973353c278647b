#!/usr/bin/env python3
"""A tiny random LTX-2 latent upsampler folder at 16 latent channels (tests/fixtures/ltx2_ups16): the diffusers
LTX2LatentUpsamplerModel layout (config.json and diffusion_pytorch_model.safetensors, float32), written with numpy
alone, so that the pipeline tests can run the two-stage recipe on tests/golden/ltx2_pipe's tiny pack before (or
without) the reference's own two-stage golden. Weights: kernels randn / sqrt(fan_in), norm weights 1 + 0.2 randn,
biases 0.1 randn, from numpy's PCG64 with a fixed seed. Shapes follow diffusers' latent_upsampler.py (58eb52c0):
in_channels 16, mid_channels 32, one res block a stage, the plain x2 spatial resampler.

Usage, from the repository root: python3 tools/make_ltx2_ups_fixture.py --out tests/fixtures/ltx2_ups16
"""
import argparse
import json
import os
import struct

import numpy as np

C, M, B = 16, 32, 1
CONFIG = {"_class_name": "LTX2LatentUpsamplerModel", "_diffusers_version": "0.40.0.dev0", "dims": 3,
          "in_channels": C, "mid_channels": M, "num_blocks_per_stage": B, "rational_spatial_scale": 2.0,
          "spatial_upsample": True, "temporal_upsample": False, "use_rational_resampler": False}


def tensors(rng):
    t = {}

    def conv(name, cout, cin, k):
        shape = (cout, cin) + k
        t[name + ".weight"] = rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))
        t[name + ".bias"] = 0.1 * rng.standard_normal(cout)

    def norm(name, n):
        t[name + ".weight"] = 1 + 0.2 * rng.standard_normal(n)
        t[name + ".bias"] = 0.1 * rng.standard_normal(n)
    conv("initial_conv", M, C, (3, 3, 3))
    norm("initial_norm", M)
    for stem in ("res_blocks", "post_upsample_res_blocks"):
        for i in range(B):
            conv(f"{stem}.{i}.conv1", M, M, (3, 3, 3))
            norm(f"{stem}.{i}.norm1", M)
            conv(f"{stem}.{i}.conv2", M, M, (3, 3, 3))
            norm(f"{stem}.{i}.norm2", M)
    conv("upsampler.0", 4 * M, M, (3, 3))
    conv("final_conv", C, M, (3, 3, 3))
    return {k: v.astype(np.float32) for k, v in t.items()}


def save_safetensors(path, ts):
    header, off, blobs = {}, 0, []
    for k in sorted(ts):
        b = np.ascontiguousarray(ts[k]).tobytes()
        header[k] = {"dtype": "F32", "shape": list(ts[k].shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures/ltx2_ups16")
    ap.add_argument("--seed", type=int, default=20261204)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
        f.write("\n")
    save_safetensors(os.path.join(a.out, "diffusion_pytorch_model.safetensors"), tensors(np.random.default_rng(a.seed)))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
