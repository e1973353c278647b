#!/usr/bin/env python3
"""Golden data for LTX-2's spatial latent upscaler x2 (src/models/ltx2_upsampler.h): a tiny random diffusers
LTX2LatentUpsamplerModel (pipelines/ltx2/latent_upsampler.py at commit 58eb52c0) in the LTX-2.3 / 2.5 layout
(dims 3, spatial x2, the plain resampler: use_rational_resampler False), run on the CPU in float32 with TF32 off,
plus the pipeline's wrapper: de-normalise with the VAE's per-channel statistics
(LTX2LatentUpsamplePipeline._denormalize_latents), upscale, normalise again (LTX2Pipeline._normalize_latents; the
same formula written out when that module does not import, e.g. a transformers without Gemma-4, noted in index.json).

Model (every parameter re-randomised from a fixed generator: norm weights 1 + 0.2 randn, kernels
randn / sqrt(fan_in), biases 0.1 randn; rounded to bf16, no f16 subnormals; stored as a bf16 diffusers folder, the
float32 run reads the folder back):
    tiny   in_channels 8, mid_channels 32 (GroupNorm's 32 groups), 1 block a stage

Cases (latent frames x height x width; z randn with uneven channel scales, the statistics random, std > 0):
    f3_3x4   3 frames of 3 x 4 (non-square)
    f1_2x2   1 frame (the zero time padding on both sides of every conv)
    f2_4x3   2 frames of 4 x 3
Each case also runs the same folder in bfloat16 (the de-normalised latent cast to bf16, as the pipeline casts it to
the upsampler's dtype) with the same taps; index.json stores per output and tap the reference's own bf16 error (a
device path must stay within a quarter of it):
    max_rel = max|ref_bf16 - ref_f32| / rms(ref_f32),   rms_rel = rms(ref_bf16 - ref_f32) / rms(ref_f32)

Writes (under --out, normally tests/golden/ltx2_upsampler):
    tiny/                  the diffusers folder (config.json, diffusion_pytorch_model.safetensors, bf16)
    index.json             versions, seed, the model's config and cases: frames, height, width, scaling_factor,
                           output RMS, bf16 errors, which normalise was used
    cases/<case>.safetensors (batch dimension dropped, channels-last, all f32)
        inputs:  z [F*H*W, C] (a normalised latent), latents_mean [C], latents_std [C],
                 x [F*H*W, C] (z de-normalised: the model's input)
        taps:    initial [F*H*W, M] (after initial_activation), pre<i> [F*H*W, M] (res_blocks[i]),
                 upsampled [F*2H*2W, M] (the upsampler's pixel shuffle), post<i> [F*2H*2W, M]
                 (post_upsample_res_blocks[i])
        outputs: out [F*2H*2W, C] (the model on x), z_out [F*2H*2W, C] (out normalised again)

Usage, from the repository root (torch on the machine; diffusers' source at commit 58eb52c0 on PYTHONPATH):
    PYTHONPATH=$DSRC:tools python3 tools/golden_ltx2_upsampler.py --out tests/golden/ltx2_upsampler
"""
import argparse
import inspect
import json
import os
import sys

import torch
from safetensors.torch import save_file

from diffusers.pipelines.ltx2.latent_upsampler import LTX2LatentUpsamplerModel
from diffusers.pipelines.ltx2.pipeline_ltx2_latent_upsample import LTX2LatentUpsamplePipeline

DIFFUSERS_COMMIT = "58eb52c0"
SIZE_BUDGET = 1 << 20  # bytes under --out
SCALING_FACTOR = 1.0  # AutoencoderKLLTX2Video's default, as LTX-2's VAE config has it

MODEL = dict(in_channels=8, mid_channels=32, num_blocks_per_stage=1, dims=3, spatial_upsample=True,
             temporal_upsample=False, rational_spatial_scale=2.0, use_rational_resampler=False)

# name: frames, height, width
CASES = {
    "f3_3x4": (3, 3, 4),
    "f1_2x2": (1, 2, 2),
    "f2_4x3": (2, 4, 3),
}


def fail(msg):
    sys.exit(f"golden_ltx2_upsampler: {msg}")


def normaliser():
    """LTX2Pipeline._normalize_latents when pipeline_ltx2 imports (it imports the Gemma-4 classes at load), else the
    same formula: (y - mean) * scaling / std."""
    try:
        from diffusers.pipelines.ltx2.pipeline_ltx2 import LTX2Pipeline
        return LTX2Pipeline._normalize_latents, "LTX2Pipeline._normalize_latents"
    except Exception as e:  # noqa: BLE001 - any import failure means the fallback
        print(f"note: pipeline_ltx2 does not import ({type(e).__name__}: {e}); normalising with the formula")

        def norm(latents, latents_mean, latents_std, scaling_factor=1.0):
            m = latents_mean.view(1, -1, 1, 1, 1).to(latents.device, latents.dtype)
            s = latents_std.view(1, -1, 1, 1, 1).to(latents.device, latents.dtype)
            return (latents - m) * scaling_factor / s
        return norm, "formula (y - mean) * scaling / std"


def check_api():
    params = inspect.signature(LTX2LatentUpsamplerModel.__init__).parameters
    missing = [k for k in MODEL if k not in params]
    if missing:
        fail(f"LTX2LatentUpsamplerModel.__init__ lacks {missing}: not diffusers {DIFFUSERS_COMMIT}?")
    if not hasattr(LTX2LatentUpsamplePipeline, "_denormalize_latents"):
        fail(f"LTX2LatentUpsamplePipeline has no _denormalize_latents: not diffusers {DIFFUSERS_COMMIT}?")


def expected_names(cfg):
    """Every state-dict name the C tensor table (src/models/ltx2_upsampler_tensors.c) lists for cfg."""
    names = set()

    def conv(stem):
        names.update({stem + ".weight", stem + ".bias"})

    conv("initial_conv")
    conv("initial_norm")
    conv("upsampler.0")
    conv("final_conv")
    for stage in ("res_blocks", "post_upsample_res_blocks"):
        for i in range(cfg["num_blocks_per_stage"]):
            for leaf in ("conv1", "norm1", "conv2", "norm2"):
                conv(f"{stage}.{i}.{leaf}")
    return names


def randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def randomise(module, gen):
    norms = {f"{mn}.{pn}" if mn else pn for mn, mod in module.named_modules() if "Norm" in type(mod).__name__
             for pn, _ in mod.named_parameters(recurse=False) if pn == "weight"}
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name in norms:
                v = 1.0 + 0.2 * randn(gen, *p.shape)
            elif p.ndim >= 2:
                v = randn(gen, *p.shape) / p[0].numel() ** 0.5
            else:
                v = 0.1 * randn(gen, *p.shape)
            v = v.to(torch.bfloat16).double()
            v[v.abs() < 2.0 ** -14] = 0
            p.copy_(v.to(p.dtype))


def last(t):
    """[1, C, F, H, W] -> [F*H*W, C] float32 (the C side's channels-last layout)."""
    if t.ndim != 5 or t.shape[0] != 1:
        fail(f"expected a [1, C, F, H, W] tensor, got {tuple(t.shape)}")
    return t[0].permute(1, 2, 3, 0).reshape(-1, t.shape[1]).detach().to(torch.float32).contiguous().clone()


def frames_last(t):
    """[F, C, H, W] (the upsampler's per-frame batch) -> [F*H*W, C] float32."""
    if t.ndim != 4:
        fail(f"expected a [F, C, H, W] tensor, got {tuple(t.shape)}")
    return t.permute(0, 2, 3, 1).reshape(-1, t.shape[1]).detach().to(torch.float32).contiguous().clone()


def rel_errs(ref, got):
    ref = ref.double()
    got = got.double()
    rms = ref.pow(2).mean().sqrt().item()
    if not rms > 0:
        fail("a reference tensor is all zeros")
    d = got - ref
    return d.abs().max().item() / rms, d.pow(2).mean().sqrt().item() / rms, rms


def add_taps(model):
    taps, hooks = {}, []

    def put(name, fn):
        def f(mod, args, out):
            taps[name] = fn(out)
        return f

    hooks.append(model.initial_activation.register_forward_hook(put("initial", last)))
    for i, blk in enumerate(model.res_blocks):
        hooks.append(blk.register_forward_hook(put(f"pre{i}", last)))
    hooks.append(model.upsampler.register_forward_hook(put("upsampled", frames_last)))
    for i, blk in enumerate(model.post_upsample_res_blocks):
        hooks.append(blk.register_forward_hook(put(f"post{i}", last)))
    return taps, hooks


def run(model, x5, dtype):
    taps, hooks = add_taps(model)
    y = model(x5.to(dtype))
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
    ap.add_argument("--out", default="tests/golden/ltx2_upsampler")
    ap.add_argument("--seed", type=int, default=20261204)
    args = ap.parse_args()
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        fail(f"--out {args.out} exists and is not a folder")
    check_api()
    normalise, norm_how = normaliser()
    denormalise = LTX2LatentUpsamplePipeline._denormalize_latents
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(os.path.join(args.out, "cases"), exist_ok=True)
    gen = torch.Generator().manual_seed(args.seed)

    m = LTX2LatentUpsamplerModel(**MODEL).float().eval()
    have = set(m.state_dict().keys())
    want = expected_names(MODEL)
    if have != want:
        fail(f"state dict differs from the C table: extra {sorted(have - want)}, missing {sorted(want - have)}")
    randomise(m, gen)
    path = os.path.join(args.out, "tiny")
    m.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
    f32 = LTX2LatentUpsamplerModel.from_pretrained(path, torch_dtype=torch.float32).eval()
    b16 = LTX2LatentUpsamplerModel.from_pretrained(path, torch_dtype=torch.bfloat16).eval()
    for k, v in f32.state_dict().items():
        if v.dtype != torch.float32:
            fail(f"{k} loaded as {v.dtype}, not float32")
    if f32.config.use_rational_resampler or not isinstance(f32.upsampler, torch.nn.Sequential):
        fail("the folder did not load with the plain resampler")

    C, M, B = MODEL["in_channels"], MODEL["mid_channels"], MODEL["num_blocks_per_stage"]
    index = dict(torch=torch.__version__, diffusers=DIFFUSERS_COMMIT, seed=args.seed, normalise=norm_how,
                 models={"tiny": dict(config=MODEL, cases=[])})
    for cname, (F, H, W) in CASES.items():
        scales = 0.5 + torch.rand(C, generator=gen, dtype=torch.float64)
        z5 = (randn(gen, 1, C, F, H, W) * scales.view(1, C, 1, 1, 1)).float()
        mean = (0.5 * randn(gen, C)).float()
        std = (0.3 + torch.rand(C, generator=gen, dtype=torch.float64) * 1.5).float()
        x5 = denormalise(z5, mean, std, SCALING_FACTOR)
        ref, y32 = run(f32, x5, torch.float32)
        got, y16 = run(b16, x5, torch.bfloat16)
        ref["out"], got["out"] = last(y32), last(y16)
        ref["z_out"] = last(normalise(y32, mean, std, SCALING_FACTOR))
        got["z_out"] = last(normalise(y16, mean, std, SCALING_FACTOR))
        names = {"initial", "upsampled", "out", "z_out"} | {f"pre{i}" for i in range(B)} | {f"post{i}" for i in range(B)}
        if set(ref) != names or set(got) != names:
            fail(f"case {cname}: taps {sorted(ref)}, expected {sorted(names)}")
        shapes = {"initial": (F * H * W, M), "upsampled": (F * 4 * H * W, M), "out": (F * 4 * H * W, C),
                  "z_out": (F * 4 * H * W, C)}
        shapes.update({f"pre{i}": (F * H * W, M) for i in range(B)})
        shapes.update({f"post{i}": (F * 4 * H * W, M) for i in range(B)})
        bf16, rms = {}, {}
        for k, r in ref.items():
            if tuple(r.shape) != shapes[k] or tuple(got[k].shape) != shapes[k]:
                fail(f"case {cname}: tap {k} is {tuple(r.shape)} / {tuple(got[k].shape)}, expected {shapes[k]}")
            mx, rr, rm = rel_errs(r, got[k])
            bf16[k] = dict(max_rel=mx, rms_rel=rr)
            rms[k] = rm
        tensors = dict(ref)
        tensors["z"] = last(z5)
        tensors["x"] = last(x5)
        tensors["latents_mean"] = mean.contiguous()
        tensors["latents_std"] = std.contiguous()
        save_file(tensors, os.path.join(args.out, "cases", cname + ".safetensors"),
                  metadata={"diffusers": DIFFUSERS_COMMIT, "case": cname})
        index["models"]["tiny"]["cases"].append(dict(name=cname, frames=F, height=H, width=W,
                                                     scaling_factor=SCALING_FACTOR, rms=rms, bf16=bf16))
        print(f"{cname}: out rms {rms['out']:.4f} bf16 max {bf16['out']['max_rel']:.3e} "
              f"rms {bf16['out']['rms_rel']:.3e}; z_out bf16 max {bf16['z_out']['max_rel']:.3e}")
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as fh:
        json.dump(index, fh, indent=1)
    size = dir_size(args.out)
    print(f"{args.out}: {size} bytes")
    if size > SIZE_BUDGET:
        fail(f"{args.out} holds {size} bytes, over the {SIZE_BUDGET}-byte budget")


if __name__ == "__main__":
    main()
