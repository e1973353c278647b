#!/usr/bin/env python3
"""Golden data for the first frame's H.264 re-compression of LTX-2 image to video (src/io/image_crf.h): diffusers'
own apply_image_conditioning_crf (pipelines/ltx2/utils.py at 58eb52c0, a port of ltx-pipelines'
media_io.preprocess: PyAV, libx264 at a CRF with preset veryfast, one frame in an MP4 in memory, decoded back to
RGB) run on the pictures of tests/golden/resample_bilinear. The module is loaded from diffusers' source file with
the one name it imports from the package (is_av_available) stood in, so only PyAV and numpy are needed.

Writes, under --out (tests/golden/image_crf): <case>.png (the re-compressed picture, cropped to even sides as the
reference crops it) and index.json (the input, the CRF, PyAV's and FFmpeg's library versions: libx264 and
libswscale decide the bytes, so the test compares byte for byte only on the same versions and within a stated
bound elsewhere).

Usage, from the repository root:
    python3 tools/golden_image_crf.py --diffusers ref/diffusers/src --out tests/golden/image_crf
"""
import argparse
import importlib.util
import json
import os
import sys
import types

import av
import numpy as np
from PIL import Image

CASES = {  # name: (input picture under tests/golden/resample_bilinear, crf)
    "down_80x40_crf18": ("down_80x40_in.png", 18),   # LTX-2.5's CRF (a Gemma-4 text encoder)
    "down_80x40_crf33": ("down_80x40_in.png", 33),   # LTX-2.0 / 2.3's
    "up_37x23_crf18": ("up_37x23_in.png", 18),       # odd sides: cropped to 36 x 22
}


def load_reference(src):
    for name in ("diffusers", "diffusers.pipelines", "diffusers.pipelines.ltx2"):
        m = types.ModuleType(name)
        m.__path__ = []
        sys.modules[name] = m
    u = types.ModuleType("diffusers.utils")
    u.is_av_available = lambda: True
    sys.modules["diffusers.utils"] = u
    path = os.path.join(src, "diffusers", "pipelines", "ltx2", "utils.py")
    spec = importlib.util.spec_from_file_location("diffusers.pipelines.ltx2.utils", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--diffusers", default="ref/diffusers/src")
    ap.add_argument("--inputs", default="tests/golden/resample_bilinear")
    ap.add_argument("--out", default="tests/golden/image_crf")
    a = ap.parse_args()
    ref = load_reference(a.diffusers)
    os.makedirs(a.out, exist_ok=True)
    index = {"generator": "tools/golden_image_crf.py", "diffusers": "58eb52c0", "pyav": av.__version__,
             "ffmpeg": {k: ".".join(map(str, v)) for k, v in av.library_versions.items()}, "cases": {}}
    for name, (src, crf) in CASES.items():
        img = np.array(Image.open(os.path.join(a.inputs, src)).convert("RGB"))
        out = ref.apply_image_conditioning_crf(img, crf)
        Image.fromarray(out, "RGB").save(os.path.join(a.out, name + ".png"))
        diff = np.abs(out.astype(int) - img[:out.shape[0], :out.shape[1]].astype(int))
        index["cases"][name] = dict(input=src, crf=crf, in_size=[img.shape[1], img.shape[0]],
                                    out_size=[out.shape[1], out.shape[0]], mean_abs_change=float(diff.mean()))
        print(f"{name}: {img.shape[1]}x{img.shape[0]} -> {out.shape[1]}x{out.shape[0]}, mean change {diff.mean():.2f}")
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
