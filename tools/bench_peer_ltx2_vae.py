#!/usr/bin/env python3
"""The peer of `cortiq bench ltx25-vae --backend cuda`: diffusers' LTX-2.5 output decoders on the same shapes.

Builds the released LTX-2.5 configurations (diffusers' scripts/convert_ltx2_to_diffusers.py, version "2.5"; the same
ones src/cli/bench_ltx2_vae.c writes for cortiq) with random weights on the GPU:
  - AutoencoderKLLTX2Video (the conv VAE: 128 latent channels, x32 in space, x8 in time), timestep_conditioning
    false (assumed: the converter takes it from a flag; the pipeline passes no timestep then);
  - AutoencoderKLLTX2Audio (its decoder) and LTX2VocoderWithBWE (BigVGAN-v2 to 16 kHz, the BWE to 48 kHz).
For each geometry W x H x F (pixels and frames) it times, each on its own as LTX2Pipeline runs them after the last
step: vae.decode of [1, 128, (F-1)/8+1, H/32, W/32] latents; audio_vae.decode of [1, 8, T, 16] latents with
T = round(F / fps x 25); the vocoder on the mel that decode gave ([1, 2, 4T-3, 64]). In bf16 (as the pipeline runs
them with torch_dtype=bfloat16), with --f32 also in float32; eager, and with --compile also through torch.compile
(each module's forward compiled; the compiling calls are the warm-ups, left out of the timing). Timing: --warmup
untimed calls, then the median of --iters calls, each between two CUDA events. The peak memory is
torch.cuda.max_memory_allocated() over each component's calls (all three models' weights included, as cortiq's
device peak includes them; the two encoders, which a decode never runs, are dropped as cortiq's pack leaves them
out).

The video decode runs untiled, the whole video at once (cortiq's --mode untiled and --mode stream compute the same
frames). When it does not fit (torch.cuda.OutOfMemoryError), or with --mode tiled, it runs diffusers' own tiling
instead: vae.enable_tiling() with 512-pixel tiles at a 448-pixel stride (cortiq's --mode tiled uses 512-pixel boxes
too, --tile 0x16x16) and, if that does not fit either, also frame-wise decoding (vae.use_framewise_decoding); the
line says which ran. diffusers' tiles are blended at the seams and are not the untiled result; cortiq's boxes carry
the exact halo and are.

cortiq's figures are host wall time and include copying the latents in and the frames out to host memory; these
are device time with everything on the GPU.

With --cortiq PATH, the cortiq bench runs first on the same machine and shapes, and both are printed side by side.

Usage (on the GPU machine; needs torch with CUDA and diffusers' source at 58eb52c0 or later):
    PYTHONPATH=<diffusers src>:tools python3 tools/bench_peer_ltx2_vae.py --geometry 768x512x121 384x256x49 \\
        [--fps 24] [--iters 3] [--warmup 1] [--mode untiled|tiled] [--f32] [--compile] \\
        [--cortiq build-gpu/cortiq [--cortiq-mode stream]]
"""
import argparse
import re
import sys
import time

import torch

from diffusers import AutoencoderKLLTX2Audio, AutoencoderKLLTX2Video
from diffusers.pipelines.ltx2.vocoder import LTX2VocoderWithBWE

from peer_timing import run_cortiq_bench, side_by_side, timed_events

# get_ltx2_video_vae_config("2.5"), timestep_conditioning False (the converter's default)
VIDEO_VAE = dict(in_channels=3, out_channels=3, latent_channels=128, block_out_channels=(256, 512, 1024, 1024),
                 down_block_types=("LTX2VideoDownBlock3D",) * 4, decoder_block_out_channels=(256, 512, 512, 1024),
                 layers_per_block=(4, 6, 4, 2, 2), decoder_layers_per_block=(4, 6, 4, 2, 2),
                 spatio_temporal_scaling=(True, True, True, True),
                 decoder_spatio_temporal_scaling=(True, True, True, True),
                 decoder_inject_noise=(False, False, False, False, False),
                 downsample_type=("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
                 upsample_type=("spatiotemporal", "spatiotemporal", "temporal", "spatial"),
                 upsample_residual=(False, False, False, False), upsample_factor=(2, 2, 1, 2),
                 timestep_conditioning=False, patch_size=4, patch_size_t=1, resnet_norm_eps=1e-6,
                 encoder_causal=True, decoder_causal=False, encoder_spatial_padding_mode="zeros",
                 decoder_spatial_padding_mode="zeros", spatial_compression_ratio=32, temporal_compression_ratio=8)
# get_ltx2_audio_vae_config("2.5")
AUDIO_VAE = dict(base_channels=128, output_channels=2, ch_mult=(1, 2, 4), num_res_blocks=2, attn_resolutions=None,
                 in_channels=2, resolution=256, latent_channels=8, norm_type="pixel", causality_axis="height",
                 dropout=0.0, mid_block_add_attention=False, sample_rate=16000, mel_hop_length=160, is_causal=True,
                 mel_bins=64, double_z=True)
# get_ltx2_vocoder_config("2.5")
_GEN = dict(resnet_kernel_sizes=[3, 7, 11], resnet_dilations=[[1, 3, 5], [1, 3, 5], [1, 3, 5]], act_fn="snakebeta",
            leaky_relu_negative_slope=0.1, antialias=True, antialias_ratio=2, antialias_kernel_size=12,
            final_act_fn=None, final_bias=False)
VOCODER = dict(in_channels=128, hidden_channels=1536, out_channels=2, upsample_kernel_sizes=[11, 4, 4, 4, 4, 4],
               upsample_factors=[5, 2, 2, 2, 2, 2], **_GEN, bwe_in_channels=128, bwe_hidden_channels=512,
               bwe_out_channels=2, bwe_upsample_kernel_sizes=[12, 11, 4, 4, 4], bwe_upsample_factors=[6, 5, 2, 2, 2],
               **{"bwe_" + k: v for k, v in _GEN.items()}, filter_length=512, hop_length=80, window_length=512,
               num_mel_channels=64, input_sampling_rate=16000, output_sampling_rate=48000)


def geometry(s):
    try:
        w, h, f = (int(v) for v in s.split("x"))
    except ValueError:
        sys.exit(f"--geometry {s}: want WxHxF")
    if w % 32 or h % 32 or (f - 1) % 8 or min(w, h, f) < 1:
        sys.exit(f"--geometry {s}: want W and H multiples of 32 and F = 8k + 1")
    return w, h, f


def shapes(geo, fps):
    w, h, f = geo
    return ((f - 1) // 8 + 1, h // 32, w // 32), round(f / fps * 25.0)


def make_models(dtype):
    """The three models on the GPU, random weights (built in float32, then cast)."""
    with torch.device("cuda"):
        vae = AutoencoderKLLTX2Video(**VIDEO_VAE).eval()
        avae = AutoencoderKLLTX2Audio(**AUDIO_VAE).eval()
        voc = LTX2VocoderWithBWE(**VOCODER).eval()
    # the encoders are never run: dropped, so the peak memory holds what cortiq's pack holds (decoders only)
    del vae.encoder, avae.encoder
    return vae.to(dtype), avae.to(dtype), voc.to(dtype)


def compile_models(vae, avae, voc):
    vae.decoder = torch.compile(vae.decoder)
    avae.decoder = torch.compile(avae.decoder)
    return vae, avae, torch.compile(voc)


def measure(fn, iters, warmup):
    """(median ms, peak GiB, warm-up s) of fn."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    warm = time.perf_counter() - t0
    ms = timed_events(fn, iters, warmup=0)
    return ms, torch.cuda.max_memory_allocated() / 2**30, warm


def video_decode(vae, z, iters, warmup, mode):
    """The decode untiled, else (out of memory, or mode tiled) with diffusers' spatial tiling, then also frame-wise."""
    plans = ([] if mode == "tiled" else ["untiled"]) + ["tiled", "tiled + frame-wise"]
    for plan in plans:
        vae.use_tiling = plan != "untiled"
        vae.use_framewise_decoding = plan == "tiled + frame-wise"
        if vae.use_tiling:
            vae.enable_tiling(tile_sample_min_height=512, tile_sample_min_width=512, tile_sample_stride_height=448,
                              tile_sample_stride_width=448)
        try:
            return measure(lambda: vae.decode(z, return_dict=False), iters, warmup) + (plan,)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            print(f"  video decode {plan}: out of memory", flush=True)
    return None, None, None, "out of memory"


def run_peer(models, geo, fps, dtype, iters, warmup, mode, label):
    vae, avae, voc = models
    (lf, lh, lw), T = shapes(geo, fps)
    g = torch.Generator(device="cpu").manual_seed(4242)
    z = torch.randn(1, VIDEO_VAE["latent_channels"], lf, lh, lw, generator=g).to("cuda", dtype)
    az = torch.randn(1, AUDIO_VAE["latent_channels"], T, AUDIO_VAE["mel_bins"] // 4, generator=g).to("cuda", dtype)
    v_ms, v_peak, v_warm, plan = video_decode(vae, z, iters, warmup, mode)
    del z
    torch.cuda.empty_cache()
    a_ms, a_peak, _ = measure(lambda: avae.decode(az, return_dict=False), iters, warmup)
    mel = avae.decode(az, return_dict=False)[0]
    o_ms, o_peak, o_warm = measure(lambda: voc(mel), iters, warmup)
    fmt = lambda v: f"{v:9.2f} ms" if v is not None else "        - ms"
    w, h, f = geo
    print(f"{label:28s} {w}x{h}x{f}: video decode {fmt(v_ms)} ({plan}), audio decode {fmt(a_ms)}, vocoder "
          f"{fmt(o_ms)}, peak memory {max(p for p in (v_peak, a_peak, o_peak) if p is not None):.1f} GiB "
          f"(video {v_peak or 0:.1f}, audio {a_peak:.1f}, vocoder {o_peak:.1f}); mel {tuple(mel.shape)}, "
          f"warm-up video {v_warm or 0:.1f} s, vocoder {o_warm:.1f} s", flush=True)
    return {"video": v_ms, "audio": a_ms, "vocoder": o_ms}


def run_cortiq(path, geo, fps, iters, warmup, mode):
    w, h, f = geo
    out = run_cortiq_bench([path, "bench", "ltx25-vae", "--backend", "cuda", "--size", f"{w}x{h}", "--frames", str(f),
                            "--fps", str(fps), "--mode", mode, "--iters", str(iters), "--warmup", str(warmup)])
    ms = {}
    for key, line in (("video", "video decode"), ("audio", "audio decode"), ("vocoder", "vocoder")):
        m = re.search(r"^" + line + r" .*?: ([0-9.]+) ms \(median", out or "", re.M)
        ms[key] = float(m.group(1)) if m else None
    return ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--geometry", nargs="+", default=["768x512x121"], help="WxHxF in pixels and frames")
    ap.add_argument("--fps", type=float, default=24.0, help="frame rate: the audio's length (default 24)")
    ap.add_argument("--iters", type=int, default=3, help="timed calls of each component (median reported)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed calls before them")
    ap.add_argument("--mode", choices=["untiled", "tiled"], default="untiled",
                    help="the video decode: untiled (tiled only when it does not fit) or always diffusers' tiling")
    ap.add_argument("--f32", action="store_true", help="also run the three models in float32")
    ap.add_argument("--compile", action="store_true", help="also time them through torch.compile (bf16)")
    ap.add_argument("--cortiq", help="path of the cortiq binary: run its CUDA bench on the same shapes first")
    ap.add_argument("--cortiq-mode", default="stream", choices=["stream", "untiled", "tiled"],
                    help="cortiq's --mode (default stream, the pipeline's)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    if args.iters < 1 or args.warmup < 0:
        sys.exit("--iters wants 1 or more, --warmup 0 or more")
    geos = [geometry(s) for s in args.geometry]
    torch.set_grad_enabled(False)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; LTX-2.5 video VAE, audio VAE and vocoder "
          f"with BWE, released configuration, random weights; median of {args.iters} after {args.warmup} warm-up",
          flush=True)

    ours = {g: run_cortiq(args.cortiq, g, args.fps, args.iters, args.warmup, args.cortiq_mode) for g in geos} \
        if args.cortiq else {}

    runs = [("bf16", torch.bfloat16, False)] + ([("f32", torch.float32, False)] if args.f32 else []) + \
        ([("bf16", torch.bfloat16, True)] if args.compile else [])
    peers = {}
    for name, dtype, comp in runs:
        torch.manual_seed(0)
        models = make_models(dtype)
        if comp:
            models = compile_models(*models)
        label = f"diffusers {name} {'torch.compile' if comp else 'eager'}"
        peers[label] = {g: run_peer(models, g, args.fps, dtype, args.iters, args.warmup, args.mode, label)
                        for g in geos}
        del models
        torch.cuda.empty_cache()

    print("\nms per component: cortiq cuda (" + args.cortiq_mode + ") | " + " | ".join(peers) +
          " | bf16 eager / cortiq")
    for g in geos:
        for key in ("video", "audio", "vocoder"):
            print(side_by_side(f"{g[0]}x{g[1]}x{g[2]} {key:8s}", ours.get(g, {}).get(key),
                               {p: peers[p][g][key] for p in peers}, "diffusers bf16 eager"))


if __name__ == "__main__":
    main()
