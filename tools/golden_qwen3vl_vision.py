#!/usr/bin/env python3
"""Golden data for the Qwen3-VL vision tower (the `visual` part of Qwen3VLForConditionalGeneration, which
Qwen-Image-2.1 runs on condition images) and for the deepstack rows its language model adds to its first layers,
tiny and random, on the CPU in float32.

The tiny configuration: vision depth 4, hidden 32, 2 heads, intermediate 48, patch 16, temporal patch 2, spatial
merge 2, 36 learned position embeddings (a 6 x 6 grid, interpolated to each image's grid), deepstack mergers after
blocks 0 and 2, out_hidden_size 32 = the language model's width (3 layers, 2 heads over 1 kv head, head_dim 16,
interleaved multimodal RoPE [2, 3, 3]). Every parameter of the whole model is re-randomised from a fixed generator
(norm weights 1 + 0.2 randn, the position table 0.5 randn, other matrices and the patch kernel randn / sqrt(fan_in),
biases 0.1 randn), rounded to values bf16 holds exactly.

Writes (under --out, normally tests/golden/qwen3vl_vision):
    model/                     the Hugging Face folder (config.json, model.safetensors in bf16: exact)
    golden.safetensors         per vision case c:
        <c>.grid         i32 [n_img, 3]   image_grid_thw
        <c>.embed        f32 [N, 32]      the patch embedding plus the interpolated position embedding (block 0's
                                          input)
        <c>.block_<i>    f32 [N, 32]      block i's output, every block (the last one is the mergers' input)
        <c>.deepstack_<k> f32 [N/4, 32]   deepstack merger k's output (after block deepstack_visual_indexes[k])
        <c>.out          f32 [N/4, 32]    the merger's output (the rows that replace <|image_pad|>)
      the two-image case "ab" keeps only the last block, the deepstack outputs and out; per image i (a, b, v):
        <i>.pixels_q     i8  [N_i, 1536]  pixel_values = pixels_q / 32 (every value exact in bf16 and f32)
      and the language model on a sequence with both images of case "ab" (their features from the tower above):
        lm.ids           i32 [T]          text ids, <|vision_start|> <|image_pad|> * K <|vision_end|> per image
        lm.pos           i32 [3, T]       the model's own get_rope_index positions
        lm.hidden        f32 [L+1, T, 32] the input embeddings (image rows replaced by "ab".out), then the state
                                          after each decoder layer with the deepstack rows added (what the next
                                          layer reads; the last is the final norm's input)
        lm.normed        f32 [T, 32]      the final norm's output
    index.json                 versions, per-case shapes, output RMS and the reference's own bf16 error:
        bf16_max_rel = max|ref_bf16 - ref_f32| / rms(ref_f32),   bf16_rms_rel = rms(ref_bf16 - ref_f32) / rms(ref_f32)
      (for out, the deepstack outputs taken together, the last block, and the language model's last state)

Usage (needs torch and transformers), from the repository root:
    PYTHONPATH=ref/diffusers/src:tools python3 tools/golden_qwen3vl_vision.py --out tests/golden/qwen3vl_vision
"""
import argparse
import copy
import inspect
import json
import os

import torch
import transformers
from safetensors.torch import save_file
from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

VISION = dict(depth=4, hidden_size=32, intermediate_size=48, num_heads=2, out_hidden_size=32, patch_size=16,
              spatial_merge_size=2, temporal_patch_size=2, in_channels=3, num_position_embeddings=36,
              deepstack_visual_indexes=[0, 2], hidden_act="gelu_pytorch_tanh")
TEXT = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
            num_key_value_heads=1, head_dim=16, max_position_embeddings=512, rms_norm_eps=1e-6,
            attention_bias=False,
            rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [2, 3, 3],
                             "mrope_interleaved": True})
TOKENS = dict(image_token_id=60, video_token_id=61, vision_start_token_id=62, vision_end_token_id=63)
# grids (t, h, w) in patches: a wider and taller one than the 6 x 6 table, one narrower in h, two frames
IMAGES = {"a": (1, 8, 12), "b": (1, 4, 10), "v": (2, 4, 6)}
CASES = {"a": ["a"], "b": ["b"], "v": ["v"], "ab": ["a", "b"]}
# the language-model sequence: text ids (below the special ones) around the two images of case "ab"
LM_TEXT = [[5, 17, 33], [8, 9], [40, 41, 42]]
PIX_SCALE = 32.0


def randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


def randomise(model, gen):
    norms = {f"{mn}.{pn}" if mn else pn for mn, mod in model.named_modules() if "Norm" in type(mod).__name__
             for pn, _ in mod.named_parameters(recurse=False) if pn == "weight"}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in norms:
                v = 1.0 + 0.2 * randn(gen, *p.shape)
            elif name.endswith("pos_embed.weight"):
                v = 0.5 * randn(gen, *p.shape)
            elif p.ndim >= 2:
                v = randn(gen, *p.shape) / p[0].numel() ** 0.5
            else:
                v = 0.1 * randn(gen, *p.shape)
            v = v.to(torch.bfloat16).double()
            v[v.abs() < 2.0 ** -14] = 0
            p.copy_(v.to(p.dtype))


def restore_inv_freq(model, pristine):
    """Put back the rotary inv_freq buffers as construction formed them (float32). They are not persistent, so
    neither saved nor loaded, but a cast to bf16 and back rounds them, which no model the reference loads has."""
    for name, buf in pristine.items():
        mod_name, leaf = name.rsplit(".", 1)
        model.get_submodule(mod_name)._buffers[leaf] = buf.clone()


def rel_errs(ref, got):
    ref, got = ref.double(), got.double()
    rms = ref.pow(2).mean().sqrt().item()
    d = got - ref
    return d.abs().max().item() / rms, d.pow(2).mean().sqrt().item() / rms, rms


def c32(t):
    return t.detach().to(torch.float32).contiguous().clone()


def first_arg(args, kwargs):
    """A module's hidden-state input, passed by position or by name."""
    return args[0] if args else kwargs.get("hidden_states")


def run_vision(vis, pixels, grid):
    """The merged output, the deepstack outputs, every block's output and block 0's input."""
    taps, embed = [], []
    hooks = [b.register_forward_hook(lambda m, a, o: taps.append(o[0] if isinstance(o, tuple) else o))
             for b in vis.blocks]
    hooks.append(vis.blocks[0].register_forward_pre_hook(lambda m, a, kw: embed.append(first_arg(a, kw)),
                                                         with_kwargs=True))
    try:
        res = vis(pixels, grid_thw=grid)
    finally:
        for h in hooks:
            h.remove()
    if isinstance(res, (tuple, list)):
        out, deep = res[0], res[1]
    else:
        out, deep = res.pooler_output, res.deepstack_features
    if out is None or deep is None:
        raise SystemExit("the vision tower returned no merged output or no deepstack features")
    assert len(taps) == len(vis.blocks) and len(embed) == 1 and embed[0] is not None
    return out, list(deep), taps, embed[0]


def rope_index(model, ids, grid):
    """The model's own get_rope_index for one sequence ([3, T]), whichever signature this version has."""
    fn = model.model.get_rope_index
    kw = dict(input_ids=ids[None], image_grid_thw=grid)
    params = inspect.signature(fn).parameters
    if "mm_token_type_ids" in params:
        kw["mm_token_type_ids"] = (ids[None] == TOKENS["image_token_id"]).to(torch.int32)
    pos, _ = fn(**kw)
    return pos[:, 0]


def run_lm(model, emb, pos, mask, deep):
    """The language model on input embeddings with the deepstack rows: every layer's input (the state after the
    previous layer, deepstack rows included), the final norm's input and output."""
    tm = model.model.language_model
    ins, final, normed = [], [], []
    hooks = [layer.register_forward_pre_hook(lambda m, a, kw: ins.append(first_arg(a, kw)), with_kwargs=True)
             for layer in tm.layers]
    hooks.append(tm.norm.register_forward_pre_hook(lambda m, a, kw: final.append(first_arg(a, kw)),
                                                   with_kwargs=True))
    hooks.append(tm.norm.register_forward_hook(lambda m, a, o: normed.append(o)))
    params = inspect.signature(tm.forward).parameters
    kw = dict(inputs_embeds=emb, position_ids=pos[:, None, :], use_cache=False)
    manual = "deepstack_visual_embeds" not in params
    if manual:
        # a version whose text model takes no deepstack rows: add them after the first layers as the reference's
        # _deepstack_process does (each layer's output, image rows only)
        def adder(k):
            def hook(m, a, o):
                h = o[0] if isinstance(o, tuple) else o
                h = h.clone()
                h[mask] = h[mask] + deep[k].to(h.dtype)
                return (h,) + tuple(o[1:]) if isinstance(o, tuple) else h
            return hook
        hooks += [tm.layers[k].register_forward_hook(adder(k)) for k in range(len(deep))]
    else:
        kw.update(visual_pos_masks=mask, deepstack_visual_embeds=deep)
    try:
        tm(**kw)
    finally:
        for h in hooks:
            h.remove()
    if any(x is None for x in ins) or not final or final[0] is None:
        raise SystemExit("a decoder layer was called without a positional hidden state: the hooks cannot tap it")
    states = [x[0] for x in ins] + [final[0][0]]
    return torch.stack(states), normed[0][0], manual


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/golden/qwen3vl_vision")
    ap.add_argument("--seed", type=int, default=3007)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)

    config = Qwen3VLConfig(text_config=dict(TEXT), vision_config=dict(VISION), tie_word_embeddings=False, **TOKENS)
    model = Qwen3VLForConditionalGeneration(config).float().eval()
    pristine = {n: b.detach().clone() for n, b in model.named_buffers() if n.endswith("inv_freq")}
    assert pristine and all(b.dtype == torch.float32 for b in pristine.values())
    randomise(model, gen)
    mdir = os.path.join(args.out, "model")
    model.to(torch.bfloat16).save_pretrained(mdir, safe_serialization=True)
    # the weights are bf16 values: the f32 model and the bf16 one hold exactly what the folder does; both keep the
    # float32 RoPE frequencies a loaded model has
    model_b = copy.deepcopy(model).eval()
    model.float()
    restore_inv_freq(model, pristine)
    restore_inv_freq(model_b, pristine)
    vis, vis_b = model.model.visual, model_b.model.visual

    merge = VISION["spatial_merge_size"]
    unit = merge * merge
    dim = VISION["in_channels"] * VISION["temporal_patch_size"] * VISION["patch_size"] ** 2
    tensors, pix = {}, {}
    for name, (t, h, w) in IMAGES.items():
        q = torch.randint(-64, 65, (t * h * w, dim), generator=gen, dtype=torch.int64).to(torch.int8)
        tensors[f"{name}.pixels_q"] = q.contiguous()
        pix[name] = q.to(torch.float32) / PIX_SCALE

    index = dict(transformers=transformers.__version__, torch=torch.__version__, seed=args.seed, vision=VISION,
                 text=TEXT, tokens=TOKENS, pixel_scale=1.0 / PIX_SCALE, cases={})
    feats = {}
    for case, imgs in CASES.items():
        grid = torch.tensor([IMAGES[i] for i in imgs], dtype=torch.int64)
        pixels = torch.cat([pix[i] for i in imgs], 0)
        n = pixels.shape[0]
        out, deep, taps, embed = run_vision(vis, pixels, grid)
        out_b, deep_b, taps_b, _ = run_vision(vis_b, pixels.to(torch.bfloat16), grid)
        assert out.shape == (n // unit, VISION["out_hidden_size"])
        assert len(deep) == len(VISION["deepstack_visual_indexes"])
        feats[case] = (out, deep, out_b, deep_b)
        mx, rm, rms = rel_errs(out, out_b.float())
        dmx, drm, drms = rel_errs(torch.cat(deep), torch.cat(deep_b).float())
        pmx, prm, prms = rel_errs(taps[-1], taps_b[-1].float())
        tensors[f"{case}.grid"] = grid.to(torch.int32).contiguous()
        tensors[f"{case}.out"] = c32(out)
        for k, d in enumerate(deep):
            tensors[f"{case}.deepstack_{k}"] = c32(d)
        tensors[f"{case}.block_{VISION['depth'] - 1}"] = c32(taps[-1])
        if len(imgs) == 1:  # the two-image case keeps only its outputs (size)
            tensors[f"{case}.embed"] = c32(embed)
            for i in range(VISION["depth"] - 1):
                tensors[f"{case}.block_{i}"] = c32(taps[i])
        index["cases"][case] = dict(images=imgs, grid=grid.tolist(), patches=n, out=list(out.shape), out_rms=rms,
                                    bf16_max_rel=mx, bf16_rms_rel=rm, deepstack_rms=drms,
                                    deepstack_bf16_max_rel=dmx, deepstack_bf16_rms_rel=drm, last_block_rms=prms,
                                    last_block_bf16_max_rel=pmx, last_block_bf16_rms_rel=prm)
        print(f"{case}: grid {grid.tolist()}, out {list(out.shape)} rms {rms:.4f}, bf16 max {mx:.3e} rms {rm:.3e}; "
              f"deepstack bf16 max {dmx:.3e}; last block bf16 max {pmx:.3e}")

    # the language model on both images of case "ab", their rows and deepstack rows from the tower
    ids = []
    grid_ab = [IMAGES[i] for i in CASES["ab"]]
    for k, (t, h, w) in enumerate(grid_ab):
        ids += LM_TEXT[k] + [TOKENS["vision_start_token_id"]] + [TOKENS["image_token_id"]] * (t * h * w // unit)
        ids += [TOKENS["vision_end_token_id"]]
    ids += LM_TEXT[-1]
    ids = torch.tensor(ids, dtype=torch.long)
    grid_t = torch.tensor(grid_ab, dtype=torch.long)
    pos = rope_index(model, ids, grid_t)
    mask = (ids == TOKENS["image_token_id"])[None]
    out, deep, out_b, deep_b = feats["ab"]
    assert int(mask.sum()) == out.shape[0]

    def embeds(m, rows):
        e = m.model.language_model.embed_tokens(ids[None])
        return e.masked_scatter(mask[..., None].expand_as(e), rows.to(e.dtype))

    hidden, normed, manual = run_lm(model, embeds(model, out), pos, mask, deep)
    hidden_b, _, _ = run_lm(model_b, embeds(model_b, out_b), pos, mask, [d.to(torch.bfloat16) for d in deep_b])
    lmx, lrm, lrms = rel_errs(hidden[-1], hidden_b[-1].float())
    tensors["lm.ids"] = ids.to(torch.int32)
    tensors["lm.pos"] = pos.to(torch.int32).contiguous()
    tensors["lm.hidden"] = c32(hidden)
    tensors["lm.normed"] = c32(normed)
    lm = dict(tokens=len(ids), image_rows=int(mask.sum()), layers=TEXT["num_hidden_layers"], last_rms=lrms,
              bf16_max_rel=lmx, bf16_rms_rel=lrm, deepstack_added_by_hooks=manual)

    # the same sequence through the whole model from pixels, as a cross-check of the path above (recorded in
    # index.json as lm.whole_model_max_abs_diff, or why it could not run; the test reads it)
    try:
        pixels_ab = torch.cat([pix[i] for i in CASES["ab"]], 0)
        final = []
        hk = model.model.language_model.norm.register_forward_pre_hook(
            lambda m, a, kw: final.append(first_arg(a, kw)), with_kwargs=True)
        kw = dict(input_ids=ids[None], pixel_values=pixels_ab, image_grid_thw=grid_t, use_cache=False)
        if "mm_token_type_ids" in inspect.signature(model.forward).parameters:
            kw["mm_token_type_ids"] = mask.to(torch.int32)
        try:
            model(**kw)
        finally:
            hk.remove()
        d = (final[0][0] - hidden[-1]).abs().max().item()
        lm["whole_model_max_abs_diff"] = d
        print(f"whole model from pixels vs the path above: max |diff| {d:.3e}"
              + ("" if d <= 1e-4 * max(1.0, lrms) else "  WARNING: larger than 1e-4 of the state's RMS"))
    except Exception as e:  # noqa: BLE001 - the cross-check is optional; its absence is recorded
        lm["whole_model_check"] = f"not run: {type(e).__name__}: {e}"
        print(lm["whole_model_check"])
    index["lm"] = lm
    print(f"lm: T={len(ids)} image rows={int(mask.sum())} pos {pos.tolist()}")
    print(f"lm: last state rms {lrms:.4f}, bf16 max {lmx:.3e} rms {lrm:.3e}; deepstack by hooks: {manual}")

    save_file(tensors, os.path.join(args.out, "golden.safetensors"),
              metadata={"transformers": transformers.__version__})
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
