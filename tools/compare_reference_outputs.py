#!/usr/bin/env python3
"""Pixel parity of a converted pipeline pack against the reference pipeline's own outputs.

tools/train_shapes.py renders its sample prompts with diffusers' QwenImage21Pipeline (prompt i with a CPU
torch generator seeded i) and saves the images in reference_outputs.npz: image_<i> float32 [H, W, 4] in
[0, 1], plus `prompts` and `steps`. This script draws the same prompts with `cortiq imagine --rgba` from the
converted .cmf and compares every pixel with the reference rounded as a PNG would be, round(x * 255).

Only the standard library: the .npz is a zip of .npy files (a short header and raw little-endian data), the
PNG is 8-bit RGBA written by cortiq (zlib data plus the five row filters).

Usage:
    python3 tools/compare_reference_outputs.py build/cortiq models/shapes.cmf reference_outputs.npz \
        [--max-diff 2] [--keep DIR]
Exit status 0 when every pixel is within --max-diff / 255 of the reference, 1 otherwise.
"""
import argparse
import ast
import os
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib
from array import array


def read_npy(data):
    """(header dict, payload bytes) of one .npy file."""
    if data[:6] != b"\x93NUMPY":
        raise ValueError("not a .npy file")
    if data[6] == 1:
        (hl,) = struct.unpack("<H", data[8:10])
        off = 10
    else:
        (hl,) = struct.unpack("<I", data[8:12])
        off = 12
    header = ast.literal_eval(data[off:off + hl].decode("latin1"))
    return header, data[off + hl:]


def npy_f32(data):
    header, payload = read_npy(data)
    if header["descr"] != "<f4" or header["fortran_order"]:
        raise ValueError(f"expected a C-ordered little-endian float32 array, got {header}")
    a = array("f")
    a.frombytes(payload)
    if sys.byteorder != "little":
        a.byteswap()
    return header["shape"], a


def npy_strings(data):
    header, payload = read_npy(data)
    descr = header["descr"]
    if not descr.startswith("<U"):
        raise ValueError(f"expected unicode strings, got {descr}")
    width = int(descr[2:]) * 4
    out = []
    for i in range(header["shape"][0]):
        out.append(payload[i * width:(i + 1) * width].decode("utf-32-le").rstrip("\x00"))
    return out


def npy_int(data):
    header, payload = read_npy(data)
    fmt = {"<i8": "<q", "<i4": "<i"}[header["descr"]]
    return struct.unpack(fmt, payload[:struct.calcsize(fmt)])[0]


def read_png_rgba(path):
    """(width, height, bytes) of an 8-bit RGBA, non-interlaced PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour != 6 or interlace:
                raise ValueError(f"{path}: want 8-bit RGBA non-interlaced (depth {depth}, colour type {colour})")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    bpp, stride = 4, width * 4
    out = bytearray(height * stride)
    prev = bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 255
            elif ftype != 0:
                raise ValueError(f"{path}: bad filter type {ftype}")
        out[y * stride:(y + 1) * stride] = line
        prev = line
    return width, height, bytes(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cortiq")
    ap.add_argument("pack")
    ap.add_argument("npz")
    ap.add_argument("--max-diff", type=int, default=2, help="largest allowed difference, in 1/255 (default 2)")
    ap.add_argument("--keep", help="write the PNGs into this folder instead of a temporary one")
    args = ap.parse_args()

    z = zipfile.ZipFile(args.npz)
    prompts = npy_strings(z.read("prompts.npy"))
    steps = npy_int(z.read("steps.npy"))
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        outdir = args.keep or tmp
        os.makedirs(outdir, exist_ok=True)
        for i, prompt in enumerate(prompts):
            shape, ref = npy_f32(z.read(f"image_{i}.npy"))
            h, w, c = shape
            if c != 4:
                raise ValueError(f"image_{i}: expected 4 channels, got {c}")
            png = os.path.join(outdir, f"image_{i}.png")
            subprocess.run([args.cortiq, "imagine", args.pack, prompt, "--seed", str(i), "--steps", str(steps),
                            "--size", f"{w}x{h}", "--rgba", "-q", "-o", png], check=True)
            pw, ph, px = read_png_rgba(png)
            if (pw, ph) != (w, h):
                raise ValueError(f"{png}: {pw}x{ph}, the reference is {w}x{h}")
            # (x * 255).round() in float32, as the reference's PNG conversion: the product is exact in double,
            # storing it in a float32 array rounds it as float32 does; Python's round() is half-to-even like numpy's
            scaled = array("f", (min(max(v, 0.0), 1.0) * 255.0 for v in ref))
            worst, total, over = 0, 0, 0
            for k in range(len(ref)):
                d = abs(px[k] - round(scaled[k]))
                total += d
                worst = max(worst, d)
                over += d > args.max_diff
            mean = total / len(ref)
            ok = ok and worst <= args.max_diff
            print(f"prompt {i} (seed {i}, {steps} steps, {w}x{h}): max {worst}/255, mean {mean:.4f}/255, "
                  f"{over} of {len(ref)} values over {args.max_diff}: {prompt!r}")
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
