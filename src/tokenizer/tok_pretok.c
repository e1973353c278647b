/*
 * tok_pretok.c — pre-tokenizers: cut a normalized string into the pieces
 * that BPE sees. Split (regex or string, five delimiter behaviours, invert),
 * ByteLevel (optional GPT-2 split, add_prefix_space, bytes -> printable
 * alphabet), Metaspace, Digits and Sequence, each with the semantics of
 * Hugging Face `tokenizers`, including that empty pieces are dropped.
 */
#include <pthread.h>
#include <string.h>

#include "tokenizer/tokenizer-impl.h"

/* ---- piece lists ----------------------------------------------------------- */
cq_status tok_pieces_push(tok_pieces *p, const char *s, size_t len, bool orig0) {
    if (len == 0) return CQ_OK; /* empty splits vanish */
    if (p->buf.n + len >= UINT32_MAX) return cq_fail(CQ_ERR_NOMEM, "tokenizer: text too long");
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        tok_piece *v = cq_reallocn(p->v, cap, sizeof *v);
        if (!v) return CQ_ERR_NOMEM;
        p->v = v;
        p->cap = cap;
    }
    uint32_t off = (uint32_t)p->buf.n;
    CQ_TRY(tok_buf_append(&p->buf, s, len));
    p->v[p->n].off = off;
    p->v[p->n].len = (uint32_t)len;
    p->v[p->n].orig0 = orig0;
    p->n++;
    return CQ_OK;
}

static void pieces_clear(tok_pieces *p) {
    p->n = 0;
    p->buf.n = 0;
}

void tok_pieces_free(tok_pieces *p) {
    cq_free(p->v);
    tok_buf_free(&p->buf);
    memset(p, 0, sizeof *p);
}

/* ---- the byte-level alphabet ---------------------------------------------
 * GPT-2 maps each byte to a printable code point: bytes that are printable
 * Latin-1 ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) map to themselves, the other 68
 * to U+0100 onwards in byte order. */
static uint32_t byte_to_cp(unsigned b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) n++;
    return 0x100 + n;
}

typedef struct byte_map {
    char enc[256][2];
    uint8_t len[256];
    int16_t inv[0x144]; /* code point -> byte, -1 outside the alphabet */
} byte_map;

static byte_map g_bytes;
static pthread_once_t g_bytes_once = PTHREAD_ONCE_INIT;

static void bytes_init(void) {
    for (unsigned i = 0; i < 0x144; i++) g_bytes.inv[i] = -1;
    for (unsigned b = 0; b < 256; b++) {
        char e[4];
        uint32_t cp = byte_to_cp(b);
        size_t k = tok_utf8_encode(cp, e);
        g_bytes.len[b] = (uint8_t)k;
        memcpy(g_bytes.enc[b], e, 2);
        g_bytes.inv[cp] = (int16_t)b;
    }
}

static const byte_map *bytes_alphabet(void) {
    pthread_once(&g_bytes_once, bytes_init);
    return &g_bytes;
}

int32_t tok_bytelevel_byte_of(uint32_t cp) {
    const byte_map *m = bytes_alphabet();
    return cp < 0x144 ? m->inv[cp] : -1;
}

static cq_status push_bytelevel(tok_pieces *out, const char *s, size_t n, bool orig0) {
    if (n == 0) return CQ_OK;
    const byte_map *bm = bytes_alphabet();
    char small[512];
    tok_buf big = {0};
    char *dst = small;
    if (n * 2 > sizeof small) {
        CQ_TRY(tok_buf_reserve(&big, n * 2));
        dst = big.p;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        dst[k++] = bm->enc[b][0];
        if (bm->len[b] == 2) dst[k++] = bm->enc[b][1];
    }
    cq_status st = tok_pieces_push(out, dst, k, orig0);
    tok_buf_free(&big);
    return st;
}

/* ---- splitting --------------------------------------------------------------
 * A split is described as a list of (start, end, is_match) events covering
 * the whole string, as Hugging Face's Pattern::find_matches returns it. */
typedef struct ev {
    size_t a, b;
    bool m;
} ev;
typedef struct evs {
    ev *v;
    size_t n, cap;
} evs;

static cq_status ev_push(evs *e, size_t a, size_t b, bool m) {
    if (e->n == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 32;
        ev *v = cq_reallocn(e->v, cap, sizeof *v);
        if (!v) return CQ_ERR_NOMEM;
        e->v = v;
        e->cap = cap;
    }
    e->v[e->n++] = (ev){a, b, m};
    return CQ_OK;
}

static cq_status events_from_spans(const tok_spans *sp, size_t n, bool invert, evs *e) {
    if (n == 0) return ev_push(e, 0, 0, invert);
    size_t prev = 0;
    for (size_t i = 0; i < sp->n; i++) {
        if (prev != sp->v[i].start) CQ_TRY(ev_push(e, prev, sp->v[i].start, invert));
        CQ_TRY(ev_push(e, sp->v[i].start, sp->v[i].end, !invert));
        prev = sp->v[i].end;
    }
    if (prev != n) CQ_TRY(ev_push(e, prev, n, invert));
    return CQ_OK;
}

/* Per-character pattern (a char or a predicate): every matching character is
 * a match of its own. */
typedef bool (*char_pred)(uint32_t cp, uint32_t arg);
static bool pred_eq(uint32_t cp, uint32_t arg) { return cp == arg; }
static bool pred_numeric(uint32_t cp, uint32_t arg) {
    (void)arg;
    return tok_cp_is_numeric(cp);
}

static cq_status events_from_chars(const char *s, size_t n, char_pred f, uint32_t arg, evs *e) {
    if (n == 0) return ev_push(e, 0, 0, false);
    size_t last = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = tok_utf8_decode(s + i, n - i, &cp);
        if (f(cp, arg)) {
            if (last < i) CQ_TRY(ev_push(e, last, i, false));
            CQ_TRY(ev_push(e, i, i + k, true));
            last = i + k;
        }
        i += k;
    }
    if (n > last) CQ_TRY(ev_push(e, last, n, false));
    return CQ_OK;
}

/* Apply a delimiter behaviour and push the resulting pieces. */
static cq_status emit(const evs *e, tok_split_behavior beh, const char *s, bool orig0, bool map_bytes,
                      tok_pieces *out) {
    ev *v = e->v;
    size_t n = e->n, k = 0;
    switch (beh) {
    case TOK_SPLIT_ISOLATED:
        k = n;
        break;
    case TOK_SPLIT_REMOVED:
        for (size_t i = 0; i < n; i++)
            if (!v[i].m) v[k++] = v[i];
        break;
    case TOK_SPLIT_MERGED_PREV: {
        bool prev_match = false;
        for (size_t i = 0; i < n; i++) {
            if (v[i].m && !prev_match && k > 0) v[k - 1].b = v[i].b;
            else v[k++] = (ev){v[i].a, v[i].b, false};
            prev_match = v[i].m;
        }
        break;
    }
    case TOK_SPLIT_MERGED_NEXT: {
        /* Walk backwards, folding a match into the piece after it; the
         * result is built from the end of the array towards its start. */
        bool prev_match = false;
        size_t w = n; /* v[w..n) holds the output, in order */
        for (size_t i = n; i-- > 0;) {
            ev cur = v[i];
            if (cur.m && !prev_match && w < n) v[w].a = cur.a;
            else v[--w] = (ev){cur.a, cur.b, false};
            prev_match = cur.m;
        }
        memmove(v, v + w, (n - w) * sizeof *v);
        k = n - w;
        break;
    }
    case TOK_SPLIT_CONTIGUOUS: {
        bool prev_match = false;
        for (size_t i = 0; i < n; i++) {
            if (v[i].m == prev_match && k > 0) v[k - 1].b = v[i].b;
            else v[k++] = (ev){v[i].a, v[i].b, false};
            prev_match = v[i].m;
        }
        break;
    }
    }
    for (size_t i = 0; i < k; i++) {
        bool o = orig0 && v[i].a == 0;
        if (map_bytes) CQ_TRY(push_bytelevel(out, s + v[i].a, v[i].b - v[i].a, o));
        else CQ_TRY(tok_pieces_push(out, s + v[i].a, v[i].b - v[i].a, o));
    }
    return CQ_OK;
}

/* One pre-tokenizer applied to one piece. */
static cq_status apply_one(const tok_pretok *pt, const char *s, size_t n, bool orig0, tok_pieces *out,
                           tok_spans *spans) {
    evs e = {0};
    cq_status st = CQ_OK;
    tok_buf tmp = {0};
    switch (pt->type) {
    case TOK_PRE_SPLIT:
        st = tok_regex_find_all(pt->re, s, n, spans);
        if (st == CQ_OK) st = events_from_spans(spans, n, pt->invert, &e);
        if (st == CQ_OK) st = emit(&e, pt->behavior, s, orig0, false, out);
        break;
    case TOK_PRE_BYTELEVEL:
        if (pt->add_prefix_space && (n == 0 || s[0] != ' ')) {
            st = tok_buf_append(&tmp, " ", 1);
            if (st == CQ_OK) st = tok_buf_append(&tmp, s, n);
            s = tmp.p;
            n = tmp.n;
        }
        if (st != CQ_OK) break;
        if (pt->re) {
            st = tok_regex_find_all(pt->re, s, n, spans);
            if (st == CQ_OK) st = events_from_spans(spans, n, false, &e);
            if (st == CQ_OK) st = emit(&e, TOK_SPLIT_ISOLATED, s, orig0, true, out);
        } else {
            st = push_bytelevel(out, s, n, orig0);
        }
        break;
    case TOK_PRE_METASPACE: {
        for (size_t i = 0; st == CQ_OK && i < n; i++)
            st = s[i] == ' ' ? tok_buf_append(&tmp, pt->rep, pt->rep_len) : tok_buf_append(&tmp, s + i, 1);
        if (st != CQ_OK) break;
        bool starts = tmp.n >= pt->rep_len && memcmp(tmp.p, pt->rep, pt->rep_len) == 0;
        bool prepend = !starts && (pt->scheme == TOK_PREPEND_ALWAYS ||
                                   (pt->scheme == TOK_PREPEND_FIRST && orig0));
        tok_buf t2 = {0};
        if (prepend) st = tok_buf_append(&t2, pt->rep, pt->rep_len);
        if (st == CQ_OK) st = tok_buf_append(&t2, tmp.p ? tmp.p : "", tmp.n);
        tok_buf_free(&tmp);
        tmp = t2;
        if (st != CQ_OK) break;
        if (pt->split) {
            uint32_t rcp;
            tok_utf8_decode(pt->rep, pt->rep_len, &rcp);
            st = events_from_chars(tmp.p, tmp.n, pred_eq, rcp, &e);
            if (st == CQ_OK) st = emit(&e, TOK_SPLIT_MERGED_NEXT, tmp.p, orig0, false, out);
        } else {
            st = tok_pieces_push(out, tmp.p, tmp.n, orig0);
        }
        break;
    }
    case TOK_PRE_DIGITS:
        st = events_from_chars(s, n, pred_numeric, 0, &e);
        if (st == CQ_OK)
            st = emit(&e, pt->individual_digits ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS, s, orig0,
                      false, out);
        break;
    case TOK_PRE_SEQUENCE:
        st = cq_fail(CQ_ERR_INTERNAL, "tokenizer: nested sequence reached apply_one");
        break;
    }
    cq_free(e.v);
    tok_buf_free(&tmp);
    return st;
}

/* Apply pt to every piece of `in`, appending to `out`. */
static cq_status apply_all(const tok_pretok *pt, const tok_pieces *in, tok_pieces *out, tok_pieces *tmp,
                           tok_spans *spans) {
    if (pt->type != TOK_PRE_SEQUENCE) {
        for (size_t i = 0; i < in->n; i++)
            CQ_TRY(apply_one(pt, in->buf.p + in->v[i].off, in->v[i].len, in->v[i].orig0, out, spans));
        return CQ_OK;
    }
    /* A sequence runs its members one after the other over all pieces. */
    tok_pieces cur = {0}, nxt = {0};
    cq_status st = CQ_OK;
    for (size_t i = 0; st == CQ_OK && i < in->n; i++)
        st = tok_pieces_push(&cur, in->buf.p + in->v[i].off, in->v[i].len, in->v[i].orig0);
    for (size_t j = 0; st == CQ_OK && j < pt->n_items; j++) {
        pieces_clear(&nxt);
        st = apply_all(&pt->items[j], &cur, &nxt, tmp, spans);
        tok_pieces t = cur;
        cur = nxt;
        nxt = t;
    }
    for (size_t i = 0; st == CQ_OK && i < cur.n; i++)
        st = tok_pieces_push(out, cur.buf.p + cur.v[i].off, cur.v[i].len, cur.v[i].orig0);
    tok_pieces_free(&cur);
    tok_pieces_free(&nxt);
    return st;
}

cq_status tok_pretokenize(const tok_pretok *pt, const char *s, size_t len, bool orig0, tok_pieces *out,
                          tok_pieces *tmp, tok_spans *spans) {
    pieces_clear(out);
    if (!pt) return tok_pieces_push(out, s, len, orig0);
    if (pt->type != TOK_PRE_SEQUENCE) return apply_one(pt, s, len, orig0, out, spans);
    /* Top-level sequence: ping-pong between out and tmp. */
    pieces_clear(tmp);
    CQ_TRY(tok_pieces_push(tmp, s, len, orig0));
    tok_pieces *cur = tmp, *nxt = out;
    for (size_t j = 0; j < pt->n_items; j++) {
        pieces_clear(nxt);
        CQ_TRY(apply_all(&pt->items[j], cur, nxt, NULL, spans));
        tok_pieces *t = cur;
        cur = nxt;
        nxt = t;
    }
    if (cur != out) { /* result sits in tmp: swap contents */
        tok_pieces t = *out;
        *out = *tmp;
        *tmp = t;
    }
    return CQ_OK;
}
