"""diffusers' offload modes, shared by the transformer peers (tools/bench_peer_qi21.py, bench_peer_zimage.py).

The peers of cortiq's device-memory budget (`cortiq bench imagine --gpu-memory`), each timed by the calling
script's own `run(model, size, label)`, which returns a dict with the seconds of its once-per-prompt part
("prefill", 0 where the model has none), of one step ("step") and the device memory it took ("peak", "used"):
  none   the model resident on the GPU
  model  enable_model_cpu_offload(): its hook moves the whole transformer to the GPU before the first forward of a
         generation and back to the CPU after it (then empties the cache)
  group  group offloading at leaf level with a CUDA stream (enable_group_offload / apply_group_offloading,
         offload_type="leaf_level", use_stream=True, record_stream=True): every Linear (and each norm's weight)
         onloaded from pinned CPU memory just before it runs, the next one prefetched on the side stream
"""
import gc
import importlib.util
import inspect
import sys
import time

import torch

MODES = ["none", "model", "group"]


def gib(nbytes):
    return nbytes / 2**30


def device_used():
    """Bytes in use on the device as the driver sees them: the caching allocator's reserve, the context, others."""
    free, total = torch.cuda.mem_get_info()
    return total - free


def free_device():
    """Give the device back everything the last mode left, so that the next mode's peak is its own."""
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def build(make, device):
    """The model make() constructs, in bf16 on `device`, with its build time and size printed."""
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.device(device):
        model = make().to(torch.bfloat16).eval()
    if device == "cuda":
        # The fp32 weights the constructor made are freed by the cast but stay in the allocator's reserve: give
        # them back, or the device's used bytes would count them (a bf16 from_pretrained never holds them).
        free_device()
    print(f"diffusers model built on the {device} in {time.perf_counter() - t0:.1f} s "
          f"({sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters)", flush=True)
    return model


def run_resident(model, sizes, compile_too, run):
    """--offload none: the model on the GPU, eager and (with --compile) through torch.compile (the first calls
    compile; they are part of the warm-up). Returns ({size: row} eager, {size: row} compiled)."""
    eager = {s: run(model, s, "diffusers eager") for s in sizes}
    compiled = {}
    if compile_too:
        cmodel = torch.compile(model)
        for s in sizes:
            t0 = time.perf_counter()
            compiled[s] = run(cmodel, s, "diffusers torch.compile")
            print(f"  (compile + timing took {time.perf_counter() - t0:.0f} s)", flush=True)
        del cmodel
        torch._dynamo.reset()
    return eager, compiled


def run_model_offload(model, sizes, run):
    """--offload model: what enable_model_cpu_offload()'s hook does to the transformer in each generation.

    accelerate's CpuOffload hook moves the whole module to the GPU (module.to(device), from pageable memory) before
    its first forward, and the next model's hook in the pipeline (the VAE's) moves it back (module.to("cpu")) and
    empties the device cache. The model arrives here on the CPU and leaves on it.
    """
    rows = {}
    for s in sizes:
        free_device()
        t0 = time.perf_counter()
        model.to("cuda")
        torch.cuda.synchronize()
        t_in = time.perf_counter() - t0
        r = run(model, s, "diffusers model cpu offload")
        t0 = time.perf_counter()
        model.to("cpu")
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        r["out"] = time.perf_counter() - t0
        r["in"] = t_in
        print(f"  move to the GPU {t_in:.2f} s, back to the CPU {r['out']:.2f} s", flush=True)
        rows[s] = r
    return rows


def enable_group_offload(model):
    """Leaf-level group offloading with a CUDA stream, as diffusers recommends it for speed; returns its setup time.

    record_stream=True lets the side stream's copies be freed without a synchronisation (faster, a little more
    memory); low_cpu_mem_usage=False keeps the CPU copies pinned from the start rather than pinning them on every
    onload, which is what lets the stream overlap the copies with compute. Both are passed only where this
    diffusers has them.
    """
    try:
        from diffusers.hooks.group_offloading import apply_group_offloading
    except ImportError as e:
        sys.exit(f"--offload group: this diffusers has no group offloading (diffusers.hooks.group_offloading."
                 f"apply_group_offloading): {e}")
    if importlib.util.find_spec("accelerate") is None:
        sys.exit("--offload group: diffusers' group offloading moves the forward's arguments with "
                 "accelerate.utils.send_to_device, and accelerate is not installed")
    # ModelMixin.enable_group_offload forwards to apply_group_offloading and also checks the model supports it.
    fn = getattr(model, "enable_group_offload", None)
    params = inspect.signature(fn if fn is not None else apply_group_offloading).parameters
    missing = [k for k in ("onload_device", "offload_device", "offload_type", "use_stream") if k not in params]
    if missing:
        sys.exit(f"--offload group: this diffusers' group offloading takes no {', '.join(missing)}")
    kw = {"onload_device": torch.device("cuda"), "offload_device": torch.device("cpu"),
          "offload_type": "leaf_level", "use_stream": True}
    for k, v in (("record_stream", True), ("low_cpu_mem_usage", False)):
        if k in params:
            kw[k] = v
    print("group offloading: " + ", ".join(f"{k}={v}" for k, v in kw.items()), flush=True)
    t0 = time.perf_counter()
    if fn is not None:
        fn(**kw)
    else:
        apply_group_offloading(model, **kw)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def run_group_offload(model, sizes, run):
    """--offload group: the model arrives on the CPU; its hooks stay on it (this mode runs last)."""
    free_device()
    t_setup = enable_group_offload(model)
    print(f"group offloading set up in {t_setup:.1f} s (CPU copies pinned; the first forward records the layer "
          f"order for prefetching and is part of the warm-up)", flush=True)
    return {s: run(model, s, "diffusers group offload (leaf)") for s in sizes}


def add_args(ap, steps, steps_help):
    """--offload and --steps (the projected generation's, `steps` by default)."""
    ap.add_argument("--offload", choices=["none", "group", "model", "all"], default="none",
                    help="diffusers' offload mode to time (all: none, model, group in that order)")
    ap.add_argument("--steps", type=int, default=steps,
                    help=f"denoising steps of the projected generation in the last table ({steps_help})")


def modes_of(args):
    """The modes --offload names, after checking --steps and --compile against them."""
    if args.steps < 1:
        sys.exit(f"--steps {args.steps}: want at least 1")
    modes = MODES if args.offload == "all" else [args.offload]
    if args.compile and "none" not in modes:
        sys.exit("--compile times the resident model: use it with --offload none or all")
    return modes


def run_modes(make, modes, sizes, compile_too, run):
    """Every mode of `modes` on one set of weights, make()'s model: built on the GPU for the resident runs (as fast
    as that is), else on the CPU, where the offload modes keep it. Returns {size: row} of the eager and the compiled
    resident runs and {mode: {size: row}} of the offloaded ones."""
    model = build(make, "cuda" if "none" in modes else "cpu")
    eager, compiled, offloaded = {}, {}, {}
    if "none" in modes:
        eager, compiled = run_resident(model, sizes, compile_too, run)
        if len(modes) > 1:
            model.to("cpu")
            free_device()
    if "model" in modes:
        offloaded["model"] = run_model_offload(model, sizes, run)
    if "group" in modes:
        offloaded["group"] = run_group_offload(model, sizes, run)
    return eager, compiled, offloaded


def step_of(rows, size):
    """The step seconds of a size's row, None where that size was not run in that mode."""
    return rows[size]["step"] if size in rows else None


def print_modes(eager, offloaded, sizes, steps):
    """The last table: per mode and size, the step, the moves, the memory and a `steps`-step generation of the
    transformer projected as move in + prefill + steps x step + move out."""
    print(f"\nmode  | size | step ms | move-in s | move-out s | peak GiB (allocator) | used GiB (device) | "
          f"{steps}-step s")
    for mode, per_size in [("none", eager)] + [(m, offloaded.get(m, {})) for m in MODES[1:]]:
        for s in sizes:
            r = per_size.get(s)
            if r is None:
                continue
            t_in, t_out = r.get("in"), r.get("out")
            total = (t_in or 0) + r["prefill"] + steps * r["step"] + (t_out or 0)
            sec = lambda v: f"{v:9.2f}" if v is not None else "        -"
            print(f"{mode:5s} | {s:4d} | {1e3 * r['step']:7.2f} | {sec(t_in)} | {sec(t_out):>10s} | "
                  f"{gib(r['peak']):20.2f} | {gib(r['used']):17.2f} | {total:8.2f}")
