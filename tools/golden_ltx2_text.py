#!/usr/bin/env python3
"""Golden data for LTX-2.3 / 2.5's feature extractor and embeddings connectors (src/models/ltx2_text.h): tiny random
diffusers LTX2TextConnectors (pipelines/ltx2/connectors.py at commit 58eb52c0) in the LTX-2.5 layout
(per_modality_projections, proj_bias, gated attention on both connectors, split RoPE with the float64 ladder over
connector_rope_base_seq_len 4096, learnable registers), run on the CPU in float32 with TF32 off, fed as LTX2Pipeline
feeds them: the text tower's hidden states stacked on a last axis and flattened (torch.stack(hs, -1).flatten(2, 3)),
with the tokenizer's left-padded attention mask.

Models (every parameter re-randomised from a fixed generator: norm weights 1 + 0.2 randn, the registers
uniform(-1, 1) as the reference initialises them, other matrices randn / sqrt(fan_in), other vectors 0.1 randn;
rounded to bf16, no f16 subnormals; stored as a bf16 diffusers folder, the float32 run reads the folder back):
    tiny   caption_channels 16, 4 hidden states; video 2 heads x 16, audio 2 heads x 8; 2 blocks each; 8 registers
    wide   the real head widths: caption_channels 32, 4 hidden states; video 1 head x 128, audio 1 head x 64;
           1 block each; 8 registers (more heads at these widths would not fit the 1 MiB budget)

Cases (hidden states randn, each state scaled differently, pad rows random too; the mask zeros then ones):
    tiny_left   16 tokens, 5 pads
    tiny_full   16 tokens, no pads
    tiny_many   24 tokens, 20 pads (more pads than registers: the registers repeat)
    tiny_one     8 tokens, 7 pads
    wide_left   16 tokens, 6 pads
Each case also runs the same folder in bfloat16 (inputs cast to bf16) with the same taps; index.json stores per
output and tap the reference's own bf16 error (a device path must stay within a quarter of it):
    max_rel = max|ref_bf16 - ref_f32| / rms(ref_f32),   rms_rel = rms(ref_bf16 - ref_f32) / rms(ref_f32)

Writes (under --out, normally tests/golden/ltx2_text):
    <model>/               the diffusers folder (config.json, diffusion_pytorch_model.safetensors, bf16)
    index.json             versions, seed, per model its config and cases: tokens, pads, output RMS, bf16 errors
    cases/<case>.safetensors (batch dimension dropped, all f32 but the mask)
        inputs:  hidden_states [L, T, C] (the tower's states, transformers' order), mask [T] (int32, 1 = real)
        taps:    video_features [T, Dv] / audio_features [T, Da] (video_text_proj_in / audio_text_proj_in outputs,
                 tokens in their order, a pad's row the bias), video_in / audio_in [T, D] (a connector's input after
                 the registers: block 0's input), video_block<i> / audio_block<i> [T, D] (block outputs),
                 rope_{video,audio}_{cos,sin} [T, D/2] (heads side by side)
        outputs: video_out [T, Dv] (after the binary mask, all ones with registers), audio_out [T, Da]

Usage, from the repository root (torch on the machine; diffusers' source at commit 58eb52c0 on PYTHONPATH):
    PYTHONPATH=$DSRC:tools python3 tools/golden_ltx2_text.py --out tests/golden/ltx2_text
"""
import argparse
import inspect
import json
import os
import sys

import torch
from safetensors.torch import save_file

from diffusers.pipelines.ltx2.connectors import LTX2TextConnectors

DIFFUSERS_COMMIT = "58eb52c0"
SIZE_BUDGET = 1 << 20  # bytes under --out


def model_config(C, L, vh, vd, ah, ad, layers, registers):
    return dict(
        caption_channels=C, text_proj_in_factor=L,
        video_connector_num_attention_heads=vh, video_connector_attention_head_dim=vd,
        video_connector_num_layers=layers, video_connector_num_learnable_registers=registers, video_gated_attn=True,
        audio_connector_num_attention_heads=ah, audio_connector_attention_head_dim=ad,
        audio_connector_num_layers=layers, audio_connector_num_learnable_registers=registers, audio_gated_attn=True,
        connector_rope_base_seq_len=4096, rope_theta=10000.0, rope_double_precision=True,
        causal_temporal_positioning=False, rope_type="split", per_modality_projections=True,
        video_hidden_dim=vh * vd, audio_hidden_dim=ah * ad, proj_bias=True,
    )


MODELS = {
    "tiny": model_config(16, 4, 2, 16, 2, 8, 2, 8),
    "wide": model_config(32, 4, 1, 128, 1, 64, 1, 8),
}

# name: model, tokens, pads
CASES = {
    "tiny_left": ("tiny", 16, 5),
    "tiny_full": ("tiny", 16, 0),
    "tiny_many": ("tiny", 24, 20),
    "tiny_one": ("tiny", 8, 7),
    "wide_left": ("wide", 16, 6),
}

STREAMS = ("video", "audio")


def fail(msg):
    sys.exit(f"golden_ltx2_text: {msg}")


def check_api():
    """The constructor and forward this script relies on, as diffusers 58eb52c0 declares them."""
    params = inspect.signature(LTX2TextConnectors.__init__).parameters
    missing = [k for k in MODELS["tiny"] if k not in params]
    if missing:
        fail(f"LTX2TextConnectors.__init__ lacks {missing}: not diffusers {DIFFUSERS_COMMIT}?")
    fwd = inspect.signature(LTX2TextConnectors.forward).parameters
    for k in ("text_encoder_hidden_states", "attention_mask", "padding_side"):
        if k not in fwd:
            fail(f"LTX2TextConnectors.forward lacks '{k}': not diffusers {DIFFUSERS_COMMIT}?")


def expected_names(cfg):
    """Every state-dict name the C tensor table (src/models/ltx2_text_tensors.c) lists for cfg."""
    names = set()
    for s in STREAMS:
        names |= {f"{s}_text_proj_in.weight", f"{s}_text_proj_in.bias", f"{s}_connector.learnable_registers"}
        for i in range(cfg[f"{s}_connector_num_layers"]):
            p = f"{s}_connector.transformer_blocks.{i}."
            for leaf in ("to_q", "to_k", "to_v", "to_out.0", "to_gate_logits"):
                names |= {p + f"attn1.{leaf}.weight", p + f"attn1.{leaf}.bias"}
            names |= {p + "attn1.norm_q.weight", p + "attn1.norm_k.weight"}
            for leaf in ("ff.net.0.proj", "ff.net.2"):
                names |= {p + f"{leaf}.weight", p + f"{leaf}.bias"}
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
            elif name.endswith("learnable_registers"):
                v = torch.rand(*p.shape, generator=gen, dtype=torch.float64) * 2.0 - 1.0
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
    if not rms > 0:
        fail("a reference tensor is all zeros")
    d = got - ref
    return d.abs().max().item() / rms, d.pow(2).mean().sqrt().item() / rms, rms


def laid_back(tab):
    _, h, t, r = tab.shape  # (B, H, T, D/2/H) -> (T, D/2)
    return tab[0].permute(1, 0, 2).reshape(t, h * r)


def add_taps(model):
    taps, hooks = {}, []

    def proj(s):
        def f(mod, args, out):
            taps[f"{s}_features"] = c32(out[0])
        return f

    def first_in(s):
        def f(mod, args, kwargs):
            x = args[0] if len(args) > 0 else kwargs["hidden_states"]
            taps[f"{s}_in"] = c32(x[0])
        return f

    def block(s, i):
        def f(mod, args, out):
            taps[f"{s}_block{i}"] = c32(out[0])
        return f

    def rope(s):
        def f(mod, args, out):
            taps[f"rope_{s}_cos"] = c32(laid_back(out[0]))
            taps[f"rope_{s}_sin"] = c32(laid_back(out[1]))
        return f

    for s in STREAMS:
        conn = getattr(model, f"{s}_connector")
        hooks.append(getattr(model, f"{s}_text_proj_in").register_forward_hook(proj(s)))
        hooks.append(conn.transformer_blocks[0].register_forward_pre_hook(first_in(s), with_kwargs=True))
        for i, blk in enumerate(conn.transformer_blocks):
            hooks.append(blk.register_forward_hook(block(s, i)))
        hooks.append(conn.rope.register_forward_hook(rope(s)))
    return taps, hooks


def make_inputs(cfg, gen, tokens, pads):
    C, L = cfg["caption_channels"], cfg["text_proj_in_factor"]
    if not 0 <= pads < tokens:
        fail(f"{pads} pads of {tokens} tokens")
    for s in STREAMS:
        if tokens % cfg[f"{s}_connector_num_learnable_registers"]:
            fail(f"{tokens} tokens is not a multiple of the {s} registers")
    # the tower's states: one [1, T, C] tensor per state, each at its own scale, pad rows random as well
    hs = tuple((randn(gen, 1, tokens, C) * (0.5 + 1.5 * l)).float() for l in range(L))
    mask = torch.zeros(1, tokens, dtype=torch.int64)
    mask[:, pads:] = 1  # the tokenizer's left padding
    return hs, mask


def run(model, hs, mask, dtype):
    taps, hooks = add_taps(model)
    # as LTX2Pipeline._get_gemma_prompt_embeds packs them, then calls the connectors
    prompt_embeds = torch.stack(hs, dim=-1).flatten(2, 3).to(dtype)
    video, audio, out_mask = model(prompt_embeds, mask, padding_side="left")
    for hk in hooks:
        hk.remove()
    if not bool((out_mask == 1).all()):
        fail("the connectors' output mask is not all ones (registers should make every row valid)")
    taps["video_out"] = c32(video[0])
    taps["audio_out"] = c32(audio[0])
    return taps


def dir_size(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/ltx2_text")
    ap.add_argument("--seed", type=int, default=20261207)
    args = ap.parse_args()
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        fail(f"--out {args.out} exists and is not a folder")
    check_api()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(os.path.join(args.out, "cases"), exist_ok=True)
    gen = torch.Generator().manual_seed(args.seed)

    index = dict(torch=torch.__version__, diffusers=DIFFUSERS_COMMIT, seed=args.seed, models={})
    loaded = {}
    for name, cfg in MODELS.items():
        m = LTX2TextConnectors(**cfg).float().eval()
        have = set(m.state_dict().keys())
        want = expected_names(cfg)
        if have != want:
            fail(f"model {name}: state dict differs from the C table: extra {sorted(have - want)}, "
                 f"missing {sorted(want - have)}")
        randomise(m, gen)
        path = os.path.join(args.out, name)
        m.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
        f32 = LTX2TextConnectors.from_pretrained(path, torch_dtype=torch.float32).eval()
        b16 = LTX2TextConnectors.from_pretrained(path, torch_dtype=torch.bfloat16).eval()
        for k, v in f32.state_dict().items():
            if v.dtype != torch.float32:
                fail(f"model {name}: {k} loaded as {v.dtype}, not float32")
        loaded[name] = (f32, b16)
        index["models"][name] = dict(config=cfg, cases=[])

    for cname, (mname, tokens, pads) in CASES.items():
        cfg = MODELS[mname]
        f32, b16 = loaded[mname]
        hs, mask = make_inputs(cfg, gen, tokens, pads)
        ref = run(f32, hs, mask, torch.float32)
        got = run(b16, hs, mask, torch.bfloat16)
        want = {f"{s}_{k}" for s in STREAMS for k in ("features", "in", "out")}
        want |= {f"{s}_block{i}" for s in STREAMS for i in range(cfg[f"{s}_connector_num_layers"])}
        want |= {f"rope_{s}_{z}" for s in STREAMS for z in ("cos", "sin")}
        if set(ref) != want:
            fail(f"case {cname}: taps {sorted(ref)}, expected {sorted(want)}")
        bf16, rms = {}, {}
        for k, r in ref.items():
            if k.startswith("rope_"):
                continue  # float32 tables in both runs
            if got[k].shape != r.shape:
                fail(f"case {cname}: tap {k} is {tuple(got[k].shape)} in bf16, {tuple(r.shape)} in f32")
            mx, rr, rm = rel_errs(r, got[k])
            bf16[k] = dict(max_rel=mx, rms_rel=rr)
            rms[k] = rm
        tensors = dict(ref)
        tensors["hidden_states"] = c32(torch.stack([h[0] for h in hs], dim=0))
        tensors["mask"] = mask[0].to(torch.int32).contiguous()
        save_file(tensors, os.path.join(args.out, "cases", cname + ".safetensors"),
                  metadata={"diffusers": DIFFUSERS_COMMIT, "case": cname})
        index["models"][mname]["cases"].append(dict(name=cname, tokens=tokens, pads=pads, rms=rms, bf16=bf16))
        print(f"{cname}: video_out rms {rms['video_out']:.4f} bf16 max {bf16['video_out']['max_rel']:.3e} "
              f"rms {bf16['video_out']['rms_rel']:.3e}; audio_out bf16 max {bf16['audio_out']['max_rel']:.3e}")
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as fh:
        json.dump(index, fh, indent=1)
    size = dir_size(args.out)
    print(f"{args.out}: {size} bytes")
    if size > SIZE_BUDGET:
        fail(f"{args.out} holds {size} bytes, over the {SIZE_BUDGET}-byte budget")


if __name__ == "__main__":
    main()
