#!/usr/bin/env python3
"""Golden data for ltx-core's ancestral Euler step (src/pipelines/ltx2_sample.h, cq_ltx2_ancestral_step; the LTX-2.5
distilled stage 1 of ltx-pipelines): ltx_core.components.diffusion_steps.EulerAncestralDiffusionStep run on random
states and predictions over whole schedules in float32, with the noise the ltx-pipelines loop draws
(_ancestral_euler_denoising_loop: one generator seeded with the pipeline seed + 10000, per step the video tensor
then the audio tensor, torch.randn in the latents' dtype; here a CPU generator and float32, model_dtype float32),
none at the terminal step, where the step returns the prediction.

Cases (cases/<name>.safetensors; index.json: sigmas, eta, s_noise, seed, shapes, the ltx-core commit):
    ladder      the distilled 8-step ladder and its terminal 0, eta 1, s_noise 1 (ltx-pipelines' setting)
    eta_half    linspace(1, 1/4, 4) and 0, eta 0.5, s_noise 0.8
    eta_zero    the stage-2 ladder (0.909375, 0.725, 0.421875, 0), eta 0: no noise, plain Euler to sigma_next
Per step i and stream s in (video, audio): <s>_x<i> (the state before), <s>_x0_<i> (the prediction),
<s>_noise<i> (the draw, where there is one), <s>_out<i> (the state after); shapes [tokens, features] (batch dropped).

Usage, from the repository root (torch; ltx-core's source on PYTHONPATH, e.g. `git archive` of Lightricks/LTX-2's
packages/ltx-core/src into ref/ltx2):
    PYTHONPATH=ref/ltx2/packages/ltx-core/src python3 tools/golden_ltx2_ancestral.py --out tests/golden/ltx2_ancestral
"""
import argparse
import json
import os

import struct

import torch

try:
    from safetensors.torch import save_file
except ImportError:  # a machine without safetensors: the same file format written by hand (float32 only)
    def save_file(tensors, path):
        header, blobs, off = {}, [], 0
        for k in sorted(tensors):
            t = tensors[k].detach().to(torch.float32).contiguous()
            b = t.numpy().tobytes()
            header[k] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
            off += len(b)
            blobs.append(b)
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * (-len(h) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

from ltx_core.components.diffusion_steps import EulerAncestralDiffusionStep

LTX_CORE_COMMIT = "400fd31"
DISTILLED = [1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875]
CASES = {
    "ladder": dict(sigmas=DISTILLED + [0.0], eta=1.0, s_noise=1.0, seed=42),
    "eta_half": dict(sigmas=[1.0, 0.75, 0.5, 0.25, 0.0], eta=0.5, s_noise=0.8, seed=7),
    "eta_zero": dict(sigmas=[0.909375, 0.725, 0.421875, 0.0], eta=0.0, s_noise=1.0, seed=3),
}
SHAPES = {"video": (24, 16), "audio": (9, 8)}  # tokens x features
OFFSET = 10000  # ltx-pipelines' ANCESTRAL_NOISE_SEED_OFFSET


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/ltx2_ancestral")
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out, "cases"), exist_ok=True)
    index = dict(generator="tools/golden_ltx2_ancestral.py", torch=torch.__version__, ltx_core=LTX_CORE_COMMIT,
                 noise_seed_offset=OFFSET, shapes=SHAPES, cases={})
    data_gen = torch.Generator().manual_seed(20261204)
    for name, c in CASES.items():
        stepper = EulerAncestralDiffusionStep(eta=c["eta"], s_noise=c["s_noise"])
        sigmas = torch.tensor(c["sigmas"], dtype=torch.float32)
        noise_gen = torch.Generator("cpu").manual_seed(c["seed"] + OFFSET)
        state = {s: torch.randn((1,) + sh, generator=data_gen) for s, sh in SHAPES.items()}
        rec = {}
        for i in range(len(c["sigmas"]) - 1):
            terminal = c["sigmas"][i + 1] == 0
            for s, sh in SHAPES.items():
                x = state[s]
                x0 = x * (1 - c["sigmas"][i]) + 0.5 * torch.randn((1,) + sh, generator=data_gen)
                noise = None
                if not terminal and c["eta"] > 0:
                    noise = torch.randn(x.shape, generator=noise_gen, dtype=x.dtype)
                    rec[f"{s}_noise{i}"] = noise[0].clone()
                out = x0.clone() if terminal else stepper.step(sample=x.float(), denoised_sample=x0, sigmas=sigmas,
                                                               step_index=i, noise=noise)
                rec[f"{s}_x{i}"], rec[f"{s}_x0_{i}"], rec[f"{s}_out{i}"] = x[0].clone(), x0[0].clone(), out[0].clone()
                state[s] = out
        save_file({k: v.contiguous() for k, v in rec.items()}, os.path.join(a.out, "cases", name + ".safetensors"))
        index["cases"][name] = dict(c, steps=len(c["sigmas"]) - 1)
        print(f"{name}: {len(c['sigmas']) - 1} steps, {len(rec)} tensors")
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
