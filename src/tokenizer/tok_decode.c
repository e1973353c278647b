/*
 * tok_decode.c — ids to text: look up each id's string (added tokens first),
 * run the decoder chain (ByteLevel, ByteFallback, Replace, Fuse, Strip,
 * Metaspace, BPEDecoder, Sequence) over the list of strings, and join. The
 * streaming decoder is Hugging Face's DecodeStream: it re-decodes a short
 * window and releases text only once it no longer ends in U+FFFD.
 */
#include <string.h>

#include "tokenizer/tokenizer-impl.h"

static const char k_fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

cq_status tok_strs_push(tok_strs *l, const char *s, size_t n) {
    if (l->buf.n + n >= UINT32_MAX) return cq_fail(CQ_ERR_NOMEM, "tokenizer: decoded text too long");
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        uint32_t *o = cq_reallocn(l->off, cap, sizeof *o);
        if (!o) return CQ_ERR_NOMEM;
        l->off = o;
        uint32_t *ln = cq_reallocn(l->len, cap, sizeof *ln);
        if (!ln) return CQ_ERR_NOMEM;
        l->len = ln;
        l->cap = cap;
    }
    l->off[l->n] = (uint32_t)l->buf.n;
    l->len[l->n] = (uint32_t)n;
    CQ_TRY(tok_buf_append(&l->buf, s, n));
    l->n++;
    return CQ_OK;
}

void tok_strs_free(tok_strs *l) {
    cq_free(l->off);
    cq_free(l->len);
    tok_buf_free(&l->buf);
    memset(l, 0, sizeof *l);
}

#define STR(l, i) ((l)->buf.p + (l)->off[i])

static cq_status dec_bytelevel(const tok_strs *in, tok_strs *out) {
    tok_buf raw = {0};
    cq_status st = CQ_OK;
    for (size_t i = 0; i < in->n && st == CQ_OK; i++) {
        const char *s = STR(in, i);
        size_t n = in->len[i], start = raw.n;
        bool mapped = true;
        for (size_t j = 0; j < n && st == CQ_OK;) {
            uint32_t cp;
            j += tok_utf8_decode(s + j, n - j, &cp);
            int32_t b = tok_bytelevel_byte_of(cp);
            if (b < 0) {
                mapped = false;
                break;
            }
            char c = (char)b;
            st = tok_buf_append(&raw, &c, 1);
        }
        if (st == CQ_OK && !mapped) { /* a token outside the alphabet goes through as is */
            raw.n = start;
            st = tok_buf_append(&raw, s, n);
        }
    }
    tok_buf fixed = {0};
    if (st == CQ_OK) st = tok_utf8_append_lossy(&fixed, raw.p ? raw.p : "", raw.n);
    if (st == CQ_OK) st = tok_strs_push(out, fixed.p ? fixed.p : "", fixed.n);
    tok_buf_free(&raw);
    tok_buf_free(&fixed);
    return st;
}

/* "<0xAB>" -> byte (Rust's u8::from_str_radix on the two characters, which
 * also takes a leading '+'). */
static int byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (i == 3 && c == '+') continue;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static cq_status flush_bytes(tok_buf *pend, tok_strs *out) {
    if (pend->n == 0) return CQ_OK;
    cq_status st = CQ_OK;
    if (tok_utf8_is_valid(pend->p, pend->n)) {
        st = tok_strs_push(out, pend->p, pend->n);
    } else { /* one U+FFFD per byte token, as Hugging Face does */
        for (size_t i = 0; i < pend->n && st == CQ_OK; i++) st = tok_strs_push(out, k_fffd, 3);
    }
    pend->n = 0;
    return st;
}

static cq_status dec_bytefallback(const tok_strs *in, tok_strs *out) {
    tok_buf pend = {0};
    cq_status st = CQ_OK;
    for (size_t i = 0; i < in->n && st == CQ_OK; i++) {
        int b = byte_token(STR(in, i), in->len[i]);
        if (b >= 0) {
            char c = (char)b;
            st = tok_buf_append(&pend, &c, 1);
            continue;
        }
        st = flush_bytes(&pend, out);
        if (st == CQ_OK) st = tok_strs_push(out, STR(in, i), in->len[i]);
    }
    if (st == CQ_OK) st = flush_bytes(&pend, out);
    tok_buf_free(&pend);
    return st;
}

static cq_status dec_replace(const tok_decoder *d, const tok_strs *in, tok_strs *out) {
    tok_spans sp = {0};
    tok_buf b = {0};
    cq_status st = CQ_OK;
    for (size_t i = 0; i < in->n && st == CQ_OK; i++) {
        const char *s = STR(in, i);
        size_t n = in->len[i], prev = 0;
        b.n = 0;
        st = tok_regex_find_all(d->re, s, n, &sp);
        for (size_t k = 0; k < sp.n && st == CQ_OK; k++) {
            st = tok_buf_append(&b, s + prev, sp.v[k].start - prev);
            if (st == CQ_OK) st = tok_buf_append(&b, d->text, d->text_len);
            prev = sp.v[k].end;
        }
        if (st == CQ_OK) st = tok_buf_append(&b, s + prev, n - prev);
        if (st == CQ_OK) st = tok_strs_push(out, b.p, b.n);
    }
    tok_spans_free(&sp);
    tok_buf_free(&b);
    return st;
}

static cq_status dec_strip(const tok_decoder *d, const tok_strs *in, tok_strs *out) {
    cq_status st = CQ_OK;
    for (size_t i = 0; i < in->n && st == CQ_OK; i++) {
        const char *s = STR(in, i);
        size_t n = in->len[i];
        /* character boundaries, counted from both ends */
        size_t a = 0, nstart = 0;
        while (nstart < d->start && a < n) {
            uint32_t cp;
            size_t k = tok_utf8_decode(s + a, n - a, &cp);
            if (cp != d->strip_cp) break;
            a += k;
            nstart++;
        }
        size_t b = n, nstop = 0;
        while (nstop < d->stop && b > 0) {
            size_t j = b - 1;
            while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
            uint32_t cp;
            tok_utf8_decode(s + j, b - j, &cp);
            if (cp != d->strip_cp) break;
            b = j;
            nstop++;
        }
        st = a < b ? tok_strs_push(out, s + a, b - a) : tok_strs_push(out, "", 0);
    }
    return st;
}

static cq_status dec_metaspace(const tok_decoder *d, const tok_strs *in, tok_strs *out) {
    tok_buf b = {0};
    cq_status st = CQ_OK;
    for (size_t i = 0; i < in->n && st == CQ_OK; i++) {
        const char *s = STR(in, i);
        size_t n = in->len[i];
        b.n = 0;
        for (size_t j = 0; j < n && st == CQ_OK;) {
            uint32_t cp;
            size_t k = tok_utf8_decode(s + j, n - j, &cp);
            if (cp == d->strip_cp) {
                /* in the first token every replacement character goes */
                if (!(i == 0 && d->scheme != TOK_PREPEND_NEVER)) st = tok_buf_append(&b, " ", 1);
            } else {
                st = tok_buf_append(&b, s + j, k);
            }
            j += k;
        }
        if (st == CQ_OK) st = tok_strs_push(out, b.p ? b.p : "", b.n);
    }
    tok_buf_free(&b);
    return st;
}

static cq_status dec_bpe(const tok_decoder *d, const tok_strs *in, tok_strs *out) {
    tok_buf b = {0};
    cq_status st = CQ_OK;
    for (size_t i = 0; i < in->n && st == CQ_OK; i++) {
        const char *s = STR(in, i);
        size_t n = in->len[i], j = 0;
        const char *rep = i + 1 == in->n ? "" : " ";
        b.n = 0;
        while (j < n && st == CQ_OK) {
            if (d->text_len && j + d->text_len <= n && !memcmp(s + j, d->text, d->text_len)) {
                st = tok_buf_append(&b, rep, strlen(rep));
                j += d->text_len;
            } else {
                st = tok_buf_append(&b, s + j, 1);
                j++;
            }
        }
        if (st == CQ_OK) st = tok_strs_push(out, b.p ? b.p : "", b.n);
    }
    tok_buf_free(&b);
    return st;
}

static cq_status dec_apply(const tok_decoder *d, const tok_strs *in, tok_strs *out) {
    switch (d->type) {
    case TOK_DEC_BYTELEVEL: return dec_bytelevel(in, out);
    case TOK_DEC_BYTEFALLBACK: return dec_bytefallback(in, out);
    case TOK_DEC_REPLACE: return dec_replace(d, in, out);
    case TOK_DEC_STRIP: return dec_strip(d, in, out);
    case TOK_DEC_METASPACE: return dec_metaspace(d, in, out);
    case TOK_DEC_BPE: return dec_bpe(d, in, out);
    case TOK_DEC_FUSE: {
        tok_buf b = {0};
        cq_status st = tok_buf_append(&b, in->buf.p ? in->buf.p : "", in->buf.n);
        if (st == CQ_OK) st = tok_strs_push(out, b.p, b.n);
        tok_buf_free(&b);
        return st;
    }
    case TOK_DEC_SEQUENCE: {
        tok_strs a = {0}, b = {0};
        cq_status st = CQ_OK;
        for (size_t i = 0; i < in->n && st == CQ_OK; i++) st = tok_strs_push(&a, STR(in, i), in->len[i]);
        for (size_t k = 0; k < d->n_items && st == CQ_OK; k++) {
            b.n = 0;
            b.buf.n = 0;
            st = dec_apply(&d->items[k], &a, &b);
            tok_strs t = a;
            a = b;
            b = t;
        }
        for (size_t i = 0; i < a.n && st == CQ_OK; i++) st = tok_strs_push(out, STR(&a, i), a.len[i]);
        tok_strs_free(&a);
        tok_strs_free(&b);
        return st;
    }
    }
    return cq_fail(CQ_ERR_INTERNAL, "tokenizer: unknown decoder %d", (int)d->type);
}

/* The string an id decodes from: an added token's (normalized) content, else
 * the vocabulary entry; NULL for ids the tokenizer does not know. */
static const char *id_string(const cq_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || (size_t)id >= t->n_ids) return NULL;
    if (t->id_added[id] >= 0) {
        const tok_added *a = &t->added[t->id_added[id]];
        *len = a->norm ? a->norm_len : a->len;
        return a->norm ? a->norm : a->content;
    }
    if (t->id_len[id] == UINT32_MAX) return NULL;
    *len = t->id_len[id];
    return t->bpe.vocab.keys.p + t->id_off[id];
}

static cq_status decode_to(const cq_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, tok_buf *out) {
    tok_strs in = {0}, res = {0};
    cq_status st = CQ_OK;
    for (size_t i = 0; i < n && st == CQ_OK; i++) {
        size_t len = 0;
        const char *s = id_string(t, ids[i], &len);
        if (!s) continue; /* unknown ids vanish, as in Hugging Face */
        if ((flags & CQ_TOK_SKIP_SPECIAL) && cq_tokenizer_is_special(t, ids[i])) continue;
        st = tok_strs_push(&in, s, len);
    }
    out->n = 0;
    if (st == CQ_OK) st = tok_buf_reserve(out, 0);
    if (st == CQ_OK && !t->decoder) {
        for (size_t i = 0; i < in.n && st == CQ_OK; i++) {
            if (i) st = tok_buf_append(out, " ", 1);
            if (st == CQ_OK) st = tok_buf_append(out, STR(&in, i), in.len[i]);
        }
    } else if (st == CQ_OK) {
        st = dec_apply(t->decoder, &in, &res);
        for (size_t i = 0; i < res.n && st == CQ_OK; i++) st = tok_buf_append(out, STR(&res, i), res.len[i]);
    }
    if (st == CQ_OK) out->p[out->n] = '\0';
    tok_strs_free(&in);
    tok_strs_free(&res);
    return st;
}

cq_status cq_tokenizer_decode(const cq_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                              char **out, size_t *out_len) {
    if (!t || !out || (!ids && n)) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tokenizer_decode: NULL argument");
    *out = NULL;
    if (out_len) *out_len = 0;
    tok_buf b = {0};
    cq_status st = decode_to(t, ids, n, flags, &b);
    if (st != CQ_OK) {
        tok_buf_free(&b);
        return st;
    }
    *out = b.p;
    if (out_len) *out_len = b.n;
    return CQ_OK;
}

/* ---- streaming ------------------------------------------------------------------ */
struct cq_tokenizer_stream {
    const cq_tokenizer *t;
    unsigned flags;
    cq_tokens ids;       /* the window still needed to decode the next text */
    tok_buf prefix;      /* decode(ids[0..prefix_index)) already handed out */
    size_t prefix_index;
    tok_buf cur, text;   /* scratch and the text returned by the last push */
};

cq_status cq_tokenizer_stream_create(const cq_tokenizer *t, unsigned decode_flags, cq_tokenizer_stream **out) {
    if (!t || !out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tokenizer_stream_create: NULL argument");
    *out = cq_calloc(1, sizeof **out);
    if (!*out) return CQ_ERR_NOMEM;
    (*out)->t = t;
    (*out)->flags = decode_flags;
    return CQ_OK;
}

void cq_tokenizer_stream_free(cq_tokenizer_stream *s) {
    if (!s) return;
    cq_tokens_free(&s->ids);
    tok_buf_free(&s->prefix);
    tok_buf_free(&s->cur);
    tok_buf_free(&s->text);
    cq_free(s);
}

static bool ends_fffd(const tok_buf *b) { return b->n >= 3 && !memcmp(b->p + b->n - 3, k_fffd, 3); }

cq_status cq_tokenizer_stream_push(cq_tokenizer_stream *s, int32_t id, const char **text, size_t *len) {
    if (!s || !text || !len) return cq_fail(CQ_ERR_INVALID_ARG, "cq_tokenizer_stream_push: NULL argument");
    *text = "";
    *len = 0;
    if (s->prefix.n == 0 && s->ids.n > 0) {
        CQ_TRY(decode_to(s->t, s->ids.ids, s->ids.n, s->flags, &s->cur));
        if (!ends_fffd(&s->cur)) {
            s->prefix.n = 0;
            CQ_TRY(tok_buf_append(&s->prefix, s->cur.p, s->cur.n));
            s->prefix_index = s->ids.n;
        }
    }
    CQ_TRY(tok_ids_push(&s->ids, id));
    CQ_TRY(decode_to(s->t, s->ids.ids, s->ids.n, s->flags, &s->cur));
    if (!(s->cur.n > s->prefix.n && !ends_fffd(&s->cur))) return CQ_OK;
    if (memcmp(s->cur.p, s->prefix.p ? s->prefix.p : "", s->prefix.n) != 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer: streaming decode: text after id %d does not extend "
                       "the text before it", id);
    s->text.n = 0;
    CQ_TRY(tok_buf_append(&s->text, s->cur.p + s->prefix.n, s->cur.n - s->prefix.n));
    size_t new_prefix_index = s->ids.n - s->prefix_index;
    memmove(s->ids.ids, s->ids.ids + s->prefix_index, new_prefix_index * sizeof *s->ids.ids);
    s->ids.n = new_prefix_index;
    CQ_TRY(decode_to(s->t, s->ids.ids, s->ids.n, s->flags, &s->prefix));
    s->prefix_index = new_prefix_index;
    *text = s->text.p;
    *len = s->text.n;
    return CQ_OK;
}
