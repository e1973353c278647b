#!/usr/bin/env python3
"""Golden data for the Qwen-Image (v1) denoiser, diffusers' QwenImageTransformer2DModel, tiny and random, from
diffusers' source on the CPU in float32 (TF32 off).

One tiny model (patch 2, 64 input channels, 16 output channels, 2 dual-stream blocks, 2 heads of 32, RoPE axes
(8, 12, 12), joint attention dim 48). Every parameter is re-randomised from a fixed generator (norm weights
1 + 0.2 randn, matrices randn / sqrt(fan_in), biases 0.15 randn), rounded to values exact in bf16 and f16, and
the folder is stored in bf16; the reference computes in f32 from those values. The `zero_cond_t` cases run the
same weights with zero_cond_t=True (the C test converts the folder with that one config member changed).

Each case is also run with the reference in bfloat16, and the reference's own bf16 error is stored next to it
(a GPU path must stay within a quarter of it):

    bf16_max_rel = max|ref_bf16 - ref_f32| / rms(ref_f32),   bf16_rms_rel = rms(ref_bf16 - ref_f32) / rms(ref_f32)

Writes (under --out, normally tests/golden/qimage):
    index.json               versions, the model's config, per-case layout, RMS and bf16 errors, tap names
    dit/                     the diffusers QwenImageTransformer2DModel folder (zero_cond_t false)
    cases/<case>.safetensors
        inputs (the `cortiq forward` contract of this model):
            hidden_states f32 [N, 64]   packed 2x2 tokens: the target's first, then each condition image's
            encoder_hidden_states f32 [L, 48]
            encoder_hidden_states_mask f32 [L] (1 valid, 0 padding; only in the masked cases)
            timestep f32 [1]            sigma in [0, 1] (the model multiplies by 1000 inside)
            img_shapes i32 [k, 3]       (frame, height, width) in patch tokens, the target first
        output: out f32 [N, 64] (proj_out over every image token, condition tokens included)
        taps: temb [T, 64] (T = 2 with zero_cond_t: rows t and 0), img_embed [N, 64] (img_in), txt_embed [L, 64]
            (txt_in(txt_norm(.))), img_mod_0 [T, 384] / txt_mod_0 [1, 384] (block 0's modulation Linear outputs),
            img_<i> [N, 64] / txt_<i> [L, 64] (both streams after block i), rope_img [N, 16, 2] / rope_txt
            [L, 16, 2] (cos, sin), norm_out [N, 64] (AdaLayerNormContinuous output)

Usage (on a machine with torch; diffusers' source at commit 58eb52c0 on PYTHONPATH), from the repository root:
    PYTHONPATH=ref/diffusers/src python3 tools/golden_qwenimage.py --out tests/golden/qimage
"""
import argparse
import json
import os
import subprocess

import torch
from safetensors.torch import save_file

from diffusers import QwenImageTransformer2DModel

DIFFUSERS_COMMIT = "58eb52c0"

CONFIG = dict(patch_size=2, in_channels=64, out_channels=16, num_layers=2, attention_head_dim=32,
              num_attention_heads=2, joint_attention_dim=48, guidance_embeds=False, axes_dims_rope=(8, 12, 12))

# name: (zero_cond_t, img_shapes [(h, w) in patch tokens, the target first], text rows, mask or None, sigma)
# A mask lists the valid rows as a string of 1/0 (any pattern: the reference masks keys element-wise).
CASES = {
    "even": (False, [(4, 6)], 7, None, 0.6),
    "odd": (False, [(5, 3)], 5, None, 0.3),
    "mask": (False, [(2, 4)], 9, "111101100", 0.8),
    "edit1": (False, [(2, 4), (4, 2)], 6, None, 0.5),
    "edit2": (False, [(2, 4), (3, 5), (2, 3)], 8, None, 0.45),
    "edit_mask": (False, [(3, 2), (2, 2)], 6, "111100", 0.7),
    "zero_cond": (True, [(2, 4), (3, 3)], 6, None, 0.7),
    "zero_cond2": (True, [(3, 4), (2, 2), (1, 3)], 5, None, 0.999),
    "zero_cond_t2i": (True, [(2, 2)], 4, None, 0.05),
}


def randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def randomise(module, gen):
    """Every parameter from gen: weights of norm layers (modules whose class name has Norm) 1 + 0.2 randn,
    matrices randn / sqrt(fan_in), other vectors (biases) 0.15 randn."""
    norms = {f"{mn}.{pn}" if mn else pn for mn, mod in module.named_modules() if "Norm" in type(mod).__name__
             for pn, _ in mod.named_parameters(recurse=False) if pn == "weight"}
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name in norms:
                v = 1.0 + 0.2 * randn(gen, *p.shape)
            elif p.ndim >= 2:
                v = randn(gen, *p.shape) / p[0].numel() ** 0.5
            else:
                v = 0.15 * randn(gen, *p.shape)
            # exact in bf16 and in f16 (no f16 subnormals): the folder is stored in bf16 and a converter may store
            # vectors in f16, neither changing a value
            v = v.to(torch.bfloat16).double()
            v[v.abs() < 2.0 ** -14] = 0
            p.copy_(v.to(p.dtype))


def rel_errs(ref, got):
    ref = ref.double()
    got = got.double()
    rms = ref.pow(2).mean().sqrt().item()
    d = got - ref
    return d.abs().max().item() / rms, d.pow(2).mean().sqrt().item() / rms, rms


def c32(t):
    return t.detach().to(torch.float32).contiguous().clone()


def add_taps(model):
    taps, hooks = {}, []

    def post(name, pick=None):
        def f(mod, args, out):
            taps[name] = c32(out if pick is None else pick(out))
        return f

    hooks.append(model.time_text_embed.register_forward_hook(post("temb")))
    hooks.append(model.img_in.register_forward_hook(post("img_embed", lambda o: o[0])))
    hooks.append(model.txt_in.register_forward_hook(post("txt_embed", lambda o: o[0])))
    b0 = model.transformer_blocks[0]
    hooks.append(b0.img_mod.register_forward_hook(post("img_mod_0")))
    hooks.append(b0.txt_mod.register_forward_hook(post("txt_mod_0")))
    for i, blk in enumerate(model.transformer_blocks):
        hooks.append(blk.register_forward_hook(post(f"txt_{i}", lambda o: o[0][0])))
        hooks.append(blk.register_forward_hook(post(f"img_{i}", lambda o: o[1][0])))
    hooks.append(model.norm_out.register_forward_hook(post("norm_out", lambda o: o[0])))

    def rope(mod, args, out):
        for nm, fr in zip(("rope_img", "rope_txt"), out):
            taps[nm] = c32(torch.stack([fr.real, fr.imag], -1))

    hooks.append(model.pos_embed.register_forward_hook(rope))
    return taps, hooks


def run(model, x, ehs, mask, t, shapes, dtype):
    kw = dict(hidden_states=x.to(dtype)[None], encoder_hidden_states=ehs.to(dtype)[None],
              timestep=t.to(dtype), img_shapes=[[(1, h, w) for h, w in shapes]], return_dict=False)
    if mask is not None:
        kw["encoder_hidden_states_mask"] = mask[None]
    return model(**kw)[0][0]


def build(state, zero_cond, dtype):
    """The model with the given weights and zero_cond_t, in dtype (the weights are exact in bf16)."""
    m = QwenImageTransformer2DModel(**CONFIG, zero_cond_t=zero_cond).float().eval()
    m.load_state_dict(state)
    return m.to(dtype)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/qimage")
    ap.add_argument("--seed", type=int, default=20260901)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(os.path.join(args.out, "cases"), exist_ok=True)
    gen = torch.Generator().manual_seed(args.seed)

    m = QwenImageTransformer2DModel(**CONFIG).float().eval()
    randomise(m, gen)
    path = os.path.join(args.out, "dit")
    state = {k: v.clone() for k, v in m.state_dict().items()}
    m.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
    models = {(z, dt): build(state, z, dt) for z in (False, True) for dt in (torch.float32, torch.bfloat16)}

    try:
        head = subprocess.run(["git", "-C", os.path.dirname(__import__("diffusers").__file__), "rev-parse", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        head = ""
    index = dict(torch=torch.__version__, diffusers=DIFFUSERS_COMMIT, diffusers_head=head, seed=args.seed,
                 config=dict(CONFIG, axes_dims_rope=list(CONFIG["axes_dims_rope"])), cases={})
    cin, jd = CONFIG["in_channels"], CONFIG["joint_attention_dim"]
    for case, (zero_cond, shapes, L, mask_s, sigma) in CASES.items():
        n = sum(h * w for h, w in shapes)
        x = randn(gen, n, cin).float()
        ehs = randn(gen, L, jd).float()
        mask = None if mask_s is None else torch.tensor([float(c) for c in mask_s], dtype=torch.float32)
        assert mask is None or len(mask) == L
        t = torch.tensor([sigma], dtype=torch.float32)
        mf = models[(zero_cond, torch.float32)]
        taps, hooks = add_taps(mf)
        out = run(mf, x, ehs, mask, t, shapes, torch.float32)
        for hk in hooks:
            hk.remove()
        out_b = run(models[(zero_cond, torch.bfloat16)], x, ehs, mask, t, shapes, torch.bfloat16).float()
        mx, rm, rms = rel_errs(out, out_b)
        tensors = {"hidden_states": c32(x), "encoder_hidden_states": c32(ehs), "timestep": t,
                   "img_shapes": torch.tensor([[1, h, w] for h, w in shapes], dtype=torch.int32), "out": c32(out)}
        if mask is not None:
            tensors["encoder_hidden_states_mask"] = mask
        tensors.update(taps)
        save_file(tensors, os.path.join(args.out, "cases", case + ".safetensors"),
                  metadata={"zero_cond_t": str(zero_cond).lower(), "diffusers": DIFFUSERS_COMMIT})
        index["cases"][case] = dict(zero_cond_t=zero_cond, img_shapes=[[1, h, w] for h, w in shapes], text_rows=L,
                                    mask=mask_s, sigma=sigma, out_rms=rms, bf16_max_rel=mx, bf16_rms_rel=rm,
                                    taps=sorted(taps))
        print(f"{case}: tokens {n}, text {L}, rms {rms:.4f}, bf16 max {mx:.3e} rms {rm:.3e}")
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)


if __name__ == "__main__":
    main()
