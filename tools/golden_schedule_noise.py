#!/usr/bin/env python3
"""Golden data for cortiq.c's seeded noise, flow-match schedule and image output.

    python3 tools/golden_schedule_noise.py --out tests/golden

writes
    tests/golden/noise/     torch.randn from CPU generators (index.json + *.bin)
    tests/golden/schedule/  sigmas, timesteps, model timesteps, Euler steps and
                            true-CFG combinations (schedule.json), and the
                            scheduler config they were made with
    tests/golden/image/     diffusers' float->uint8 postprocessing and PIL's
                            alpha-over-white (image.json + over_white.bin)

Needs torch and numpy, and diffusers for the schedule and image parts. diffusers
is taken from the environment, or from its source tree given by --diffusers-src
(default: ref/diffusers/src under the repository, or $DIFFUSERS_SRC), e.g.

    git clone --depth 1 https://github.com/huggingface/diffusers ref/diffusers

Nothing is reimplemented: the schedule comes from diffusers'
FlowMatchEulerDiscreteScheduler driven exactly as QwenImage21Pipeline drives it
(its calculate_shift and retrieve_timesteps are imported from the pipeline
module), the noise from torch.randn, the pixels from VaeImageProcessor.

torch's float32 randn kernel depends on the CPU capability torch dispatches to
(AVX2/AVX512: Cephes polynomials; DEFAULT: the C library's logf/cosf/sinf), so
the float32 noise is written twice: once as this machine runs it and once with
ATEN_CPU_CAPABILITY=default (a child process). Each case records its capability.
With CUDA available, the model timesteps, Euler steps and CFG are also computed
on the GPU (torch divides by a CPU scalar there as a multiply by its reciprocal).
"""
import argparse
import json
import os
import platform
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Qwen/Qwen-Image-2.1 scheduler/scheduler_config.json
SCHEDULER_CONFIG = {
    "_class_name": "FlowMatchEulerDiscreteScheduler",
    "base_image_seq_len": 256,
    "base_shift": 0.5,
    "invert_sigmas": False,
    "max_image_seq_len": 8192,
    "max_shift": 0.9,
    "num_train_timesteps": 1000,
    "shift": 1.0,
    "shift_terminal": 0.02,
    "stochastic_sampling": False,
    "time_shift_type": "exponential",
    "use_beta_sigmas": False,
    "use_dynamic_shifting": True,
    "use_exponential_sigmas": False,
    "use_karras_sigmas": False,
}

SEEDS_FULL = [0, 42]
SEEDS_SHORT = [1, 2**32 + 5, 2**63 + 12345, 2**64 - 1]
SIZES_FULL = [1, 2, 3, 7, 15, 16, 17, 31, 32, 33, 100, 1000, 4097]
SIZES_SHORT = [3, 16, 17, 100]
# (batch, 1, channels, h, w) as QwenImage21Pipeline.prepare_latents shapes them
LATENT_SHAPES_FULL = [(1, 1, 64, 16, 16)]                      # 256x256
LATENT_SHAPES_HASHED = [(1, 1, 64, 32, 32), (1, 1, 64, 64, 64),  # 512, 1024
                        (1, 1, 64, 82, 82), (2, 1, 64, 16, 16), (1, 1, 64, 58, 104)]
HEAD_TAIL = 256
DTYPES = ["float32", "bfloat16", "float16", "float64"]

SCHEDULE_STEPS = [1, 2, 3, 8, 20, 40, 50]
SCHEDULE_SIZES = [(256, 256), (512, 512), (1024, 1024), (1328, 1328), (1664, 928), (928, 1664),
                  (768, 1344), (2048, 2048)]
EULER_CASES = [(8, 1024, 1024), (20, 512, 512), (3, 1664, 928)]
CFG_SCALES = [1.5, 4.0, 7.5]


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def torch_dtype(torch, name):
    return getattr(torch, name)


def raw_bytes(torch, x):
    """Little-endian raw bytes of a CPU tensor (16-bit types as their bit patterns)."""
    x = x.contiguous().cpu()
    if x.dtype in (torch.bfloat16, torch.float16):
        return x.view(torch.int16).numpy().astype("<i2").tobytes()
    if x.dtype == torch.float32:
        return x.numpy().astype("<f4").tobytes()
    return x.numpy().astype("<f8").tobytes()


def f32_bits(values):
    return [int(v) for v in np.asarray(values, dtype="<f4").view("<u4")]


def f64_hex(v):
    return "%016x" % int(np.asarray([v], dtype="<f8").view("<u8")[0])


# ------------------------------------------------------------------ noise ---

def noise_cases(torch, out_dir, tag, dtypes):
    """randn cases for the capability torch runs now; tag names the files."""
    cap = torch.backends.cpu.get_cpu_capability()
    cases = []
    blob = bytearray()
    blob_name = "%s.bin" % tag

    def emit(name, seed, dtype, calls, full=True):
        # calls: shapes (ints or tuples) in `dtype`, or (shape, dtype) pairs
        norm = []
        for c in calls:
            shape, cdt = (c if isinstance(c, tuple) and isinstance(c[-1], str) else (c, dtype))
            norm.append(((shape,) if isinstance(shape, int) else tuple(shape), cdt))
        g = torch.Generator("cpu").manual_seed(seed)
        data = b"".join(raw_bytes(torch, torch.randn(s, generator=g, dtype=torch_dtype(torch, t))) for s, t in norm)
        case = {"name": name, "seed": str(seed), "capability": cap,
                "calls": [{"shape": list(s), "dtype": t} for s, t in norm],
                "bytes": len(data), "fnv1a64": fnv1a64(data), "file": blob_name}
        if not full:
            # big tensors: the hash of all bytes, and the first and last elements
            k = HEAD_TAIL * {"float32": 4, "float64": 8, "bfloat16": 2, "float16": 2}[dtype]
            case["head_tail_elems"] = HEAD_TAIL
            data = data[:k] + data[-k:]
        case["offset"] = len(blob)
        case["stored_bytes"] = len(data)
        blob.extend(data)
        cases.append(case)

    for dt in dtypes:
        for seed in SEEDS_FULL:
            for n in SIZES_FULL:
                emit("%s_s%d_n%d" % (dt, seed, n), seed, dt, [n])
        for seed in SEEDS_SHORT:
            for n in SIZES_SHORT:
                emit("%s_s%d_n%d" % (dt, seed, n), seed, dt, [n])
        if dt in ("float32", "bfloat16"):
            for shape in LATENT_SHAPES_FULL:
                emit("%s_s0_latent_%s" % (dt, "x".join(map(str, shape))), 0, dt, [shape])
            for shape in LATENT_SHAPES_HASHED:
                emit("%s_s42_latent_%s" % (dt, "x".join(map(str, shape))), 42, dt, [shape], full=False)
    if "float32" in dtypes:
        # one generator, several calls: the scalar sampler's cached value and the
        # engine state carry over between calls (and across dtypes)
        emit("seq_f32", 7, "float32", [3, 5, 20, 1, 16, 2])
        emit("seq_mixed", 9, "float32", [(1, "float32"), (2, "bfloat16"), (17, "float32"), (3, "float64"),
                                         (40, "bfloat16"), (1, "float16")])
    with open(os.path.join(out_dir, blob_name), "wb") as f:
        f.write(bytes(blob))
    return cases


def run_noise(torch, out):
    d = os.path.join(out, "noise")
    os.makedirs(d, exist_ok=True)
    native = torch.backends.cpu.get_cpu_capability()
    cases = noise_cases(torch, d, "native", DTYPES)
    if native.upper() != "DEFAULT":
        # float32 under torch's DEFAULT kernel, from a child with the variable set
        env = dict(os.environ, ATEN_CPU_CAPABILITY="default")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--noise-default-child", d],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("default-capability child failed:\n" + r.stdout + r.stderr)
        with open(os.path.join(d, "default_cases.json")) as f:
            cases += json.load(f)
        os.remove(os.path.join(d, "default_cases.json"))
    index = {"generator": meta(torch), "cases": cases}
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    print("noise: %d cases in %s" % (len(cases), d))


def noise_default_child(d):
    import torch
    assert torch.backends.cpu.get_cpu_capability().upper() == "DEFAULT", torch.backends.cpu.get_cpu_capability()
    cases = noise_cases(torch, d, "default", ["float32"])
    with open(os.path.join(d, "default_cases.json"), "w") as f:
        json.dump(cases, f)


# --------------------------------------------------------------- schedule ---

def import_diffusers(src):
    candidates = [src] if src else []
    if os.environ.get("DIFFUSERS_SRC"):
        candidates.append(os.environ["DIFFUSERS_SRC"])
    candidates.append(os.path.join(REPO, "ref", "diffusers", "src"))
    try:
        import diffusers  # noqa: F401
    except ImportError:
        for c in candidates:
            if os.path.isdir(os.path.join(c, "diffusers")):
                sys.path.insert(0, c)
                break
    try:
        import diffusers
    except ImportError as e:
        sys.exit("diffusers is needed for the schedule and image goldens (%s). Install it, or clone its "
                 "source and pass --diffusers-src PATH/src (tried: %s)" % (e, ", ".join(candidates)))
    from diffusers import FlowMatchEulerDiscreteScheduler
    try:  # the pipeline's own helpers
        from diffusers.pipelines.qwenimage21.pipeline_qwenimage21 import calculate_shift, retrieve_timesteps
        helpers = "diffusers.pipelines.qwenimage21.pipeline_qwenimage21"
    except ImportError:
        # older trees: the same functions ("Copied from") in the Qwen-Image pipeline
        from diffusers.pipelines.qwenimage.pipeline_qwenimage import calculate_shift, retrieve_timesteps
        helpers = "diffusers.pipelines.qwenimage.pipeline_qwenimage"
    return diffusers, FlowMatchEulerDiscreteScheduler, calculate_shift, retrieve_timesteps, helpers


def latent_grid(width, height):
    """QwenImage21Pipeline: sizes floored to multiples of 32, then prepare_latents' grid."""
    multiple_of = 16 * 2
    w = width // multiple_of * multiple_of
    h = height // multiple_of * multiple_of
    return w, h, 2 * (int(w) // (16 * 2)), 2 * (int(h) // (16 * 2))


def make_schedule(torch, Sched, calculate_shift, retrieve_timesteps, steps, seq_len, device):
    scheduler = Sched.from_config(SCHEDULER_CONFIG)
    sigmas = np.linspace(1.0, 1 / steps, steps)
    mu = calculate_shift(
        seq_len,
        scheduler.config.get("base_image_seq_len", 256),
        scheduler.config.get("max_image_seq_len", 4096),
        scheduler.config.get("base_shift", 0.5),
        scheduler.config.get("max_shift", 1.15),
    )
    with np.errstate(all="ignore"):
        timesteps, _ = retrieve_timesteps(scheduler, steps, device, sigmas=sigmas, mu=mu)
    scheduler.set_begin_index(0)
    return scheduler, timesteps, mu


def model_timestep_bits(torch, t_all, dtype):
    """timestep = t.expand(1).to(dtype); timestep / 1000, as the pipeline does."""
    out = []
    for t in t_all:
        ts = t.expand(1).to(dtype)
        out.append((ts / 1000).float().cpu().numpy()[0])
    return f32_bits(out)


def run_schedule(torch, out, diffusers_src):
    diffusers, Sched, calculate_shift, retrieve_timesteps, helpers = import_diffusers(diffusers_src)
    d = os.path.join(out, "schedule")
    os.makedirs(d, exist_ok=True)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    cases = []
    for (width, height) in SCHEDULE_SIZES:
        w, h, lw, lh = latent_grid(width, height)
        seq_len = lw * lh
        for steps in SCHEDULE_STEPS:
            scheduler, timesteps, mu = make_schedule(torch, Sched, calculate_shift, retrieve_timesteps, steps,
                                                     seq_len, "cpu")
            case = {
                "width": width, "height": height, "render_width": w, "render_height": h,
                "latent_w": lw, "latent_h": lh, "image_seq_len": seq_len, "steps": steps,
                "mu": float(mu), "mu_f64": f64_hex(mu),
                "sigmas_f32": f32_bits(scheduler.sigmas.cpu().numpy()),
                "timesteps_f32": f32_bits(timesteps.cpu().numpy()),
                "model_timestep": {},
            }
            for dev in devices:
                _, tdev, _ = make_schedule(torch, Sched, calculate_shift, retrieve_timesteps, steps, seq_len, dev)
                for dt in ("float32", "bfloat16"):
                    case["model_timestep"]["%s_%s" % (dev, dt)] = model_timestep_bits(
                        torch, tdev, torch_dtype(torch, dt))
            cases.append(case)

    euler = []
    for steps, width, height in EULER_CASES:
        _, _, lw, lh = latent_grid(width, height)
        for dev in devices:
            scheduler, timesteps, _ = make_schedule(torch, Sched, calculate_shift, retrieve_timesteps, steps,
                                                    lw * lh, dev)
            g = torch.Generator("cpu").manual_seed(1234 + steps)
            x = torch.randn(64, generator=g, dtype=torch.float32)
            x0 = x.clone()
            vs, xs = [], []
            x = x.to(dev)
            for t in timesteps:
                v = torch.randn(64, generator=g, dtype=torch.float32)
                vs.append(f32_bits(v.numpy()))
                x = scheduler.step(v.to(dev), t, x, return_dict=False)[0]
                xs.append(f32_bits(x.cpu().numpy()))
            euler.append({"device": dev, "steps": steps, "image_seq_len": lw * lh, "x0": f32_bits(x0.numpy()),
                          "v": vs, "x": xs})

    cfg = []
    g = torch.Generator("cpu").manual_seed(99)
    pos = torch.randn(256, generator=g, dtype=torch.float32)
    neg = torch.randn(256, generator=g, dtype=torch.float32)
    for dev in devices:
        for scale in CFG_SCALES:
            p, n = pos.to(dev), neg.to(dev)
            res = n + scale * (p - n)  # QwenImage21Pipeline's true-CFG line
            cfg.append({"device": dev, "scale": scale, "pos": f32_bits(pos.numpy()), "neg": f32_bits(neg.numpy()),
                        "out": f32_bits(res.cpu().numpy())})

    with open(os.path.join(d, "scheduler_config.json"), "w") as f:
        json.dump(SCHEDULER_CONFIG, f, indent=2, sort_keys=True)
    m = meta(torch)
    m["diffusers"] = getattr(diffusers, "__version__", "?")
    m["diffusers_path"] = os.path.dirname(diffusers.__file__)
    m["pipeline_helpers"] = helpers
    with open(os.path.join(d, "schedule.json"), "w") as f:
        json.dump({"generator": m, "config": SCHEDULER_CONFIG, "cases": cases, "euler": euler, "cfg": cfg}, f,
                  indent=1, sort_keys=True)
    print("schedule: %d schedules, %d Euler runs, %d CFG cases in %s" % (len(cases), len(euler), len(cfg), d))
    return diffusers


# ------------------------------------------------------------------ image ---

def run_image(torch, out):
    from diffusers.image_processor import VaeImageProcessor
    from PIL import Image

    d = os.path.join(out, "image")
    os.makedirs(d, exist_ok=True)
    proc = VaeImageProcessor(vae_scale_factor=16, vae_latent_channels=64)  # as QwenImage21Pipeline builds it
    vals = [-2.0, -1.0, -0.0, 0.0, 1.0, 2.0, 1e-30, -1e-30, 0.5, -0.5, 1.0000001, -0.9999999]
    vals += list(np.linspace(-1.1, 1.1, 4001, dtype=np.float64))
    for k in range(255):  # values whose x*0.5+0.5 lands near a .5 rounding point
        y = (k + 0.5) / 255.0
        x = np.float32(2.0 * y - 1.0)
        vals += [float(x), float(np.nextafter(x, np.float32(2))), float(np.nextafter(x, np.float32(-2)))]
    x = np.asarray(vals, dtype=np.float32)
    side = 64
    total = 4 * side * side
    x = np.concatenate([x, np.zeros(total - x.size % total if x.size % total else 0, np.float32)])
    x = x[: (x.size // total) * total].reshape(-1, 4, side, side)
    outs = []
    for i in range(x.shape[0]):
        pil = proc.postprocess(torch.from_numpy(x[i : i + 1].copy()), output_type="pil")[0]
        outs.append(np.asarray(pil).transpose(2, 0, 1).reshape(-1))  # back to planar order
    q = {"x_f32": f32_bits(x.reshape(-1)), "u8": [int(v) for v in np.concatenate(outs)],
         "layout": "planar (B, 4, 64, 64) inputs; outputs in the same planar order"}

    # PIL's alpha over white for every (value, alpha) pair: row = alpha, column = value
    c = np.tile(np.arange(256, dtype=np.uint8), (256, 1))
    a = np.tile(np.arange(256, dtype=np.uint8)[:, None], (1, 256))
    rgba = np.stack([c, 255 - c, c, a], axis=-1)
    img = Image.fromarray(rgba, mode="RGBA")
    white = Image.new("RGB", img.size, (255, 255, 255))
    white.paste(img, mask=img.getchannel("A"))
    with open(os.path.join(d, "over_white.bin"), "wb") as f:
        f.write(np.asarray(white)[:, :, 0].tobytes())
    m = meta(torch)
    m["pillow"] = Image.__version__ if hasattr(Image, "__version__") else __import__("PIL").__version__
    with open(os.path.join(d, "image.json"), "w") as f:
        json.dump({"generator": m, "quantize": q,
                   "over_white": {"file": "over_white.bin", "rows": "alpha 0..255", "cols": "value 0..255",
                                  "how": "white.paste(img, mask=img.getchannel('A'))"}}, f, indent=1,
                  sort_keys=True)
    print("image: %d quantized values, over_white.bin in %s" % (len(q["u8"]), d))


def meta(torch):
    libc = platform.libc_ver()
    return {
        "script": "tools/golden_schedule_noise.py",
        "torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(), "machine": platform.machine(),
        "processor": platform.processor(), "libc": "%s %s" % libc,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden"))
    ap.add_argument("--diffusers-src", default=None, help="diffusers source tree (the folder holding diffusers/)")
    ap.add_argument("--only", choices=["noise", "schedule", "image"], action="append")
    ap.add_argument("--noise-default-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.noise_default_child:
        noise_default_child(args.noise_default_child)
        return
    import torch

    parts = args.only or ["noise", "schedule", "image"]
    if "noise" in parts:
        run_noise(torch, args.out)
    if "schedule" in parts:
        run_schedule(torch, args.out, args.diffusers_src)
    if "image" in parts:
        import_diffusers(args.diffusers_src)
        run_image(torch, args.out)


if __name__ == "__main__":
    main()
