/* fuzz_tokenizer.c — libFuzzer target for the tokenizer.
 *
 * The first input byte picks what is fuzzed:
 *   0 mod 3: the tokenizer.json loader on the rest of the input; when it
 *            loads, the input is also encoded and decoded with it;
 *   1 mod 3: the encoder of a byte-level tokenizer (NFKC, Lowercase, Digits,
 *            ByteLevel, added tokens with strip flags) on arbitrary bytes;
 *   2 mod 3: the encoder of a SentencePiece-style tokenizer (Split
 *            behaviours, Metaspace, byte fallback, unk) on arbitrary bytes.
 * The second byte supplies the encode flags. Decoding and streaming run on
 * every result; decoded text must be valid UTF-8. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/tokenizer.h"

static cq_tokenizer *g_tok[2];

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

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    cq_set_log(NULL, NULL, CQ_LOG_NONE);
    g_tok[0] = load("syn_bytelevel.json");
    g_tok[1] = load("syn_spm.json");
    return 0;
}

static int utf8_ok(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xC2 && c < 0xE0) ? 2 : (c >= 0xE0 && c < 0xF0) ? 3
                 : (c >= 0xF0 && c < 0xF5) ? 4 : 0;
        if (k == 0 || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

static void exercise(cq_tokenizer *t, const uint8_t *data, size_t size, unsigned flags) {
    cq_tokens ids = {0};
    if (cq_tokenizer_encode(t, (const char *)data, size, flags, &ids) != CQ_OK) return;
    size_t vocab = cq_tokenizer_vocab_size(t);
    for (size_t i = 0; i < ids.n; i++)
        if (ids.ids[i] < 0 || (size_t)ids.ids[i] >= vocab) __builtin_trap();
    char *out = NULL;
    size_t ol = 0;
    if (cq_tokenizer_decode(t, ids.ids, ids.n, flags & 4 ? CQ_TOK_SKIP_SPECIAL : 0, &out, &ol) == CQ_OK) {
        if (!utf8_ok(out, ol) || strlen(out) > ol) __builtin_trap();
        cq_free(out);
    }
    cq_tokenizer_stream *s = NULL;
    if (cq_tokenizer_stream_create(t, 0, &s) == CQ_OK) {
        for (size_t i = 0; i < ids.n && i < 512; i++) {
            const char *chunk;
            size_t cl;
            if (cq_tokenizer_stream_push(s, ids.ids[i], &chunk, &cl) != CQ_OK) break;
            if (!utf8_ok(chunk, cl)) __builtin_trap();
        }
        cq_tokenizer_stream_free(s);
    }
    cq_tokens_free(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    unsigned mode = data[0] % 3, flags = data[1] & 7;
    data += 2;
    size -= 2;
    if (mode == 0) {
        cq_tokenizer *t = NULL;
        if (cq_tokenizer_load(data, size, &t) == CQ_OK) {
            exercise(t, data, size < 512 ? size : 512, flags);
            cq_tokenizer_free(t);
        }
        return 0;
    }
    exercise(g_tok[mode - 1], data, size, flags);
    return 0;
}
