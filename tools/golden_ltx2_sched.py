#!/usr/bin/env python3
"""Golden data for LTX-2's sampling rules (src/pipelines/ltx2_sample.h): diffusers (commit 58eb52c0)
FlowMatchEulerDiscreteScheduler in the two configurations scripts/convert_ltx2_to_diffusers.py writes (distilled: no
dynamic shifting, no terminal stretch; dev: dynamic shifting 0.95 .. 2.05 over 1024 .. 4096 tokens, terminal 0.1),
driven as LTX2Pipeline.__call__ drives it, plus the pipeline's latent packing, noise and step.

Records (under --out, normally tests/golden/ltx2_sched):
    index.json
        schedules: per case the config (distilled / dev), the pipeline's sigmas (DISTILLED_SIGMA_VALUES,
            STAGE_2_DISTILLED_SIGMA_VALUES, or null for np.linspace(1, 1/N, N)), steps, the video token count mu is
            computed from (calculate_shift with the scheduler config's base/max values), and the scheduler's
            sigmas (N + 1, float32 values written exactly) and timesteps (N)
        geometry: per (width, height, frames, fps) the latent frames / height / width, the video token count, the
            audio latent frames and mel bins, by the lines of LTX2Pipeline.__call__ step 4 (they are inline there,
            so this script repeats them: (frames - 1) // 8 + 1, // 32, round(frames / fps * 16000 / 160 / 4.0))
        noise: the seed and geometry of noise.safetensors; cpu_capability (torch's float32 randn kernel)
        euler: steps and noise_scale of euler.safetensors
    noise.safetensors   video [F'*H'*W', 128], audio [L, 128]: one torch.Generator("cpu").manual_seed(seed) drawing
                        randn_tensor of the video shape then of the audio shape in float32, packed by
                        LTX2Pipeline._pack_latents / _pack_audio_latents (prepare_latents, prepare_audio_latents)
    euler.safetensors   x [n], v [steps, n] (a velocity per step), x_steps [steps, n]: the distilled schedule's
                        steps as the pipeline takes them without guidance (convert_velocity_to_x0, then
                        convert_x0_to_velocity, then scheduler.step), each step from the previous reference state;
                        clean [n], noise [n], renoised [n]: LTX2Pipeline._create_noised_state(clean, noise_scale,
                        generator) with the noise its generator draws

LTX2Pipeline's module imports the Gemma-4 classes at load; where it does not import, its static methods' formulas
are written out here (index.json: "pipeline_import").

Usage, from the repository root (torch on the machine; diffusers' source at commit 58eb52c0 on PYTHONPATH):
    PYTHONPATH=$DSRC:tools python3 tools/golden_ltx2_sched.py --out tests/golden/ltx2_sched
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import save_file

from diffusers import FlowMatchEulerDiscreteScheduler
from diffusers.pipelines.ltx2.utils import DISTILLED_SIGMA_VALUES, STAGE_2_DISTILLED_SIGMA_VALUES
from diffusers.utils.torch_utils import randn_tensor

DIFFUSERS_COMMIT = "58eb52c0"
SIZE_BUDGET = 1 << 20

try:
    from diffusers.pipelines.ltx2.pipeline_ltx2 import LTX2Pipeline, calculate_shift
    PIPELINE_IMPORT = "LTX2Pipeline"
except Exception as e:  # noqa: BLE001 - any import failure means the written-out formulas
    print(f"note: pipeline_ltx2 does not import ({type(e).__name__}: {e}); using the formulas written out")
    LTX2Pipeline = None
    PIPELINE_IMPORT = f"formulas ({type(e).__name__})"

    def calculate_shift(image_seq_len, base_seq_len=256, max_seq_len=4096, base_shift=0.5, max_shift=1.15):
        m = (max_shift - base_shift) / (max_seq_len - base_seq_len)
        b = base_shift - m * base_seq_len
        return image_seq_len * m + b


def fail(msg):
    sys.exit(f"golden_ltx2_sched: {msg}")


def pack_latents(x):
    if LTX2Pipeline is not None:
        return LTX2Pipeline._pack_latents(x, 1, 1)
    b, c, f, h, w = x.shape
    return x.reshape(b, c, f, 1, h, 1, w, 1).permute(0, 2, 4, 6, 1, 3, 5, 7).flatten(4, 7).flatten(1, 3)


def pack_audio(x):
    if LTX2Pipeline is not None:
        return LTX2Pipeline._pack_audio_latents(x)
    return x.transpose(1, 2).flatten(2, 3)


def v_to_x0(sample, out, i, sched):
    if LTX2Pipeline is not None:
        return LTX2Pipeline.convert_velocity_to_x0(None, sample, out, i, sched)
    return sample - out * sched.sigmas[i]


def x0_to_v(sample, x0, i, sched):
    if LTX2Pipeline is not None:
        return LTX2Pipeline.convert_x0_to_velocity(None, sample, x0, i, sched)
    return (sample - x0) / sched.sigmas[i]


def noised_state(latents, scale, gen):
    if LTX2Pipeline is not None:
        return LTX2Pipeline._create_noised_state(latents, scale, gen)
    noise = randn_tensor(latents.shape, generator=gen, device=latents.device, dtype=latents.dtype)
    return scale * noise + (1 - scale) * latents


def scheduler(kind):
    # as scripts/convert_ltx2_to_diffusers.py builds them for a distilled and a dev checkpoint
    if kind == "distilled":
        return FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=False, base_shift=0.95, max_shift=2.05,
                                               base_image_seq_len=1024, max_image_seq_len=4096, shift_terminal=None)
    return FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, base_shift=0.95, max_shift=2.05,
                                           base_image_seq_len=1024, max_image_seq_len=4096, shift_terminal=0.1)


def pipeline_schedule(sched, sigmas, steps, tokens):
    """LTX2Pipeline.__call__ step 5 (retrieve_timesteps is set_timesteps(sigmas=..., mu=...))."""
    sig = np.linspace(1.0, 1 / steps, steps) if sigmas is None else sigmas
    cfg = sched.config
    mu = calculate_shift(tokens, cfg.get("base_image_seq_len", 1024), cfg.get("max_image_seq_len", 4096),
                         cfg.get("base_shift", 0.95), cfg.get("max_shift", 2.05))
    sched.set_timesteps(sigmas=sig, device="cpu", mu=mu)
    if len(sched.timesteps) != steps or len(sched.sigmas) != steps + 1:
        fail(f"{steps} steps gave {len(sched.timesteps)} timesteps")
    return mu


def geometry(w, h, frames, fps):
    lat_f = (frames - 1) // 8 + 1
    lat_h, lat_w = h // 32, w // 32
    duration_s = frames / fps
    per_s = 16000 / 160 / float(4)
    return dict(width=w, height=h, frames=frames, fps=fps, latent_frames=lat_f, latent_height=lat_h,
                latent_width=lat_w, video_tokens=lat_f * lat_h * lat_w, audio_frames=round(duration_s * per_s),
                audio_mel=64 // 4)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/ltx2_sched")
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        fail(f"--out {args.out} exists and is not a folder")
    os.makedirs(args.out, exist_ok=True)
    torch.set_grad_enabled(False)
    if len(DISTILLED_SIGMA_VALUES) != 8 or len(STAGE_2_DISTILLED_SIGMA_VALUES) != 3:
        fail("the distilled ladders are not 8 and 3 steps: not diffusers " + DIFFUSERS_COMMIT + "?")

    index = dict(torch=torch.__version__, numpy=np.__version__, diffusers=DIFFUSERS_COMMIT,
                 cpu_capability=torch.backends.cpu.get_cpu_capability(), pipeline_import=PIPELINE_IMPORT,
                 schedules=[], geometry=[])
    runs = [("distilled_768", "distilled", list(DISTILLED_SIGMA_VALUES), 768, 8),
            ("distilled_6144", "distilled", list(DISTILLED_SIGMA_VALUES), 6144, 8),
            ("stage2_3072", "distilled", list(STAGE_2_DISTILLED_SIGMA_VALUES), 3072, 3)]
    runs += [(f"dev_{n}_{tokens}", "dev", None, tokens, n) for n in (8, 30, 40) for tokens in (768, 3072, 6144)]
    for name, kind, sig, tokens, steps in runs:
        sched = scheduler(kind)
        mu = pipeline_schedule(sched, sig, steps, tokens)
        index["schedules"].append(dict(name=name, config=kind, sigmas_in=sig, steps=steps, video_tokens=tokens,
                                       mu=mu, sigmas=sched.sigmas.to(torch.float32).tolist(),
                                       timesteps=sched.timesteps.to(torch.float32).tolist()))
        print(f"{name}: sigmas {[round(s, 6) for s in sched.sigmas.tolist()[:4]]} ...")

    for w, h, f, fps in ((768, 512, 121, 24.0), (64, 64, 5, 50.0), (1216, 704, 97, 25.0), (64, 96, 17, 24.0),
                         (512, 768, 33, 30.0), (1536, 1024, 241, 24.0)):
        index["geometry"].append(geometry(w, h, f, fps))

    # the initial noise: prepare_latents then prepare_audio_latents from one CPU generator
    g = geometry(64, 96, 17, 24.0)
    gen = torch.Generator("cpu").manual_seed(args.seed)
    v = randn_tensor((1, 128, g["latent_frames"], g["latent_height"], g["latent_width"]), generator=gen,
                     device=torch.device("cpu"), dtype=torch.float32)
    a = randn_tensor((1, 8, g["audio_frames"], g["audio_mel"]), generator=gen, device=torch.device("cpu"),
                     dtype=torch.float32)
    pv, pa = pack_latents(v), pack_audio(a)
    if tuple(pv.shape) != (1, g["video_tokens"], 128) or tuple(pa.shape) != (1, g["audio_frames"], 128):
        fail(f"packed noise shapes {tuple(pv.shape)} / {tuple(pa.shape)}")
    save_file({"video": pv[0].contiguous(), "audio": pa[0].contiguous()}, os.path.join(args.out, "noise.safetensors"),
              metadata={"seed": str(args.seed)})
    index["noise"] = dict(seed=args.seed, width=64, height=96, frames=17, fps=24.0)

    # an 8-step trace of the distilled schedule's step without guidance, and stage 2's re-noise
    n = 64
    tg = torch.Generator("cpu").manual_seed(args.seed + 1)
    sched = scheduler("distilled")
    pipeline_schedule(sched, list(DISTILLED_SIGMA_VALUES), 8, 768)
    sched.set_begin_index(0)
    x = torch.randn(1, n, generator=tg, dtype=torch.float32)
    x_in = x.clone()
    vs, xs = [], []
    for i, t in enumerate(sched.timesteps):
        vel = torch.randn(1, n, generator=tg, dtype=torch.float32) * 1.5
        x0 = v_to_x0(x, vel, i, sched)
        v2 = x0_to_v(x, x0, i, sched)
        x = sched.step(v2, t, x, return_dict=False)[0]
        vs.append(vel[0].clone())
        xs.append(x[0].clone())
    clean = torch.randn(1, n, generator=tg, dtype=torch.float32)
    scale = STAGE_2_DISTILLED_SIGMA_VALUES[0]
    g1 = torch.Generator("cpu").manual_seed(args.seed + 2)
    g2 = torch.Generator("cpu").manual_seed(args.seed + 2)
    renoised = noised_state(clean, scale, g1)
    noise = randn_tensor(clean.shape, generator=g2, device=torch.device("cpu"), dtype=torch.float32)
    save_file({"x": x_in[0].contiguous(), "v": torch.stack(vs).contiguous(), "x_steps": torch.stack(xs).contiguous(),
               "clean": clean[0].contiguous(), "noise": noise[0].contiguous(), "renoised": renoised[0].contiguous()},
              os.path.join(args.out, "euler.safetensors"))
    index["euler"] = dict(steps=8, n=n, noise_scale=scale)

    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as fh:
        json.dump(index, fh, indent=1)
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(f"{args.out}: {size} bytes")
    if size > SIZE_BUDGET:
        fail(f"{args.out} holds {size} bytes, over the {SIZE_BUDGET}-byte budget")


if __name__ == "__main__":
    main()
