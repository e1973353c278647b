#!/usr/bin/env python3
"""Golden data for the Gemma-4 text tower (src/models/gemma4.h; LTX-2.5's prompt encoder), checked by
tests/unit/test_gemma4.c.

Writes into --out:
    model/               a Hugging Face folder of a tiny random Gemma4ForCausalLM (config.json,
                         model.safetensors): 6 layers, sliding, sliding, full, sliding, sliding, full; GQA (4 query
                         heads over 2 KV heads) on sliding layers, attention_k_eq_v with one KV head and a head twice
                         as wide on full layers, sliding_window 5, proportional RoPE (partial 0.25, theta 1e6) on
                         full layers, default RoPE (theta 1e4) on sliding ones, no per-layer input embeddings. Every
                         parameter re-initialised from a fixed generator (norm weights 1 + 0.2 randn, others
                         0.15 randn), every layer_scalar set away from 1, all rounded to bf16 (so the f32 folder and
                         a bf16 copy hold the same weights).
    golden.safetensors   per case c:
                             ids_<c>     i32 [T]             token ids
                             mask_<c>    i32 [T]             attention mask (1 real, 0 pad; left padding)
                             hidden_<c>  f32 [L+1, T, H]     transformers' hidden_states (output_hidden_states=True):
                                                             0 the scaled embeddings, l the output of layer l-1,
                                                             L the final norm's output
    index.json           the versions, the config, and per case: name, T, pads, bf16_err = max over hidden states
                         of max|bf16 run - f32 run| / RMS(f32 run) over the real rows (the bf16 copy of the same
                         model on the CPU), and that per hidden state.
Cases: "short" (4 tokens), "long" (13 tokens, longer than two windows), "padded" (12 tokens, the first 4 left
pads with mask 0, as the LTX pipeline pads).

The reference run is f32 on the CPU with TF32 off and eager attention. Pad rows are not compared by the test
(the reference leaves them to the attention kernel's handling of fully masked rows).

Usage (needs torch and a transformers with Gemma-4, models/gemma4):
    PYTHONPATH=tools python3 tools/golden_gemma4.py --out tests/golden/gemma4
With --unified the same model is built as Gemma4UnifiedForCausalLM (models/gemma4_unified, the class of LTX-2.5's
text encoder); the test reads either folder.
"""
import argparse
import copy
import json
import os
import sys

try:
    import torch
except ImportError as e:
    sys.exit(f"golden_gemma4: needs torch ({e})")

LAYER_TYPES = ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
               "full_attention"]
CONFIG = dict(vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=len(LAYER_TYPES),
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=32,
              num_global_key_value_heads=1, attention_k_eq_v=True, sliding_window=5, layer_types=LAYER_TYPES,
              rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                  "rope_theta": 1000000.0}},
              rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh", hidden_size_per_layer_input=0,
              num_kv_shared_layers=0, enable_moe_block=False, max_position_embeddings=256, tie_word_embeddings=True,
              pad_token_id=0, eos_token_id=1, bos_token_id=2, final_logit_softcapping=None)


# keys gemma4_unified's text config does not have (its class fixes them)
NOT_UNIFIED = ("hidden_size_per_layer_input", "num_kv_shared_layers", "enable_moe_block")


def need_gemma4(unified):
    try:
        import transformers
    except ImportError as e:
        sys.exit(f"golden_gemma4: transformers is not installed ({e})")
    names = ("Gemma4UnifiedTextConfig", "Gemma4UnifiedForCausalLM") if unified else ("Gemma4TextConfig",
                                                                                      "Gemma4ForCausalLM")
    try:
        Config, Model = (getattr(transformers, n) for n in names)
    except AttributeError as e:
        sys.exit(f"golden_gemma4: the installed transformers {transformers.__version__} has no Gemma-4"
                 f"{' unified' if unified else ''} ({' / '.join(names)}: {e}); install a release with "
                 f"models/{'gemma4_unified' if unified else 'gemma4'}")
    return transformers, Config, Model


def bf16_exact(t):
    return t.to(torch.bfloat16).to(torch.float32)


def make_model(Config, Model, seed, unified):
    config = Config(**{k: v for k, v in CONFIG.items() if not (unified and k in NOT_UNIFIED)})
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = Model(config).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g)
            v = 1.0 + 0.2 * r if name.endswith("norm.weight") else 0.15 * r
            p.copy_(bf16_exact(v))
        n_scalars = 0
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                layer = int(name.split(".layers.")[1].split(".")[0])
                b.copy_(bf16_exact(torch.full(b.shape, 0.55 + 0.1 * layer)))
                n_scalars += 1
        if n_scalars != len(LAYER_TYPES):
            sys.exit(f"golden_gemma4: found {n_scalars} layer_scalar buffers, expected {len(LAYER_TYPES)}")
    return model, config


def check_model(model, config):
    """The features the C tower implements, as this transformers builds them."""
    text = model.model
    if getattr(text, "hidden_size_per_layer_input", 0):
        sys.exit("golden_gemma4: the model has per-layer input embeddings; the config did not turn them off")
    for i, layer in enumerate(text.layers):
        att = layer.self_attn
        full = LAYER_TYPES[i] == "full_attention"
        want_hd = CONFIG["global_head_dim"] if full else CONFIG["head_dim"]
        if att.head_dim != want_hd:
            sys.exit(f"golden_gemma4: layer {i} head_dim {att.head_dim}, expected {want_hd}")
        if full and getattr(att, "v_proj", None) is not None:
            sys.exit(f"golden_gemma4: full layer {i} has a v_proj although attention_k_eq_v is set")
        if att.scaling != 1.0:
            sys.exit(f"golden_gemma4: layer {i} attention scaling {att.scaling}, expected 1.0")


def run(model, ids, mask):
    with torch.no_grad():
        out = model.model(input_ids=ids, attention_mask=mask, output_hidden_states=True, use_cache=False)
    hs = out.hidden_states
    if len(hs) != len(LAYER_TYPES) + 1:
        sys.exit(f"golden_gemma4: {len(hs)} hidden states, expected {len(LAYER_TYPES) + 1}")
    if not torch.equal(hs[-1], out.last_hidden_state):
        sys.exit("golden_gemma4: hidden_states[-1] is not the final norm's output; the test's convention "
                 "(src/models/gemma4.h) needs revisiting")
    return torch.stack([h[0].float() for h in hs])  # [L+1, T, H]


def rel_err(a, ref, pads):
    a, ref = a[:, pads:].double(), ref[:, pads:].double()
    per = []
    for l in range(ref.shape[0]):
        rms = ref[l].pow(2).mean().sqrt().item()
        per.append((a[l] - ref[l]).abs().max().item() / (rms if rms > 0 else 1.0))
    return max(per), per


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--unified", action="store_true",
                    help="build Gemma4UnifiedForCausalLM (model_type gemma4_unified_text, LTX-2.5's encoder class) "
                         "instead of Gemma4ForCausalLM")
    args = ap.parse_args()
    transformers, Config, Model = need_gemma4(args.unified)
    from safetensors.torch import save_file

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    model, config = make_model(Config, Model, args.seed, args.unified)
    check_model(model, config)
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(os.path.join(args.out, "model"), safe_serialization=True)
    model16 = copy.deepcopy(model).to(torch.bfloat16)
    # as a bf16 checkpoint loads: weights and activations in bf16, the RoPE frequencies still f32
    for mod in model16.modules():
        for bname, buf in list(mod.named_buffers(recurse=False)):
            if "inv_freq" in bname:
                setattr(mod, bname, buf.float())

    g = torch.Generator().manual_seed(args.seed + 1)
    V = CONFIG["vocab_size"]
    cases = [("short", 4, 0), ("long", 13, 0), ("padded", 12, 4)]
    tensors, index = {}, []
    for name, T, pads in cases:
        real = torch.randint(3, V, (T - pads,), generator=g)
        real[0] = CONFIG["bos_token_id"]  # the LTX pipeline starts every prompt with BOS
        ids = torch.cat([torch.full((pads,), CONFIG["pad_token_id"], dtype=torch.long), real])[None]
        mask = torch.cat([torch.zeros(pads, dtype=torch.long), torch.ones(T - pads, dtype=torch.long)])[None]
        ref = run(model, ids, mask)
        got16 = run(model16, ids, mask)
        worst, per = rel_err(got16, ref, pads)
        tensors[f"ids_{name}"] = ids[0].to(torch.int32).contiguous()
        tensors[f"mask_{name}"] = mask[0].to(torch.int32).contiguous()
        tensors[f"hidden_{name}"] = ref.contiguous()
        index.append(dict(name=name, T=T, pads=pads, bf16_err=worst, bf16_err_per_state=per))
        print(f"{name}: T {T}, {pads} pads, bf16 run max|d|/rms {worst:.3g}")
    save_file(tensors, os.path.join(args.out, "golden.safetensors"))
    meta = dict(generator="tools/golden_gemma4.py", transformers=transformers.__version__, torch=torch.__version__,
                seed=args.seed, unified=args.unified, model_class=Model.__name__, config=CONFIG,
                hidden_states="0 = scaled embeddings, l = output of decoder layer l-1, L = final norm output",
                cases=index)
    with open(os.path.join(args.out, "index.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
