#!/usr/bin/env python3
"""Golden data for LTX-2.3 / 2.5's audio output path (src/models/ltx2_audio.h): a tiny random diffusers
AutoencoderKLLTX2Audio (models/autoencoders/autoencoder_kl_ltx2_audio.py at commit 58eb52c0) decoding as
LTX2Pipeline decodes (the packed latents un-normalised with latents_mean / latents_std, unpacked, decoded), and a
tiny random LTX2VocoderWithBWE (pipelines/ltx2/vocoder.py) on that mel. CPU, float32, TF32 off, fixed generators.

Models, in LTX-2.5's structure at small widths (every parameter re-randomised: conv weights randn / sqrt(fan_in),
conv_out's times 0.2 so the waveforms stay near full scale, biases 0.1 randn, SnakeBeta's log alpha / beta 0.3 randn;
the latent statistics mean 0.1 randn, std 0.5 + rand; everything rounded to bf16; the anti-aliasing filters are
the kaiser sincs the modules build, as in a real checkpoint):
    audio_vae  base_channels 4, ch_mult (1, 2, 4), num_res_blocks 1, latent_channels 2, mel_bins 8 (2 latent mel
               bins: base_channels = latent_channels x latent mel bins, as 128 = 8 x 16 in LTX-2.5), pixel norm,
               causal in time, no attention, stereo out
    vocoder    LTX2VocoderWithBWE with LTX-2.5's strides, kernels, dilations, anti-aliasing and rate ratio
               (16 kHz -> 48 kHz, hop 80): main generator 16 -> 64 hidden (6 levels down to 1 channel), BWE
               generator 2 x 16 mels -> 32 hidden; a causal STFT of filter/window 128 (not 512: the bases would
               not fit the size budget) whose forward_basis is the DFT times a periodic Hann window, and a slaney-
               style triangular mel filterbank of 16 bands (both stored, as the real checkpoint stores them)

Cases (latents randn, the DiT's packed [T, C * Ml] view before un-normalisation):
    t2   2 latent frames (5 mel frames, 800 samples at 16 kHz)
    t4   4 latent frames (13 mel frames, 2080 samples)
Each case also runs both models in bfloat16 (the vocoder on the f32 reference mel, cast) and stores per output the
reference's own bf16 error (a device path must stay within a quarter of it), and runs both in float64 on the same
weights and inputs (the vocoder on the same f32 mel) and stores the reference's own f32 error against that ("f64";
the CPU path is held to max(1e-4, twice it): a random-weight BWE generator amplifies its input's f32 rounding to
~9e-5 of full scale at 48 kHz, measured against the test's float64 host loop):
    mel:       max_rel = max|ref_bf16 - ref_f32| / rms(ref_f32),  rms_rel = rms(ref_bf16 - ref_f32) / rms(ref_f32)
    waveforms: the same over full scale, max(1, max|ref_f32|), instead of the RMS

Writes (under --out, normally tests/golden/ltx2_audio):
    audio_vae/, vocoder/   diffusers folders (config.json, diffusion_pytorch_model.safetensors in bf16; the VAE
                           without its encoder, the vocoder without the unused inverse STFT basis: the converter
                           treats both as optional)
    index.json             versions, seed, configs, per case: T, mel frames, samples, bf16 errors, f64 (the f32
                           reference's own errors against float64, the same measures)
    cases/<case>.safetensors (batch dimension dropped, f32):
        latents [T, C * Ml]      the normalised packed latents (the decoder's input with denormalize)
        mel     [2, Tm, M]       AutoencoderKLLTX2Audio.decode's output
        wav16   [L, 2]           the main generator's output (LTX2VocoderWithBWE.vocoder), channels-last
        bwe_mel [F, 2 * n_mels]  the BWE's causal log-mel (mel_stft), channel c * n_mels + m
        wav48   [3 L, 2]         the final waveform

Usage, from the repository root (torch on the machine; diffusers' source at commit 58eb52c0 on PYTHONPATH):
    PYTHONPATH=$DSRC:tools python3 tools/golden_ltx2_audio.py --out tests/golden/ltx2_audio
"""
import argparse
import copy
import inspect
import json
import math
import os
import sys

import torch
from safetensors.torch import save_file

from diffusers.models.autoencoders.autoencoder_kl_ltx2_audio import AutoencoderKLLTX2Audio
from diffusers.pipelines.ltx2.vocoder import LTX2VocoderWithBWE

DIFFUSERS_COMMIT = "58eb52c0"
SIZE_BUDGET = 1 << 20  # bytes under --out

VAE_CONFIG = dict(
    base_channels=4, output_channels=2, ch_mult=(1, 2, 4), num_res_blocks=1, attn_resolutions=None, in_channels=2,
    resolution=256, latent_channels=2, norm_type="pixel", causality_axis="height", dropout=0.0,
    mid_block_add_attention=False, sample_rate=16000, mel_hop_length=160, is_causal=True, mel_bins=8, double_z=True,
)
N_MELS = 16
VOC_CONFIG = dict(
    in_channels=2 * 8, hidden_channels=64, out_channels=2,
    upsample_kernel_sizes=[11, 4, 4, 4, 4, 4], upsample_factors=[5, 2, 2, 2, 2, 2],
    resnet_kernel_sizes=[3, 7, 11], resnet_dilations=[[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    act_fn="snakebeta", leaky_relu_negative_slope=0.1, antialias=True, antialias_ratio=2, antialias_kernel_size=12,
    final_act_fn=None, final_bias=False,
    bwe_in_channels=2 * N_MELS, bwe_hidden_channels=32, bwe_out_channels=2,
    bwe_upsample_kernel_sizes=[12, 11, 4, 4, 4], bwe_upsample_factors=[6, 5, 2, 2, 2],
    bwe_resnet_kernel_sizes=[3, 7, 11], bwe_resnet_dilations=[[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    bwe_act_fn="snakebeta", bwe_leaky_relu_negative_slope=0.1, bwe_antialias=True, bwe_antialias_ratio=2,
    bwe_antialias_kernel_size=12, bwe_final_act_fn=None, bwe_final_bias=False,
    filter_length=128, hop_length=80, window_length=128, num_mel_channels=N_MELS,
    input_sampling_rate=16000, output_sampling_rate=48000,
)
CASES = {"t2": 2, "t4": 4}


def fail(msg):
    sys.exit(f"golden_ltx2_audio: {msg}")


def check_api():
    for cls, cfg in ((AutoencoderKLLTX2Audio, VAE_CONFIG), (LTX2VocoderWithBWE, VOC_CONFIG)):
        params = inspect.signature(cls.__init__).parameters
        missing = [k for k in cfg if k not in params]
        if missing:
            fail(f"{cls.__name__}.__init__ lacks {missing}: not diffusers {DIFFUSERS_COMMIT}?")


# ---- the names the C tables list (src/models/ltx2_audio_tensors.c) ----
def vae_names(cfg):
    names = set()

    def conv(n):
        names.update({f"{n}.conv.weight", f"{n}.conv.bias"})

    def res(n, cin, cout):
        conv(f"{n}.conv1")
        conv(f"{n}.conv2")
        if cin != cout:
            conv(f"{n}.nin_shortcut")

    mult, base = cfg["ch_mult"], cfg["base_channels"]
    ch = base * mult[-1]
    conv("decoder.conv_in")
    res("decoder.mid.block_1", ch, ch)
    res("decoder.mid.block_2", ch, ch)
    for level in reversed(range(len(mult))):
        co = base * mult[level]
        for j in range(cfg["num_res_blocks"] + 1):
            res(f"decoder.up.{level}.block.{j}", ch, co)
            ch = co
        if level:
            conv(f"decoder.up.{level}.upsample.conv")
    conv("decoder.conv_out")
    return names | {"latents_mean", "latents_std"}


def gen_names(stem, n_ups, n_res, n_dil, final_bias):
    names = {f"{stem}conv_in.weight", f"{stem}conv_in.bias", f"{stem}conv_out.weight"}
    if final_bias:
        names.add(f"{stem}conv_out.bias")

    def act(n):
        names.update({f"{n}.act.alpha", f"{n}.act.beta", f"{n}.upsample.filter", f"{n}.downsample.filter"})

    for i in range(n_ups):
        names.update({f"{stem}upsamplers.{i}.weight", f"{stem}upsamplers.{i}.bias"})
        for j in range(n_res):
            r = i * n_res + j
            for d in range(n_dil):
                for z in (1, 2):
                    names.update({f"{stem}resnets.{r}.convs{z}.{d}.weight", f"{stem}resnets.{r}.convs{z}.{d}.bias"})
                    act(f"{stem}resnets.{r}.acts{z}.{d}")
    act(f"{stem}act_out")
    return names


def voc_names(cfg):
    names = gen_names("vocoder.", len(cfg["upsample_factors"]), len(cfg["resnet_kernel_sizes"]), 3, cfg["final_bias"])
    names |= gen_names("bwe_generator.", len(cfg["bwe_upsample_factors"]), len(cfg["bwe_resnet_kernel_sizes"]), 3,
                       cfg["bwe_final_bias"])
    return names | {"mel_stft.stft_fn.forward_basis", "mel_stft.mel_basis"}


# ---- weights ----
def bf16(t):
    return t.to(torch.bfloat16).to(torch.float32)


def randomise(module, gen, stats=False):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith(".alpha") or name.endswith(".beta"):
                v = 0.3 * torch.randn(p.shape, generator=gen, dtype=torch.float64)
            elif p.ndim >= 2:
                v = torch.randn(p.shape, generator=gen, dtype=torch.float64) / p[0].numel() ** 0.5
                if name.endswith("conv_out.weight") or name.endswith("conv_out.conv.weight"):
                    v = v * 0.2
            else:
                v = 0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float64)
            p.copy_(bf16(v.float()))
        if stats:
            module.latents_mean.copy_(bf16(0.1 * torch.randn(module.latents_mean.shape, generator=gen)))
            module.latents_std.copy_(bf16(0.5 + torch.rand(module.latents_std.shape, generator=gen)))
        persistent = set(module.state_dict())
        for name, b in module.named_buffers():
            if name in persistent:  # the stored ones, as a bf16 checkpoint holds them (not the resampler's filter)
                b.copy_(bf16(b))


def stft_tables(module, cfg):
    """A real causal STFT basis (DFT x periodic Hann) and a slaney-style triangular mel filterbank."""
    N, n_mels, sr = cfg["filter_length"], cfg["num_mel_channels"], cfg["input_sampling_rate"]
    nf = N // 2 + 1
    n = torch.arange(N, dtype=torch.float64)
    hann = 0.5 - 0.5 * torch.cos(2 * math.pi * n / N)
    r = torch.arange(nf, dtype=torch.float64)[:, None]
    real = torch.cos(2 * math.pi * r * n / N) * hann
    imag = -torch.sin(2 * math.pi * r * n / N) * hann
    basis = torch.cat([real, imag], 0).reshape(2 * nf, 1, N)

    def hz_to_mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)

    def mel_to_hz(m):
        return 700.0 * (10 ** (m / 2595.0) - 1.0)

    edges = [mel_to_hz(hz_to_mel(0) + (hz_to_mel(sr / 2) - hz_to_mel(0)) * i / (n_mels + 1)) for i in range(n_mels + 2)]
    freqs = torch.arange(nf, dtype=torch.float64) * sr / N
    mel = torch.zeros(n_mels, nf, dtype=torch.float64)
    for m in range(n_mels):
        lo, c, hi = edges[m], edges[m + 1], edges[m + 2]
        up = (freqs - lo) / (c - lo)
        down = (hi - freqs) / (hi - c)
        mel[m] = torch.clamp(torch.minimum(up, down), min=0) * (2.0 / (hi - lo))
    with torch.no_grad():
        module.mel_stft.stft_fn.forward_basis.copy_(bf16(basis.float()))
        module.mel_stft.stft_fn.inverse_basis.zero_()
        module.mel_stft.mel_basis.copy_(bf16(mel.float()))


def save_folder(module, keep, path):
    os.makedirs(path, exist_ok=True)
    module.save_config(path)
    sd = {k: v.detach().to(torch.bfloat16).contiguous().clone() for k, v in module.state_dict().items() if keep(k)}
    save_file(sd, os.path.join(path, "diffusion_pytorch_model.safetensors"))
    return set(sd)


# ---- runs ----
def c32(t, dtype=torch.float32):
    return t.detach().to(dtype).contiguous().clone()


def decode(vae, packed, dtype):
    """LTX2Pipeline's audio decode: un-normalise the packed latents, unpack, decode."""
    ml = vae.config.mel_bins // 4
    x = packed[None].to(dtype)
    x = x * vae.latents_std.to(dtype) + vae.latents_mean.to(dtype)
    x = x.unflatten(2, (-1, ml)).transpose(1, 2)
    return vae.decode(x, return_dict=False)[0]


def vocode(voc, mel, dtype, keep=torch.float32):
    taps, hooks = {}, []

    def grab(name, pick):
        def f(mod, args, out):
            taps[name] = pick(out)
        return f

    ch = voc.config.out_channels
    hooks.append(voc.vocoder.register_forward_hook(grab("wav16", lambda o: c32(o[0].transpose(0, 1), keep))))
    # log_mel [B * C, n_mels, F] -> [F, C * n_mels]
    hooks.append(voc.mel_stft.register_forward_hook(
        grab("bwe_mel", lambda o: c32(o[0].unflatten(0, (-1, ch))[0].permute(2, 0, 1).flatten(1, 2), keep))))
    out = voc(mel.to(dtype))
    for h in hooks:
        h.remove()
    taps["wav48"] = c32(out[0].transpose(0, 1), keep)
    return taps


def errs(ref, got, wave):
    ref, got = ref.double(), got.double()
    scale = max(1.0, ref.abs().max().item()) if wave else ref.pow(2).mean().sqrt().item()
    if not scale > 0:
        fail("a reference tensor is all zeros")
    d = got - ref
    return dict(max_rel=d.abs().max().item() / scale, rms_rel=d.pow(2).mean().sqrt().item() / scale)


def dir_size(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/ltx2_audio")
    ap.add_argument("--seed", type=int, default=20261204)
    args = ap.parse_args()
    check_api()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(os.path.join(args.out, "cases"), exist_ok=True)
    gen = torch.Generator().manual_seed(args.seed)

    vae = AutoencoderKLLTX2Audio(**VAE_CONFIG).float().eval()
    randomise(vae, gen, stats=True)
    want = vae_names(VAE_CONFIG)
    have = {k for k in vae.state_dict() if not k.startswith("encoder.")}
    if have != want:
        fail(f"audio VAE state dict differs from the C table: extra {sorted(have - want)}, missing {sorted(want - have)}")
    save_folder(vae, lambda k: not k.startswith("encoder."), os.path.join(args.out, "audio_vae"))

    voc = LTX2VocoderWithBWE(**VOC_CONFIG).float().eval()
    randomise(voc, gen)
    stft_tables(voc, VOC_CONFIG)
    want = voc_names(VOC_CONFIG)
    have = set(voc.state_dict()) - {"mel_stft.stft_fn.inverse_basis"}
    if have != want:
        fail(f"vocoder state dict differs from the C table: extra {sorted(have - want)}, missing {sorted(want - have)}")
    save_folder(voc, lambda k: k != "mel_stft.stft_fn.inverse_basis", os.path.join(args.out, "vocoder"))

    vae_b, voc_b = copy.deepcopy(vae).to(torch.bfloat16), copy.deepcopy(voc).to(torch.bfloat16)
    vae_d, voc_d = copy.deepcopy(vae).double(), copy.deepcopy(voc).double()
    index = dict(torch=torch.__version__, diffusers=DIFFUSERS_COMMIT, seed=args.seed,
                 audio_vae=dict(config={k: list(v) if isinstance(v, tuple) else v for k, v in VAE_CONFIG.items()}),
                 vocoder=dict(config=VOC_CONFIG), cases=[])
    C, ml = VAE_CONFIG["latent_channels"], VAE_CONFIG["mel_bins"] // 4
    for name, T in CASES.items():
        packed = torch.randn(T, C * ml, generator=gen)
        mel = decode(vae, packed, torch.float32)
        mel_b = decode(vae_b, packed, torch.bfloat16)
        ref = vocode(voc, mel, torch.float32)
        got = vocode(voc_b, mel, torch.bfloat16)
        tm, L = mel.shape[2], ref["wav16"].shape[0]
        if tm != max(4 * T - 3, 1) or L != tm * 160 or ref["wav48"].shape[0] != 3 * L:
            fail(f"case {name}: {tm} mel frames, {L} samples: not the expected geometry")
        bf = {"mel": errs(mel[0], mel_b[0].float(), False)}
        for k in ("wav16", "wav48"):
            bf[k] = errs(ref[k], got[k], True)
        bf["bwe_mel"] = errs(ref["bwe_mel"], got["bwe_mel"], False)
        # the reference's own f32 error: f32 against the same modules in float64 (taps kept in float64)
        mel_d = decode(vae_d, packed, torch.float64)
        exact = vocode(voc_d, mel, torch.float64, keep=torch.float64)
        f64 = {"mel": errs(mel_d[0], mel[0], False)}
        for k in ("wav16", "wav48"):
            f64[k] = errs(exact[k], ref[k], True)
        f64["bwe_mel"] = errs(exact["bwe_mel"], ref["bwe_mel"], False)
        tensors = dict(latents=c32(packed), mel=c32(mel[0]), **ref)
        save_file(tensors, os.path.join(args.out, "cases", name + ".safetensors"),
                  metadata={"diffusers": DIFFUSERS_COMMIT, "case": name})
        index["cases"].append(dict(name=name, T=T, mel_frames=tm, samples=L, bf16=bf, f64=f64,
                                   max_abs=dict(wav16=ref["wav16"].abs().max().item(),
                                                wav48=ref["wav48"].abs().max().item())))
        print(f"{name}: mel bf16 max {bf['mel']['max_rel']:.3e}; wav16 bf16 max {bf['wav16']['max_rel']:.3e} "
              f"(max |x| {ref['wav16'].abs().max().item():.3f}); wav48 bf16 max {bf['wav48']['max_rel']:.3e}; "
              f"f32-vs-f64 max: wav16 {f64['wav16']['max_rel']:.3e}, wav48 {f64['wav48']['max_rel']:.3e}")
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as fh:
        json.dump(index, fh, indent=1)
    size = dir_size(args.out)
    print(f"{args.out}: {size} bytes")
    if size > SIZE_BUDGET:
        fail(f"{args.out} holds {size} bytes, over the {SIZE_BUDGET}-byte budget")


if __name__ == "__main__":
    main()
