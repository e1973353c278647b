#!/usr/bin/env python3
"""Golden data for the Qwen2.5-VL language model with image tokens (sectioned multimodal RoPE, image rows injected),
and for Qwen3-VL's (interleaved multimodal RoPE) on the same inputs.

Reads the tiny random models tools/golden_qwen3.py wrote (tests/golden/qwen3/qwen25vl_a and qwen3vl_a) and writes
mrope.safetensors next to each, for two sequences of text and images (case `one`: one image, `two`: two images of
different grids), each <|vision_start|> <|image_pad|> * k <|vision_end|> as the processor expands them:
    mrope_ids_<c>     i32 [T]           the token ids
    mrope_grid_<c>    i32 [N, 3]        image_grid_thw of each image (patch grid, before the 2x2 merge)
    mrope_pos_<c>     i32 [3, T]        position ids from the model's own get_rope_index
    mrope_image_<c>   f32 [K, H]        the vectors that replace the K <|image_pad|> rows (fixed random ones,
                                        standing in for the vision tower's output)
    mrope_hidden_<c>  f32 [L+1, T, H]   input embeddings (after the replacement), then every decoder layer's output
                                        (the last one BEFORE the final norm; captured with hooks)
    mrope_normed_<c>  f32 [T, H]        the final norm's output
The model runs with `inputs_embeds` (the embedding table's rows, image rows replaced as masked_scatter does) and
those position ids, so no vision tower is involved.

Usage (from the repository root; needs torch, transformers, tokenizers):
    python3 tools/golden_qwen25vl_mrope.py [--model tests/golden/qwen3/qwen25vl_a ...]
Qwen3-VL's vision tower (and its deepstack rows) is not involved either: only the language model runs.
"""
import argparse
import inspect
import os

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import AutoConfig, Qwen2_5_VLForConditionalGeneration, Qwen3VLForConditionalGeneration

CLASSES = {"qwen2_5_vl": Qwen2_5_VLForConditionalGeneration, "qwen3_vl": Qwen3VLForConditionalGeneration}

# (text before, grid) pairs, then the text after the last image
CASES = {
    "one": ([("Picture 1: ", (1, 4, 6))], "Make the circle red."),
    "two": ([("Picture 1: ", (1, 4, 6)), ("Picture 2: ", (1, 6, 8))], "Swap the two objects, keep the background."),
}


def text_model(model):
    inner = model.model
    return getattr(inner, "language_model", inner)


def build_ids(tok, cfg, parts, tail, merge):
    ids = []
    for text, (t, h, w) in parts:
        ids += tok.encode(text).ids
        ids += [cfg.vision_start_token_id] + [cfg.image_token_id] * (t * h * w // (merge * merge))
        ids += [cfg.vision_end_token_id]
    ids += tok.encode(tail).ids
    return torch.tensor(ids, dtype=torch.long)


def rope_index(model, ids, grid, image_token_id):
    """The model's get_rope_index for one sequence, whichever signature this transformers version has."""
    fn = model.model.get_rope_index
    kw = dict(input_ids=ids[None], image_grid_thw=grid)
    if "mm_token_type_ids" in inspect.signature(fn).parameters:
        kw["mm_token_type_ids"] = (ids[None] == image_token_id).to(torch.int32)
        pos, _ = fn(**kw)
        return pos[:, 0]  # [3, T]
    # older versions tell images from videos by token id, and this config gives both the same one
    cfg = model.model.config
    saved, cfg.video_token_id = cfg.video_token_id, -1
    try:
        pos, _ = fn(**kw)
    finally:
        cfg.video_token_id = saved
    return pos[:, 0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", nargs="+", default=["tests/golden/qwen3/qwen25vl_a", "tests/golden/qwen3/qwen3vl_a"])
    ap.add_argument("--seed", type=int, default=25)
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    for folder in args.model:
        make(folder, args.seed)


def make(folder, seed):
    cls = CLASSES[AutoConfig.from_pretrained(folder).model_type]
    model = cls.from_pretrained(folder, dtype=torch.float32).eval()
    cfg = model.config
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    merge = cfg.vision_config.spatial_merge_size
    tm = text_model(model)
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for key, (parts, tail) in CASES.items():
        ids = build_ids(tok, cfg, parts, tail, merge)
        grid = torch.tensor([g for _, g in parts], dtype=torch.long)
        pos = rope_index(model, ids, grid, cfg.image_token_id)
        mask = ids == cfg.image_token_id
        k = int(mask.sum())
        image = torch.randn((k, cfg.text_config.hidden_size), generator=gen)
        emb = tm.embed_tokens(ids[None])
        emb = emb.masked_scatter(mask[None, :, None].expand_as(emb), image)

        outs, normed = [], []
        hooks = [layer.register_forward_hook(lambda m, a, o: outs.append((o[0] if isinstance(o, tuple) else o)[0]))
                 for layer in tm.layers]
        hooks.append(tm.norm.register_forward_hook(lambda m, a, o: normed.append(o[0])))
        try:
            model(inputs_embeds=emb, position_ids=pos[:, None, :], use_cache=False)
        finally:
            for h in hooks:
                h.remove()
        tensors[f"mrope_ids_{key}"] = ids.to(torch.int32)
        tensors[f"mrope_grid_{key}"] = grid.to(torch.int32)
        tensors[f"mrope_pos_{key}"] = pos.to(torch.int32).contiguous()
        tensors[f"mrope_image_{key}"] = image.contiguous()
        tensors[f"mrope_hidden_{key}"] = torch.stack([emb[0]] + outs).contiguous()
        tensors[f"mrope_normed_{key}"] = normed[0].contiguous()
        print(f"{folder} {key}: T={len(ids)} image rows={k} pos t={pos[0].tolist()}")
        print(f"      h={pos[1].tolist()}\n      w={pos[2].tolist()}")
    save_file(tensors, os.path.join(folder, "mrope.safetensors"))


if __name__ == "__main__":
    main()
