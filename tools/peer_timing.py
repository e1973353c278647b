"""Timing shared by the GPU peer benchmarks (tools/bench_peer_qi21.py, bench_peer_vae.py, bench_peer_zimage.py,
bench_peer_ltx2_vae.py)."""
import statistics
import subprocess
import sys
import time

import torch


def timed(fn, repeat):
    """Median seconds of `repeat` runs of fn() after one warm-up, each bracketed by torch.cuda.synchronize()."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def timed_events(fn, iters, warmup=1):
    """Median milliseconds of `iters` runs of fn() after `warmup` untimed ones, each timed on the device with a
    pair of CUDA events (the GPU's time from the first kernel queued to the last one done, not the host's)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def run_cortiq_bench(cmd):
    """Run a `cortiq bench ...` command line, echoing it and its report; its stdout, or None when it failed."""
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        sys.stdout.write(p.stderr)
        print(f"cortiq bench failed (exit {p.returncode})", flush=True)
        return None
    return p.stdout


def side_by_side(label, ours, theirs, ref):
    """One summary row: cortiq's figure, each peer's (a dict label -> figure) and ref's over cortiq's."""
    fmt = lambda v: f"{v:9.2f}" if v else "        -"
    r = theirs.get(ref)
    ratio = f"{r / ours:6.2f}x" if ours and r else "     -"
    return f"{label}: {fmt(ours)} | " + " | ".join(fmt(v) for v in theirs.values()) + f" | {ratio}"
