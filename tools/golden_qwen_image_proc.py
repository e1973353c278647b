#!/usr/bin/env python3
"""Golden data for the image input of the Qwen-Image edit pipelines (src/image/qwen_image_proc.h).

Synthetic deterministic images (gradients, a saturated rectangle, block noise and fine noise) are written as PNG
files; then, from those files as PIL opens them:

  - proc cases: transformers' Qwen2VLImageProcessor (the torchvision backend, on the CPU: the native uint8
    bicubic antialiased resize) on the image converted to RGB: the resized uint8 image, pixel_values and
    image_grid_thw, for the class defaults and for other min/max pixels;
  - editplus cases: QwenImageEditPlusPipeline's pre-processing: calculate_dimensions for the condition (384^2
    area) and VAE (1024^2 area) sizes, VaeImageProcessor.resize (PIL Lanczos) to the condition size, the
    processor on that image, and VaeImageProcessor.preprocess to the VAE size (the [-1, 1] tensor);
  - edit cases: QwenImageEditPipeline's: one Lanczos resize to the 1024^2-area size feeds both the processor and
    the VAE preprocess;
  - decode cases: PIL's convert("RGB") of grey, palette and RGBA files (alpha dropped).

JPEG files written by PIL (4:2:0, 4:4:4, 4:2:2, grey) are decoded by PIL (libjpeg-turbo, its default settings)
for the decode cases and one proc case.

Writes (under --out, normally tests/golden/qwen_image_proc):
    index.json         versions; per case its file, sizes, grids and the FNV-1a 64 hash of every full output
    *.png, *.jpg       the inputs
    data.safetensors   per output <case>.<what>.rows (I64: the rows kept, all rows when the tensor is small)
                       and <case>.<what>.sample (those rows of the output):
        rgb      [H, W, 3] u8   the decoded RGB pixels (rows along H)
        cond     [h, w, 3] u8   the condition image after PIL's resize (rows along h)
        resized  [3, h, w] u8   the processor's resized image (rows along h)
        pv       [N, 1176] f32  pixel_values (rows along N)
        vae_u8   [H, W, 3] u8   the VAE-size image after PIL's resize (rows along H)
        vae      [3, H, W] f32  VaeImageProcessor.preprocess's output without the batch dimension (rows along H)

Usage, from the repository root (torch, torchvision, transformers, Pillow on the machine; diffusers' source at
commit 58eb52c0):
    PYTHONPATH=ref/diffusers/src:tools python3 tools/golden_qwen_image_proc.py --out tests/golden/qwen_image_proc
"""
import argparse
import json
import os
import platform

import numpy as np
import PIL
import PIL.features
import torch
import torchvision
import torchvision.transforms.v2.functional as tvF
import transformers
from PIL import Image
from safetensors.torch import save_file

import diffusers
from diffusers.image_processor import VaeImageProcessor
from diffusers.pipelines.qwenimage.pipeline_qwenimage_edit_plus import (
    CONDITION_IMAGE_SIZE,
    VAE_IMAGE_SIZE,
    calculate_dimensions,
)
from transformers import Qwen2VLImageProcessor
from transformers.image_utils import SizeDict

DIFFUSERS_COMMIT = "58eb52c0"
FULL_MAX = 16384  # outputs of at most this many values are stored whole
KEEP = {"rgb": 8, "cond": 6, "resized": 6, "pv": 6, "vae_u8": 6, "vae": 2}

# name: (width, height, seed, noise block, fine noise amplitude, mode)
IMAGES = {
    "a_100x75": (100, 75, 1, 2, 3, "RGB"),
    "b_333x517": (333, 517, 2, 2, 0, "RGB"),
    "c_40x30": (40, 30, 3, 1, 2, "RGB"),
    "d_48x40_rgba": (48, 40, 4, 1, 2, "RGBA"),
    "e_30x20_grey": (30, 20, 5, 1, 2, "L"),
    "f_37x23_palette": (37, 23, 6, 1, 2, "P"),
}
# JPEG inputs (PIL's encoder): name: (source image, save kwargs)
JPEGS = {
    "g_100x75_420.jpg": ("a_100x75", {"quality": 90}),
    "h_100x75_444.jpg": ("a_100x75", {"quality": 95, "subsampling": 0}),
    "i_30x20_grey.jpg": ("e_30x20_grey", {"quality": 90}),
    "j_45x33_422.jpg": ("a_100x75", {"quality": 85, "subsampling": 1, "crop": (3, 5, 48, 38)}),
}
# name: (kind, image, processor kwargs)
CASES = [
    ("dec_grey", "decode", "e_30x20_grey", {}),
    ("dec_palette", "decode", "f_37x23_palette", {}),
    ("dec_rgba", "decode", "d_48x40_rgba", {}),
    ("dec_jpeg420", "decode", "g_100x75_420.jpg", {}),
    ("dec_jpeg444", "decode", "h_100x75_444.jpg", {}),
    ("dec_jpeg_grey", "decode", "i_30x20_grey.jpg", {}),
    ("dec_jpeg422", "decode", "j_45x33_422.jpg", {}),
    ("proc_jpeg420", "proc", "g_100x75_420.jpg", {}),
    ("proc_a", "proc", "a_100x75", {}),
    ("proc_c_min", "proc", "c_40x30", {}),
    ("proc_b", "proc", "b_333x517", {}),
    ("proc_b_max", "proc", "b_333x517", {"min_pixels": 56 * 56, "max_pixels": 28 * 28 * 40}),
    ("proc_a_min", "proc", "a_100x75", {"min_pixels": 28 * 28 * 30, "max_pixels": 28 * 28 * 1280}),
    ("proc_rgba", "proc", "d_48x40_rgba", {}),
    ("editplus_a", "editplus", "a_100x75", {}),
    ("editplus_b", "editplus", "b_333x517", {}),
    ("edit_a", "edit", "a_100x75", {}),
]


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def synth(w, h, seed, block, fine, mode):
    """A gradient per channel, a wave, a saturated rectangle (ringing and clamping), block noise, fine noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    base = np.stack([255.0 * x / (w - 1), 255.0 * y / (h - 1),
                     127.5 + 120.0 * np.sin(x / 5.0 + y / 9.0)], axis=-1)
    base[h // 4:h // 2, w // 3:(2 * w) // 3, :] = [255.0, 0.0, 255.0]
    base[(3 * h) // 4:, : w // 5, :] = [0.0, 255.0, 0.0]
    nb = rng.integers(-24, 25, size=((h + block - 1) // block, (w + block - 1) // block, 3))
    nb = np.repeat(np.repeat(nb, block, axis=0), block, axis=1)[:h, :w]
    img = base + nb
    if fine:
        img = img + rng.integers(-fine, fine + 1, size=(h, w, 3))
    rgb = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    if mode == "RGB":
        return Image.fromarray(rgb, "RGB")
    if mode == "RGBA":
        a = rng.integers(0, 256, size=(h, w, 1)).astype(np.uint8)
        a[: h // 3] = 255
        a[h // 3: h // 2] = 0
        return Image.fromarray(np.concatenate([rgb, a], axis=-1), "RGBA")
    if mode == "L":
        return Image.fromarray(rgb[:, :, 0], "L")
    if mode == "P":
        return Image.fromarray(rgb, "RGB").quantize(colors=16)
    raise ValueError(mode)


def row_sample(arr, dim, keep):
    """(rows, sample): every row of arr along dim when it is small, else `keep` rows spread evenly."""
    n = arr.shape[dim]
    if arr.size <= FULL_MAX or n <= keep:
        rows = np.arange(n)
    else:
        rows = np.array([(i * (n - 1)) // (keep - 1) for i in range(keep)])
    return rows, np.ascontiguousarray(np.take(arr, rows, axis=dim))


class Out:
    def __init__(self):
        self.tensors = {}

    def put(self, case, what, arr, dim, entry):
        arr = np.ascontiguousarray(arr)
        rows, sample = row_sample(arr, dim, KEEP[what])
        self.tensors[f"{case}.{what}.rows"] = torch.from_numpy(rows.astype(np.int64))
        self.tensors[f"{case}.{what}.sample"] = torch.from_numpy(sample)
        entry[what] = {"shape": list(arr.shape), "dtype": str(arr.dtype), "fnv1a64": fnv1a64(arr.tobytes()),
                       "rows_dim": dim}


def make_processor(**kw):
    """Qwen2VLImageProcessor with min/max pixels always given (the class defaults unless kw says otherwise), so
    that no case depends on what an earlier construction may have left in a shared default."""
    return Qwen2VLImageProcessor(**{"min_pixels": 56 * 56, "max_pixels": 28 * 28 * 1280, **kw})


def run_processor(proc, img, case, out, entry):
    """The processor as the pipelines call it; its uint8 stage recomputed with the torchvision call the
    torchvision backend makes (tvF.resize, BICUBIC, antialias=True, on the CPU tensor of the RGB picture), and a
    record of whether the processor's pixel_values are that picture normalised (pv_from_resized_max_diff)."""
    feat = proc(images=[img], return_tensors="pt")
    pv = feat["pixel_values"].to(torch.float32).contiguous()
    thw = feat["image_grid_thw"].tolist()
    assert len(thw) == 1
    t, gh, gw = (int(v) for v in thw[0])
    patch = int(getattr(proc, "patch_size", 14))
    tps = int(getattr(proc, "temporal_patch_size", 2))
    merge = int(getattr(proc, "merge_size", 2))
    rh, rw = gh * patch, gw * patch
    u8 = tvF.pil_to_tensor(img.convert("RGB"))[None]
    if (rh, rw) != tuple(u8.shape[-2:]):
        resized = tvF.resize(u8, [rh, rw], interpolation=tvF.InterpolationMode.BICUBIC, antialias=True)[0]
    else:
        resized = u8[0]
    assert resized.dtype == torch.uint8
    # the fused rescale and normalisation, then the patch order, from that uint8 picture
    mean = torch.tensor([0.48145466, 0.4578275, 0.40821073]) * (1.0 / (1 / 255))
    std = torch.tensor([0.26862954, 0.26130258, 0.27577711]) * (1.0 / (1 / 255))
    x = (resized.to(torch.float32) - mean.view(3, 1, 1)) / std.view(3, 1, 1)
    x = x[None].repeat(tps, 1, 1, 1)  # [T, C, H, W]
    x = x.view(1, tps, 3, gh // merge, merge, patch, gw // merge, merge, patch)
    mine = x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(gh * gw, 3 * tps * patch * patch)
    size = proc.size
    get = (lambda k: size[k]) if isinstance(size, dict) else (lambda k: getattr(size, k))
    entry["proc"] = {"in_hw": [img.height, img.width], "resized_hw": [rh, rw], "grid_thw": [t, gh, gw],
                     "min_pixels": int(get("shortest_edge")), "max_pixels": int(get("longest_edge")),
                     "pv_from_resized_max_diff": float((mine - pv).abs().max()) if mine.shape == pv.shape else None}
    out.put(case, "resized", resized.numpy(), 1, entry)
    out.put(case, "pv", pv.numpy(), 0, entry)


def run_case(case, kind, image, kw, outdir, vae_proc, out):
    """One case's outputs into out and its index entry."""
    fname = image if image.endswith(".jpg") else image + ".png"
    img = Image.open(os.path.join(outdir, fname))
    img.load()
    entry = {"name": case, "kind": kind, "file": fname, "mode": img.mode,
             "size_wh": [img.width, img.height]}
    rgb = img.convert("RGB")
    out.put(case, "rgb", np.asarray(rgb), 0, entry)
    if kind == "proc":  # the file as opened: the processor converts to RGB itself
        run_processor(make_processor(**kw), img, case, out, entry)
    elif kind == "editplus":
        w, h = rgb.size
        cw, ch = calculate_dimensions(CONDITION_IMAGE_SIZE, w / h)
        vw, vh = calculate_dimensions(VAE_IMAGE_SIZE, w / h)
        cond = vae_proc.resize(rgb, ch, cw)
        vae = vae_proc.preprocess(rgb, vh, vw)
        entry["cond_wh"], entry["vae_wh"] = [cw, ch], [vw, vh]
        out.put(case, "cond", np.asarray(cond), 0, entry)
        out.put(case, "vae_u8", np.asarray(vae_proc.resize(rgb, vh, vw)), 0, entry)
        out.put(case, "vae", vae[0].to(torch.float32).numpy(), 1, entry)
        run_processor(make_processor(), cond, case, out, entry)
    elif kind == "edit":
        w, h = rgb.size
        vw, vh = calculate_dimensions(VAE_IMAGE_SIZE, w / h)  # the Edit pipeline's formula is the same
        resized = vae_proc.resize(rgb, vh, vw)
        vae = vae_proc.preprocess(resized, vh, vw)
        entry["vae_wh"] = [vw, vh]
        out.put(case, "vae_u8", np.asarray(resized), 0, entry)
        out.put(case, "vae", vae[0].to(torch.float32).numpy(), 1, entry)
        run_processor(make_processor(), resized, case, out, entry)
    return entry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/golden/qwen_image_proc")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    fresh = Qwen2VLImageProcessor()  # before any other construction: the class defaults as they ship
    fresh_size = fresh.size if isinstance(fresh.size, dict) else {"shortest_edge": fresh.size.shortest_edge,
                                                                  "longest_edge": fresh.size.longest_edge}

    for name, (w, h, seed, block, fine, mode) in IMAGES.items():
        synth(w, h, seed, block, fine, mode).save(os.path.join(args.out, name + ".png"), optimize=True)
    for name, (src, kw) in JPEGS.items():
        kw = dict(kw)
        img = Image.open(os.path.join(args.out, src + ".png"))
        crop = kw.pop("crop", None)
        if crop:
            img = img.crop(crop)
        img.save(os.path.join(args.out, name), "JPEG", **kw)

    vae_proc = VaeImageProcessor(vae_scale_factor=8 * 2)  # as the edit pipelines construct it
    out = Out()
    cases = []
    failed = []
    for case, kind, image, kw in CASES:
        try:
            entry = run_case(case, kind, image, kw, args.out, vae_proc, out)
        except Exception as e:  # keep the other cases; the test fails on a case marked "error"
            import traceback
            traceback.print_exc()
            entry = {"name": case, "kind": kind, "error": f"{type(e).__name__}: {e}"}
            failed.append(case)
        cases.append(entry)
        print(case, json.dumps({k: v for k, v in entry.items() if k in ("proc", "cond_wh", "vae_wh", "error")}))

    save_file(out.tensors, os.path.join(args.out, "data.safetensors"), metadata={"diffusers": DIFFUSERS_COMMIT})
    gen = {"torch": torch.__version__, "torchvision": torchvision.__version__,
           "transformers": transformers.__version__, "pillow": PIL.__version__, "numpy": np.__version__,
           "diffusers": diffusers.__version__,
           "libjpeg_turbo": str(PIL.features.version("libjpeg_turbo")), "diffusers_commit": DIFFUSERS_COMMIT,
           "cpu_capability": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
           "processor_backend": getattr(fresh, "backend", "?"),
           "processor_default_pixels": [int(fresh_size["shortest_edge"]), int(fresh_size["longest_edge"])]}
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": gen, "full_max": FULL_MAX, "cases": cases}, f, indent=1)
    total = sum(os.path.getsize(os.path.join(args.out, n)) for n in os.listdir(args.out))
    print("wrote", args.out, total, "bytes")
    if failed:
        print("FAILED cases:", ", ".join(failed))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
