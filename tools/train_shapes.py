#!/usr/bin/env python3
"""Train the tiny "shapes" text-to-image model shipped in models/shapes.cmf, from scratch.

Same architectures as Qwen-Image-2.1 (a Qwen3-VL text tower, QwenImage21Transformer2DModel,
AutoencoderKLQwenImage21), only small, trained on procedurally drawn and captioned 256x256 pictures: one or
two shapes (circle, square, triangle, star, ring, cross) of a named colour, size and position on a plain
background colour. Captions come from templates with some variety in wording.

Stages
 1. tokenizer: a byte-level BPE in Qwen's format (Qwen's split regex, its special tokens) trained on the
    captions plus the pipeline's system prompt, so the embedding table stays small; then a bank of scenes
    is drawn once on the GPU (--bank, 8-bit RGB), which both trainings sample from;
 2. VAE: trained as an autoencoder (L1 + L2 on RGBA, a small KL term), then the latent mean/std per channel
    are measured on fresh data and written into the VAE config, as the pipeline normalises with them;
 3. text tower + DiT (on the bank's latents, encoded once by the frozen VAE): trained jointly with the flow-matching objective (x_t = (1-s) x0 + s e, target e - x0)
    where s is drawn the way the pipeline's scheduler spaces its steps for 256 tokens (exponential time
    shift with mu from calculate_shift), prompts go through the pipeline's own prompt encoding (template,
    tokenizer, the text tower's hidden_states[-1], system rows dropped), and 10% of captions are
    replaced by " " (the pipeline's empty prompt) so negative prompts / CFG have something to stand on;
 4. export as a diffusers QwenImage21Pipeline folder and render a few prompts with the reference pipeline
    (20 steps) into a PNG sheet.

Usage (torch + transformers + diffusers' source with the Qwen-Image-2.1 files; runs on one GPU in minutes):
    PYTHONPATH=ref/diffusers/src python3 tools/train_shapes.py --out out/shapes \
        --chat-template tests/fixtures/chat_templates/qwen3_vl.jinja [--smoke]
        [--vae-base-dim 32] [--dit-layers 8 --dit-heads 4 --dit-head-dim 64 --dit-rope-axes 16,24,24]
(the defaults are the shipped model's sizes)
The parity reference of an exported folder alone (float32, TF32 off):
    PYTHONPATH=ref/diffusers/src python3 tools/train_shapes.py --out out/ref --render-reference out/shapes/pipeline
"""
import argparse
import json
import math
import os
import random
import time

import numpy as np
import torch
import torch.nn.functional as F

from diffusers import (AutoencoderKLQwenImage21, FlowMatchEulerDiscreteScheduler, QwenImage21Pipeline,
                       QwenImage21Transformer2DModel)
from diffusers.pipelines.qwenimage21.pipeline_qwenimage21 import calculate_shift
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor

SIZE = 256
COLOURS = {
    "red": (220, 30, 30), "green": (30, 170, 60), "blue": (30, 70, 220), "yellow": (240, 210, 30),
    "orange": (245, 130, 20), "purple": (140, 50, 180), "white": (245, 245, 245), "black": (15, 15, 15),
    "pink": (245, 120, 180), "cyan": (40, 200, 220), "gray": (128, 128, 128), "brown": (120, 70, 30),
}
SHAPES = ["circle", "square", "triangle", "star", "ring", "cross"]
SIZES = {"small": 0.11, "medium": 0.18, "large": 0.27}  # radius as a fraction of the side
POSITIONS = {
    "in the centre": (0.5, 0.5), "on the left": (0.25, 0.5), "on the right": (0.75, 0.5),
    "at the top": (0.5, 0.25), "at the bottom": (0.5, 0.75), "in the top left corner": (0.25, 0.25),
    "in the top right corner": (0.75, 0.25), "in the bottom left corner": (0.25, 0.75),
    "in the bottom right corner": (0.75, 0.75),
}
SCHEDULER_CONFIG = {
    "base_image_seq_len": 256, "base_shift": 0.5, "invert_sigmas": False, "max_image_seq_len": 8192,
    "max_shift": 0.9, "num_train_timesteps": 1000, "shift": 1.0, "shift_terminal": 0.02,
    "stochastic_sampling": False, "time_shift_type": "exponential", "use_beta_sigmas": False,
    "use_dynamic_shifting": True, "use_exponential_sigmas": False, "use_karras_sigmas": False,
}
SYSTEM_PROMPT = "Comprehend and analyze the provided prompt."
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
              r"|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
            "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
            "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]


# ----------------------------------------------------------------------------------------------- data
def sample_scene(rng):
    bg = rng.choice(list(COLOURS))
    n = 1 if rng.random() < 0.55 else 2
    objs = []
    positions = list(POSITIONS)
    rng.shuffle(positions)
    if n == 2:  # two objects on opposite sides so they do not overlap much
        pairs = [("on the left", "on the right"), ("at the top", "at the bottom"),
                 ("in the top left corner", "in the bottom right corner"),
                 ("in the top right corner", "in the bottom left corner")]
        positions = list(rng.choice(pairs))
    for k in range(n):
        colour = rng.choice([c for c in COLOURS if c != bg and all(c != o["colour"] for o in objs)])
        objs.append(dict(shape=rng.choice(SHAPES), colour=colour,
                         size=rng.choice(list(SIZES)) if n == 1 else rng.choice(["small", "medium"]),
                         position=positions[k] if n == 2 or rng.random() < 0.85 else "in the centre"))
    return dict(bg=bg, objs=objs)


# The words a caption may use for each scene attribute: American and British spellings and common synonyms,
# so that a prompt written either way means the same picture.
POSITION_WORDS = {
    "in the centre": ["in the centre", "in the center", "in the middle", "in the centre of the picture",
                      "in the center of the image", "centred", "centered", "in the middle of the picture"],
    "on the left": ["on the left", "on the left side", "at the left", "to the left"],
    "on the right": ["on the right", "on the right side", "at the right", "to the right"],
    "at the top": ["at the top", "at the top of the picture", "near the top", "at the top centre",
                   "at the top center"],
    "at the bottom": ["at the bottom", "at the bottom of the picture", "near the bottom", "at the bottom centre",
                      "at the bottom center"],
    "in the top left corner": ["in the top left corner", "in the upper left corner", "at the top left",
                               "in the top-left corner", "in the upper left", "top left"],
    "in the top right corner": ["in the top right corner", "in the upper right corner", "at the top right",
                                "in the top-right corner", "in the upper right", "top right"],
    "in the bottom left corner": ["in the bottom left corner", "in the lower left corner", "at the bottom left",
                                  "in the bottom-left corner", "in the lower left", "bottom left"],
    "in the bottom right corner": ["in the bottom right corner", "in the lower right corner",
                                   "at the bottom right", "in the bottom-right corner", "in the lower right",
                                   "bottom right"],
}
COLOUR_WORDS = {c: [c] for c in COLOURS}
COLOUR_WORDS["gray"] = ["gray", "grey"]
COLOUR_WORDS["purple"] = ["purple", "violet"]
SIZE_WORDS = {"small": ["small", "tiny", "little"], "medium": ["medium", "medium-sized", "mid-sized"],
              "large": ["large", "big", "huge"]}
SHAPE_WORDS = {"circle": ["circle", "disc", "round dot"], "square": ["square"], "triangle": ["triangle"],
               "star": ["star", "five-pointed star"], "ring": ["ring", "donut"], "cross": ["cross", "plus sign"]}


def caption(scene, rng):
    """One caption of a scene, worded at random from the synonym lists; a single centred object may also be
    described without any position (the picture's centre is what such a prompt means)."""
    def obj_text(o, with_size, with_pos):
        size = (rng.choice(SIZE_WORDS[o["size"]]) + " ") if with_size else ""
        colour = rng.choice(COLOUR_WORDS[o["colour"]])
        shape = rng.choice(SHAPE_WORDS[o["shape"]])
        art = "an" if (size or colour)[0] in "aeiou" else "a"
        text = f"{art} {size}{colour} {shape}"
        return text + " " + rng.choice(POSITION_WORDS[o["position"]]) if with_pos else text
    objs = scene["objs"]
    with_size = rng.random() < 0.6
    with_pos = not (len(objs) == 1 and objs[0]["position"] == "in the centre" and rng.random() < 0.35)
    parts = [obj_text(o, with_size, with_pos) for o in objs]
    if len(parts) == 1:
        body = parts[0]
    else:
        body = rng.choice([f"{parts[0]} and {parts[1]}", f"{parts[0]}, and {parts[1]}", f"{parts[0]}, {parts[1]}",
                           f"{parts[0]} with {parts[1]}"])
    bg = rng.choice(COLOUR_WORDS[scene["bg"]])
    templates = [f"{body} on a {bg} background", f"{body}, {bg} background", f"a {bg} background with {body}",
                 f"{body}. The background is {bg}.", f"picture of {body} on {bg}", f"{body} on {bg}",
                 f"{body} against a {bg} background", f"{body} with a {bg} background", f"{bg} background, {body}",
                 f"an image of {body} on a plain {bg} background", f"{body} on a solid {bg} background"]
    text = rng.choice(templates)
    if rng.random() < 0.3:
        text = text[0].upper() + text[1:]
    return text


def draw(scenes, device):
    """Render a batch of scenes to RGBA in [-1, 1], [B, 4, 1, SIZE, SIZE], with 2x supersampled edges."""
    s = SIZE * 2
    ys, xs = torch.meshgrid(torch.arange(s, device=device), torch.arange(s, device=device), indexing="ij")
    ys = (ys.float() + 0.5) / s
    xs = (xs.float() + 0.5) / s
    out = torch.empty(len(scenes), 3, s, s, device=device)
    for i, sc in enumerate(scenes):
        img = torch.tensor(COLOURS[sc["bg"]], device=device, dtype=torch.float32).view(3, 1, 1).expand(3, s, s).clone()
        for o in sc["objs"]:
            cx, cy = POSITIONS[o["position"]]
            r = SIZES[o["size"]]
            dx, dy = xs - cx, ys - cy
            if o["shape"] == "circle":
                m = dx * dx + dy * dy <= r * r
            elif o["shape"] == "square":
                m = (dx.abs() <= r * 0.85) & (dy.abs() <= r * 0.85)
            elif o["shape"] == "ring":
                d2 = dx * dx + dy * dy
                m = (d2 <= r * r) & (d2 >= (0.55 * r) ** 2)
            elif o["shape"] == "cross":
                w = 0.32 * r
                m = ((dx.abs() <= w) & (dy.abs() <= r)) | ((dy.abs() <= w) & (dx.abs() <= r))
            elif o["shape"] == "triangle":  # pointing up
                top, bottom = -r, 0.8 * r
                half = (dy - top) / (bottom - top) * r * 1.05
                m = (dy >= top) & (dy <= bottom) & (dx.abs() <= half)
            else:  # five-pointed star
                ang = torch.atan2(dy, dx) + math.pi / 2
                rad = torch.sqrt(dx * dx + dy * dy)
                k = torch.remainder(ang, 2 * math.pi / 5) - math.pi / 5
                inner = 0.45 * r
                # radius of the star outline at this angle (linear between tip and notch)
                lim = inner + (r - inner) * (1 - k.abs() / (math.pi / 5))
                m = rad <= lim
            col = torch.tensor(COLOURS[o["colour"]], device=device, dtype=torch.float32).view(3, 1, 1)
            img = torch.where(m[None], col.expand(3, s, s), img)
        out[i] = img
    out = F.avg_pool2d(out, 2) / 127.5 - 1.0
    alpha = torch.ones(len(scenes), 1, SIZE, SIZE, device=device)
    return torch.cat([out, alpha], 1)[:, :, None]


def batch(rng, n, device):
    scenes = [sample_scene(rng) for _ in range(n)]
    return draw(scenes, device), [caption(s, rng) for s in scenes]


class Bank:
    """Scenes drawn once and kept on the device as 8-bit RGB (a scene is fully described by its parameters, so
    a bank of tens of thousands covers the single-object combinations many times over); training then samples
    from it instead of drawing every batch, which left the GPU mostly idle. Captions are made fresh per draw."""

    def __init__(self, rng, n, device, log):
        t0 = time.time()
        self.scenes = [sample_scene(rng) for _ in range(n)]
        self.rgb = torch.empty(n, 3, SIZE, SIZE, dtype=torch.uint8, device=device)
        for i in range(0, n, 256):
            x = draw(self.scenes[i:i + 256], device)[:, :3, 0]
            self.rgb[i:i + 256] = ((x + 1) * 127.5).round().clamp(0, 255).to(torch.uint8)
        self.device = device
        log(f"bank: {n} scenes drawn in {time.time() - t0:.0f}s")

    def __len__(self):
        return len(self.scenes)

    def images(self, idx):
        """RGBA in [-1, 1], [B, 4, 1, SIZE, SIZE], for bank indices idx (a device tensor)."""
        x = self.rgb[idx].float() / 127.5 - 1.0
        return torch.cat([x, torch.ones_like(x[:, :1])], 1)[:, :, None]


# ------------------------------------------------------------------------------------------ tokenizer
def train_tokenizer(rng, out_dir, template):
    corpus = [caption(sample_scene(rng), rng) for _ in range(20000)] + [SYSTEM_PROMPT] * 50 + [
        "system", "user", "assistant", " "] * 50
    tok = Tokenizer(models.BPE(byte_fallback=False))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=640, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
                   "pad_token": "<|endoftext|>", "unk_token": None, "add_prefix_space": False,
                   "errors": "replace", "model_max_length": 4096, "split_special_tokens": False,
                   "chat_template": template,
                   "added_tokens_decoder": {str(tok.token_to_id(t)): {"content": t, "special": True,
                                                                     "lstrip": False, "rstrip": False,
                                                                     "normalized": False, "single_word": False}
                                            for t in SPECIALS}}, f, indent=1)
    return AutoTokenizer.from_pretrained(out_dir)


# ------------------------------------------------------------------------------------------------ VAE
def train_vae(args, rng, device, bank, log):
    vae = AutoencoderKLQwenImage21(
        base_dim=args.vae_base_dim, decoder_base_dim=args.vae_base_dim, z_dim=16, dim_mult=[1, 2, 2, 4, 4], num_res_blocks=1, attn_scales=[],
        temperal_downsample=[False, True, True, True], in_channels=4, out_channels=4,
        latents_mean=[0.0] * 16, latents_std=[1.0] * 16).to(device)
    opt = torch.optim.AdamW(vae.parameters(), lr=args.vae_lr, weight_decay=0.0)
    t0 = time.time()
    step = 0
    while True:
        if args.vae_steps and step >= args.vae_steps:
            break
        if not args.vae_steps and time.time() - t0 > args.vae_seconds:
            break
        x = bank.images(torch.randint(0, len(bank), (args.vae_batch,), device=device))
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            post = vae.encode(x).latent_dist
            z = post.sample()
            rec = vae.decode(z).sample
        rec = rec.float()
        kl = 0.5 * (post.mean.float() ** 2 + post.var.float() - 1 - post.logvar.float()).mean()
        loss = (rec - x).abs().mean() + ((rec - x) ** 2).mean() + 1e-4 * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vae.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 200 == 0 or step == 1:
            log(f"vae step {step} loss {loss.item():.4f} l1 {(rec - x).abs().mean().item():.4f} kl {kl.item():.3f}")
    vae.eval()
    # latent statistics, as the pipeline normalises with them
    with torch.no_grad():
        zs = []
        for _ in range(8):
            x, _ = batch(rng, 32, device)
            zs.append(vae.encode(x).latent_dist.mode().float())
        z = torch.cat(zs)
        mean = z.mean(dim=(0, 2, 3, 4))
        std = z.std(dim=(0, 2, 3, 4))
        x, _ = batch(rng, 16, device)
        rec = vae.decode(vae.encode(x).latent_dist.mode()).sample
        psnr = -10 * torch.log10(((rec.clamp(-1, 1) - x) / 2).pow(2).mean())
    vae.register_to_config(latents_mean=[round(float(v), 5) for v in mean],
                           latents_std=[round(float(v), 5) for v in std])
    log(f"vae done: {step} steps in {time.time() - t0:.0f}s, reconstruction PSNR {psnr.item():.1f} dB")
    return vae


# ------------------------------------------------------------------------------ text tower + transformer
def build_text_encoder(tok, device):
    ids = {t: tok.convert_tokens_to_ids(t) for t in ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>",
                                                    "<|vision_end|>")}
    text = dict(vocab_size=len(tok), hidden_size=128, intermediate_size=384, num_hidden_layers=3,
                num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=1024,
                rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 5000000.0,
                                                    "mrope_section": [4, 6, 6], "mrope_interleaved": True})
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=128,
                  patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                  deepstack_visual_indexes=[0])
    cfg = Qwen3VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True,
                        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    return Qwen3VLForConditionalGeneration(cfg).to(device)


def sample_sigmas(n, device, mu):
    """Training sigmas spread like the pipeline's shifted schedule for 256 tokens (logit-normal + shift)."""
    u = torch.sigmoid(torch.randn(n, device=device) * 1.0)
    return math.exp(mu) / (math.exp(mu) + (1.0 / u - 1.0))


def encode_bank(vae, bank, device, log):
    """Every bank picture through the frozen VAE encoder once (the latent mode, normalised as the pipeline does):
    [N, 256, 16] token rows."""
    t0 = time.time()
    mean = torch.tensor(vae.config.latents_mean, device=device).view(1, -1, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std, device=device).view(1, -1, 1, 1, 1)
    out = torch.empty(len(bank), 256, 16, device=device)
    with torch.no_grad():
        for i in range(0, len(bank), 256):
            idx = torch.arange(i, min(i + 256, len(bank)), device=device)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
                z = vae.encode(bank.images(idx)).latent_dist.mode()
            z = (z.float() - mean) / std  # [b, 16, 1, 16, 16]
            out[i:i + len(idx)] = z.view(len(idx), 16, 256).transpose(1, 2)
    log(f"bank encoded to latents in {time.time() - t0:.0f}s")
    return out


def train_dit(args, rng, device, vae, pipe, bank, latents, log):
    te, tr = pipe.text_encoder, pipe.transformer
    te.train()
    tr.train()
    params = list(tr.parameters()) + list(te.model.language_model.parameters())
    opt = torch.optim.AdamW(params, lr=args.dit_lr, weight_decay=0.01, betas=(0.9, 0.99))
    mu = calculate_shift(256, 256, 8192, 0.5, 0.9)
    t0 = time.time()
    step = 0
    ema = None
    while True:
        if args.dit_steps and step >= args.dit_steps:
            break
        if not args.dit_steps and time.time() - t0 > args.dit_seconds:
            break
        idx = [rng.randrange(len(bank)) for _ in range(args.dit_batch)]
        caps = [caption(bank.scenes[i], rng) if rng.random() > 0.1 else " " for i in idx]
        x0 = latents[torch.tensor(idx, device=device)]  # [B, 256, 16]
        b = x0.shape[0]
        eps = torch.randn_like(x0)
        s = sample_sigmas(b, device, mu).view(b, 1, 1)
        xt = (1 - s) * x0 + s * eps
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
            embeds, mask, pad_mask = pipe._get_qwen_prompt_embeds(caps, None, device)
            img_mask = torch.cat([pad_mask, pad_mask.new_ones(b, 64)], dim=1)
            pred = tr(hidden_states=xt, encoder_hidden_states=embeds, encoder_hidden_states_mask=mask,
                      timestep=s.view(b), img_shapes=[[(1, 16, 16)]] * b, img_mask=img_mask,
                      return_dict=False)[0][:, -256:]  # the output covers the joint sequence; keep the target
        loss = ((pred.float() - (eps - x0)) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        # linear warm-up, then constant; the last 20% of the budget decays linearly to 10%
        frac = min(1.0, (time.time() - t0) / args.dit_seconds) if not args.dit_steps else step / args.dit_steps
        lr = args.dit_lr * min(1.0, (step + 1) / 300) * (1.0 if frac < 0.8 else 1.0 - 4.5 * (frac - 0.8))
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        step += 1
        ema = loss.detach() if ema is None else 0.98 * ema + 0.02 * loss.detach()  # no host sync per step
        if step % 500 == 0 or step == 1:
            log(f"dit step {step} loss {loss.item():.4f} ema {ema.item():.4f} ({time.time() - t0:.0f}s)")
    te.eval()
    tr.eval()
    log(f"dit done: {step} steps of {args.dit_batch} in {time.time() - t0:.0f}s, final ema loss {ema.item():.4f}")


def project_for_export(pipe):
    """Round the weights onto lattices the shipped .cmf stores losslessly: every 2-D Linear weight of the
    transformer and the text tower onto q8_row (int8 times one f16 scale per row), the VAE onto f16. The
    reference pipeline then runs with exactly the numbers cortiq.c reads, so their outputs can be compared."""
    with torch.no_grad():
        for module in (pipe.transformer, pipe.text_encoder):
            for _, p in module.named_parameters():
                if p.ndim != 2:
                    continue
                absmax = p.abs().amax(dim=1, keepdim=True)
                scale = (absmax / 127).to(torch.float16).to(torch.float32).clamp_min(6.1035156e-5)
                p.copy_(torch.clamp(torch.round(p / scale), -128, 127) * scale)
        for p in pipe.vae.parameters():
            p.copy_(p.to(torch.float16).to(torch.float32))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="out/shapes")
    ap.add_argument("--chat-template", help="the Qwen3-VL chat template (required for training)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="a few steps of everything, to check the script")
    ap.add_argument("--vae-seconds", type=float, default=150)
    ap.add_argument("--dit-seconds", type=float, default=480)
    ap.add_argument("--vae-batch", type=int, default=32)
    ap.add_argument("--dit-batch", type=int, default=128)
    ap.add_argument("--bank", type=int, default=64000, help="scenes drawn once and trained on")
    ap.add_argument("--vae-lr", type=float, default=4e-4)
    ap.add_argument("--dit-lr", type=float, default=3e-4)
    ap.add_argument("--vae-base-dim", type=int, default=32, help="the VAE's base width (encoder and decoder)")
    ap.add_argument("--dit-layers", type=int, default=8)
    ap.add_argument("--dit-heads", type=int, default=4)
    ap.add_argument("--dit-head-dim", type=int, default=64)
    ap.add_argument("--dit-rope-axes", default="16,24,24",
                    help="RoPE axes (frame, height, width) as a comma list; they sum to --dit-head-dim")
    ap.add_argument("--render-reference", metavar="PIPELINE_DIR",
                    help="train nothing: load an exported pipeline folder and render samples.png and "
                         "reference_outputs.npz into --out (float32, TF32 off; on the CPU with --cpu)")
    ap.add_argument("--cpu", action="store_true", help="with --render-reference: render on the CPU")
    args = ap.parse_args()
    if args.render_reference:
        render_reference(args)
        return
    if not args.chat_template:
        ap.error("--chat-template is required for training")
    try:
        axes = tuple(int(v) for v in args.dit_rope_axes.split(","))
    except ValueError:
        axes = ()
    if len(axes) != 3 or sum(axes) != args.dit_head_dim or any(a % 2 for a in axes):
        ap.error(f"--dit-rope-axes {args.dit_rope_axes}: three even sizes summing to --dit-head-dim "
                 f"{args.dit_head_dim}")
    args.vae_steps = 3 if args.smoke else 0
    args.dit_steps = 3 if args.smoke else 0
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "train_log.txt"), "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    template = open(args.chat_template, encoding="utf-8").read()
    tok = train_tokenizer(rng, os.path.join(args.out, "tok"), template)
    log(f"tokenizer: {len(tok)} tokens; example {tok.tokenize('a red circle on a blue background')}")
    bank = Bank(rng, args.bank if not args.smoke else 512, device, log)
    vae = train_vae(args, rng, device, bank, log)
    for p in vae.parameters():
        p.requires_grad_(False)

    from transformers import Qwen2VLImageProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
    processor = Qwen3VLProcessor(image_processor=Qwen2VLImageProcessor(patch_size=16, merge_size=2),
                                 tokenizer=tok, video_processor=Qwen3VLVideoProcessor(), chat_template=template)
    te = build_text_encoder(tok, device)
    tr = QwenImage21Transformer2DModel(patch_size=1, in_channels=16, out_channels=16, num_layers=args.dit_layers,
                                       attention_head_dim=args.dit_head_dim, num_attention_heads=args.dit_heads,
                                       context_in_dim=128, mlp_ratio=3, axes_dims_rope=axes, eps=1e-6,
                                       causal_condition=True).to(device)
    pipe = QwenImage21Pipeline(scheduler=FlowMatchEulerDiscreteScheduler(**SCHEDULER_CONFIG), vae=vae,
                               text_encoder=te, processor=processor, transformer=tr)
    log(f"params: dit {sum(p.numel() for p in tr.parameters()) / 1e6:.2f}M, text "
        f"{sum(p.numel() for p in te.model.language_model.parameters()) / 1e6:.2f}M, vae "
        f"{sum(p.numel() for p in vae.parameters()) / 1e6:.2f}M")
    latents = encode_bank(vae, bank, device, log)
    train_dit(args, rng, device, vae, pipe, bank, latents, log)
    del latents, bank

    pipe.to(torch.float32)
    # The sample sheets and the parity reference in true float32: TF32 (on for training) rounds matmul and
    # convolution inputs to 10 mantissa bits, which moves shape edges by up to ~20/255 after 20 steps.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    render_sheet(pipe, args, os.path.join(args.out, "samples_before_export.png"), save_ref=None)
    project_for_export(pipe)
    pipe.save_pretrained(os.path.join(args.out, "pipeline"), safe_serialization=True, max_shard_size="12MB")
    render_sheet(pipe, args, os.path.join(args.out, "samples.png"),
                 save_ref=os.path.join(args.out, "reference_outputs.npz"))
    log("prompts: " + " | ".join(PROMPTS))


def render_reference(args):
    """The parity reference of an exported pipeline folder, without training."""
    args.smoke = False
    device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    pipe = QwenImage21Pipeline.from_pretrained(args.render_reference, torch_dtype=torch.float32).to(device)
    render_sheet(pipe, args, os.path.join(args.out, "samples.png"),
                 save_ref=os.path.join(args.out, "reference_outputs.npz"))
    print(f"rendered {len(PROMPTS)} prompts on {device} into {args.out}")


PROMPTS = ["a red circle on a blue background", "a large yellow star in the centre on a black background",
           "a small green square in the top left corner, white background",
           "a purple triangle on the left and an orange ring on the right on a gray background"]


def render_sheet(pipe, args, path, save_ref):
    """The sample prompts with the reference pipeline (20 steps, seeds 0..3) as one PNG row; with save_ref
    also the raw latents and [0, 1] images, the parity reference for the shipped .cmf."""
    from PIL import Image
    tiles, ref = [], {}
    steps = 20 if not args.smoke else 2
    for i, p in enumerate(PROMPTS):
        def gen():
            return torch.Generator("cpu").manual_seed(i)
        arr = pipe(p, height=SIZE, width=SIZE, num_inference_steps=steps, generator=gen(), output_type="np").images[0]
        if save_ref:
            lat = pipe(p, height=SIZE, width=SIZE, num_inference_steps=steps, generator=gen(),
                       output_type="latent").images
            ref[f"latents_{i}"] = lat[0].float().cpu().numpy()
            ref[f"image_{i}"] = arr.astype(np.float32)
        tiles.append(Image.fromarray((arr * 255).round().astype(np.uint8)).convert("RGB"))
    sheet = Image.new("RGB", (SIZE * len(tiles), SIZE))
    for i, t in enumerate(tiles):
        sheet.paste(t, (SIZE * i, 0))
    sheet.save(path)
    if save_ref:
        np.savez_compressed(save_ref, prompts=np.array(PROMPTS), steps=steps, **ref)


if __name__ == "__main__":
    main()
