#!/usr/bin/env python3
"""Golden data for the op layer's video-VAE and vocoder ops (conv3d, depth_to_space3d, conv1d, conv_transpose1d,
snake; src/ops/ops.h) from the reference modules themselves: diffusers' LTX2VideoCausalConv3d and
LTX2VideoUpsampler3d (autoencoder_kl_ltx2.py at commit 58eb52c0), its vocoder's SnakeBeta, UpSample1d,
DownSample1d and AntiAliasAct1d (pipelines/ltx2/vocoder.py), and torch.nn.Conv1d / ConvTranspose1d configured as
the vocoder configures them. CPU, float32, TF32 off, fixed generators; every weight, bias and input is rounded to a
bfloat16 value first (bf16-exact), and every case stores the reference's own bfloat16 error (the module and input
in bfloat16 against the float32 output, max |diff| / rms), the bound a GPU path can be held to.

Cases (kind, in index.json):
    conv3d     LTX2VideoCausalConv3d, kernel 3: causal and non-causal time padding, zeros / reflect / replicate
               space padding, a spatial stride, a single frame
    upsample3d LTX2VideoUpsampler3d (conv, depth-to-space, the first frame dropped when the time factor is 2):
               strides (2,2,2), (2,1,1), (1,2,2), upscale_factor 1 and 2, causal and not
    conv1d     nn.Conv1d: the vocoder's conv_in (k 7), AMP-block convs (k 3 dilation 5, k 11 dilation 3, "same"),
               conv_post without bias, a strided grouped conv with reflect padding
    convt1d    nn.ConvTranspose1d: k 11 stride 5 padding 3, k 4 stride 2 padding 1, grouped with output_padding
    snake      SnakeBeta with logs (alpha and beta), and plain Snake (no beta, no logs)
    aa_act     AntiAliasAct1d("snakebeta", ratio 2, kernel 12): the replicate-padded x2 upsample (transposed
               depthwise conv with the stored filter, times 2, trimmed), SnakeBeta, the replicate-padded
               depthwise low-pass with stride 2
    hann_up3   UpSample1d(ratio 3, window "hann"): the BWE skip path's x3 upsample

Writes (under --out, normally tests/golden/ltx_ops):
    index.json          generator versions; per case: name, kind, its parameters (as the op takes them: pads,
                        strides, groups...), the shapes, bf16_err
    golden.safetensors  per case c, f32, channels-last ([T*H*W, C] video, [L, C] signals):
                        x_<c>, y_<c>, w_<c> (conv weights flattened to [rows, rest] in PyTorch order: conv3d
                        [Cout, Cin*27], conv1d [Cout, Cin/G*k], convt1d [Cin, Cout/G*k]), b_<c> (when there is a
                        bias), alpha_<c> / beta_<c> (snake, aa_act: the stored parameters), fup_<c> / fdown_<c>
                        (aa_act, hann_up3: the stored filters)

Usage, from the repository root (torch on the machine; diffusers' source at commit 58eb52c0):
    PYTHONPATH=ref/diffusers/src python3 tools/golden_ltx_ops.py --out tests/golden/ltx_ops
"""
import argparse
import json
import os

import torch
import torch.nn as nn
from safetensors.torch import save_file

import diffusers
from diffusers.models.autoencoders.autoencoder_kl_ltx2 import LTX2VideoCausalConv3d, LTX2VideoUpsampler3d
from diffusers.pipelines.ltx2.vocoder import AntiAliasAct1d, SnakeBeta, UpSample1d

DIFFUSERS_COMMIT = "58eb52c0"


def bf16_exact(t):
    return t.to(torch.bfloat16).to(torch.float32)


def round_module(m):
    for p in m.parameters():
        p.data.copy_(bf16_exact(p.data))
    return m


def bf16_err(fn, m, x, y):
    """max |f_bf16(x) - y| / rms(y) with the module and the input in bfloat16 (None where torch lacks a kernel)."""
    import copy

    try:
        mb = copy.deepcopy(m).to(torch.bfloat16)
        yb = fn(mb, x.to(torch.bfloat16)).to(torch.float32)
    except (RuntimeError, NotImplementedError):
        return None
    rms = y.pow(2).mean().sqrt().item()
    return (yb - y).abs().max().item() / max(rms, 1e-30)


def video_cl(t):
    """[1, C, T, H, W] -> [T*H*W, C]"""
    _, c, f, h, w = t.shape
    return t[0].permute(1, 2, 3, 0).reshape(f * h * w, c).contiguous()


def signal_cl(t):
    """[1, C, L] -> [L, C]"""
    return t[0].transpose(0, 1).contiguous()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/ltx_ops")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1234)
    os.makedirs(args.out, exist_ok=True)
    tensors, cases = {}, []

    def randn(*shape, scale=1.0):
        return bf16_exact(torch.randn(*shape, generator=gen) * scale)

    def put(name, **kv):
        for k, v in kv.items():
            tensors[f"{k}_{name}"] = v.detach().to(torch.float32).contiguous().clone()

    # ---- conv3d: LTX2VideoCausalConv3d ----
    conv3d = [
        # name, Cin, Cout, T, H, W, stride, space mode, causal
        ("c3_causal", 4, 6, 3, 5, 7, 1, "zeros", True),
        ("c3_noncausal", 5, 3, 4, 6, 5, 1, "zeros", False),
        ("c3_reflect", 3, 4, 2, 5, 4, 1, "reflect", False),
        ("c3_replicate", 3, 5, 3, 4, 3, 1, "replicate", True),
        ("c3_stride", 4, 4, 3, 7, 6, (1, 2, 2), "zeros", True),
        ("c3_one_frame", 6, 5, 1, 4, 5, 1, "zeros", True),
    ]
    for name, cin, cout, t, h, w, stride, mode, causal in conv3d:
        m = round_module(LTX2VideoCausalConv3d(cin, cout, kernel_size=3, stride=stride, spatial_padding_mode=mode))
        x = randn(1, cin, t, h, w)
        fn = lambda mod, inp, c=causal: mod(inp, causal=c)
        y = fn(m, x)
        st = stride if isinstance(stride, tuple) else (stride,) * 3
        cases.append({"name": name, "kind": "conv3d", "cin": cin, "cout": cout, "T": t, "H": h, "W": w,
                      "stride": list(st), "mode": {"zeros": 0, "replicate": 1, "reflect": 2}[mode],
                      "causal": causal, "out": list(y.shape[2:]), "bf16_err": bf16_err(fn, m, x, y)})
        put(name, x=video_cl(x), y=video_cl(y), w=m.conv.weight.reshape(cout, -1), b=m.conv.bias)

    # ---- upsample3d: LTX2VideoUpsampler3d (conv + depth-to-space + the dropped first frame) ----
    ups = [
        # name, Cin, Cout (module's out_channels), stride, upscale_factor, T, H, W, causal
        ("up_222", 8, 4, (2, 2, 2), 1, 2, 3, 4, False),
        ("up_211", 6, 3, (2, 1, 1), 1, 3, 2, 3, False),
        ("up_122", 5, 2, (1, 2, 2), 1, 2, 3, 3, False),
        ("up_222_f2", 4, 8, (2, 2, 2), 2, 2, 2, 3, False),
        ("up_222_causal", 4, 3, (2, 2, 2), 1, 3, 2, 2, True),
    ]
    for name, cin, cout, stride, uf, t, h, w, causal in ups:
        m = round_module(LTX2VideoUpsampler3d(cin, out_channels=cout, stride=stride, residual=False,
                                              upscale_factor=uf))
        x = randn(1, cin, t, h, w)
        fn = lambda mod, inp, c=causal: mod(inp, causal=c)
        y = fn(m, x)
        conv_out = m.conv.conv.weight.shape[0]
        cases.append({"name": name, "kind": "upsample3d", "cin": cin, "conv_out": conv_out, "cout": y.shape[1],
                      "T": t, "H": h, "W": w, "stride": list(stride), "causal": causal, "out": list(y.shape[2:]),
                      "bf16_err": bf16_err(fn, m, x, y)})
        put(name, x=video_cl(x), y=video_cl(y), w=m.conv.conv.weight.reshape(conv_out, -1), b=m.conv.conv.bias)

    # ---- conv1d / convt1d: nn.Conv1d / nn.ConvTranspose1d ----
    conv1d = [
        # name, module, L
        ("c1_conv_in", nn.Conv1d(8, 12, 7, stride=1, padding=3), 19),
        ("c1_dil5", nn.Conv1d(6, 6, 3, dilation=5, padding="same"), 23),
        ("c1_k11_dil3", nn.Conv1d(6, 6, 11, dilation=3, padding="same"), 40),
        ("c1_post", nn.Conv1d(6, 2, 7, padding=3, bias=False), 17),
        ("c1_grouped_reflect", nn.Conv1d(6, 9, 5, stride=2, groups=3, padding=2, padding_mode="reflect"), 15),
    ]
    for name, m, length in conv1d:
        round_module(m)
        x = randn(1, m.in_channels, length)
        fn = lambda mod, inp: mod(inp)
        y = fn(m, x)
        k, d = m.kernel_size[0], m.dilation[0]
        if m.padding == "same":
            total = d * (k - 1)
            pads = [total // 2, total - total // 2]
        else:
            pads = [m.padding[0], m.padding[0]]
        mode = {"zeros": 0, "replicate": 1, "reflect": 2}[m.padding_mode]
        cases.append({"name": name, "kind": "conv1d", "L": length, "cin": m.in_channels, "cout": m.out_channels,
                      "k": k, "stride": m.stride[0], "dilation": d, "groups": m.groups, "pad": pads, "mode": mode,
                      "out": y.shape[2], "bf16_err": bf16_err(fn, m, x, y)})
        put(name, x=signal_cl(x), y=signal_cl(y), w=m.weight.reshape(m.out_channels, -1))
        if m.bias is not None:
            put(name, b=m.bias)

    convt = [
        ("ct_k11_s5", nn.ConvTranspose1d(12, 6, 11, stride=5, padding=3), 9),
        ("ct_k4_s2", nn.ConvTranspose1d(6, 3, 4, stride=2, padding=1), 8),
        ("ct_grouped_outpad", nn.ConvTranspose1d(6, 6, 4, stride=2, padding=1, output_padding=1, groups=3), 7),
    ]
    for name, m, length in convt:
        round_module(m)
        x = randn(1, m.in_channels, length)
        fn = lambda mod, inp: mod(inp)
        y = fn(m, x)
        p, q = m.padding[0], m.output_padding[0]
        cases.append({"name": name, "kind": "convt1d", "L": length, "cin": m.in_channels, "cout": m.out_channels,
                      "k": m.kernel_size[0], "stride": m.stride[0], "groups": m.groups, "crop": [p, p - q],
                      "out": y.shape[2], "bf16_err": bf16_err(fn, m, x, y)})
        put(name, x=signal_cl(x), y=signal_cl(y), w=m.weight.reshape(m.in_channels, -1), b=m.bias)

    # ---- snake ----
    for name, logscale, use_beta in (("snakebeta_log", True, True), ("snake_plain", False, False)):
        c, length = 7, 29
        m = SnakeBeta(c, logscale=logscale, use_beta=use_beta)
        if logscale:
            m.alpha.data.copy_(randn(c, scale=0.5))
            m.beta.data.copy_(randn(c, scale=0.5))
        else:
            m.alpha.data.copy_(bf16_exact(0.5 + torch.rand(c, generator=gen)))
        x = randn(1, c, length, scale=2.0)
        fn = lambda mod, inp: mod(inp)
        y = fn(m, x)
        cases.append({"name": name, "kind": "snake", "L": length, "C": c, "logscale": logscale, "beta": use_beta,
                      "eps": m.eps, "bf16_err": bf16_err(fn, m, x, y)})
        put(name, x=signal_cl(x), y=signal_cl(y), alpha=m.alpha.data)
        if use_beta:
            put(name, beta=m.beta.data)

    # ---- aa_act: AntiAliasAct1d("snakebeta") ----
    c, length = 5, 21
    m = AntiAliasAct1d("snakebeta", ratio=2, kernel_size=12, channels=c)
    m.act.alpha.data.copy_(randn(c, scale=0.5))
    m.act.beta.data.copy_(randn(c, scale=0.5))
    x = randn(1, c, length)
    fn = lambda mod, inp: mod(inp)
    y = fn(m, x)
    up, down = m.upsample, m.downsample
    cases.append({"name": "aa_act", "kind": "aa_act", "L": length, "C": c, "ratio": up.ratio,
                  "k_up": up.kernel_size, "up_pad": up.pad, "up_crop": [up.pad_left, up.pad_right],
                  "k_down": down.kernel_size, "down_pad": [down.pad_left, down.pad_right], "eps": m.act.eps,
                  "out": y.shape[2], "bf16_err": bf16_err(fn, m, x, y)})
    put("aa_act", x=signal_cl(x), y=signal_cl(y), alpha=m.act.alpha.data, beta=m.act.beta.data,
        fup=up.filter.reshape(-1), fdown=down.filter.reshape(-1))

    # ---- hann_up3: UpSample1d(ratio 3, "hann") ----
    c, length = 2, 13
    m = UpSample1d(ratio=3, window_type="hann")
    x = randn(1, c, length)
    fn = lambda mod, inp: mod(inp)
    y = fn(m, x)
    cases.append({"name": "hann_up3", "kind": "hann_up3", "L": length, "C": c, "ratio": m.ratio, "k": m.kernel_size,
                  "pad": m.pad, "crop": [m.pad_left, m.pad_right], "out": y.shape[2],
                  "bf16_err": bf16_err(fn, m, x, y)})
    put("hann_up3", x=signal_cl(x), y=signal_cl(y), fup=m.filter.reshape(-1))

    save_file(tensors, os.path.join(args.out, "golden.safetensors"))
    index = {"generator": {"torch": torch.__version__, "diffusers": diffusers.__version__,
                           "diffusers_commit": DIFFUSERS_COMMIT, "script": "tools/golden_ltx_ops.py"},
             "cases": cases}
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)
    print(f"wrote {len(cases)} cases, {len(tensors)} tensors to {args.out}")


if __name__ == "__main__":
    main()
