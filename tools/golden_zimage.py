#!/usr/bin/env python3
"""Golden data for Z-Image: the DiT (ZImageTransformer2DModel), the Flux VAE (AutoencoderKL), the schedule and the
whole ZImagePipeline, tiny and random, from diffusers' source on the CPU in float32 (TF32 off).

Every parameter is re-randomised from a fixed generator (norm weights 1 + 0.2 randn, matrices randn / sqrt(fan_in),
other vectors 0.1 randn; the pad tokens, which diffusers initialises to zeros, get non-zero rows), so every path
matters. Each DiT, VAE and pipeline case is also run with the reference in bfloat16, and the reference's own bf16
error is stored next to the case (a GPU path must stay within a quarter of it):

    bf16_max_rel = max|ref_bf16 - ref_f32| / rms(ref_f32),   bf16_rms_rel = rms(ref_bf16 - ref_f32) / rms(ref_f32)

Writes (under --out, normally tests/golden/zimage):
    index.json                 versions, per-case shapes, RMS and bf16 errors, the schedule tables
    dit_a/, dit_b/             diffusers ZImageTransformer2DModel folders
    dit_cases/<case>.safetensors
        x [16,1,H,W], cap_feats [L,cap_dim], t [1] (the DiT's own timestep input: 1 - sigma), out [16,1,H,W];
        taps: adaln_input [adaln], x_embed [N',dim], cap_embed [L',dim], x_refined [N',dim], cap_refined [L',dim],
        layer_<i> [N'+L',dim], pos_img / pos_cap i32 [*,3], rope_img / rope_cap [*, head_dim/2, 2] (cos, sin)
    vae_a/, vae_b/             diffusers AutoencoderKL folders (Flux layout)
    vae_cases/<case>.safetensors
        decode: z [16,h,w] (what vae.decode receives) -> image [3,8h,8w] (raw decoder output)
        encode: x [3,H,W] -> moments [32,H/8,W/8] (the encoder's raw output: mean | logvar)
    pipeline/                  a tiny ZImagePipeline folder (Qwen3Model text encoder, the real Qwen3 tokenizer;
                               its tokenizer.json stored as tokenizer.json.gz, gzip -9, which `cortiq convert` reads)
    pipeline_cases.json, pipeline_expected.safetensors
        per case c: embeds_<c> [L,hidden], neg_embeds_<c> (with CFG), noise_<c> [16,h,w], sigmas_<c>,
        timesteps_<c>, latents_<c> [16,h,w] (final), image_<c> [H,W,3] (postprocessed to [0,1], before rounding)

Usage (on a machine with torch and transformers; diffusers' source at commit 58eb52c0 on PYTHONPATH):
    PYTHONPATH=ref/diffusers/src python3 tools/golden_zimage.py --out tests/golden/zimage \
        --tokenizer ref/qwen3_tokenizer.json --chat-template tests/fixtures/chat_templates/qwen3.jinja
"""
import argparse
import gzip
import json
import os
import shutil

import numpy as np
import torch
from safetensors.torch import save_file

from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, ZImagePipeline, ZImageTransformer2DModel

DIFFUSERS_COMMIT = "58eb52c0"

DITS = {
    "dit_a": dict(dim=96, n_heads=2, n_kv_heads=2, axes_dims=[16, 16, 16], n_layers=2, n_refiner_layers=2,
                  cap_feat_dim=48),
    "dit_b": dict(dim=128, n_heads=4, n_kv_heads=4, axes_dims=[8, 12, 12], n_layers=3, n_refiner_layers=2,
                  cap_feat_dim=40),
}
DIT_COMMON = dict(all_patch_size=[2], all_f_patch_size=[1], in_channels=16, norm_eps=1e-5, qk_norm=True,
                  rope_theta=256.0, t_scale=1000.0, axes_lens=[1024, 512, 512])
# name: (model, latent h, latent w, caption length, t)
DIT_CASES = {
    "sq": ("dit_a", 16, 16, 7, 0.6),
    "pad": ("dit_a", 10, 14, 33, 0.3),
    "b_small": ("dit_b", 6, 8, 40, 0.9),
    "b_long": ("dit_b", 8, 8, 150, 0.45),
    "t0": ("dit_a", 8, 8, 5, 0.001),
    "t1": ("dit_a", 8, 8, 5, 0.999),
}

VAES = {
    "vae_a": dict(block_out_channels=[16, 32, 32, 32], layers_per_block=1, norm_num_groups=16),
    "vae_b": dict(block_out_channels=[32, 32, 64, 64], layers_per_block=2, norm_num_groups=32),
}
VAE_COMMON = dict(in_channels=3, out_channels=3, latent_channels=16, down_block_types=["DownEncoderBlock2D"] * 4,
                  up_block_types=["UpDecoderBlock2D"] * 4, act_fn="silu", scaling_factor=0.3611, shift_factor=0.1159,
                  use_quant_conv=False, use_post_quant_conv=False, mid_block_add_attention=True, force_upcast=True,
                  sample_size=1024)
# name: (kind, h, w): decode sizes in latent pixels, encode sizes in image pixels
VAE_CASES = {"dec_s": ("decode", 4, 4), "dec_odd": ("decode", 5, 7), "dec_l": ("decode", 16, 12),
             "enc_s": ("encode", 32, 32), "enc_odd": ("encode", 40, 56)}

TE = dict(hidden=16, layers=3, heads=2, kv_heads=1, head_dim=8, ff=40)
LONG_PROMPT = " ".join(["a very detailed oil painting of a lighthouse on a rocky coast at dusk, waves, gulls,"
                        " 海浪 and 🙂, number 12345"] * 40)
PIPE_CASES = {
    "turbo": dict(prompt="a red fox in the snow, 4k photo", negative=None, height=64, width=96, steps=3, seed=42,
                  guidance=0.0, cfg_normalization=False, cfg_truncation=1.0, shift=3.0),
    "base_cfg": dict(prompt="两只猫 and a dog 🙂", negative=None, height=64, width=64, steps=3, seed=7,
                     guidance=4.0, cfg_normalization=False, cfg_truncation=1.0, shift=6.0),
    "base_norm": dict(prompt="a castle on a hill", negative="blurry, low quality", height=48, width=80, steps=3,
                      seed=2**32 + 5, guidance=4.0, cfg_normalization=True, cfg_truncation=1.0, shift=6.0),
    "base_trunc": dict(prompt="a bowl of fruit", negative="", height=64, width=48, steps=4, seed=11, guidance=3.0,
                       cfg_normalization=False, cfg_truncation=0.5, shift=6.0),
    "long": dict(prompt=LONG_PROMPT, negative=None, height=32, width=32, steps=2, seed=3, guidance=0.0,
                 cfg_normalization=False, cfg_truncation=1.0, shift=3.0),
}
SCHEDULE_STEPS = [1, 2, 3, 4, 8, 9, 28, 50]


def randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def randomise(module, gen, pads=()):
    """Every parameter from gen: the weights of norm layers (any module class named *Norm*) 1 + 0.2 randn."""
    norms = {f"{mn}.{pn}" if mn else pn for mn, mod in module.named_modules() if "Norm" in type(mod).__name__
             for pn, _ in mod.named_parameters(recurse=False) if pn == "weight"}
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith(pads):
                v = 0.5 * randn(gen, *p.shape)
            elif name in norms:
                v = 1.0 + 0.2 * randn(gen, *p.shape)
            elif p.ndim >= 2:
                v = randn(gen, *p.shape) / p[0].numel() ** 0.5
            else:
                v = 0.1 * randn(gen, *p.shape)
            # exactly representable in bf16 and in f16 (no f16 subnormals): the folders are stored in bf16 and a
            # converter may store kernels in f16, both without changing a value
            v = v.to(torch.bfloat16).double()
            v[v.abs() < 2.0 ** -14] = 0
            p.copy_(v.to(p.dtype))


def rel_errs(ref, got):
    ref = ref.double()
    got = got.double()
    rms = ref.pow(2).mean().sqrt().item()
    d = (got - ref)
    return d.abs().max().item() / rms, d.pow(2).mean().sqrt().item() / rms, rms


def c32(t):
    return t.detach().to(torch.float32).contiguous().clone()


# ---- DiT ---------------------------------------------------------------------------------------------------------
def dit_taps(model):
    taps, hooks = {}, []

    def pre(name, idx_x, idx_f=None):
        def f(mod, args):
            taps[name] = c32(args[idx_x][0])
            if idx_f is not None:
                fr = args[idx_f][0]
                taps["rope_" + name.split("_")[0].replace("x", "img")] = c32(torch.stack([fr.real, fr.imag], -1))
        return f

    def post(name):
        def f(mod, args, out):
            taps[name] = c32(out[0])
        return f

    hooks.append(model.t_embedder.register_forward_hook(post("adaln_input")))
    hooks.append(model.noise_refiner[0].register_forward_pre_hook(pre("x_embed", 0, 2)))
    hooks.append(model.noise_refiner[-1].register_forward_hook(post("x_refined")))
    hooks.append(model.context_refiner[0].register_forward_pre_hook(pre("cap_embed", 0, 2)))
    hooks.append(model.context_refiner[-1].register_forward_hook(post("cap_refined")))
    for i, layer in enumerate(model.layers):
        hooks.append(layer.register_forward_hook(post(f"layer_{i}")))
    orig = model.patchify_and_embed

    def patchify(*a, **k):
        r = orig(*a, **k)
        taps["pos_img"] = r[3][0].to(torch.int32).contiguous().clone()
        taps["pos_cap"] = r[4][0].to(torch.int32).contiguous().clone()
        return r

    model.patchify_and_embed = patchify
    return taps, hooks


def make_dits(args, gen):
    models = {}
    for name, cfg in DITS.items():
        m = ZImageTransformer2DModel(**cfg, **DIT_COMMON).float().eval()
        randomise(m, gen, pads=("x_pad_token", "cap_pad_token"))
        path = os.path.join(args.out, name)
        m.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
        models[name] = ZImageTransformer2DModel.from_pretrained(path, torch_dtype=torch.float32).eval()
    return models


def run_dit_cases(args, gen, models, index):
    os.makedirs(os.path.join(args.out, "dit_cases"), exist_ok=True)
    index["dit"] = {}
    for case, (mname, h, w, L, t) in DIT_CASES.items():
        m = models[mname]
        cfg = DITS[mname]
        x = randn(gen, 16, 1, h, w).float()
        cap = randn(gen, L, cfg["cap_feat_dim"]).float()
        tt = torch.tensor([t], dtype=torch.float32)
        taps, hooks = dit_taps(m)
        out = m([x], tt, [cap], return_dict=False)[0][0]
        for hk in hooks:
            hk.remove()
        del m.patchify_and_embed
        mb = ZImageTransformer2DModel.from_pretrained(os.path.join(args.out, mname),
                                                      torch_dtype=torch.bfloat16).eval()
        out_b = mb([x.bfloat16()], tt.bfloat16(), [cap.bfloat16()], return_dict=False)[0][0].float()
        mx, rm, rms = rel_errs(out, out_b)
        tensors = {"x": c32(x), "cap_feats": c32(cap), "t": tt, "out": c32(out)}
        tensors.update(taps)
        save_file(tensors, os.path.join(args.out, "dit_cases", case + ".safetensors"),
                  metadata={"model": mname, "diffusers": DIFFUSERS_COMMIT})
        index["dit"][case] = dict(model=mname, latent=[h, w], caption=L, t=t, out_rms=rms, bf16_max_rel=mx,
                                  bf16_rms_rel=rm, taps=sorted(taps))
        print(f"dit {case}: rms {rms:.4f}, bf16 max {mx:.3e} rms {rm:.3e}")


# ---- VAE ---------------------------------------------------------------------------------------------------------
def make_vaes(args, gen):
    models = {}
    for name, cfg in VAES.items():
        m = AutoencoderKL(**cfg, **VAE_COMMON).float().eval()
        assert m.config.scaling_factor == 0.3611
        randomise(m, gen)
        path = os.path.join(args.out, name)
        m.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
        models[name] = AutoencoderKL.from_pretrained(path, torch_dtype=torch.float32).eval()
    return models


def run_vae_cases(args, gen, models, index):
    os.makedirs(os.path.join(args.out, "vae_cases"), exist_ok=True)
    index["vae"] = {}
    for mname in VAES:
        mb = AutoencoderKL.from_pretrained(os.path.join(args.out, mname), torch_dtype=torch.bfloat16).eval()
        for case, (kind, h, w) in VAE_CASES.items():
            m = models[mname]
            if kind == "decode":
                z = randn(gen, 1, 16, h, w).float()
                ref = m.decode(z, return_dict=False)[0]
                got = mb.decode(z.bfloat16(), return_dict=False)[0].float()
                tensors = {"z": c32(z[0]), "image": c32(ref[0])}
            else:
                x = (torch.rand(1, 3, h, w, generator=gen, dtype=torch.float64) * 2 - 1).float()
                ref = m._encode(x)
                got = mb._encode(x.bfloat16()).float()
                tensors = {"x": c32(x[0]), "moments": c32(ref[0])}
            mx, rm, rms = rel_errs(ref, got)
            full = f"{mname}_{case}"
            save_file(tensors, os.path.join(args.out, "vae_cases", full + ".safetensors"),
                      metadata={"model": mname, "kind": kind, "diffusers": DIFFUSERS_COMMIT})
            index["vae"][full] = dict(model=mname, kind=kind, size=[h, w], out_rms=rms, bf16_max_rel=mx,
                                      bf16_rms_rel=rm)
            print(f"vae {full}: rms {rms:.4f}, bf16 max {mx:.3e} rms {rm:.3e}")


# ---- schedule ----------------------------------------------------------------------------------------------------
def schedule_tables(index):
    rows = []
    for shift in (3.0, 6.0):
        for n in SCHEDULE_STEPS:
            s = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=shift, use_dynamic_shifting=False)
            lin = torch.linspace(1.0, 1 / n, n)
            s.set_timesteps(sigmas=lin.tolist(), mu=0.5)
            model_t = ((1000 - s.timesteps.float()) / 1000)
            t_norm = ((1000 - s.timesteps.float()) / 1000).tolist()
            rows.append(dict(steps=n, shift=shift,
                             linspace=[float(v) for v in lin.tolist()],
                             sigmas=[float(v) for v in s.sigmas.float().tolist()],
                             timesteps=[float(v) for v in s.timesteps.float().tolist()],
                             model_t=[float(v) for v in model_t.tolist()],
                             t_norm=[float(v) for v in t_norm]))
    index["schedule"] = rows


# ---- pipeline ----------------------------------------------------------------------------------------------------
def make_tokenizer(args, dst):
    os.makedirs(dst, exist_ok=True)
    if args.tokenizer.endswith(".gz"):
        with gzip.open(args.tokenizer, "rb") as src, open(os.path.join(dst, "tokenizer.json"), "wb") as out:
            shutil.copyfileobj(src, out)
    else:
        shutil.copyfile(args.tokenizer, os.path.join(dst, "tokenizer.json"))
    template = open(args.chat_template, encoding="utf-8").read()
    cfg = {"tokenizer_class": "Qwen2Tokenizer", "add_bos_token": False, "add_prefix_space": False,
           "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
           "errors": "replace", "model_max_length": 131072, "split_special_tokens": False,
           "clean_up_tokenization_spaces": False, "chat_template": template}
    with open(os.path.join(dst, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)


def build_pipeline(args, gen):
    from transformers import AutoTokenizer, Qwen3Config, Qwen3Model
    tokdir = os.path.join(args.out, "_tok")
    make_tokenizer(args, tokdir)
    tok = AutoTokenizer.from_pretrained(tokdir)
    # ids the cases read: only their embedding rows are random, the rest zeros (the file compresses well)
    used = set()
    for c in PIPE_CASES.values():
        for p in (c["prompt"], c["negative"] or ""):
            text = tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                           add_generation_prompt=True, enable_thinking=True)
            used.update(tok(text, max_length=512, truncation=True).input_ids)
    used.add(tok.pad_token_id)
    te = Qwen3Model(Qwen3Config(vocab_size=151936, hidden_size=TE["hidden"], intermediate_size=TE["ff"],
                                num_hidden_layers=TE["layers"], num_attention_heads=TE["heads"],
                                num_key_value_heads=TE["kv_heads"], head_dim=TE["head_dim"],
                                max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=1000000.0,
                                tie_word_embeddings=True)).float().eval()
    randomise(te, gen)
    with torch.no_grad():
        emb = te.embed_tokens.weight
        keep = torch.zeros(emb.shape[0], dtype=torch.bool)
        keep[sorted(used)] = True
        emb[~keep] = 0
    dit = ZImageTransformer2DModel(dim=64, n_heads=2, n_kv_heads=2, axes_dims=[8, 12, 12], n_layers=2,
                                   n_refiner_layers=1, cap_feat_dim=TE["hidden"], **DIT_COMMON).float().eval()
    randomise(dit, gen, pads=("x_pad_token", "cap_pad_token"))
    vae = AutoencoderKL(**VAES["vae_a"], **VAE_COMMON).float().eval()
    randomise(vae, gen)
    sched = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)
    pipe = ZImagePipeline(scheduler=sched, vae=vae, text_encoder=te, tokenizer=tok, transformer=dit)
    path = os.path.join(args.out, "pipeline")
    pipe.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
    shutil.rmtree(tokdir)
    return path, len(used)


def gzip_tokenizer(path):
    """The pipeline's tokenizer.json as tokenizer.json.gz (level 9, no name or time in the header, so the same
    input gives the same bytes), once the reference has read the plain file."""
    plain = os.path.join(path, "tokenizer", "tokenizer.json")
    with open(plain, "rb") as f:
        data = f.read()
    with open(plain + ".gz", "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9,
                                                         mtime=0) as out:
        out.write(data)
    os.remove(plain)


def run_pipeline_cases(args, path, index):
    cases, tensors = {}, {}
    for dtype in (torch.float32, torch.bfloat16):
        pipe = ZImagePipeline.from_pretrained(path, torch_dtype=dtype)
        for name, c in PIPE_CASES.items():
            pipe.scheduler = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=c["shift"],
                                                             use_dynamic_shifting=False)
            rec = {}
            orig_enc = pipe._encode_prompt

            def enc(prompt, *a, **k):
                r = orig_enc(prompt, *a, **k)
                rec.setdefault("embeds", []).append([c32(e) for e in r])
                return r

            pipe._encode_prompt = enc
            orig_lat = pipe.prepare_latents

            def lat(*a, **k):
                r = orig_lat(*a, **k)
                rec["noise"] = c32(r[0])
                return r

            pipe.prepare_latents = lat

            def on_step(p, i, t, kw):
                rec.setdefault("step_latents", []).append(c32(kw["latents"][0]))
                return {}

            gen = torch.Generator("cpu").manual_seed(c["seed"])
            lat_h, lat_w = c["height"] // 8, c["width"] // 8
            noise = torch.randn((1, 16, lat_h, lat_w), generator=torch.Generator("cpu").manual_seed(c["seed"]),
                                dtype=torch.float32)
            out = pipe(prompt=c["prompt"], negative_prompt=c["negative"], height=c["height"], width=c["width"],
                       num_inference_steps=c["steps"], guidance_scale=c["guidance"],
                       cfg_normalization=c["cfg_normalization"], cfg_truncation=c["cfg_truncation"],
                       generator=gen, output_type="pt", callback_on_step_end=on_step,
                       callback_on_step_end_tensor_inputs=["latents"], return_dict=False)[0]
            del pipe._encode_prompt
            del pipe.prepare_latents
            assert torch.equal(rec["noise"], noise[0]), "the pipeline's noise is not torch.randn on the CPU generator"
            image = c32(out[0].permute(1, 2, 0).float())
            latents = rec["step_latents"][-1].clone()
            if dtype == torch.float32:
                tensors[f"embeds_{name}"] = rec["embeds"][0][0]
                if c["guidance"] > 0:
                    tensors[f"neg_embeds_{name}"] = rec["embeds"][1][0]
                tensors[f"noise_{name}"] = c32(noise[0])
                tensors[f"sigmas_{name}"] = c32(pipe.scheduler.sigmas)
                tensors[f"timesteps_{name}"] = c32(pipe.scheduler.timesteps)
                tensors[f"latents_{name}"] = latents
                tensors[f"image_{name}"] = image
                for i, sl in enumerate(rec["step_latents"]):
                    tensors[f"step{i}_{name}"] = sl
                cases[name] = dict(c, tokens=(lat_h // 2) * (lat_w // 2), rows=int(rec["embeds"][0][0].shape[0]),
                                   image_shape=list(image.shape), latents_rms=rel_errs(latents, latents)[2])
            else:
                mx, rm, _ = rel_errs(tensors[f"latents_{name}"], latents)
                cases[name]["bf16_latents_max_rel"] = mx
                cases[name]["bf16_latents_rms_rel"] = rm
                cases[name]["bf16_image_max_abs"] = (image - tensors[f"image_{name}"]).abs().max().item()
                print(f"pipeline {name}: rows {cases[name]['rows']}, bf16 latents max {mx:.3e} rms {rm:.3e}, "
                      f"image {cases[name]['bf16_image_max_abs']:.4f}")
    save_file(tensors, os.path.join(args.out, "pipeline_expected.safetensors"),
              metadata={"diffusers": DIFFUSERS_COMMIT})
    with open(os.path.join(args.out, "pipeline_cases.json"), "w", encoding="utf-8") as f:
        json.dump(dict(torch=torch.__version__, diffusers=DIFFUSERS_COMMIT, cases=cases), f, ensure_ascii=False,
                  indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/zimage")
    ap.add_argument("--tokenizer", required=True, help="the Qwen3 tokenizer.json (or a gzipped .json.gz)")
    ap.add_argument("--chat-template", required=True, help="the Qwen3 chat template (jinja)")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--only", default="dit,vae,schedule,pipeline")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(args.out, exist_ok=True)
    only = set(args.only.split(","))
    index = dict(torch=torch.__version__, diffusers=DIFFUSERS_COMMIT, seed=args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    if "dit" in only:
        run_dit_cases(args, gen, make_dits(args, gen), index)
    if "vae" in only:
        run_vae_cases(args, gen, make_vaes(args, gen), index)
    if "schedule" in only:
        schedule_tables(index)
    if "pipeline" in only:
        path, n_used = build_pipeline(args, gen)
        index["pipeline_embedding_rows"] = n_used
        run_pipeline_cases(args, path, index)
        gzip_tokenizer(path)
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)


if __name__ == "__main__":
    main()
