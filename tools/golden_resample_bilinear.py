#!/usr/bin/env python3
"""Golden data for PIL's Image.resize(..., BILINEAR) on 8-bit RGB (src/image/resample.h, CQ_RESAMPLE_PIL_BILINEAR:
the resize LTX-2's video processor gives an image-to-video first frame, VideoProcessor(resample="bilinear")).
Writes, under --out (tests/golden/resample_bilinear), per case <name>_in.png (a random picture with smooth parts
and hard edges) and <name>_out.png (PIL's resize of it, reducing_gap None as diffusers calls it), and index.json
(PIL's version, the sizes). Needs Pillow and numpy only.

Usage, from the repository root: python3 tools/golden_resample_bilinear.py --out tests/golden/resample_bilinear
"""
import argparse
import json
import os

import numpy as np
import PIL
from PIL import Image

# name: (in w, in h, out w, out h)
CASES = {
    "down_80x40": (80, 40, 64, 32),     # the pipeline golden's first frame to its stage size
    "up_37x23": (37, 23, 64, 32),       # enlarged: support 1
    "down_203x101": (203, 101, 64, 32),  # shrunk ~3x: support widened with the scale
    "vert_31x17": (31, 17, 31, 40),     # one dimension only (the other is not resampled)
}


def picture(w, h, rng):
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([255 * x / max(w - 1, 1), 255 * y / max(h - 1, 1), 127 + 100 * np.sin(x / 3.0 + y / 5.0)], -1)
    noise = rng.integers(-40, 41, size=(h, w, 3))
    edges = ((x // 7 + y // 5) % 2)[..., None] * 60
    return np.clip(base + noise + edges, 0, 255).astype(np.uint8)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/resample_bilinear")
    ap.add_argument("--seed", type=int, default=20261204)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    index = {"generator": "tools/golden_resample_bilinear.py", "pillow": PIL.__version__, "cases": {}}
    for name, (iw, ih, ow, oh) in CASES.items():
        img = Image.fromarray(picture(iw, ih, rng), "RGB")
        img.save(os.path.join(a.out, name + "_in.png"))
        img.resize((ow, oh), resample=Image.BILINEAR).save(os.path.join(a.out, name + "_out.png"))
        index["cases"][name] = dict(in_size=[iw, ih], out_size=[ow, oh])
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print(f"wrote {a.out}: {len(CASES)} cases")


if __name__ == "__main__":
    main()
