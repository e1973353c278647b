/* fuzz_tokenizer.c — libFuzzer target for the tokenizer's encoders and
 * decoders on arbitrary text. The tokenizers are loaded once per process
 * (LLVMFuzzerInitialize), so every execution is one encode, one decode and
 * one streamed decode; the loader is fuzz_tokenizer_json's.
 *
 * Input: [u8 tokenizer][u8 flags][text...]. The first byte picks, mod 4:
 *   0: Qwen3's real tokenizer.json (151k tokens, byte-level BPE, Qwen's
 *      split pattern, NFC), from tests/fixtures/tokenizers/qwen3.json.gz;
 *   1: a byte-level tokenizer (NFKC, Lowercase, Digits, ByteLevel, added
 *      tokens with strip flags);
 *   2: a SentencePiece-style tokenizer (Split behaviours, Metaspace, byte
 *      fallback, unk);
 *   3: Llama 2's real tokenizer.json (SentencePiece BPE, byte fallback).
 * Without zlib the gzipped real ones are not read and 0 and 3 fall back to
 * 1 and 2. The second byte supplies the encode flags (bit 2: skip special
 * tokens when decoding). Every id must be inside the vocabulary and decoded
 * text (whole or streamed) valid UTF-8. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CQ_HAVE_ZLIB
#include <zlib.h>
#endif

#include "base/base.h"
#include "tokenizer/tokenizer.h"
#include "tok_check.h"

/* The streamed decode holds ids back while the text ends in U+FFFD, and
 * re-decodes the held window on each push: on ill-formed bytes that is
 * quadratic in the ids pushed, so the stream sees a bounded prefix. */
#define STREAM_IDS 32

static cq_tokenizer *g_tok[4];

static cq_tokenizer *load(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/tokenizers/%s", CQ_SOURCE_DIR, name);
    cq_tokenizer *t = NULL;
    if (cq_tokenizer_load_file(path, &t) != CQ_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", cq_last_error());
        abort(); /* a broken harness, not a finding */
    }
    return t;
}

static cq_tokenizer *load_gz(const char *name) {
#ifdef CQ_HAVE_ZLIB
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/tokenizers/%s", CQ_SOURCE_DIR, name);
    gzFile gz = gzopen(path, "rb");
    if (!gz) return NULL;
    size_t n = 0, cap = 1 << 20;
    char *d = malloc(cap);
    int k;
    while (d && (k = gzread(gz, d + n, (unsigned)(cap - n))) > 0) {
        n += (size_t)k;
        if (n == cap) d = realloc(d, cap *= 2);
    }
    gzclose(gz);
    cq_tokenizer *t = NULL;
    if (!d || cq_tokenizer_load(d, n, &t) != CQ_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s: %s\n", name, cq_last_error());
        abort();
    }
    free(d);
    return t;
#else
    (void)name;
    return NULL;
#endif
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    cq_set_log(NULL, NULL, CQ_LOG_NONE);
    g_tok[1] = load("syn_bytelevel.json");
    g_tok[2] = load("syn_spm.json");
    g_tok[0] = load_gz("qwen3.json.gz");
    g_tok[3] = load_gz("llama2.json.gz");
    if (!g_tok[0]) g_tok[0] = g_tok[1];
    if (!g_tok[3]) g_tok[3] = g_tok[2];
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    cq_tokenizer *t = g_tok[data[0] % 4];
    unsigned flags = data[1] & 7;
    tok_exercise(t, (const char *)data + 2, size - 2, flags, STREAM_IDS);
    return 0;
}
