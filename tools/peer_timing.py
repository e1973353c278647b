"""Timing shared by the GPU peer benchmarks (tools/bench_peer_qi21.py, bench_peer_vae.py, bench_peer_zimage.py)."""
import statistics
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
