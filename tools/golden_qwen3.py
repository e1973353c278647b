#!/usr/bin/env python3
"""Golden data for the Qwen3 / Qwen3-VL text towers, the Qwen2.5-VL one (Qwen-Image's), and for `cortiq run`.

For each tiny random configuration this writes a Hugging Face model folder (config.json, model.safetensors,
tokenizer.json, tokenizer_config.json with the chat template) and `golden.safetensors` holding, for a few
prompts:
    ids_<p>        i32 [T]           the prompt token ids
    hidden_<p>     f32 [L+1, T, H]   input embeddings, then every decoder layer's output (the last one BEFORE
                                     the final norm, captured with hooks so the transformers version does
                                     not matter)
    normed_<p>     f32 [T, H]        the final norm's output
    logits_<p>     f32 [T, V]
    greedy_<p>     i32 [32]          greedy continuation (argmax, no sampling), 32 new tokens
    chat_ids       i32 [T]           the chat-template rendering of a fixed conversation, tokenized

The tokenizer is a small byte-level BPE trained here on a fixed text (Qwen's split regex, its special tokens)
so the embedding tables stay small; the chat template is Qwen3's (passed with --chat-template).

Usage (needs torch, transformers, tokenizers):
    python3 tools/golden_qwen3.py --chat-template tests/fixtures/chat_templates/qwen3.jinja --out tests/golden/qwen3 \
        [--only qwen25vl_a]
Each configuration keeps its seed (--seed + its index in CONFIGS), so --only remakes one folder as a full run would.
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen3Config, Qwen3ForCausalLM,
                          Qwen3VLConfig, Qwen3VLForConditionalGeneration)

QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
              r"|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
            "<|vision_start|>", "<|vision_end|>", "<|image_pad|>"]
CORPUS = [
    "The quick brown fox jumps over the lazy dog. A red circle sits on a blue background.",
    "You are a helpful assistant. Hello! How are you today? I am fine, thank you.",
    "Numbers like 12345 and 3.14159 appear in text; so do symbols: #, $, %, &, (, ), *, +.",
    "def main():\n    print('hello world')\n    return 0\n",
    "Qwen is a family of language models. Comprehend and analyze the provided prompt.",
    "Die Katze schläft. Le chat dort. El gato duerme. 猫在睡觉。 고양이가 잔다.",
] * 20

PROMPTS = {
    "a": "Hello! How are you today?",
    "b": "A red circle sits on a blue background, and 12345 numbers.",
}

CONFIGS = {
    # untied embeddings, GQA 4 q heads over 2 kv heads
    "qwen3_a": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, rope_theta=1000000.0, tie_word_embeddings=False),
    # tied embeddings, head_dim 32, multi-query
    "qwen3_b": dict(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=2,
                    num_key_value_heads=1, head_dim=32, rope_theta=10000.0, tie_word_embeddings=True),
    # the language half of Qwen3-VL (interleaved multimodal RoPE; text-only input)
    "qwen3vl_a": dict(hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=16, rope_theta=5000000.0, tie_word_embeddings=False,
                      vl=True),
    # the language half of Qwen2.5-VL (q/k/v biases, no q/k norm, sectioned multimodal RoPE; text-only input)
    "qwen25vl_a": dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=16, rope_theta=1000000.0, tie_word_embeddings=False,
                       vl="qwen2.5"),
}


def make_model(cfg, vocab, tok):
    cfg = dict(cfg)
    vl = cfg.pop("vl", False)
    theta = cfg.pop("rope_theta")
    common = dict(vocab_size=vocab, max_position_embeddings=512, rms_norm_eps=1e-6, attention_bias=False)
    if not vl:
        config = Qwen3Config(bos_token_id=None, eos_token_id=tok.token_to_id("<|im_end|>"),
                             pad_token_id=tok.token_to_id("<|endoftext|>"),
                             rope_parameters={"rope_type": "default", "rope_theta": theta}, **common, **cfg)
        return Qwen3ForCausalLM(config), config
    tie = cfg.pop("tie_word_embeddings")
    tokens = dict(image_token_id=tok.token_to_id("<|image_pad|>"),
                  vision_start_token_id=tok.token_to_id("<|vision_start|>"),
                  vision_end_token_id=tok.token_to_id("<|vision_end|>"), video_token_id=tok.token_to_id("<|image_pad|>"))
    if vl == "qwen2.5":
        text = dict(common, **cfg, rope_parameters={"rope_type": "mrope", "rope_theta": theta, "mrope_section": [2, 3, 3]})
        text.pop("attention_bias")
        text.pop("head_dim")  # Qwen2.5-VL derives it: hidden_size / num_attention_heads
        vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=cfg["hidden_size"],
                      patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56,
                      fullatt_block_indexes=[0])
        config = Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=tie, **tokens)
        return Qwen2_5_VLForConditionalGeneration(config), config
    text = dict(common, **cfg, rope_parameters={"rope_type": "default", "rope_theta": theta,
                                                "mrope_section": [2, 3, 3], "mrope_interleaved": True})
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=cfg["hidden_size"],
                  patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
                  deepstack_visual_indexes=[0])
    config = Qwen3VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=tie, **tokens)
    return Qwen3VLForConditionalGeneration(config), config


def text_model(model):
    """The decoder stack holding embed_tokens, layers and norm, for both model classes."""
    inner = model.model
    return getattr(inner, "language_model", inner)


def train_tokenizer(vocab_size):
    tok = Tokenizer(models.BPE(byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    return tok


def randomise(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "visual" in name:
                continue  # the vision tower is not part of the text tower's golden data
            if p.ndim == 2:
                scale = 1.0 if "embed_tokens" in name else 1.0 / (p.shape[1] ** 0.5)
                p.copy_(torch.randn(p.shape, generator=gen) * scale)
            elif name.endswith(".bias"):  # the Qwen2 family's q/k/v biases
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            else:  # RMSNorm weights, away from identity
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))


def capture(model, ids):
    """Embeddings, every decoder layer's output (pre-final-norm), the normed output and logits."""
    tm = text_model(model)
    layers = tm.layers
    outs = []
    hooks = [layer.register_forward_hook(lambda m, a, o: outs.append((o[0] if isinstance(o, tuple) else o)[0]))
             for layer in layers]
    normed = []
    hooks.append(tm.norm.register_forward_hook(lambda m, a, o: normed.append(o[0])))
    try:
        res = model(input_ids=ids[None], use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    emb = tm.embed_tokens(ids[None])[0]
    hidden = torch.stack([emb] + outs)
    return hidden, normed[0], res.logits[0]


def greedy(model, ids, n):
    seq = ids.clone()
    for _ in range(n):
        logits = model(input_ids=seq[None], use_cache=False).logits[0, -1]
        seq = torch.cat([seq, logits.argmax().view(1)])
    return seq[len(ids):]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/golden/qwen3")
    ap.add_argument("--chat-template", required=True)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only", help="make this configuration's folder alone")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    template = open(args.chat_template, encoding="utf-8").read()

    tok = train_tokenizer(384)
    vocab = tok.get_vocab_size()
    for i, (name, cfg) in enumerate(CONFIGS.items()):
        if args.only and name != args.only:
            continue
        gen = torch.Generator().manual_seed(args.seed + i)
        model, config = make_model(cfg, vocab, tok)
        model = model.float().eval()
        randomise(model, gen)
        if cfg["tie_word_embeddings"]:
            model.tie_weights()
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        model.save_pretrained(d, safe_serialization=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"tokenizer_class": "Qwen2Tokenizer", "chat_template": template, "eos_token": "<|im_end|>",
                       "pad_token": "<|endoftext|>", "bos_token": None, "model_max_length": 512,
                       "added_tokens_decoder": {str(tok.token_to_id(s)): {"content": s, "special": True}
                                                for s in SPECIALS}}, f, ensure_ascii=False, indent=1)

        tensors = {}
        for key, text in PROMPTS.items():
            ids = torch.tensor(tok.encode(text).ids, dtype=torch.long)
            hidden, normed, logits = capture(model, ids)
            tensors[f"ids_{key}"] = ids.to(torch.int32)
            tensors[f"hidden_{key}"] = hidden.contiguous()
            tensors[f"normed_{key}"] = normed.contiguous()
            tensors[f"logits_{key}"] = logits.contiguous()
            tensors[f"greedy_{key}"] = greedy(model, ids, 32).to(torch.int32)
        # the chat path: template rendering -> ids -> greedy
        from jinja2.sandbox import ImmutableSandboxedEnvironment
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(
            x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)
        rendered = env.from_string(template).render(
            messages=[{"role": "system", "content": "You are a helpful assistant."},
                      {"role": "user", "content": "Hello! How are you today?"}],
            add_generation_prompt=True, enable_thinking=False)
        chat_ids = torch.tensor(tok.encode(rendered).ids, dtype=torch.long)
        tensors["chat_ids"] = chat_ids.to(torch.int32)
        tensors["chat_greedy"] = greedy(model, chat_ids, 32).to(torch.int32)
        save_file(tensors, os.path.join(d, "golden.safetensors"), metadata={"chat_text": rendered})
        print(f"{name}: vocab={vocab} params={sum(p.numel() for p in model.parameters())} "
              f"chat_len={len(chat_ids)} greedy_a={tensors['greedy_a'][:8].tolist()}")


if __name__ == "__main__":
    main()
