#!/usr/bin/env python3
"""ltx2_st.py — the safetensors helper of forward_ltx2.sh, standard library only (no numpy or torch on CI).

    ltx2_st.py inputs CASE.safetensors INDEX.json NAME OUT.safetensors [EDIT...]
        OUT gets CASE's forward inputs (the reference's tensors; the golden's outputs and taps left out) plus the
        grid and flags of case NAME from INDEX.json as scalars: num_frames, height, width (I64), fps (F32),
        audio_num_frames (I64), use_cross_timestep, isolate_modalities (I64) and, when the case has STG blocks,
        spatio_temporal_guidance_blocks (I64 [k]). EDITs break it for the refusal checks:
            drop=T       leave T out
            short=T      T loses its last row (its first dimension one smaller)
            narrow=T     the 2-D T loses its last column
            all=1        every tensor of CASE is kept too (its outputs and taps)
            nan=T        T's first element is NaN
            int=T:V      T is the I64 scalar V
            f16=T        T is stored as F16 (same values, rounded)
    ltx2_st.py compare GOT.safetensors WANT.safetensors TOL NAME...
        each NAME of GOT against WANT: prints max|err| / RMS(want) and exits 1 if any is over TOL, NaN or absent.
"""
import json
import math
import struct
import sys

INPUTS = ("hidden_states", "audio_hidden_states", "encoder_hidden_states", "audio_encoder_hidden_states",
          "timestep", "audio_timestep", "sigma", "audio_sigma", "video_coords", "audio_coords")
SIZES = {"F32": 4, "I64": 8}


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    head = json.loads(blob[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = (v["dtype"], list(v["shape"]), blob[8 + n + a:8 + n + b])
    return out


def write(path, tensors):
    head, off, parts = {}, 0, []
    for k, (dt, shape, data) in tensors.items():
        head[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        parts.append(data)
        off += len(data)
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(parts))


def floats(t):
    dt, _, data = t
    assert dt == "F32", dt
    return struct.unpack("<%df" % (len(data) // 4), data)


def inputs(case, index, name, out, edits):
    src = read(case)
    c = json.load(open(index))["cases"][name]
    t = {k: src[k] for k in INPUTS if k in src}
    i64 = lambda v: ("I64", [1], struct.pack("<q", int(v)))
    t["num_frames"], t["height"], t["width"] = i64(c["frames"]), i64(c["height"]), i64(c["width"])
    t["fps"] = ("F32", [1], struct.pack("<f", c["fps"]))
    t["audio_num_frames"] = i64(c["audio_frames"])
    t["use_cross_timestep"] = i64(c["use_cross_timestep"])
    t["isolate_modalities"] = i64(c["isolate_modalities"])
    if c["stg_blocks"]:
        b = c["stg_blocks"]
        t["spatio_temporal_guidance_blocks"] = ("I64", [len(b)], struct.pack("<%dq" % len(b), *b))
    for e in edits:
        op, arg = e.split("=", 1)
        if op == "all":
            t = dict(src, **t)
        elif op == "narrow":
            dt, (r, c), data = t[arg]
            t[arg] = (dt, [r, c - 1], b"".join(data[i * c * 4:(i * c + c - 1) * 4] for i in range(r)))
        elif op == "drop":
            del t[arg]
        elif op == "short":
            dt, shape, data = t[arg]
            row = len(data) // shape[0]
            t[arg] = (dt, [shape[0] - 1] + shape[1:], data[:-row])
        elif op == "nan":
            dt, shape, data = t[arg]
            t[arg] = (dt, shape, struct.pack("<f", math.nan) + data[4:])
        elif op == "f16":
            dt, shape, data = t[arg]
            v = struct.unpack("<%df" % (len(data) // 4), data)
            t[arg] = ("F16", shape, struct.pack("<%de" % len(v), *v))
        elif op == "int":
            k, v = arg.split(":")
            t[k] = i64(v)
        else:
            sys.exit("unknown edit " + e)
    write(out, t)


def compare(got, want, tol, names):
    g, w = read(got), read(want)
    bad = False
    for n in names:
        if n not in g:
            print(f"{got}: no tensor {n}")
            bad = True
            continue
        a, b = floats(g[n]), floats(w[n])
        if g[n][1] != w[n][1]:
            print(f"{got}: {n} is {g[n][1]}, expected {w[n][1]}")
            bad = True
            continue
        rms = math.sqrt(sum(x * x for x in b) / len(b))
        err = max(abs(x - y) if not (math.isnan(x) or math.isnan(y)) else math.inf for x, y in zip(a, b))
        print(f"{got}: {n} max|err|/RMS(ref) = {err / rms:.3g}")
        bad |= not err / rms <= tol
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "inputs":
        inputs(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
    elif len(sys.argv) >= 6 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5:])
    else:
        sys.exit(__doc__)
