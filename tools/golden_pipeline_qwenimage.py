#!/usr/bin/env python3
"""Golden data for the whole Qwen-Image (v1) text-to-image pipeline: a tiny random QwenImagePipeline from diffusers'
source, run on the CPU in float32 (TF32 off), and again in bfloat16 for the reference's own error.

The pipeline holds the real Qwen tokenizer (tests/fixtures/tokenizers/qwen3.json.gz: the Qwen2 BPE family, whose
ids for the template's special tokens are Qwen2.5-VL's), so the template's 34 dropped rows are the system turn as in
the released model; a tiny Qwen2_5_VLForConditionalGeneration text encoder (2 layers, 16 wide; only the embedding
rows the cases read are random, the rest zeros, so the file compresses well; the head tied to it, as text to image
never reads it), a tiny QwenImageTransformer2DModel
(2 layers, 2 heads x 16, text width 16) and a tiny AutoencoderKLQwenImage with random latents_mean / latents_std.
The bf16 run is given the f32 run's noise (rounded): a bf16 draw from the same seed is another sample.
The scheduler is Qwen-Image's (dynamic exponential shift 0.5 -> 0.9 over 256..8192 tokens, terminal 0.02).
Every parameter is re-randomised from a fixed generator (golden_zimage.randomise: norm weights 1 + 0.2 randn,
matrices randn / sqrt(fan_in), vectors 0.1 randn; every value exact in bf16 and f16).

Writes (under --out, normally tests/golden/qimage_pipeline):
    pipeline/                    the QwenImagePipeline folder (save_pretrained in bf16; its tokenizer.json stored as
                                 tokenizer.json.gz, which `cortiq convert` reads)
    cases.json                   per case: prompt, negative, size, steps, seed, true_cfg_scale, rows, tokens, the
                                 reference's bf16 errors
    expected.safetensors         per case c: ids_<c> (the template's tokens), embeds_<c> [rows, 16] (after the drop),
                                 neg_embeds_<c> (with CFG), noise_<c> [16, h, w] (torch.randn on the CPU generator),
                                 sigmas_<c>, timesteps_<c>, step<i>_<c> [tokens, 64] (the packed latents after step i),
                                 latents_<c> [tokens, 64] (final), image_<c> [H, W, 3] (postprocessed to [0, 1])

Usage (on a machine with torch and transformers; diffusers' source at commit 58eb52c0 on PYTHONPATH), from the
repository root:
    PYTHONPATH=ref/diffusers/src:tools python3 tools/golden_pipeline_qwenimage.py --out tests/golden/qimage_pipeline
"""
import argparse
import gzip
import json
import os
import shutil

import torch
from safetensors.torch import save_file

from diffusers import (AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, QwenImagePipeline,
                       QwenImageTransformer2DModel)
from golden_zimage import c32, gzip_tokenizer, randn, randomise, rel_errs

DIFFUSERS_COMMIT = "58eb52c0"
TE = dict(hidden=16, layers=2, heads=2, kv_heads=1, ff=40, mrope=[1, 1, 2])
DIT = dict(patch_size=2, in_channels=64, out_channels=16, num_layers=2, attention_head_dim=16, num_attention_heads=2,
           joint_attention_dim=TE["hidden"], guidance_embeds=False, axes_dims_rope=(4, 6, 6))
VAE = dict(base_dim=4, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=1, attn_scales=[],
           temperal_downsample=[False, True, True], dropout=0.0, input_channels=3)
SCHEDULER = dict(num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=0.9,
                 base_image_seq_len=256, max_image_seq_len=8192, shift_terminal=0.02, time_shift_type="exponential")
CASES = {
    "t2i": dict(prompt="a red fox sitting in the snow, 4k photo", negative=None, height=64, width=96, steps=3,
                seed=42, true_cfg_scale=1.0),
    "cfg": dict(prompt="两只猫 and a dog 🙂 on a sofa", negative=" ", height=64, width=64, steps=3, seed=7,
                true_cfg_scale=4.0),
    "cfg_neg": dict(prompt="a castle on a hill at dawn", negative="blurry, low quality, watermark", height=48,
                    width=80, steps=2, seed=2**32 + 5, true_cfg_scale=2.5),
    "odd": dict(prompt="a bowl of fruit", negative=None, height=80, width=48, steps=2, seed=11,
                true_cfg_scale=1.0),
}


def make_tokenizer(src, dst):
    os.makedirs(dst, exist_ok=True)
    with gzip.open(src, "rb") as f, open(os.path.join(dst, "tokenizer.json"), "wb") as out:
        shutil.copyfileobj(f, out)
    cfg = {"tokenizer_class": "Qwen2Tokenizer", "add_bos_token": False, "add_prefix_space": False, "bos_token": None,
           "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None, "errors": "replace",
           "model_max_length": 131072, "split_special_tokens": False, "clean_up_tokenization_spaces": False}
    with open(os.path.join(dst, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)


def build(args, gen):
    from transformers import AutoTokenizer, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    tokdir = os.path.join(args.out, "_tok")
    make_tokenizer(args.tokenizer, tokdir)
    tok = AutoTokenizer.from_pretrained(tokdir)
    text = dict(vocab_size=151936, hidden_size=TE["hidden"], intermediate_size=TE["ff"],
                num_hidden_layers=TE["layers"], num_attention_heads=TE["heads"], num_key_value_heads=TE["kv_heads"],
                max_position_embeddings=4096, rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "mrope", "rope_theta": 1000000.0, "mrope_section": TE["mrope"]})
    vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=TE["hidden"],
                  patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[0])
    te = Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(
        text_config=text, vision_config=vision, tie_word_embeddings=True,
        image_token_id=tok.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tok.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tok.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tok.convert_tokens_to_ids("<|vision_end|>"))).float().eval()
    randomise(te, gen)
    dit = QwenImageTransformer2DModel(**DIT).float().eval()
    randomise(dit, gen)
    std = (0.5 + randn(gen, 16).abs()).to(torch.bfloat16).double()
    mean = (0.3 * randn(gen, 16)).to(torch.bfloat16).double()
    vae = AutoencoderKLQwenImage(**VAE, latents_mean=[float(v) for v in mean],
                                 latents_std=[float(v) for v in std]).float().eval()
    randomise(vae, gen)
    sched = FlowMatchEulerDiscreteScheduler(**SCHEDULER)
    pipe = QwenImagePipeline(scheduler=sched, vae=vae, text_encoder=te, tokenizer=tok, transformer=dit)
    # the ids the cases read: only their embedding rows stay random
    used = set()
    for c in CASES.values():
        for p in (c["prompt"], c["negative"]):
            if p is not None:
                used.update(tok(pipe.prompt_template_encode.format(p)).input_ids)
    with torch.no_grad():
        emb = te.get_input_embeddings().weight
        keep = torch.zeros(emb.shape[0], dtype=torch.bool)
        keep[sorted(used)] = True
        emb[~keep] = 0
    path = os.path.join(args.out, "pipeline")
    pipe.to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
    shutil.rmtree(tokdir)
    return path, len(used)


def run_cases(path):
    cases, tensors = {}, {}
    for dtype in (torch.float32, torch.bfloat16):
        pipe = QwenImagePipeline.from_pretrained(path, torch_dtype=dtype)
        for name, c in CASES.items():
            rec = {}
            orig_enc = pipe._get_qwen_prompt_embeds

            def enc(prompt, *a, **k):
                r = orig_enc(prompt, *a, **k)
                rec.setdefault("embeds", []).append(c32(r[0][0]))
                rec.setdefault("ids", []).append(
                    pipe.tokenizer(pipe.prompt_template_encode.format(prompt if isinstance(prompt, str) else
                                                                       prompt[0])).input_ids)
                return r

            pipe._get_qwen_prompt_embeds = enc
            orig_lat = pipe.prepare_latents

            def lat(*a, **k):
                r = orig_lat(*a, **k)
                rec["packed_noise"] = c32(r[0])
                return r

            pipe.prepare_latents = lat

            def on_step(p, i, t, kw):
                rec.setdefault("steps", []).append(c32(kw["latents"][0]))
                return {}

            lh, lw = 2 * (c["height"] // 16), 2 * (c["width"] // 16)
            noise = torch.randn((1, 1, 16, lh, lw), generator=torch.Generator("cpu").manual_seed(c["seed"]),
                                dtype=torch.float32)
            packed = QwenImagePipeline._pack_latents(noise, 1, 16, lh, lw)
            if dtype == torch.float32:  # the pipeline's own draw, checked against the noise the test reads
                latents_in = None
            else:  # the same noise, rounded: a bf16 draw would be another sample, not a rounding of this one
                latents_in = packed.to(dtype)
            out = pipe(prompt=c["prompt"], negative_prompt=c["negative"], true_cfg_scale=c["true_cfg_scale"],
                       height=c["height"], width=c["width"], num_inference_steps=c["steps"], latents=latents_in,
                       generator=torch.Generator("cpu").manual_seed(c["seed"]), output_type="pt",
                       callback_on_step_end=on_step, callback_on_step_end_tensor_inputs=["latents"],
                       return_dict=False)[0]
            del pipe._get_qwen_prompt_embeds
            del pipe.prepare_latents
            if dtype == torch.float32:
                assert torch.equal(rec["packed_noise"], packed[0]), "the noise is not torch.randn on the CPU generator"
            image = c32(out[0].permute(1, 2, 0).float())
            latents = rec["steps"][-1].clone()
            if dtype == torch.float32:
                tensors[f"ids_{name}"] = torch.tensor(rec["ids"][0], dtype=torch.int32)
                tensors[f"embeds_{name}"] = rec["embeds"][0]
                if len(rec["embeds"]) > 1:
                    tensors[f"neg_ids_{name}"] = torch.tensor(rec["ids"][1], dtype=torch.int32)
                    tensors[f"neg_embeds_{name}"] = rec["embeds"][1]
                tensors[f"noise_{name}"] = c32(noise[0, 0])
                tensors[f"sigmas_{name}"] = c32(pipe.scheduler.sigmas)
                tensors[f"timesteps_{name}"] = c32(pipe.scheduler.timesteps)
                for i, s in enumerate(rec["steps"]):
                    tensors[f"step{i}_{name}"] = s
                tensors[f"latents_{name}"] = latents
                tensors[f"image_{name}"] = image
                cases[name] = dict(c, rows=int(rec["embeds"][0].shape[0]), tokens=int(latents.shape[0]),
                                   latent_hw=[lh, lw], image_shape=list(image.shape),
                                   latents_rms=rel_errs(latents, latents)[2])
            else:
                mx, rm, _ = rel_errs(tensors[f"latents_{name}"], latents)
                cases[name]["bf16_latents_max_rel"] = mx
                cases[name]["bf16_latents_rms_rel"] = rm
                cases[name]["bf16_image_max_abs"] = (image - tensors[f"image_{name}"]).abs().max().item()
                print(f"{name}: rows {cases[name]['rows']}, tokens {cases[name]['tokens']}, bf16 latents max "
                      f"{mx:.3e} rms {rm:.3e}, image {cases[name]['bf16_image_max_abs']:.4f}")
    return cases, tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/qimage_pipeline")
    ap.add_argument("--tokenizer", default="tests/fixtures/tokenizers/qwen3.json.gz")
    ap.add_argument("--seed", type=int, default=2025)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(args.out, exist_ok=True)
    gen = torch.Generator().manual_seed(args.seed)
    path, n_used = build(args, gen)
    cases, tensors = run_cases(path)
    gzip_tokenizer(path)
    save_file(tensors, os.path.join(args.out, "expected.safetensors"), metadata={"diffusers": DIFFUSERS_COMMIT})
    with open(os.path.join(args.out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(dict(torch=torch.__version__, diffusers=DIFFUSERS_COMMIT, seed=args.seed, embedding_rows=n_used,
                       drop_rows=34, cases=cases), f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
