#!/usr/bin/env python3
"""Golden data for the Qwen-Image editing pipelines end to end: tiny random QwenImageEditPipeline (Edit) and
QwenImageEditPlusPipeline (Edit-2509, and Edit-2511 with the transformer's zero_cond_t) from diffusers' source, run
on the CPU in float32 (TF32 off), and again in bfloat16 for the reference's own error.

The three pipelines share their parts, so their folders hold the same weight files (git stores each once):
  - the real Qwen tokenizer (tests/fixtures/tokenizers/qwen3.json.gz, with Qwen2.5-VL's vision special tokens);
  - a Qwen2VLProcessor assembled offline from a Qwen2VLImageProcessor (min_pixels 4096, max_pixels 7056, so the
    tiny condition pictures make grids of a few patches and both of smart_resize's rescaling branches run), that
    tokenizer and a Qwen2VLVideoProcessor;
  - a tiny Qwen2_5_VLForConditionalGeneration: the language model of the text-to-image golden (2 layers, 16 wide;
    only the embedding rows the cases read are random, the rest zeros) and a vision tower of 2 blocks (32 wide,
    2 heads, windows of 2 x 2 merge units in block 0, full attention in block 1) whose merger gives 16-wide rows;
  - a tiny QwenImageTransformer2DModel (2 layers, 2 heads x 16; Edit-2511's copy has zero_cond_t=True);
  - a tiny AutoencoderKLQwenImage with random latents_mean / latents_std; the scheduler of Qwen-Image.
Every parameter is re-randomised from a fixed generator (golden_zimage.randomise), every value exact in bf16.

The pipelines size their pictures by pixel areas: the VAE picture (and the default output size) at the
1024^2-area size of calculate_dimensions, Edit-Plus's VL picture at 384^2. Full-size pictures would make a golden
of tens of MB, so this generator replaces the areas (the Edit-Plus module's VAE_IMAGE_SIZE and
CONDITION_IMAGE_SIZE, and the 1024 * 1024 both modules pass to calculate_dimensions) by VAE_AREA = 96^2 and
VL_AREA = 80^2; cortiq takes the same areas as the edit architectures' options (--vae-area, --vl-area).
Measured with this data: transformers 5.17, called by the pipelines without mm_token_type_ids, runs the language
model at positions 0..n-1 on all three RoPE axes (not Qwen2.5-VL's 3-D index).

Input pictures are PNG files written here (images/*.png, one RGBA); the reference opens each with PIL and
convert("RGB"), as a user of the pipelines does.

Writes (under --out, normally tests/golden/qimage_edit_pipeline):
    pipeline_edit/, pipeline_plus/, pipeline_2511/   the pipeline folders (save_pretrained in bf16; the tokenizer's
                                 tokenizer.json stored as tokenizer.json.gz, the processor's copy of the tokenizer
                                 removed: `cortiq convert` reads tokenizer/ and processor/preprocessor_config.json;
                                 the later folders' weight files are relative links to pipeline_edit's)
    images/*.png                 the input pictures
    cases.json                   per case: pipeline, images, prompt, negative, size (given or default), steps, seed,
                                 true_cfg_scale, img_shapes, grids, rows, tokens, the reference's bf16 errors
    expected.safetensors         per case c (and input picture i of the case):
        ids_<c>            i32 [T]        the processor's input_ids (image pads expanded); neg_ids_<c> with CFG
        vl_u8_<c>_<i>      u8  [h, w, 3]  the picture the processor receives (after the pipeline's Lanczos resize)
        proc_u8_<c>_<i>    u8  [3, h, w]  the processor's own resized picture (torchvision bicubic, antialiased)
        grid_<c>           i32 [n, 3]     image_grid_thw
        vision_<c>         f32 [n_pad, 16] the vision tower's output rows (all pictures, in order)
        embeds_<c>         f32 [rows, 16] hidden_states[-1] after the drop of 64; neg_embeds_<c> with CFG
        vae_u8_<c>_<i>     u8  [H, W, 3]  the VAE-size picture (after the Lanczos resize)
        cond_<c>           f32 [n_cond, 64] the packed, normalised condition latents (all pictures, in order)
        noise_<c>          f32 [16, h, w] torch.randn on the CPU generator; sigmas_<c>, timesteps_<c>
        step<i>_<c>        f32 [tokens, 64] the packed target latents after step i; latents_<c> (final)
        image_<c>          f32 [H, W, 3]  the output, postprocessed to [0, 1]

Usage (on a machine with torch, torchvision and transformers; diffusers' source at commit 58eb52c0 on PYTHONPATH),
from the repository root:
    PYTHONPATH=ref/diffusers/src:tools python3 tools/golden_pipeline_qwenimage_edit.py \\
        --out tests/golden/qimage_edit_pipeline
"""
import argparse
import json
import os
import shutil

import numpy as np
import torch
import torchvision.transforms.v2.functional as tvF
from PIL import Image
from safetensors.torch import save_file

import diffusers.pipelines.qwenimage.pipeline_qwenimage_edit as edit_mod
import diffusers.pipelines.qwenimage.pipeline_qwenimage_edit_plus as plus_mod
from diffusers import (AutoencoderKLQwenImage, FlowMatchEulerDiscreteScheduler, QwenImageEditPipeline,
                       QwenImageEditPlusPipeline, QwenImageTransformer2DModel)
from golden_pipeline_qwenimage import DIT, SCHEDULER, TE, VAE, make_tokenizer
from golden_qwen25vl_vision import visual_of
from golden_zimage import c32, gzip_tokenizer, randn, randomise, rel_errs

DIFFUSERS_COMMIT = "58eb52c0"
VAE_AREA = 96 * 96
VL_AREA = 80 * 80
MIN_PIXELS, MAX_PIXELS = 4096, 7056
DROP = 64
VISION = dict(depth=2, hidden_size=32, intermediate_size=48, num_heads=2, out_hidden_size=TE["hidden"],
              patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56, fullatt_block_indexes=[1],
              in_channels=3, hidden_act="silu")
# name: (width, height, seed, noise block, fine noise amplitude, mode)
IMAGES = {
    "a_80x64": (80, 64, 21, 2, 3, "RGB"),
    "b_64x96": (64, 96, 22, 1, 2, "RGB"),
    "c_96x56": (96, 56, 23, 2, 2, "RGB"),
    "d_72x72_rgba": (72, 72, 24, 1, 2, "RGBA"),
    "e_56x88": (56, 88, 25, 1, 3, "RGB"),
}
PIPES = {"edit": "pipeline_edit", "plus": "pipeline_plus", "2511": "pipeline_2511"}
CASES = {
    "edit": dict(pipe="edit", images=["a_80x64"], prompt="make the sky purple and add a small boat", negative=None,
                 height=None, width=None, steps=2, seed=3, true_cfg_scale=4.0),
    "edit_cfg": dict(pipe="edit", images=["b_64x96"], prompt="把背景换成海滩 🌊", negative=" ", height=48, width=80,
                     steps=2, seed=2**32 + 9, true_cfg_scale=4.0),
    "plus": dict(pipe="plus", images=["c_96x56", "e_56x88"],
                 prompt="the cat from picture 2 sits on the sofa of picture 1", negative="blurry, low quality",
                 height=None, width=None, steps=2, seed=11, true_cfg_scale=2.5),
    "p2511": dict(pipe="2511", images=["d_72x72_rgba", "c_96x56"], prompt="turn picture 1 into a watercolor painting",
                  negative=" ", height=None, width=None, steps=2, seed=5, true_cfg_scale=4.0),
    "p2511_one": dict(pipe="2511", images=["e_56x88"], prompt="add snow", negative=None, height=64, width=64, steps=2,
                      seed=0, true_cfg_scale=1.0),
}


def synth(w, h, seed, block, fine, mode):
    """A picture with structure at several scales: per-channel gradients, a wave, two flat rectangles, block noise
    and fine noise; RGBA pictures get an alpha plane with opaque, clear and random bands."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([255.0 * x / (w - 1), 255.0 * y / (h - 1), 127.5 + 120.0 * np.sin(x / 5.0 + y / 9.0)], axis=-1)
    img[h // 4:h // 2, w // 3:(2 * w) // 3] = [255.0, 0.0, 255.0]
    img[(3 * h) // 4:, :w // 5] = [0.0, 255.0, 0.0]
    nb = rng.integers(-24, 25, size=((h + block - 1) // block, (w + block - 1) // block, 3))
    img = img + np.repeat(np.repeat(nb, block, axis=0), block, axis=1)[:h, :w]
    img = img + rng.integers(-fine, fine + 1, size=(h, w, 3))
    rgb = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    if mode == "RGB":
        return Image.fromarray(rgb, "RGB")
    a = rng.integers(0, 256, size=(h, w, 1)).astype(np.uint8)
    a[:h // 3] = 255
    a[h // 3:h // 2] = 0
    return Image.fromarray(np.concatenate([rgb, a], axis=-1), "RGBA")


def patch_areas():
    """The pipelines' areas replaced by the small ones (module globals, read at call time)."""
    for mod in (edit_mod, plus_mod):
        orig = mod.calculate_dimensions

        def small(area, ratio, _orig=orig):
            return _orig(VAE_AREA if area == 1024 * 1024 else area, ratio)

        mod.calculate_dimensions = small
    plus_mod.VAE_IMAGE_SIZE = VAE_AREA
    plus_mod.CONDITION_IMAGE_SIZE = VL_AREA


def open_rgb(outdir, name):
    img = Image.open(os.path.join(outdir, "images", name + ".png"))
    img.load()
    return img.convert("RGB")


def build(args, gen):
    from transformers import (AutoTokenizer, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration,
                              Qwen2VLImageProcessor, Qwen2VLProcessor)
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
    tokdir = os.path.join(args.out, "_tok")
    make_tokenizer(args.tokenizer, tokdir)
    tok = AutoTokenizer.from_pretrained(tokdir)
    improc = Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    proc = Qwen2VLProcessor(image_processor=improc, tokenizer=tok, video_processor=Qwen2VLVideoProcessor())
    text = dict(vocab_size=151936, hidden_size=TE["hidden"], intermediate_size=TE["ff"],
                num_hidden_layers=TE["layers"], num_attention_heads=TE["heads"], num_key_value_heads=TE["kv_heads"],
                max_position_embeddings=4096, rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "mrope", "rope_theta": 1000000.0, "mrope_section": TE["mrope"]})
    te = Qwen2_5_VLForConditionalGeneration(Qwen2_5_VLConfig(
        text_config=text, vision_config=VISION, tie_word_embeddings=True,
        image_token_id=tok.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tok.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=tok.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tok.convert_tokens_to_ids("<|vision_end|>"))).float().eval()
    randomise(te, gen)
    dit = QwenImageTransformer2DModel(**DIT).float().eval()
    randomise(dit, gen)
    dit2511 = QwenImageTransformer2DModel(**DIT, zero_cond_t=True).float().eval()
    dit2511.load_state_dict(dit.state_dict())
    std = (0.5 + randn(gen, 16).abs()).to(torch.bfloat16).double()
    mean = (0.3 * randn(gen, 16)).to(torch.bfloat16).double()
    vae = AutoencoderKLQwenImage(**VAE, latents_mean=[float(v) for v in mean],
                                 latents_std=[float(v) for v in std]).float().eval()
    randomise(vae, gen)
    sched = FlowMatchEulerDiscreteScheduler(**SCHEDULER)
    common = dict(scheduler=sched, vae=vae, text_encoder=te, tokenizer=tok, processor=proc)
    pipes = {"edit": QwenImageEditPipeline(transformer=dit, **common),
             "plus": QwenImageEditPlusPipeline(transformer=dit, **common),
             "2511": QwenImageEditPlusPipeline(transformer=dit2511, **common)}
    # the ids the cases read (the image pad's row is replaced by the vision tower's): only their rows stay random
    used = set()
    for c in CASES.values():
        p = pipes[c["pipe"]]
        pre = "".join(f"Picture {i + 1}: <|vision_start|><|image_pad|><|vision_end|>"
                      for i in range(len(c["images"]))) if c["pipe"] != "edit" else ""
        for t in (c["prompt"], c["negative"]):
            if t is not None:
                used.update(tok(p.prompt_template_encode.format(pre + t)).input_ids)
    with torch.no_grad():
        emb = te.get_input_embeddings().weight
        keep = torch.zeros(emb.shape[0], dtype=torch.bool)
        keep[sorted(used)] = True
        emb[~keep] = 0
    shutil.rmtree(tokdir)
    return pipes, len(used)


def save_pipes(args, pipes):
    for key, folder in PIPES.items():
        path = os.path.join(args.out, folder)
        pipes[key].save_pretrained(path, safe_serialization=True)
        pdir = os.path.join(path, "processor")
        os.makedirs(pdir, exist_ok=True)
        pipes[key].processor.image_processor.save_pretrained(pdir)  # preprocessor_config.json, whatever else wrote
        for n in os.listdir(pdir):  # the tokenizer's second copy (tokenizer/ is the one converted)
            if n.startswith(("tokenizer", "vocab", "merges", "special_tokens", "added_tokens", "chat_template")):
                os.remove(os.path.join(pdir, n))
        gzip_tokenizer(path)
    # the later folders' weight files are the first's: relative links, so the folder holds each once
    first = os.path.join(args.out, PIPES["edit"])
    for folder in list(PIPES.values())[1:]:
        for root, _, files in os.walk(os.path.join(args.out, folder)):
            for n in files:
                mine = os.path.join(root, n)
                theirs = os.path.join(first, os.path.relpath(mine, os.path.join(args.out, folder)))
                if (n.endswith((".safetensors", ".gz")) and os.path.isfile(theirs)
                        and open(mine, "rb").read() == open(theirs, "rb").read()):
                    os.remove(mine)
                    os.symlink(os.path.relpath(theirs, root), mine)


def proc_resized(pil, grid, pv):
    """The processor's uint8 resize recomputed with the torchvision call its backend makes, and how far the
    normalisation of that picture is from the processor's pixel_values (0 when it is the same picture)."""
    t, gh, gw = (int(v) for v in grid)
    u8 = tvF.pil_to_tensor(pil)[None]
    if (gh * 14, gw * 14) != tuple(u8.shape[-2:]):
        u8 = tvF.resize(u8, [gh * 14, gw * 14], interpolation=tvF.InterpolationMode.BICUBIC, antialias=True)
    u8 = u8[0]
    mean = torch.tensor([0.48145466, 0.4578275, 0.40821073]) * (1.0 / (1 / 255))
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711]) * (1.0 / (1 / 255))
    x = (u8.to(torch.float32) - mean.view(3, 1, 1)) / std.view(3, 1, 1)
    x = x[None].repeat(2, 1, 1, 1).view(1, 2, 3, gh // 2, 2, 14, gw // 2, 2, 14)
    mine = x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(gh * gw, 3 * 2 * 14 * 14)
    diff = float((mine - pv.float()).abs().max()) if mine.shape == pv.shape else None
    return u8.contiguous(), diff


def run_case(pipe, name, c, outdir, dtype, tensors, cases):
    kind = c["pipe"]
    imgs = [open_rgb(outdir, n) for n in c["images"]]
    rec = {}
    te = pipe.text_encoder
    vis = visual_of(te)
    orig_fwd = te.forward

    def fwd(*a, **k):
        r = orig_fwd(*a, **k)
        rec.setdefault("ids", []).append(k["input_ids"][0].tolist())
        rec.setdefault("pv", []).append(k.get("pixel_values"))
        rec.setdefault("grid", []).append(k.get("image_grid_thw"))
        return r

    te.forward = fwd

    def vis_hook(m, a, o):
        out = o if torch.is_tensor(o) else getattr(o, "pooler_output", None)
        if out is None:
            out = o[0]
        rec.setdefault("vision", []).append(c32(out))

    hook = vis.register_forward_hook(vis_hook)
    orig_enc = pipe._get_qwen_prompt_embeds

    def enc(*a, **k):
        r = orig_enc(*a, **k)
        rec.setdefault("embeds", []).append(c32(r[0][0]))
        return r

    pipe._get_qwen_prompt_embeds = enc
    orig_lat = pipe.prepare_latents

    def lat(*a, **k):
        r = orig_lat(*a, **k)
        rec["packed_noise"] = c32(r[0][0])
        rec["cond"] = c32(r[1][0])
        return r

    pipe.prepare_latents = lat

    def on_step(p, i, t, kw):
        rec.setdefault("steps", []).append(c32(kw["latents"][0]))
        return {}

    # the output size as the pipeline works it out (the last picture's for Edit-Plus, the only one's for Edit)
    ref_img = imgs[-1] if kind != "edit" else imgs[0]
    dw, dh = edit_mod.calculate_dimensions(1024 * 1024, ref_img.size[0] / ref_img.size[1])[:2]
    width = (c["width"] or dw) // 16 * 16
    height = (c["height"] or dh) // 16 * 16
    lh, lw = 2 * (height // 16), 2 * (width // 16)
    noise = torch.randn((1, 1, 16, lh, lw), generator=torch.Generator("cpu").manual_seed(c["seed"]),
                        dtype=torch.float32)
    packed = QwenImageEditPlusPipeline._pack_latents(noise, 1, 16, lh, lw)
    latents_in = None if dtype == torch.float32 else packed.to(dtype)
    image_arg = imgs[0] if kind == "edit" else imgs
    try:
        out = pipe(image=image_arg, prompt=c["prompt"], negative_prompt=c["negative"],
                   true_cfg_scale=c["true_cfg_scale"], height=c["height"], width=c["width"],
                   num_inference_steps=c["steps"], latents=latents_in,
                   generator=torch.Generator("cpu").manual_seed(c["seed"]), output_type="pt",
                   callback_on_step_end=on_step, callback_on_step_end_tensor_inputs=["latents"],
                   return_dict=False)[0]
    finally:
        del te.forward
        hook.remove()
        del pipe._get_qwen_prompt_embeds
        del pipe.prepare_latents
    image = c32(out[0].permute(1, 2, 0).float())
    latents = rec["steps"][-1].clone()
    if dtype != torch.float32:
        mx, rm, _ = rel_errs(tensors[f"latents_{name}"], latents)
        cases[name]["bf16_latents_max_rel"] = mx
        cases[name]["bf16_latents_rms_rel"] = rm
        cases[name]["bf16_image_max_abs"] = (image - tensors[f"image_{name}"]).abs().max().item()
        cases[name]["bf16_embeds_max_rel"] = rel_errs(tensors[f"embeds_{name}"], rec["embeds"][0])[0]
        print(f"{name}: bf16 latents max {mx:.3e} rms {rm:.3e}, image {cases[name]['bf16_image_max_abs']:.4f}")
        return
    assert torch.equal(rec["packed_noise"], packed[0]), "the noise is not torch.randn on the CPU generator"
    assert image.shape[0] == height and image.shape[1] == width, (image.shape, height, width)
    t = tensors
    t[f"ids_{name}"] = torch.tensor(rec["ids"][0], dtype=torch.int32)
    t[f"embeds_{name}"] = rec["embeds"][0]
    if len(rec["embeds"]) > 1:
        t[f"neg_ids_{name}"] = torch.tensor(rec["ids"][1], dtype=torch.int32)
        t[f"neg_embeds_{name}"] = rec["embeds"][1]
    grid = rec["grid"][0]
    t[f"grid_{name}"] = grid.to(torch.int32).contiguous()
    t[f"vision_{name}"] = rec["vision"][0]
    # the pictures of both routes, as the pipeline makes them
    ip = pipe.image_processor
    vl_sizes, vae_sizes, pv_diffs, offset = [], [], [], 0
    pv_all = rec["pv"][0]
    for i, img in enumerate(imgs):
        w, h = img.size
        vw, vh = edit_mod.calculate_dimensions(1024 * 1024, w / h)[:2]
        if kind == "edit":
            cw, ch = vw, vh
        else:
            cw, ch = plus_mod.calculate_dimensions(plus_mod.CONDITION_IMAGE_SIZE, w / h)
        vl = ip.resize(img, ch, cw)
        t[f"vl_u8_{name}_{i}"] = torch.from_numpy(np.ascontiguousarray(np.asarray(vl)))
        t[f"vae_u8_{name}_{i}"] = torch.from_numpy(np.ascontiguousarray(np.asarray(ip.resize(img, vh, vw))))
        n = int(grid[i].prod())
        pu8, diff = proc_resized(vl, grid[i].tolist(), pv_all[offset:offset + n])
        offset += n
        t[f"proc_u8_{name}_{i}"] = pu8
        pv_diffs.append(diff)
        vl_sizes.append([cw, ch])
        vae_sizes.append([vw, vh])
    t[f"cond_{name}"] = rec["cond"]
    t[f"noise_{name}"] = c32(noise[0, 0])
    t[f"sigmas_{name}"] = c32(pipe.scheduler.sigmas)
    t[f"timesteps_{name}"] = c32(pipe.scheduler.timesteps)
    for i, s in enumerate(rec["steps"]):
        t[f"step{i}_{name}"] = s
    t[f"latents_{name}"] = latents
    t[f"image_{name}"] = image
    img_shapes = [[1, lh // 2, lw // 2]] + [[1, vh // 16, vw // 16] for vw, vh in vae_sizes]
    cases[name] = dict(c, out_width=width, out_height=height, vl_sizes_wh=vl_sizes, vae_sizes_wh=vae_sizes,
                       grids=grid.tolist(), img_shapes=img_shapes, ids=len(rec["ids"][0]),
                       rows=int(rec["embeds"][0].shape[0]), vision_rows=int(rec["vision"][0].shape[0]),
                       cond_tokens=int(rec["cond"].shape[0]), tokens=int(latents.shape[0]), latent_hw=[lh, lw],
                       pv_from_proc_u8_max_diff=pv_diffs, latents_rms=rel_errs(latents, latents)[2])
    print(f"{name}: ids {len(rec['ids'][0])}, rows {cases[name]['rows']}, grids {grid.tolist()}, cond "
          f"{cases[name]['cond_tokens']}, tokens {cases[name]['tokens']}, out {width}x{height}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/qimage_edit_pipeline")
    ap.add_argument("--tokenizer", default="tests/fixtures/tokenizers/qwen3.json.gz")
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(os.path.join(args.out, "images"), exist_ok=True)
    for n, (w, h, seed, block, fine, mode) in IMAGES.items():
        synth(w, h, seed, block, fine, mode).save(os.path.join(args.out, "images", n + ".png"), optimize=True)
    patch_areas()
    gen = torch.Generator().manual_seed(args.seed)
    pipes, n_used = build(args, gen)
    cases, tensors = {}, {}
    for name, c in CASES.items():
        run_case(pipes[c["pipe"]], name, c, args.out, torch.float32, tensors, cases)
    for p in pipes.values():  # shared modules: converted once, losslessly (every weight is bf16-exact)
        p.to(torch.bfloat16)
    save_pipes(args, pipes)
    for name, c in CASES.items():
        run_case(pipes[c["pipe"]], name, c, args.out, torch.bfloat16, tensors, cases)
    save_file(tensors, os.path.join(args.out, "expected.safetensors"), metadata={"diffusers": DIFFUSERS_COMMIT})
    proc_files = sorted(os.listdir(os.path.join(args.out, PIPES["edit"], "processor")))
    with open(os.path.join(args.out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(dict(torch=torch.__version__, diffusers=DIFFUSERS_COMMIT, seed=args.seed, embedding_rows=n_used,
                       drop_rows=DROP, vae_area=VAE_AREA, vl_area=VL_AREA, min_pixels=MIN_PIXELS,
                       max_pixels=MAX_PIXELS, processor_files=proc_files, pipelines=PIPES, cases=cases), f,
                  ensure_ascii=False, indent=1)
    total = 0
    for root, _, files in os.walk(args.out):
        total += sum(os.path.getsize(os.path.join(root, n)) for n in files)
    print("wrote", args.out, total, "bytes")


if __name__ == "__main__":
    main()
