#!/usr/bin/env python3
"""Golden data for LTX-2's audio-video DiT (src/models/ltx2.h): a tiny random diffusers
LTX2VideoTransformer3DModel (transformer_ltx2.py at commit 58eb52c0) in the LTX-2.5 layout, on the CPU in float32
with TF32 off.

The model: 2 blocks; video 2 heads x 32 (inner 64, RoPE pad 2), audio 2 heads x 16 (inner 32); prompt contexts as
wide as each stream (cross_attention_dim 64, audio_cross_attention_dim 32: the connectors' outputs, no caption
projection); per-head gates and the 9-row adaLN on both streams (gated_attn, cross_attn_mod, audio_gated_attn,
audio_cross_attn_mod); the prompt adaLN (use_prompt_adaln_single); video FF without biases, audio FF with them;
split RoPE with the float64 ladder; STG support (perturbed_attn); video channels 16 in / 12 out, audio 12 in / 8 out.
Every parameter is re-randomised from a fixed generator (norm weights 1 + 0.2 randn, matrices randn / sqrt(fan_in),
other vectors 0.1 randn), rounded to bf16 (and with no f16 subnormal), and stored as a bf16 diffusers folder; the
float32 run reads the folder back.

Cases (forward called as LTX2Pipeline calls it: timestep = sigma = 1000 sigma, explicit coords, no masks,
use_cross_timestep True unless said):
    t2v       3 latent frames of 2x3, 9 audio frames, one sigma
    sigmas    as t2v with different video and audio sigmas (audio_timestep, audio_sigma given)
    f1a1      1 latent frame of 3x2, 1 audio frame
    f1a9      1 latent frame of 2x2, 9 audio frames, different sigmas, fps 25
    stg       as t2v with spatio_temporal_guidance_blocks [1] (block 1's self-attentions return their values)
    isolate   as sigmas with isolate_modalities (no audio<->video attention)
    pertoken  as sigmas with a per-token video timestep (the first latent frame at 0)
    legacy    as sigmas with use_cross_timestep False (the A<->V tables read each stream's own timestep)
Each case is also run with the reference in bfloat16 (the same folder, inputs cast to bf16, the same taps recorded:
index.json's tap_bf16_max_rel holds each tap's bf16 max |diff| / rms, the bound of a device path's tap), and its own bf16 error
is stored per output (a GPU path must stay within a quarter of it):
    bf16_max_rel = max|ref_bf16 - ref_f32| / rms(ref_f32),   bf16_rms_rel = rms(ref_bf16 - ref_f32) / rms(ref_f32)

Writes (under --out, normally tests/golden/ltx2_dit):
    model/               the diffusers folder (config.json, diffusion_pytorch_model.safetensors, bf16)
    index.json           versions, config, per case: geometry, sigmas, flags, output RMS and bf16 errors, taps
    cases/<case>.safetensors (batch dimension dropped, all f32)
        inputs:  hidden_states [T, 16], audio_hidden_states [Ta, 12], encoder_hidden_states [L, 64],
                 audio_encoder_hidden_states [La, 32], timestep [1 or T], audio_timestep [1], sigma [1],
                 audio_sigma [1], video_coords [3, T, 2], audio_coords [1, Ta, 2]
        outputs: sample [T, 12], audio_sample [Ta, 8]
        tables:  <m>_t (the timestep each adaLN-single read), <m>_mod [rows, k*D] and <m>_emb [rows, D] for
                 m in time_embed, audio_time_embed, prompt_adaln, audio_prompt_adaln, av_video_ss, av_audio_ss,
                 av_video_gate, av_audio_gate; rope_{video,audio,xvideo,xaudio}_{cos,sin} [T, D/2] (heads side
                 by side)
        stream:  proj_in [T, 64], audio_proj_in [Ta, 32], block<i>_video [T, 64], block<i>_audio [Ta, 32]
        block 0: b0_<a>_q (the query input), b0_<a>_kv (the key/value input; cross attentions only), b0_<a>_out
                 for a in attn1, audio_attn1, attn2, audio_attn2, a2v, v2a (absent when a2v / v2a did not run);
                 b0_ff_in / b0_ff_out, b0_audio_ff_in / b0_audio_ff_out
        (the stg case also stores block 1's b1_attn1_* and b1_audio_attn1_*)

Usage, from the repository root (torch on the machine; diffusers' source at commit 58eb52c0 on PYTHONPATH):
    PYTHONPATH=ref/diffusers/src:tools python3 tools/golden_ltx2_dit.py --out tests/golden/ltx2_dit
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file

from diffusers.models.transformers.transformer_ltx2 import LTX2VideoTransformer3DModel

DIFFUSERS_COMMIT = "58eb52c0"

CONFIG = dict(
    in_channels=16, out_channels=12, patch_size=1, patch_size_t=1, num_attention_heads=2, attention_head_dim=32,
    cross_attention_dim=64, vae_scale_factors=(8, 32, 32), pos_embed_max_pos=20, base_height=2048, base_width=2048,
    gated_attn=True, cross_attn_mod=True,
    audio_in_channels=12, audio_out_channels=8, audio_patch_size=1, audio_patch_size_t=1,
    audio_num_attention_heads=2, audio_attention_head_dim=16, audio_cross_attention_dim=32, audio_scale_factor=4,
    audio_pos_embed_max_pos=20, audio_sampling_rate=16000, audio_hop_length=160, audio_gated_attn=True,
    audio_cross_attn_mod=True,
    num_layers=2, activation_fn="gelu-approximate", qk_norm="rms_norm_across_heads", norm_elementwise_affine=False,
    norm_eps=1e-6, caption_channels=48, attention_bias=True, attention_out_bias=True, rope_theta=10000.0,
    rope_double_precision=True, causal_offset=1, timestep_scale_multiplier=1000,
    cross_attn_timestep_scale_multiplier=1000, rope_type="split", use_prompt_embeddings=False, perturbed_attn=True,
    ff_bias=False, audio_ff_bias=True, use_prompt_adaln_single=True, use_keyframes_abs_pos_embedding=False,
)

# name: frames, h, w, audio frames, sigma, audio sigma (None: the video's), fps, video text rows, audio text rows,
#       extra forward arguments, per-token video timestep
CASES = {
    "t2v": (3, 2, 3, 9, 0.7, None, 24.0, 6, 4, {}, False),
    "sigmas": (3, 2, 3, 9, 0.8, 0.35, 24.0, 6, 4, {}, False),
    "f1a1": (1, 3, 2, 1, 0.5, None, 24.0, 5, 5, {}, False),
    "f1a9": (1, 2, 2, 9, 0.9, 0.2, 25.0, 3, 7, {}, False),
    "stg": (3, 2, 3, 9, 0.6, None, 24.0, 6, 4, {"spatio_temporal_guidance_blocks": [1]}, False),
    "isolate": (3, 2, 3, 9, 0.8, 0.35, 24.0, 6, 4, {"isolate_modalities": True}, False),
    "pertoken": (3, 2, 3, 9, 0.8, 0.35, 24.0, 6, 4, {}, True),
    "legacy": (3, 2, 3, 9, 0.8, 0.35, 24.0, 6, 4, {"use_cross_timestep": False}, False),
}

TABLES = {"time_embed": "time_embed", "audio_time_embed": "audio_time_embed", "prompt_adaln": "prompt_adaln",
          "audio_prompt_adaln": "audio_prompt_adaln", "av_video_ss": "av_cross_attn_video_scale_shift",
          "av_audio_ss": "av_cross_attn_audio_scale_shift", "av_video_gate": "av_cross_attn_video_a2v_gate",
          "av_audio_gate": "av_cross_attn_audio_v2a_gate"}
ROPES = {"video": "rope", "audio": "audio_rope", "xvideo": "cross_attn_rope", "xaudio": "cross_attn_audio_rope"}
BLOCK0 = {"attn1": "attn1", "audio_attn1": "audio_attn1", "attn2": "attn2", "audio_attn2": "audio_attn2",
          "a2v": "audio_to_video_attn", "v2a": "video_to_audio_attn"}


def randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def randomise(module, gen):
    """Every parameter from gen: the weights of norm layers (the q/k RMSNorms) 1 + 0.2 randn."""
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


def c32(t):
    return t.detach().to(torch.float32).contiguous().clone()


def rel_errs(ref, got):
    ref = ref.double()
    got = got.double()
    rms = ref.pow(2).mean().sqrt().item()
    d = got - ref
    return d.abs().max().item() / rms, d.pow(2).mean().sqrt().item() / rms, rms


def laid_back(tab):
    _, h, t, r = tab.shape  # (B, H, T, D/2/H) -> (T, D/2)
    return tab[0].permute(1, 0, 2).reshape(t, h * r)


def add_taps(model, stg_block):
    taps, hooks = {}, []

    def table(name):
        def f(mod, args, out):
            taps[name + "_t"] = c32(args[0])
            taps[name + "_mod"] = c32(out[0])
            taps[name + "_emb"] = c32(out[1])
        return f

    def rope(name):
        def f(mod, args, out):
            taps[f"rope_{name}_cos"] = c32(laid_back(out[0]))
            taps[f"rope_{name}_sin"] = c32(laid_back(out[1]))
        return f

    def plain(name):
        def f(mod, args, out):
            taps[name] = c32(out[0])
        return f

    def block(i):
        def f(mod, args, kwargs, out):
            taps[f"block{i}_video"] = c32(out[0][0])
            taps[f"block{i}_audio"] = c32(out[1][0])
        return f

    def attn(name):
        def f(mod, args, kwargs, out):
            q = args[0] if len(args) > 0 else kwargs["hidden_states"]
            kv = args[1] if len(args) > 1 else kwargs.get("encoder_hidden_states")
            taps[name + "_q"] = c32(q[0])
            if kv is not None:
                taps[name + "_kv"] = c32(kv[0])
            taps[name + "_out"] = c32(out[0])
        return f

    def ff(name):
        def f(mod, args, out):
            taps[name + "_in"] = c32(args[0][0])
            taps[name + "_out"] = c32(out[0])
        return f

    for short, attr in TABLES.items():
        hooks.append(getattr(model, attr).register_forward_hook(table(short)))
    for short, attr in ROPES.items():
        hooks.append(getattr(model, attr).register_forward_hook(rope(short)))
    hooks.append(model.proj_in.register_forward_hook(plain("proj_in")))
    hooks.append(model.audio_proj_in.register_forward_hook(plain("audio_proj_in")))
    for i, blk in enumerate(model.transformer_blocks):
        hooks.append(blk.register_forward_hook(block(i), with_kwargs=True))
    b0 = model.transformer_blocks[0]
    for short, attr in BLOCK0.items():
        hooks.append(getattr(b0, attr).register_forward_hook(attn("b0_" + short), with_kwargs=True))
    hooks.append(b0.ff.register_forward_hook(ff("b0_ff")))
    hooks.append(b0.audio_ff.register_forward_hook(ff("b0_audio_ff")))
    if stg_block is not None:
        bs = model.transformer_blocks[stg_block]
        for short in ("attn1", "audio_attn1"):
            hooks.append(getattr(bs, short).register_forward_hook(attn(f"b{stg_block}_{short}"), with_kwargs=True))
    return taps, hooks


def make_inputs(model, gen, case):
    f, h, w, na, sig, asig, fps, lv, la, extra, per_token = case
    cfg = model.config
    t = f * h * w
    asig_v = sig if asig is None else asig
    inp = dict(
        hidden_states=randn(gen, 1, t, cfg.in_channels).float(),
        audio_hidden_states=randn(gen, 1, na, cfg.audio_in_channels).float(),
        encoder_hidden_states=randn(gen, 1, lv, cfg.cross_attention_dim).float(),
        audio_encoder_hidden_states=randn(gen, 1, la, cfg.audio_cross_attention_dim).float(),
    )
    ts = torch.tensor([sig * 1000.0], dtype=torch.float32)
    ats = torch.tensor([asig_v * 1000.0], dtype=torch.float32)
    if per_token:
        tok = torch.full((1, t), sig * 1000.0, dtype=torch.float32)
        tok[:, : h * w] = 0.0  # the first latent frame as a conditioning frame
        inp["timestep"] = tok
    else:
        inp["timestep"] = ts
    inp["audio_timestep"] = ats
    inp["sigma"] = ts.clone()
    inp["audio_sigma"] = ats.clone()
    inp["video_coords"] = model.rope.prepare_video_coords(1, f, h, w, torch.device("cpu"), fps=fps)
    inp["audio_coords"] = model.audio_rope.prepare_audio_coords(1, na, torch.device("cpu"))
    return inp, dict(num_frames=f, height=h, width=w, fps=fps, audio_num_frames=na)


def run(model, inp, geo, extra, dtype):
    kw = {k: (v.to(dtype) if k.endswith("hidden_states") else v) for k, v in inp.items()}
    args = dict(use_cross_timestep=True)
    args.update(extra)
    out = model(**kw, **geo, **args, return_dict=False)
    return out[0][0], out[1][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/ltx2_dit")
    ap.add_argument("--seed", type=int, default=20261203)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(os.path.join(args.out, "cases"), exist_ok=True)
    gen = torch.Generator().manual_seed(args.seed)

    m = LTX2VideoTransformer3DModel(**CONFIG).float().eval()
    randomise(m, gen)
    path = os.path.join(args.out, "model")
    m.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
    model = LTX2VideoTransformer3DModel.from_pretrained(path, torch_dtype=torch.float32).eval()
    model_bf16 = LTX2VideoTransformer3DModel.from_pretrained(path, torch_dtype=torch.bfloat16).eval()

    index = dict(torch=torch.__version__, diffusers=DIFFUSERS_COMMIT, seed=args.seed,
                 config={k: (list(v) if isinstance(v, tuple) else v) for k, v in CONFIG.items()}, cases={})
    for name, case in CASES.items():
        f, h, w, na, sig, asig, fps, lv, la, extra, per_token = case
        inp, geo = make_inputs(model, gen, case)
        stg = extra.get("spatio_temporal_guidance_blocks")
        taps, hooks = add_taps(model, stg[0] if stg else None)
        video, audio = run(model, inp, geo, extra, torch.float32)
        for hk in hooks:
            hk.remove()
        taps_b, hooks = add_taps(model_bf16, stg[0] if stg else None)
        vb, ab = run(model_bf16, inp, geo, extra, torch.bfloat16)
        for hk in hooks:
            hk.remove()
        tap_bf16 = {}
        for k, ref in taps.items():
            b = taps_b.get(k)
            if k.startswith("rope_") or b is None or b.shape != ref.shape or not ref.abs().max().item() > 0:
                continue
            tap_bf16[k] = rel_errs(ref, b)[0]
        vmx, vrm, vrms = rel_errs(video, vb.float())
        amx, arm, arms = rel_errs(audio, ab.float())
        tensors = {k: c32(v[0]) for k, v in inp.items() if k not in ("timestep", "audio_timestep", "sigma",
                                                                      "audio_sigma")}
        for k in ("timestep", "audio_timestep", "sigma", "audio_sigma"):
            tensors[k] = c32(inp[k].flatten())
        tensors["sample"] = c32(video)
        tensors["audio_sample"] = c32(audio)
        tensors.update(taps)
        save_file(tensors, os.path.join(args.out, "cases", name + ".safetensors"),
                  metadata={"diffusers": DIFFUSERS_COMMIT, "case": name})
        index["cases"][name] = dict(
            frames=f, height=h, width=w, audio_frames=na, sigma=sig, audio_sigma=sig if asig is None else asig,
            fps=fps, text_rows=lv, audio_text_rows=la, per_token_timestep=per_token,
            stg_blocks=list(stg) if stg else [], isolate_modalities=bool(extra.get("isolate_modalities", False)),
            use_cross_timestep=bool(extra.get("use_cross_timestep", True)),
            sample_rms=vrms, audio_sample_rms=arms, bf16_max_rel=vmx, bf16_rms_rel=vrm, audio_bf16_max_rel=amx,
            audio_bf16_rms_rel=arm, taps=sorted(taps), tap_bf16_max_rel=tap_bf16)
        print(f"{name}: video rms {vrms:.4f} bf16 max {vmx:.3e} rms {vrm:.3e}; "
              f"audio rms {arms:.4f} bf16 max {amx:.3e} rms {arm:.3e}")
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as fh:
        json.dump(index, fh, indent=1)


if __name__ == "__main__":
    main()
