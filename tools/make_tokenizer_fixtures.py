#!/usr/bin/env python3
"""Derive the small synthetic tokenizer.json fixtures from the real ones.

The real tokenizers (Qwen3, Llama-3, Llama-2) cover the pipelines those
models use. These two small files exercise the rest of what the loader
accepts, so that Hugging Face `tokenizers` can vouch for it through the same
golden run:

  syn_bytelevel.json  Qwen3's byte alphabet and first 3000 merges; NFKC +
                      Lowercase + Replace + Strip normalizer; Digits +
                      ByteLevel(add_prefix_space, GPT-2 regex); added tokens
                      with lstrip/rstrip/single_word/normalized, one whose
                      content is already in the vocab and one declared with a
                      wrong id; TemplateProcessing <s> $A </s>.
  syn_spm.json        Llama-2's vocab cut to ASCII byte-fallback tokens and
                      its first 2000 merges, so non-ASCII text reaches
                      byte fallback and unk fusing; Split pre-tokenizers with
                      every delimiter behaviour (and invert) before a
                      Metaspace(prepend_scheme=first); the SentencePiece
                      decoder chain.

Usage (from the repository root; deterministic, no network):
    python3 tools/make_tokenizer_fixtures.py
"""
import gzip
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizers")


def load(name):
    with gzip.open(os.path.join(FIX, name + ".json.gz"), "rt", encoding="utf-8") as f:
        return json.load(f)


def merge_pair(m):
    return tuple(m) if isinstance(m, list) else tuple(m.split(" "))


def subset(vocab, merges, n_merges, keep):
    """Vocab restricted to `keep` plus everything the first n merges use,
    renumbered densely in the original id order."""
    pairs = [merge_pair(m) for m in merges[:n_merges]]
    need = set(keep)
    for a, b in pairs:
        need.update((a, b, a + b))
    toks = sorted(need, key=lambda t: vocab[t])
    return {t: i for i, t in enumerate(toks)}, [list(p) for p in pairs]


def added(id_, content, special=False, lstrip=False, rstrip=False, single_word=False, normalized=False):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def bytelevel():
    q = load("qwen3")
    vocab = q["model"]["vocab"]
    alphabet = [t for t in vocab if len(t) == 1 and vocab[t] < 256]
    v, merges = subset(vocab, q["model"]["merges"], 3000, alphabet)
    n = len(v)
    toks = [
        added(n, "<s>", special=True),
        added(n + 1, "</s>", special=True),
        added(n + 2, "<mask>", special=True, lstrip=True),
        added(n + 3, "[SEP]", special=True, rstrip=True),
        added(n + 4, "Hello", single_word=True, normalized=True),
        added(n + 5, "<b>"),
        added(n + 6, "ABC", normalized=True),
        added(n + 7, "xyz", lstrip=True, rstrip=True, normalized=True),
        added(v["the"], "the", normalized=True),      # already in the vocab: keeps its id
        added(999999, "<wrong_id>", special=True),    # Hugging Face reassigns the id
    ]
    bl = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": toks,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFKC"},
            {"type": "Lowercase"},
            {"type": "Replace", "pattern": {"String": "``"}, "content": "\""},
            {"type": "Replace", "pattern": {"Regex": "\\s{3,}"}, "content": "  "},
            {"type": "Strip", "strip_left": False, "strip_right": True},
        ]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, bl]},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "</s>", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [n], "tokens": ["<s>"]},
                               "</s>": {"id": "</s>", "ids": [n + 1], "tokens": ["</s>"]}}},
        "decoder": dict(bl),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": v, "merges": merges},
    }


def spm():
    l2 = load("llama2")
    vocab = l2["model"]["vocab"]
    keep = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(128)]
    keep += [t for t in vocab if len(t) == 1 and vocab[t] < 3000]
    v, merges = subset(vocab, l2["model"]["merges"], 2000, keep)
    n = len(v)
    toks = [
        added(v["<unk>"], "<unk>", special=True),
        added(v["<s>"], "<s>", special=True),
        added(v["</s>"], "</s>", special=True),
        added(n, "<sep>", special=True, lstrip=True, rstrip=True),
        added(n + 1, "@@", normalized=False),
    ]
    split = lambda pat, beh, inv=False: {"type": "Split", "pattern": pat, "behavior": beh, "invert": inv}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": toks,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            split({"Regex": "[0-9]+"}, "Isolated"),
            split({"String": "-"}, "MergedWithPrevious"),
            split({"Regex": ","}, "Removed"),
            split({"Regex": "\\s*;"}, "MergedWithNext"),
            split({"String": "|"}, "Contiguous"),
            split({"Regex": "[^#]+"}, "MergedWithPrevious", True),
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
        ]},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [v["<s>"]], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "ignore_merges": False, "vocab": v, "merges": merges},
    }


def main():
    for name, tok in (("syn_bytelevel", bytelevel()), ("syn_spm", spm())):
        path = os.path.join(FIX, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(path, os.path.getsize(path), "bytes,", len(tok["model"]["vocab"]), "tokens")


if __name__ == "__main__":
    main()
