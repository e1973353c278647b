/* tok_check.h — what the tokenizer fuzz targets check: decoded text is
 * well-formed UTF-8 (every lead byte legal, no 0xC0/0xC1/0xF5+, every
 * sequence complete) and every id inside the vocabulary. */
#ifndef CQ_FUZZ_TOK_CHECK_H
#define CQ_FUZZ_TOK_CHECK_H

#include <stddef.h>

static inline int utf8_ok(const char *s, size_t n) {
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


#include <string.h>

#include "base/base.h"
#include "tokenizer/tokenizer.h"

/* Encode `text` with `t`, then decode it whole and streamed (the first
 * `max_stream` ids): every id must be inside the vocabulary and every piece
 * of decoded text valid UTF-8, else the process traps (a finding). */
static inline void tok_exercise(cq_tokenizer *t, const char *text, size_t size, unsigned flags, size_t max_stream) {
    cq_tokens ids = {0};
    if (cq_tokenizer_encode(t, text, size, flags, &ids) != CQ_OK) {
        cq_tokens_free(&ids); /* a failed encode leaves the buffer to its owner */
        return;
    }
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
        for (size_t i = 0; i < ids.n && i < max_stream; i++) {
            const char *chunk;
            size_t cl;
            if (cq_tokenizer_stream_push(s, ids.ids[i], &chunk, &cl) != CQ_OK) break;
            if (!utf8_ok(chunk, cl)) __builtin_trap();
        }
        cq_tokenizer_stream_free(s);
    }
    cq_tokens_free(&ids);
}

#endif
