/* fuzz_tokenizer_json.c — libFuzzer target for the tokenizer.json loader.
 *
 * Input: [u8 flags][tokenizer.json...]. A tokenizer that loads encodes a
 * fixed probe text (spaces, digits, an added-token look-alike, CJK, an
 * emoji, an ill-formed byte) and the first bytes of the input itself with
 * the flags, and decodes and streams the result: ids must be inside the
 * vocabulary and decoded text valid UTF-8. The inputs are small JSON files
 * (the seeds are a few hundred bytes; see fuzz_tokenizer_json.options), so
 * an execution is one cheap load, not a big tokenizer's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/tokenizer.h"
#include "utf8_check.h"

static const char k_probe[] = "Hello  world 12345 <a><b> [L] \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 \xff\tx\n";

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    cq_set_log(NULL, NULL, CQ_LOG_NONE);
    return 0;
}

static void exercise(cq_tokenizer *t, const char *text, size_t size, unsigned flags) {
    cq_tokens ids = {0};
    if (cq_tokenizer_encode(t, text, size, flags, &ids) != CQ_OK) return;
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
        for (size_t i = 0; i < ids.n && i < 64; i++) {
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
    if (size < 1) return 0;
    unsigned flags = data[0] & 7;
    cq_tokenizer *t = NULL;
    if (cq_tokenizer_load(data + 1, size - 1, &t) != CQ_OK) return 0;
    exercise(t, k_probe, sizeof k_probe - 1, flags);
    exercise(t, (const char *)data + 1, size - 1 < 256 ? size - 1 : 256, flags);
    cq_tokenizer_free(t);
    return 0;
}
