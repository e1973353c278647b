#!/usr/bin/env python3
"""What the Qwen-Image-2.1 step's products alone take on the GPU's libraries: a floor for any implementation
built from them.

Runs, per layer of the released 7B shape (32 layers, 4096 wide, MLP 12288, 32 heads x 128), the cached step's
matrix products and nothing else: the q, k, v and output projections (T x 4096 x 4096), the fused gate/up
projection (T x 4096 -> 2 x 12288), the down projection (T x 12288 -> 4096), all as PyTorch bf16 `F.linear`
(cuBLAS, bf16 out), and the attention of T queries over T + 18 keys by `scaled_dot_product_attention` on the
cuDNN backend (bf16). No normalisation, modulation, RoPE, residual or conversion runs, so the figures are below
what any whole step built on these kernels can take. Three sequences, each captured in one CUDA graph and
replayed (median of --repeat replays after a warm-up): the GEMMs alone, the attention alone, and both in the
step's order (the GEMMs' power draw lowers the clock the attention gets, and the reverse).

Usage (on the GPU machine): python3 tools/bench_floor_qi21.py --size 512 1024 2048 [--repeat 5]
"""
import argparse
import statistics
import sys

import torch
import torch.nn.functional as F

LAYERS, HEADS, HEAD_DIM, RATIO, TEXT = 32, 32, 128, 3, 18
D = HEADS * HEAD_DIM
M = D * RATIO


def graph_ms(fn, repeat):
    """Median milliseconds of `repeat` replays of fn captured as one CUDA graph (after a warm-up)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm-up outside the capture: library handles and workspaces
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1))
    return statistics.median(times)


def run(side, repeat):
    T = side * side
    g = torch.Generator(device="cuda").manual_seed(1)
    rnd = lambda *s: torch.randn(*s, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
    h, a, mlp = rnd(T, D) * 50, rnd(T, D) * 50, rnd(T, M) * 50
    wq, wk, wv, wo = rnd(D, D), rnd(D, D), rnd(D, D), rnd(D, D)
    wgu, wd = rnd(2 * M, D), rnd(D, M)
    q, k, v = rnd(1, HEADS, T, HEAD_DIM) * 50, rnd(1, HEADS, T + TEXT, HEAD_DIM) * 50, rnd(1, HEADS, T + TEXT, HEAD_DIM) * 50
    out = {}

    def gemms():
        for _ in range(LAYERS):
            for w in (wk, wv, wq):
                out["p"] = F.linear(h, w)
            out["o"] = F.linear(a, wo)
            out["gu"] = F.linear(h, wgu)
            out["d"] = F.linear(mlp, wd)

    def attention():
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            for _ in range(LAYERS):
                out["att"] = F.scaled_dot_product_attention(q, k, v)

    def both():
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            for _ in range(LAYERS):
                for w in (wk, wv, wq):
                    out["p"] = F.linear(h, w)
                out["att"] = F.scaled_dot_product_attention(q, k, v)
                out["o"] = F.linear(a, wo)
                out["gu"] = F.linear(h, wgu)
                out["d"] = F.linear(mlp, wd)

    gf = LAYERS * (2 * T * D * D * 4 + 2 * T * D * M * 3)
    af = LAYERS * 4 * T * (T + TEXT) * D
    tg, ta, tb = graph_ms(gemms, repeat), graph_ms(attention, repeat), graph_ms(both, repeat)
    print(f"{side * 16:4d}^2 ({T} tokens): GEMMs {tg:8.2f} ms ({gf / tg * 1e-9:5.0f} TFLOP/s) | attention {ta:7.2f} ms "
          f"({af / ta * 1e-9:5.0f} TFLOP/s) | both in step order {tb:8.2f} ms ({(gf + af) / tb * 1e-9:5.0f} TFLOP/s)",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, nargs="+", default=[512, 1024, 2048], help="image sides in pixels")
    ap.add_argument("--repeat", type=int, default=5, help="timed replays after the warm-up (median reported)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    for s in args.size:
        if s % 16 or s < 256 or s > 4096:
            sys.exit(f"--size {s}: want a multiple of 16 in [256, 4096]")
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: the step's products alone, bf16, "
          f"{LAYERS} layers, cuBLAS (F.linear) and cuDNN attention, each sequence one CUDA graph", flush=True)
    for s in args.size:
        run(s // 16, args.repeat)


if __name__ == "__main__":
    main()
