#!/usr/bin/env python3
"""The peer of `cortiq bench imagine --model zimage --backend cuda`: diffusers' whole ZImagePipeline, Turbo recipe.

Builds the released Z-Image-Turbo pipeline with random bf16 weights on the GPU: ZImageTransformer2DModel at its
class defaults (the released 6.15 B configuration), a Qwen3-4B text encoder (Qwen3Model: hidden 2560, 36 layers,
32 heads over 8 kv heads, head_dim 128, SwiGLU 9728, vocabulary 151,936), the Flux AutoencoderKL (128-256-512-512,
2 layers per block, GroupNorm 32, 16 latent channels, scaling 0.3611, shift 0.1159, no quant convs), the
FlowMatchEulerDiscreteScheduler with shift 3, and the real Qwen3 tokenizer with its chat template (the folder of
tests/golden/zimage/pipeline/tokenizer; a tokenizer.json.gz there is unpacked first). Default SDPA attention.

It times, each after one warm-up and as the median of --repeat runs bracketed by torch.cuda.synchronize():
  - the whole generation: pipe(prompt, SIZE x SIZE, --steps steps, guidance_scale 0, output_type "pil"), i.e.
    prompt encoding, the steps, the VAE decode and the conversion to an 8-bit picture;
  - its parts: encode_prompt alone, one transformer forward, and the VAE decode of a SIZE/8 latent.
Prints one line per figure; `cortiq bench imagine --model zimage --size SIZE --steps N` is the cortiq side (run it
in the same device call).

Usage (on the GPU machine; needs torch with CUDA, transformers, and diffusers' source at 58eb52c0):
    PYTHONPATH=$DSRC python3 tools/bench_peer_zimage_pipe.py --tokenizer tests/golden/zimage/pipeline/tokenizer \\
        [--size 1024] [--steps 8] [--repeat 3]
"""
import argparse
import gzip
import os
import shutil
import tempfile

import torch

from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, ZImagePipeline, ZImageTransformer2DModel
from peer_timing import timed
from transformers import AutoTokenizer, Qwen3Config, Qwen3Model

PROMPT = "a lighthouse on a cliff at sunset, waves breaking on the rocks, oil painting"


def tokenizer_from(folder):
    """AutoTokenizer from a folder whose tokenizer.json may be stored gzipped."""
    if os.path.isfile(os.path.join(folder, "tokenizer.json")):
        return AutoTokenizer.from_pretrained(folder)
    tmp = tempfile.mkdtemp(prefix="ztok_")
    try:
        for name in os.listdir(folder):
            src = os.path.join(folder, name)
            if name == "tokenizer.json.gz":
                with gzip.open(src, "rb") as f, open(os.path.join(tmp, "tokenizer.json"), "wb") as out:
                    shutil.copyfileobj(f, out)
            else:
                shutil.copy(src, tmp)
        return AutoTokenizer.from_pretrained(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build(tokenizer):
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        dit = ZImageTransformer2DModel()
        te = Qwen3Model(Qwen3Config(vocab_size=151936, hidden_size=2560, intermediate_size=9728,
                                    num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                                    head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
                                    rope_theta=1000000.0, tie_word_embeddings=True))
        vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=16,
                            down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4,
                            block_out_channels=[128, 256, 512, 512], layers_per_block=2, norm_num_groups=32,
                            act_fn="silu", scaling_factor=0.3611, shift_factor=0.1159, use_quant_conv=False,
                            use_post_quant_conv=False, mid_block_add_attention=True, force_upcast=False,
                            sample_size=1024)
    torch.set_default_dtype(torch.float32)
    for m in (dit, te, vae):
        m.to("cuda", torch.bfloat16).eval()
    sched = FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)
    pipe = ZImagePipeline(scheduler=sched, vae=vae, text_encoder=te, tokenizer=tokenizer, transformer=dit)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json[.gz] and tokenizer_config.json")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    pipe = build(tokenizer_from(args.tokenizer))
    n = sum(p.numel() for m in (pipe.transformer, pipe.text_encoder, pipe.vae) for p in m.parameters())
    print(f"diffusers ZImagePipeline, random bf16 weights: {n / 1e9:.2f} B parameters", flush=True)
    S = args.size
    gen = torch.Generator("cuda")

    def whole():
        gen.manual_seed(0)
        pipe(PROMPT, height=S, width=S, num_inference_steps=args.steps, guidance_scale=0.0, generator=gen,
             output_type="pil")

    torch.cuda.reset_peak_memory_stats()
    total = timed(whole, args.repeat)
    peak = torch.cuda.max_memory_allocated()
    enc = timed(lambda: pipe.encode_prompt(PROMPT, device="cuda", do_classifier_free_guidance=False), args.repeat)
    embeds, _ = pipe.encode_prompt(PROMPT, device="cuda", do_classifier_free_guidance=False)
    x = [torch.randn(16, 1, S // 8, S // 8, device="cuda", dtype=torch.bfloat16)]
    t = torch.tensor([0.5], device="cuda", dtype=torch.bfloat16)
    step = timed(lambda: pipe.transformer(x, t, embeds, return_dict=False), args.repeat)
    lat = torch.randn(1, 16, S // 8, S // 8, device="cuda", dtype=torch.bfloat16)
    dec = timed(lambda: pipe.vae.decode(lat, return_dict=False), args.repeat)
    print(f"size {S}^2, {args.steps} steps, caption {embeds[0].shape[0]} rows: whole generation {total:.3f} s "
          f"(peak {peak / 2**30:.1f} GiB); encode_prompt {1e3 * enc:.1f} ms, transformer forward {1e3 * step:.1f} ms, "
          f"VAE decode {1e3 * dec:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
