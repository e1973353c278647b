/*
 * tok_encode.c — text to ids: repair ill-formed UTF-8, cut out raw added
 * tokens, normalize, cut out normalized added tokens, pre-tokenize, BPE
 * each piece, then (on request) add the post-processor's special ids.
 * Also the throughput hook for `cortiq bench tokenizer`.
 */
#include <string.h>

#include "tokenizer/tokenizer-impl.h"

static cq_status encode_segment(cq_tokenizer *t, const char *s, size_t n, bool orig0, unsigned flags,
                                cq_tokens *out) {
    CQ_TRY(tok_normalize(t->normalizer, s, n, &t->s_norm));
    const char *ns = t->s_norm.p;
    size_t nn = t->s_norm.n;
    tok_splits *sp = &t->s_norm_splits;
    CQ_TRY(tok_added_find(t, &t->trie_norm, ns, nn, flags & CQ_TOK_SPLIT_SPECIAL, sp));
    for (size_t i = 0; i < sp->n; i++) {
        const tok_split *x = &sp->v[i];
        if (x->id >= 0) {
            CQ_TRY(tok_ids_push(out, x->id));
            continue;
        }
        if (x->end == x->start) continue;
        CQ_TRY(tok_pretokenize(t->pretok, ns + x->start, x->end - x->start, orig0 && x->start == 0,
                               &t->s_pieces, &t->s_pieces_tmp, &t->s_spans));
        const tok_pieces *pc = &t->s_pieces;
        for (size_t j = 0; j < pc->n; j++)
            CQ_TRY(tok_bpe_encode_word(&t->bpe, pc->buf.p + pc->v[j].off, pc->v[j].len, out));
    }
    return CQ_OK;
}

static cq_status post_apply(const tok_post *p, cq_tokens *out, size_t first) {
    switch (p->type) {
    case TOK_POST_NOOP:
        return CQ_OK;
    case TOK_POST_SEQUENCE:
        for (size_t i = 0; i < p->n_items; i++) CQ_TRY(post_apply(&p->items[i], out, first));
        return CQ_OK;
    case TOK_POST_TEMPLATE: {
        if (p->n_before) { /* a template with nothing before the text has no `before` array at all */
            for (size_t i = 0; i < p->n_before; i++) CQ_TRY(tok_ids_push(out, 0)); /* make room */
            size_t body = out->n - first - p->n_before;
            memmove(out->ids + first + p->n_before, out->ids + first, body * sizeof *out->ids);
            memcpy(out->ids + first, p->before, p->n_before * sizeof *out->ids);
        }
        for (size_t i = 0; i < p->n_after; i++) CQ_TRY(tok_ids_push(out, p->after[i]));
        return CQ_OK;
    }
    }
    return cq_fail(CQ_ERR_INTERNAL, "tokenizer: unknown post-processor %d", (int)p->type);
}

static cq_status encode(cq_tokenizer *t, const char *text, size_t len, unsigned flags, cq_tokens *out) {
    const char *s = text ? text : "";
    size_t n = len;
    if (!tok_utf8_is_valid(s, n)) {
        t->s_text.n = 0;
        CQ_TRY(tok_utf8_append_lossy(&t->s_text, s, n));
        s = t->s_text.p;
        n = t->s_text.n;
    }
    size_t first = out->n;
    tok_splits *raw = &t->s_raw;
    CQ_TRY(tok_added_find(t, &t->trie_raw, s, n, flags & CQ_TOK_SPLIT_SPECIAL, raw));
    for (size_t i = 0; i < raw->n; i++) {
        tok_split x = raw->v[i]; /* copy: encode_segment reuses other scratch only */
        if (x.id >= 0) CQ_TRY(tok_ids_push(out, x.id));
        else if (x.end > x.start)
            CQ_TRY(encode_segment(t, s + x.start, x.end - x.start, x.start == 0, flags, out));
    }
    if ((flags & CQ_TOK_ADD_SPECIAL) && t->post) CQ_TRY(post_apply(t->post, out, first));
    return CQ_OK;
}

cq_status cq_tokenizer_encode(cq_tokenizer *t, const char *text, size_t len, unsigned flags,
                              cq_tokens *out) {
    if (!t || !out || (!text && len))
        return cq_fail(CQ_ERR_INVALID_ARG, "cq_tokenizer_encode: NULL argument");
    size_t first = out->n;
    cq_status st = encode(t, text, len, flags, out);
    if (st != CQ_OK) out->n = first; /* nothing half-done is left behind */
    return st;
}

cq_status cq_tokenizer_bench_encode(cq_tokenizer *t, const char *text, size_t len, double min_seconds,
                                    cq_tokenizer_bench_result *out) {
    if (!t || !out || (!text && len))
        return cq_fail(CQ_ERR_INVALID_ARG, "cq_tokenizer_bench_encode: NULL argument");
    memset(out, 0, sizeof *out);
    tok_bpe_clear_cache(&t->bpe);
    cq_tokens ids = {0};
    cq_status st = CQ_OK;
    double t0 = cq_now(), el = 0;
    size_t passes = 0;
    do {
        ids.n = 0;
        st = cq_tokenizer_encode(t, text, len, 0, &ids);
        if (st != CQ_OK) break;
        passes++;
        if (passes == 1) out->tokens = ids.n;
        el = cq_now() - t0;
    } while (el < min_seconds);
    cq_tokens_free(&ids);
    if (st != CQ_OK) return st;
    out->seconds = el;
    out->passes = passes;
    double secs = el > 0 ? el : 1e-9;
    out->mb_per_s = (double)len * (double)passes / 1e6 / secs;
    out->tokens_per_s = (double)out->tokens * (double)passes / secs;
    return CQ_OK;
}
