#!/usr/bin/env python3
"""Golden data for Qwen-Image-2.1 with condition images (QwenImage21Pipeline's image-to-image route).

Rebuilds the tiny random pipeline of tools/golden_pipeline_qi21.py (its build() and seed, so the weights are those
of tests/golden/pipeline_qi21/tiny_pipeline.cmf.gz), saves it as a diffusers folder in a temporary directory and
reloads it as a user would. Before anything else it re-runs that script's t2i case "plain" and compares the
latents (and the picture) with tests/golden/pipeline_qi21/expected.safetensors: it stops when they differ by more
than 1e-6 of their RMS (the weights would then not be the .cmf's), or, for the picture, 1e-5 (the VAE, whose
encoder the condition cases need, would differ; --allow-vae-mismatch carries on).

Two settings differ from the saved folder, both recorded in cases.json:
  - the image label: the reference draws "Picture ", "Image ", "图 " or "图片 " with random.choice for every
    prompt; the pipeline's ref_token_list is set to ["Picture "], the label cortiq always writes;
  - the processor's min_pixels (size.shortest_edge) is lowered from 56*56 to 32*32: at output_resolution 64 a
    40x72 picture is resized to 32x96 (3072 pixels), which Qwen2VLImageProcessor would enlarge to 64x128, and the
    transformer then refuses the condition (its token count no longer matches the VAE latents).

Two synthetic pictures are written as PNG files and opened with PIL as a user's files would be:
    cond_rgb.png   80x48 RGB (gradients, a checker, a red rectangle)
    cond_rgba.png  40x72 RGBA (opaque top third, an alpha ramp, a transparent block and a half-transparent one)
Cases (output_resolution 64, 2 steps, KV cache on as by default):
    rgb        cond_rgb, no CFG, size derived from the picture (96x64)
    rgba_cfg   cond_rgba, true CFG 4 with the negative prompt " ", explicit 64x64
    two        cond_rgb then cond_rgba, no CFG, size derived from the last picture (32x96)

Writes (under --out, normally tests/golden/pipeline_qi21_cond):
    cond_rgb.png, cond_rgba.png
    cases.json           versions (torch, transformers, diffusers base commit and the 2.1 overlay's commits), the
                         processor settings, the drop count, per picture its resized size, per case the prompt
                         text given to the processor, sizes, token counts, grids, img_shapes, the RGBA-to-RGB rule
                         the processor followed, and the bfloat16 errors (the GPU bound)
    expected.safetensors per picture <pic>.resized  u8 [h, w, 4] (VaeImageProcessor.resize of the RGBA picture:
                         what the processor and, scaled to [-1, 1], the VAE encoder read);
                         per case <c>.:
        input_ids i32 [S], attention_mask i32 [S]        the processor's text (one prompt, no padding)
        pixel_values f32 [N, 1536], image_grid_thw i32 [n, 3]   (case "two": pixel_values are those of "rgb"
                                                          then "rgba_cfg", checked here, not stored again)
        vision f32 [N/4, D], deepstack_<k> f32 [N/4, D]  the vision tower's merged output and deepstack features
        embeds f32 [T, D], embeds_mask i32 [T], image_pad_mask u8 [T]    encode_prompt's outputs (after the drop)
        neg_embeds, neg_embeds_mask, neg_image_pad_mask  the same for the negative prompt (case "rgba_cfg")
        cond_latents f32 [Nc, C]                         prepare_latents' second output (normalised, packed)
        img_shapes i32 [n+1, 3]                          (frame, h, w) per condition picture, then the target
        noise f32 [L, C]                                 the initial latents (seeded torch.randn, packed)
        step_<i> f32 [L, C]                              the latents after step i (callback_on_step_end)
        latents f32 [L, C]                               the final latents
        image f32 [H, W, 4]                              output_type "np" ([0, 1], before 8-bit rounding)
        timesteps f32 [steps]                            the scheduler's timesteps

Usage, from the repository root (torch, transformers 5.x, torchvision, safetensors, Pillow; diffusers' source at
commit 58eb52c0 and the Qwen-Image-2.1 overlay, see tools/qi21_ref.py):
    PYTHONPATH=$DSRC:tools QI21_REF=<overlay> python3 tools/golden_pipeline_qi21_cond.py \
        --out tests/golden/pipeline_qi21_cond [--remake-t2i DIR]
With --remake-t2i the text-to-image golden is written again first, from the same reference files (DIR/pipeline,
DIR/expected.safetensors, DIR/cases.json; convert DIR/pipeline with
`cortiq convert DIR/pipeline -o tiny_pipeline.cmf --quant f32 --quant-rule 'te.model.language_model.embed_tokens.weight=q8_row'`
and gzip -9 it into tests/golden/pipeline_qi21/), the old one's differences printed tensor by tensor, and the
condition cases checked against the new one.
"""
import argparse
import dataclasses
import gzip
import json
import os
import shutil
import sys
import tempfile

import qi21_ref

qi21_ref.install()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from PIL import Image  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import diffusers  # noqa: E402
from diffusers import QwenImage21Pipeline  # noqa: E402
from diffusers.pipelines.qwenimage21.pipeline_qwenimage21 import calculate_dimensions  # noqa: E402
from golden_pipeline_qi21 import CASES as T2I_CASES  # noqa: E402
from golden_pipeline_qi21 import build  # noqa: E402
from golden_pipeline_qi21 import run_cases as run_t2i_cases  # noqa: E402

DIFFUSERS_BASE = "58eb52c0803ea9af3abec60841c2a093bdf1f951"
RESOLUTION = 64
MIN_PIXELS = 32 * 32
LABEL = "Picture "
PICTURES = ("rgb", "rgba")
CASES = {
    "rgb": dict(images=["rgb"], prompt="make the sky purple and keep the red box", negative=None, cfg=1.0,
                height=None, width=None, steps=2, seed=11),
    "rgba_cfg": dict(images=["rgba"], prompt="the same shape on a green field", negative=" ", cfg=4.0,
                     height=64, width=64, steps=2, seed=12),
    "two": dict(images=["rgb", "rgba"], prompt="put the second picture's shape into the first", negative=None,
                cfg=1.0, height=None, width=None, steps=2, seed=13),
}


def make_tokenizer(tokenizer, chat_template, dst):
    """A tokenizer folder like ref/qwen_tok/qwen3: tokenizer.json and a Qwen2Tokenizer config."""
    os.makedirs(dst, exist_ok=True)
    with gzip.open(tokenizer, "rb") as src, open(os.path.join(dst, "tokenizer.json"), "wb") as out:
        shutil.copyfileobj(src, out)
    cfg = {"tokenizer_class": "Qwen2Tokenizer", "add_bos_token": False, "add_prefix_space": False,
           "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "unk_token": None,
           "errors": "replace", "model_max_length": 131072, "split_special_tokens": False,
           "clean_up_tokenization_spaces": False,
           "chat_template": open(chat_template, encoding="utf-8").read()}
    with open(os.path.join(dst, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=1)


def make_pictures(out):
    """The two condition pictures as uint8 arrays, written as PNG files; returns their paths."""
    y, x = np.mgrid[0:48, 0:80]
    rgb = np.stack([(x * 255) // 79, (y * 255) // 47, ((x // 8 + y // 8) % 2) * 200 + 30], -1)
    rgb[8:20, 10:30] = (230, 20, 40)
    y, x = np.mgrid[0:72, 0:40]
    rgba = np.stack([200 - 2 * y, 50 + 4 * x, (x * y) % 256, np.full_like(x, 255)], -1)
    rgba[24:48, :, 3] = (x[24:48] * 255) // 39
    rgba[48:, :20, 3] = 0
    rgba[48:, 20:, 3] = 128
    paths = {}
    for name, arr in (("rgb", rgb), ("rgba", rgba)):
        paths[name] = os.path.join(out, f"cond_{name}.png")
        Image.fromarray(np.ascontiguousarray(arr.astype(np.uint8))).save(paths[name])
    return paths


def open_picture(path):
    img = Image.open(path)
    img.load()
    return img


def lower_min_pixels(ip, n):
    """Sets the image processor's lower pixel bound (size.shortest_edge, and min_pixels where it is kept)."""
    size = ip.size
    if isinstance(size, dict):
        ip.size = {**size, "shortest_edge": n}
    elif dataclasses.is_dataclass(size):
        ip.size = dataclasses.replace(size, shortest_edge=n)
    else:
        raise SystemExit(f"unknown image processor size type {type(size).__name__}")
    if getattr(ip, "min_pixels", None) is not None:
        ip.min_pixels = n


def size_of(ip, key):
    size = ip.size
    return int(size[key] if isinstance(size, dict) else getattr(size, key))


def c32(t):
    return t.detach().to(torch.float32).contiguous().clone()


def i32(t):
    return t.detach().to(torch.int32).contiguous().clone()


def rel_rms(got, ref):
    ref = ref.double()
    return float((got.double() - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt().clamp_min(1e-30))


def prepare_images(pipe, pictures):
    """__call__'s step 1: RGBA conversion, the output_resolution-area size, one resize for the text encoder and
    the VAE's [-1, 1] tensor. Returns (sizes [(w, h)], resized PIL pictures, VAE tensors [1, 4, 1, h, w])."""
    sizes, resized, vae = [], [], []
    for img in pictures:
        if img.mode != "RGBA":
            img = img.convert("RGBA")
        w, h, _ = calculate_dimensions(RESOLUTION * RESOLUTION, img.size[0] / img.size[1])
        sizes.append((w, h))
        resized.append(pipe.image_processor.resize(img, width=w, height=h))
        vae.append(pipe.image_processor.preprocess(img, width=w, height=h).unsqueeze(2))
    return sizes, resized, vae


def prompt_text(pipe, prompt, n_images):
    """_get_qwen_prompt_embeds' template for n condition pictures, with the fixed label."""
    slot = "Picture 1: <|vision_start|><|image_pad|><|vision_end|>"
    replace = slot + "".join(f" Picture {i}: <|vision_start|><|image_pad|><|vision_end|>"
                             for i in range(2, n_images + 1))
    return pipe.prompt_template_ti2i.replace(slot, replace.replace("Picture ", LABEL)).format(prompt)


def vision_of(te, pixel_values, grid):
    """The vision tower's merged output and deepstack features (a tuple in older transformers, an output object
    with pooler_output / deepstack_features in 5.x)."""
    visual = te.model.visual if hasattr(te, "model") and hasattr(te.model, "visual") else te.visual
    res = visual(pixel_values.to(visual.dtype), grid_thw=grid)
    if isinstance(res, tuple):
        merged, deep = res[0], res[1] if len(res) > 1 else []
    else:
        merged = getattr(res, "pooler_output", None)
        deep = getattr(res, "deepstack_features", None) or []
        if merged is None:
            raise SystemExit(f"the vision tower returned {type(res).__name__} without pooler_output")
    return merged, list(deep)


def rgba_rule(pipe, rgba_resized, pixel_values):
    """Which RGB picture the processor made of the RGBA one: alpha dropped, or composited over white."""
    ip = pipe.processor.image_processor
    drop = rgba_resized.convert("RGB")
    white = Image.new("RGBA", rgba_resized.size, (255, 255, 255, 255))
    white.alpha_composite(rgba_resized)
    found = {}
    for name, img in (("drop_alpha", drop), ("over_white", white.convert("RGB"))):
        pv = ip(images=[img], return_tensors="pt")["pixel_values"].to(torch.float32)
        found[name] = float((pv - pixel_values).abs().max()) if pv.shape == pixel_values.shape else None
    exact = [k for k, v in found.items() if v == 0.0]
    return exact[0] if exact else "neither", found


def check_plain(pipe, golden, allow_vae_mismatch):
    """Re-runs golden_pipeline_qi21's case "plain" exactly as that script does and compares."""
    c = T2I_CASES["plain"]
    common = dict(prompt=c["prompt"], negative_prompt=c["negative"], true_cfg_scale=c["cfg"], height=c["height"],
                  width=c["width"], num_inference_steps=c["steps"])
    lat = pipe(**common, generator=torch.Generator("cpu").manual_seed(c["seed"]), output_type="latent",
               return_dict=False)[0][0].float()
    img = pipe(**common, generator=torch.Generator("cpu").manual_seed(c["seed"]), output_type="np",
               return_dict=False)[0][0]
    img = torch.from_numpy(np.ascontiguousarray(img)).float()
    exp = load_file(golden)
    res = {}
    for what, got, ref, tol in (("latents", lat, exp["latents_plain"], 1e-6), ("image", img, exp["image_plain"], 1e-5)):
        ref = ref.float()
        diff = float((got - ref).abs().max())
        rms = float(ref.pow(2).mean().sqrt())
        res[what] = dict(max_abs_diff=diff, rms=rms)
        print(f"t2i 'plain' {what}: max abs diff {diff:.3e} (rms {rms:.4f}, bound {tol:g} of it)")
        if diff > tol * rms:
            if what == "latents":
                raise SystemExit("the rebuilt pipeline does not reproduce tests/golden/pipeline_qi21: its weights "
                                 "differ from tiny_pipeline.cmf.gz, so these goldens could not be read with it")
            if not allow_vae_mismatch:
                raise SystemExit("the rebuilt pipeline's picture differs from tests/golden/pipeline_qi21: the VAE "
                                 "(whose encoder the condition cases use) is not the .cmf's; "
                                 "--allow-vae-mismatch carries on")
            print("WARNING: VAE mismatch allowed; the condition latents will not match tiny_pipeline.cmf.gz")
    return res


def compare_t2i(new, old):
    """Prints, per tensor of the text-to-image golden, how far the remade one is from the old one."""
    a, b = load_file(new), load_file(old)
    for k in sorted(set(a) & set(b)):
        x, y = a[k].double(), b[k].double()
        if x.shape != y.shape:
            print(f"t2i remade vs old {k}: shape {tuple(x.shape)} vs {tuple(y.shape)}")
            continue
        print(f"t2i remade vs old {k}: max abs {float((x - y).abs().max()):.3e}, rel rms {rel_rms(x, y):.3e}")


def run_case(pipe, name, c, pics, tensors, stored_pv):
    """One condition case in float32: every intermediate the C side compares, then the whole pipeline."""
    pictures = [pics[p] for p in c["images"]]
    sizes, resized, vae_images = prepare_images(pipe, pictures)
    text = prompt_text(pipe, c["prompt"], len(pictures))
    inputs = pipe.processor(text=[text], images=resized, padding=True, return_tensors="pt")
    ids, mask = inputs["input_ids"][0], inputs["attention_mask"][0]
    pv, grid = inputs["pixel_values"].to(torch.float32), inputs["image_grid_thw"]
    for (w, h), g in zip(sizes, grid.tolist()):
        if g != [1, h // 16, w // 16]:
            raise SystemExit(f"{name}: the processor's grid {g} is not the VAE latent grid [1, {h // 16}, "
                             f"{w // 16}] of the {w}x{h} picture; the transformer would refuse it")
    pad_id = pipe._img_token_id
    pads = [int(n) for n in (grid.prod(-1) // (pipe.processor.image_processor.merge_size ** 2)).tolist()]
    if int((ids == pad_id).sum()) != sum(pads):
        raise SystemExit(f"{name}: {int((ids == pad_id).sum())} image pads in the ids, grids say {sum(pads)}")
    tensors[f"{name}.input_ids"] = i32(ids)
    tensors[f"{name}.attention_mask"] = i32(mask)
    tensors[f"{name}.image_grid_thw"] = i32(grid)
    key = tuple(c["images"])
    if len(key) > 1 and all((p,) in stored_pv for p in key):
        joined = torch.cat([stored_pv[(p,)] for p in key], 0)
        if not torch.equal(joined, pv):
            raise SystemExit(f"{name}: pixel_values are not those of the single-picture cases")
        pv_note = "those of " + " then ".join(stored_pv[(p,), "case"] for p in key)
    else:
        tensors[f"{name}.pixel_values"] = c32(pv)
        stored_pv[key] = pv
        stored_pv[key, "case"] = name
        pv_note = "stored"
    te = pipe.text_encoder
    merged, deep = vision_of(te, pv, grid)
    tensors[f"{name}.vision"] = c32(merged)
    for k, d in enumerate(deep):
        tensors[f"{name}.deepstack_{k}"] = c32(d)

    embeds, emask, pmask = pipe.encode_prompt(prompt=c["prompt"], image=resized, device="cpu")
    tensors[f"{name}.embeds"] = c32(embeds[0])
    tensors[f"{name}.embeds_mask"] = i32(emask[0])
    tensors[f"{name}.image_pad_mask"] = pmask[0].to(torch.uint8).contiguous().clone()
    entry_neg = None
    if c["negative"] is not None and c["cfg"] > 1:
        nembeds, nmask, npmask = pipe.encode_prompt(prompt=c["negative"], image=resized, device="cpu")
        tensors[f"{name}.neg_embeds"] = c32(nembeds[0])
        tensors[f"{name}.neg_embeds_mask"] = i32(nmask[0])
        tensors[f"{name}.neg_image_pad_mask"] = npmask[0].to(torch.uint8).contiguous().clone()
        entry_neg = dict(text=prompt_text(pipe, c["negative"], len(pictures)), embeds_rows=int(nembeds.shape[1]),
                         image_pad_rows=int(npmask[0].sum()))

    # the size rule of __call__: derived from the last picture's aspect at output_resolution^2, else explicit
    height, width = c["height"], c["width"]
    last = pictures[-1].size
    cw, ch, _ = calculate_dimensions(RESOLUTION * RESOLUTION, last[0] / last[1])
    height, width = (height or ch) // 32 * 32, (width or cw) // 32 * 32
    zc = pipe.transformer.config.in_channels
    lh, lw = 2 * (height // 32), 2 * (width // 32)
    noise = torch.randn((1, 1, zc, lh, lw), generator=torch.Generator("cpu").manual_seed(c["seed"]),
                        dtype=torch.float32)
    noise = noise.view(1, zc, lh * lw).transpose(1, 2).contiguous()
    _, cond = pipe.prepare_latents(vae_images, 1, zc, height, width, torch.float32, torch.device("cpu"), None,
                                   noise.clone())
    tensors[f"{name}.cond_latents"] = c32(cond[0])
    shapes = [(1, h // 16, w // 16) for (w, h) in sizes] + [(1, height // 16, width // 16)]
    tensors[f"{name}.img_shapes"] = torch.tensor(shapes, dtype=torch.int32)
    tensors[f"{name}.noise"] = c32(noise[0])

    steps = []

    def on_step(_pipe, i, _t, kw):
        steps.append(kw["latents"][0].detach().clone())
        return {}

    common = dict(image=pictures, prompt=c["prompt"], negative_prompt=c["negative"], true_cfg_scale=c["cfg"],
                  height=c["height"], width=c["width"], num_inference_steps=c["steps"],
                  output_resolution=RESOLUTION)
    img = pipe(**common, generator=torch.Generator("cpu").manual_seed(c["seed"]), output_type="np",
               callback_on_step_end=on_step, return_dict=False)[0][0]
    if len(steps) != c["steps"]:
        raise SystemExit(f"{name}: {len(steps)} step callbacks for {c['steps']} steps")
    for i, s in enumerate(steps):
        tensors[f"{name}.step_{i}"] = c32(s)
    lat = steps[-1]
    tensors[f"{name}.latents"] = c32(lat)
    image = torch.from_numpy(np.ascontiguousarray(img)).float()
    tensors[f"{name}.image"] = image.contiguous()
    tensors[f"{name}.timesteps"] = c32(pipe.scheduler.timesteps)
    if tuple(image.shape) != (height, width, 4):
        raise SystemExit(f"{name}: image {tuple(image.shape)}, expected ({height}, {width}, 4)")

    # the same run fed the noise as latents (the bf16 run's route) must give the same latents
    steps_l = []
    pipe(**common, latents=noise.clone(), output_type="latent", return_dict=False,
         callback_on_step_end=lambda p, i, t, kw: steps_l.append(kw["latents"][0].clone()) or {})
    noise_route = float((steps_l[-1] - lat).abs().max())
    # without the prefix K/V cache (cortiq always caches): how far the two reference routes are apart
    nocache = pipe(**common, latents=noise.clone(), output_type="latent", return_dict=False,
                   use_kv_cache=False)[0][0]

    entry = dict(c, text=text, output_resolution=RESOLUTION, requested_hw=[c["height"], c["width"]],
                 height=height, width=width,
                 picture_sizes_wh=[list(s) for s in sizes], input_ids=int(ids.shape[0]),
                 image_pads=pads, image_grid_thw=grid.tolist(), pixel_values=list(pv.shape),
                 pixel_values_stored=pv_note, vision=list(merged.shape), deepstack=len(deep),
                 embeds_rows=int(embeds.shape[1]), image_pad_rows=int(pmask[0].sum()),
                 cond_tokens=int(cond.shape[1]), target_tokens=lh * lw, img_shapes=[list(s) for s in shapes],
                 image_shape=list(image.shape), negative_entry=entry_neg,
                 noise_as_latents_max_abs_diff=noise_route,
                 kv_cache_off_rel_rms=rel_rms(nocache.float(), lat), latents_rms=float(lat.pow(2).mean().sqrt()))
    print(f"{name}: ids {entry['input_ids']}, pads {pads}, grids {grid.tolist()}, embeds {entry['embeds_rows']}, "
          f"cond {entry['cond_tokens']} + target {entry['target_tokens']} tokens, image {tuple(image.shape)}, "
          f"noise route diff {noise_route:.2e}, no-cache rel {entry['kv_cache_off_rel_rms']:.2e}")
    return entry, common, noise, lat, image


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="out/pipeline_qi21_cond")
    ap.add_argument("--tokenizer", default="tests/fixtures/tokenizers/qwen3.json.gz")
    ap.add_argument("--chat-template", default="tests/fixtures/chat_templates/qwen3_vl.jinja")
    ap.add_argument("--t2i-golden", default="tests/golden/pipeline_qi21/expected.safetensors")
    ap.add_argument("--seed", type=int, default=20261129, help="golden_pipeline_qi21's build seed")
    ap.add_argument("--allow-vae-mismatch", action="store_true")
    ap.add_argument("--remake-t2i", metavar="DIR",
                    help="write the text-to-image golden again from these reference files (DIR/pipeline, "
                         "DIR/expected.safetensors, DIR/cases.json; convert DIR/pipeline into tiny_pipeline.cmf.gz) "
                         "and check against it instead; the old golden's differences are printed, stage by stage")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)

    tmp = tempfile.mkdtemp(prefix="qi21cond_")
    try:
        tokdir = os.path.join(tmp, "tok")
        make_tokenizer(args.tokenizer, args.chat_template, tokdir)
        pipe = build(argparse.Namespace(seed=args.seed, tokenizer_dir=tokdir, chat_template=args.chat_template))
        folder = os.path.join(args.remake_t2i or tmp, "pipeline")
        pipe.save_pretrained(folder, safe_serialization=True)
        pipe = QwenImage21Pipeline.from_pretrained(folder, torch_dtype=torch.float32)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    pipe.set_progress_bar_config(disable=True)
    if args.remake_t2i:
        run_t2i_cases(pipe, args.remake_t2i)
        compare_t2i(os.path.join(args.remake_t2i, "expected.safetensors"), args.t2i_golden)
        args.t2i_golden = os.path.join(args.remake_t2i, "expected.safetensors")
    plain = check_plain(pipe, args.t2i_golden, args.allow_vae_mismatch)

    pipe.ref_token_list = [LABEL]
    ip = pipe.processor.image_processor
    saved_min = size_of(ip, "shortest_edge")
    lower_min_pixels(ip, MIN_PIXELS)

    paths = make_pictures(args.out)
    pics = {k: open_picture(p) for k, p in paths.items()}
    tensors, meta, runs, stored_pv = {}, {}, {}, {}
    pictures = {}
    for p in PICTURES:
        sizes, resized, _ = prepare_images(pipe, [pics[p]])
        tensors[f"{p}.resized"] = torch.from_numpy(np.ascontiguousarray(np.asarray(resized[0]))).contiguous()
        pictures[p] = dict(file=os.path.basename(paths[p]), mode=pics[p].mode, size_wh=list(pics[p].size),
                           resized_wh=list(sizes[0]), resized_mode=resized[0].mode)
    for name, c in CASES.items():
        entry, common, noise, lat, image = run_case(pipe, name, c, pics, tensors, stored_pv)
        meta[name], runs[name] = entry, (common, noise, lat, image)
    # the RGBA rule, from the processor's own pixel values of the RGBA case
    _, rgba_resized, _ = prepare_images(pipe, [pics["rgba"]])
    rule, rule_diffs = rgba_rule(pipe, rgba_resized[0], stored_pv[("rgba",)])
    print("processor RGBA -> RGB:", rule, rule_diffs)

    # the same cases in bfloat16 from the float32 noise: the reference's own bf16 error, the GPU bound
    pipe.to(torch.bfloat16)
    for name, (common, noise, lat, image) in runs.items():
        got = []
        img = pipe(**common, latents=noise.clone(), output_type="np", return_dict=False,
                   callback_on_step_end=lambda p, i, t, kw: got.append(kw["latents"][0].float()) or {})[0][0]
        meta[name]["bf16_latents_rel_rms"] = rel_rms(got[-1], lat)
        img = torch.from_numpy(np.ascontiguousarray(img)).float()
        meta[name]["bf16_image_rel_rms"] = rel_rms(img, image)
        meta[name]["bf16_image_max_abs"] = float((img - image).abs().max())
        print(f"{name}: bf16 rel rms latents {meta[name]['bf16_latents_rel_rms']:.3e}, "
              f"image {meta[name]['bf16_image_rel_rms']:.3e}")

    save_file(tensors, os.path.join(args.out, "expected.safetensors"))
    index = dict(
        torch=torch.__version__, transformers=transformers.__version__, diffusers=diffusers.__version__,
        diffusers_base_commit=DIFFUSERS_BASE, overlay=qi21_ref.sources().get("files", {}),
        pipeline="tools/golden_pipeline_qi21.py build(), seed %d (tests/golden/pipeline_qi21/tiny_pipeline.cmf.gz)"
                 % args.seed,
        t2i_plain_check=plain, image_label=LABEL, ref_token_list_reference=["Picture ", "Image ", "图 ", "图片 "],
        image_processor=type(ip).__name__, min_pixels=MIN_PIXELS, min_pixels_saved=saved_min,
        max_pixels=size_of(ip, "longest_edge"), patch_size=int(ip.patch_size), merge_size=int(ip.merge_size),
        temporal_patch_size=int(ip.temporal_patch_size), drop_rows=int(pipe._drop_idx_ti2i),
        image_pad_id=int(pipe._img_token_id), rgba_to_rgb=rule, rgba_to_rgb_max_abs_diff=rule_diffs,
        use_kv_cache=True, weights_note="the t2i golden's weights (not bf16-exact): the bf16 errors include "
        "the rounding of the weights", pictures=pictures, cases=meta)
    with open(os.path.join(args.out, "cases.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1, ensure_ascii=False)
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    print(f"wrote {args.out}: {len(tensors)} tensors, {total} bytes")


if __name__ == "__main__":
    sys.exit(main())
