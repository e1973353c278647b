#!/usr/bin/env python3
"""Golden token ids for the tokenizer tests, from Hugging Face `tokenizers`.

For every tokenizer fixture and every corpus case this records what
`tokenizers.Tokenizer` produces; tests/unit/test_tokenizer.c compares the C
tokenizer against it exactly.

Run from the repository root (needs `pip install tokenizers`, nothing else):

    python3 tools/golden_tokenizer.py --out tests/golden/tokenizer

By default it reads every tokenizer in tests/fixtures/tokenizers/ (*.json and
*.json.gz, named after the file: qwen3, llama2, syn_bytelevel,
syn_spm) and every case in tests/golden/tokenizer/corpus/*.txt. Other
tokenizers can be given as NAME=PATH:

    python3 tools/golden_tokenizer.py --out DIR --tokenizer qwen3=/path/to/tokenizer.json

How input bytes become text: each case file is read as bytes and decoded
with bytes.decode("utf-8", errors="replace"), i.e. every maximal ill-formed
subsequence becomes one U+FFFD. The C API takes bytes and repairs them by the
same rule before tokenizing, so the ids must agree for any input, including
the invalid_utf8 case. (A BOM is kept as U+FEFF, as Python's "utf-8" codec
does.)

Output: one DIR/<tokenizer>.json per tokenizer:
  {"tokenizer": name, "sha256": of the uncompressed tokenizer.json,
   "tokenizers_version": ..., "cases": {case: {
       "ids":               encode(text, add_special_tokens=False).ids,
       "ids_add_special":   encode(text, add_special_tokens=True).ids, or "same",
       "ids_split_special": ids with encode_special_tokens=True, or "same"
                            (only for the case named "special"),
       "decoded":           decode(ids, skip_special_tokens=False),
       "decoded_skip_special": decode(ids, skip_special_tokens=True), or
                            {"same": true} when equal to "decoded",
       "stream":            DecodeStream(skip_special_tokens=False) chunks, one
                            entry per id (null when the step returned None);
                            only for the cases in STREAM_CASES}}}
Decoded text containing U+0000 is written as {"utf8_hex": "..."} (cJSON
strings cannot hold NUL). The syn_* tokenizers skip the long_100k case.
"""
import argparse
import gzip
import hashlib
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The synthetic tokenizers cover components, not scale.
SYN_SKIP = ("long_100k",)
STREAM_CASES = ("emoji", "cjk", "invalid_utf8", "multilingual", "special", "code")


def read_tokenizer(path):
    with open(path, "rb") as f:
        raw = f.read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    return raw


def default_tokenizers():
    d = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
    out = {}
    for fn in sorted(os.listdir(d)):
        for ext in (".json.gz", ".json"):
            if fn.endswith(ext):
                out[fn[: -len(ext)]] = os.path.join(d, fn)
                break
    return out


def text_field(s):
    """A decoded string for the JSON file. cJSON strings end at NUL, so text
    containing U+0000 is stored as {"utf8_hex": "..."} instead."""
    if s is None or "\x00" not in s:
        return s
    return {"utf8_hex": s.encode("utf-8").hex()}


def stream_chunks(tok, ids):
    from tokenizers.decoders import DecodeStream

    ds = DecodeStream(skip_special_tokens=False)
    return [text_field(ds.step(tok, i)) for i in ids]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (tests/golden/tokenizer)")
    ap.add_argument("--corpus", default=os.path.join(ROOT, "tests", "golden", "tokenizer", "corpus"))
    ap.add_argument("--tokenizer", action="append", default=[], metavar="NAME=PATH",
                    help="tokenizer.json (or .json.gz) to use; repeatable; default: the fixtures")
    args = ap.parse_args()

    import tokenizers
    from tokenizers import Tokenizer

    toks = default_tokenizers()
    for spec in args.tokenizer:
        name, _, path = spec.partition("=")
        if not path:
            sys.exit("--tokenizer wants NAME=PATH, got %r" % spec)
        toks[name] = path

    cases = {}
    for fn in sorted(os.listdir(args.corpus)):
        if fn.endswith(".txt"):
            with open(os.path.join(args.corpus, fn), "rb") as f:
                cases[fn[:-4]] = f.read().decode("utf-8", errors="replace")
    if not cases:
        sys.exit("no corpus cases in " + args.corpus)

    has_stream = True
    try:
        from tokenizers.decoders import DecodeStream  # noqa: F401
    except ImportError:
        has_stream = False
        print("note: this tokenizers has no DecodeStream; stream goldens skipped", file=sys.stderr)

    os.makedirs(args.out, exist_ok=True)
    for name, path in toks.items():
        raw = read_tokenizer(path)
        tok = Tokenizer.from_str(raw.decode("utf-8"))
        rec = {"tokenizer": name, "sha256": hashlib.sha256(raw).hexdigest(),
               "tokenizers_version": tokenizers.__version__, "cases": {}}
        for cname, text in cases.items():
            if name.startswith("syn_") and cname in SYN_SKIP:
                continue
            ids = tok.encode(text, add_special_tokens=False).ids
            with_sp = tok.encode(text, add_special_tokens=True).ids
            dec = tok.decode(ids, skip_special_tokens=False)
            dec_skip = tok.decode(ids, skip_special_tokens=True)
            c = {
                "ids": ids,
                "ids_add_special": "same" if with_sp == ids else with_sp,
                "decoded": text_field(dec),
                "decoded_skip_special": {"same": True} if dec_skip == dec else text_field(dec_skip),
            }
            if cname == "special":
                tok.encode_special_tokens = True
                split = tok.encode(text, add_special_tokens=False).ids
                tok.encode_special_tokens = False
                c["ids_split_special"] = "same" if split == ids else split
            if has_stream and cname in STREAM_CASES:
                c["stream"] = stream_chunks(tok, ids)
            rec["cases"][cname] = c
        out = os.path.join(args.out, name + ".json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump(rec, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        print("%s: %d cases -> %s (%d bytes)" % (name, len(rec["cases"]), out, os.path.getsize(out)))


if __name__ == "__main__":
    main()
