#!/usr/bin/env python3
"""Golden data for the whole Qwen-Image-2.1 text-to-image pipeline (QwenImage21Pipeline), tiny and random.

Builds a tiny random pipeline from the reference classes — a Qwen3-VL text tower with the REAL Qwen tokenizer
(151,936-entry vocabulary), the single-stream transformer, the 16x VAE and the pipeline's real scheduler
configuration — saves it as a diffusers folder, and runs the reference pipeline on the CPU in float32 with a
fixed seed for a few prompts/sizes, with and without true CFG.

The embedding table dominates the size, so its rows are made exactly representable in the q8_row codec
(int8 * one f16 scale per row): a .cmf that stores the embedding as q8_row and everything else as f32 holds
exactly the reference's numbers.

Writes:
    <out>/pipeline/            the diffusers folder (convert it with `cortiq convert`)
    <out>/expected.safetensors per case: latents_<c> f32 [tokens, C] (final packed latents),
                               image_<c> f32 [H, W, 4] (postprocessed to [0, 1], before 8-bit rounding),
                               noise_<c> f32 [tokens, C] (the initial latents), embeds_<c> f32 [T, D]
                               (prompt embeddings the transformer reads), sigmas_<c>
    <out>/cases.json           the prompts, sizes, steps, seeds, guidance of each case

Usage (needs torch, transformers with Qwen3-VL, torchvision, and diffusers' source with the 2.1 files):
    PYTHONPATH=ref/diffusers/src python3 tools/golden_pipeline_qi21.py \
        --tokenizer-dir ref/qwen_tok/qwen3 --chat-template tests/fixtures/chat_templates/qwen3_vl.jinja \
        --out out/pipeline_qi21
"""
import argparse
import json
import os

import numpy as np
import torch
from safetensors.torch import save_file

from diffusers import (AutoencoderKLQwenImage21, FlowMatchEulerDiscreteScheduler, QwenImage21Pipeline,
                       QwenImage21Transformer2DModel)
from transformers import AutoTokenizer, Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor

SCHEDULER_CONFIG = {  # Qwen/Qwen-Image-2.1 scheduler/scheduler_config.json
    "base_image_seq_len": 256, "base_shift": 0.5, "invert_sigmas": False, "max_image_seq_len": 8192,
    "max_shift": 0.9, "num_train_timesteps": 1000, "shift": 1.0, "shift_terminal": 0.02,
    "stochastic_sampling": False, "time_shift_type": "exponential", "use_beta_sigmas": False,
    "use_dynamic_shifting": True, "use_exponential_sigmas": False, "use_karras_sigmas": False,
}
TE = dict(hidden=16, layers=2, heads=2, kv_heads=1, head_dim=8, ff=40, mrope_section=[1, 1, 2])
Z = 16
CASES = {
    "plain": dict(prompt="a red circle on a blue background", negative=None, cfg=1.0, height=64, width=64,
                  steps=4, seed=42),
    "cfg": dict(prompt="two small green squares, top left", negative="blurry", cfg=4.0, height=64, width=96,
                steps=3, seed=7),
    "long": dict(prompt="A capybara wearing a wizard hat, reading a book by candlelight, oil painting, "
                 "warm colours, 你好, emoji 🙂 and numbers 12345.", negative=None, cfg=1.0, height=96,
                 width=64, steps=2, seed=2**32 + 5),
}


def randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def randomise(module, gen, zero_centered=(), norms=()):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith(zero_centered):
                v = 0.2 * randn(gen, *p.shape)
            elif name.endswith(norms) or name.endswith("gamma"):
                v = 1.0 + 0.2 * randn(gen, *p.shape)
            elif p.ndim >= 2:
                v = randn(gen, *p.shape) / p[0].numel() ** 0.5
            else:
                v = 0.1 * randn(gen, *p.shape)
            p.copy_(v.to(p.dtype))


def q8_row_exact_(weight, gen):
    """Rows = int8 q (|q| <= 127, one entry exactly +-127) times an f16 scale: q8_row-lossless."""
    with torch.no_grad():
        rows, cols = weight.shape
        q = torch.randint(-127, 128, (rows, cols), generator=gen, dtype=torch.int32)
        q[torch.arange(rows), torch.randint(0, cols, (rows,), generator=gen)] = 127
        scale = (0.01 + 0.02 * torch.rand(rows, 1, generator=gen)).to(torch.float16).to(torch.float32)
        weight.copy_(q.to(torch.float32) * scale)


def build(args):
    gen = torch.Generator().manual_seed(args.seed)
    tok = AutoTokenizer.from_pretrained(args.tokenizer_dir)
    template = open(args.chat_template, encoding="utf-8").read()
    ids = {n: tok.convert_tokens_to_ids(n) for n in
           ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")}
    text = dict(vocab_size=151936, hidden_size=TE["hidden"], intermediate_size=TE["ff"],
                num_hidden_layers=TE["layers"], num_attention_heads=TE["heads"],
                num_key_value_heads=TE["kv_heads"], head_dim=TE["head_dim"], max_position_embeddings=4096,
                rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 5000000.0,
                                                    "mrope_section": TE["mrope_section"],
                                                    "mrope_interleaved": True})
    vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=TE["hidden"],
                  patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                  deepstack_visual_indexes=[0])
    te = Qwen3VLForConditionalGeneration(Qwen3VLConfig(
        text_config=text, vision_config=vision, tie_word_embeddings=True, image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"])).float().eval()
    randomise(te, gen, norms=("layernorm.weight", "norm.weight", "q_norm.weight", "k_norm.weight"))
    q8_row_exact_(te.model.language_model.embed_tokens.weight, gen)
    te.tie_weights()

    transformer = QwenImage21Transformer2DModel(
        patch_size=1, in_channels=Z, out_channels=Z, num_layers=2, attention_head_dim=16, num_attention_heads=2,
        context_in_dim=TE["hidden"], mlp_ratio=3, axes_dims_rope=(4, 6, 6), eps=1e-6,
        causal_condition=True).float().eval()
    randomise(transformer, gen, zero_centered=("text_norm.weight",), norms=("norm_q.weight", "norm_k.weight"))

    vae = AutoencoderKLQwenImage21(
        base_dim=4, decoder_base_dim=6, z_dim=Z, dim_mult=[1, 2, 4, 8, 8], num_res_blocks=1, attn_scales=[],
        temperal_downsample=[False, True, True, True], in_channels=4, out_channels=4,
        latents_mean=[0.05 * k for k in range(Z)], latents_std=[1.0 + 0.1 * k for k in range(Z)]).float().eval()
    randomise(vae, gen)

    from transformers import Qwen2VLImageProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
    processor = Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2),
                                 tokenizer=tok, video_processor=Qwen3VLVideoProcessor(), chat_template=template)
    scheduler = FlowMatchEulerDiscreteScheduler(**SCHEDULER_CONFIG)
    return QwenImage21Pipeline(scheduler=scheduler, vae=vae, text_encoder=te, processor=processor,
                               transformer=transformer)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="out/pipeline_qi21")
    ap.add_argument("--tokenizer-dir", required=True)
    ap.add_argument("--chat-template", required=True)
    ap.add_argument("--seed", type=int, default=20261129)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    pipe = build(args)
    pipe.save_pretrained(os.path.join(args.out, "pipeline"), safe_serialization=True)
    # run from the saved folder, as a user would
    pipe = QwenImage21Pipeline.from_pretrained(os.path.join(args.out, "pipeline"), torch_dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    run_cases(pipe, args.out)


def run_cases(pipe, out):
    """Runs every case on the pipeline and writes <out>/expected.safetensors and <out>/cases.json."""
    tensors, meta = {}, {}
    for name, c in CASES.items():
        common = dict(prompt=c["prompt"], negative_prompt=c["negative"], true_cfg_scale=c["cfg"],
                      height=c["height"], width=c["width"], num_inference_steps=c["steps"])
        lat = pipe(**common, generator=torch.Generator("cpu").manual_seed(c["seed"]), output_type="latent",
                   return_dict=False)[0]
        img = pipe(**common, generator=torch.Generator("cpu").manual_seed(c["seed"]), output_type="np",
                   return_dict=False)[0]
        embeds, _, _ = pipe.encode_prompt(prompt=c["prompt"], device="cpu")
        tokens = (c["height"] // 16) * (c["width"] // 16)
        noise = torch.randn((1, 1, Z, c["height"] // 16, c["width"] // 16),
                            generator=torch.Generator("cpu").manual_seed(c["seed"]), dtype=torch.float32)
        noise = noise.view(1, Z, tokens).transpose(1, 2)
        tensors[f"latents_{name}"] = lat[0].float().contiguous()
        tensors[f"image_{name}"] = torch.from_numpy(np.ascontiguousarray(img[0])).float()
        tensors[f"noise_{name}"] = noise[0].contiguous()
        tensors[f"embeds_{name}"] = embeds[0].float().contiguous()
        meta[name] = dict(c, tokens=tokens, image_shape=list(img[0].shape))
        print(name, "latents", tuple(lat.shape), "image", img[0].shape, "embeds", tuple(embeds.shape),
              "img mean", float(img.mean()))
    save_file(tensors, os.path.join(out, "expected.safetensors"))
    with open(os.path.join(out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"torch": torch.__version__, "scheduler": SCHEDULER_CONFIG, "cases": meta}, f, indent=1,
                  ensure_ascii=False)


if __name__ == "__main__":
    main()
