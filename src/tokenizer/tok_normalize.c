/*
 * tok_normalize.c — the normalizers of a tokenizer.json: Unicode NFC, NFD,
 * NFKC, NFKD (utf8proc), Replace, Prepend, Lowercase, Strip and Sequence.
 * Each maps a UTF-8 string to a new one; offsets are not tracked because
 * only ids are produced.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef CQ_HAVE_UTF8PROC
#include <utf8proc.h>
#endif

#include "tokenizer/tokenizer-impl.h"

/* Below U+0300 no character changes under NFC (no combining marks, no
 * singletons), and ASCII is invariant under all four forms. */
static bool all_below(const char *s, size_t n, uint32_t limit) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        i += tok_utf8_decode(s + i, n - i, &cp);
        if (cp >= limit) return false;
    }
    return true;
}

static cq_status library_form(tok_norm_type type, const char *s, size_t n, tok_buf *out) {
    uint32_t limit = type == TOK_NORM_NFC ? 0x300 : 0x80;
    if (all_below(s, n, limit)) return tok_buf_append(out, s, n);
#ifdef CQ_HAVE_UTF8PROC
    int opt = UTF8PROC_STABLE;
    switch (type) {
    case TOK_NORM_NFC: opt |= UTF8PROC_COMPOSE; break;
    case TOK_NORM_NFD: opt |= UTF8PROC_DECOMPOSE; break;
    case TOK_NORM_NFKC: opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    default: opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    if (n > (size_t)INT32_MAX) return cq_fail(CQ_ERR_INVALID_ARG, "tokenizer: text too long to normalize");
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                      (utf8proc_option_t)opt);
    if (r < 0) {
        free(dst);
        return cq_fail(r == UTF8PROC_ERROR_NOMEM ? CQ_ERR_NOMEM : CQ_ERR_INTERNAL,
                       "tokenizer: Unicode normalization failed: %s", utf8proc_errmsg(r));
    }
    cq_status st = tok_buf_append(out, dst, (size_t)r);
    free(dst); /* utf8proc allocates with malloc */
    return st;
#else
    return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer: Unicode normalization needs utf8proc");
#endif
}

/* An ASCII character is a starter that never combines with what precedes
 * it, so every normalization form splits at it: text before it normalizes
 * independently of text after it. Only the non-ASCII runs (with the one
 * character before each, which marks may attach to) go to the library;
 * ASCII stretches are copied. */
static cq_status unicode_form(tok_norm_type type, const char *s, size_t n, tok_buf *out) {
    size_t done = 0, i = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        size_t a = i > done ? i - 1 : i; /* include the preceding ASCII character */
        size_t b = i;
        while (b < n && (unsigned char)s[b] >= 0x80) b++;
        CQ_TRY(tok_buf_append(out, s + done, a - done));
        CQ_TRY(library_form(type, s + a, b - a, out));
        done = i = b;
    }
    return tok_buf_append(out, s + done, n - done);
}

static cq_status lowercase(const char *s, size_t n, tok_buf *out) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            char l = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            CQ_TRY(tok_buf_append(out, &l, 1));
            i++;
            continue;
        }
        uint32_t cp;
        i += tok_utf8_decode(s + i, n - i, &cp);
        char enc[4];
        if (cp == 0x130) { /* the one full lowercase mapping of more than one char */
            CQ_TRY(tok_buf_append(out, "i\xCC\x87", 3));
            continue;
        }
#ifdef CQ_HAVE_UTF8PROC
        cp = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
#endif
        CQ_TRY(tok_buf_append(out, enc, tok_utf8_encode(cp, enc)));
    }
    return CQ_OK;
}

static cq_status strip(const tok_norm *nm, const char *s, size_t n, tok_buf *out) {
    size_t a = 0, b = n;
    if (nm->left) {
        while (a < b) {
            uint32_t cp;
            size_t k = tok_utf8_decode(s + a, b - a, &cp);
            if (!tok_cp_is_whitespace(cp)) break;
            a += k;
        }
    }
    if (nm->right) {
        while (b > a) {
            size_t j = b - 1;
            while (j > a && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
            uint32_t cp;
            tok_utf8_decode(s + j, b - j, &cp);
            if (!tok_cp_is_whitespace(cp)) break;
            b = j;
        }
    }
    return tok_buf_append(out, s + a, b - a);
}

/* Normalized text may grow (NFKC expands one code point to at most 18, a
 * Replace or Prepend adds its text), but not without bound: a Replace whose
 * pattern matches the empty string inserts its content at every position,
 * and a Sequence of such multiplies the text each time. */
#define NORM_GROWTH 64
#define NORM_SLACK 4096

static cq_status too_long(size_t n, size_t limit) {
    return cq_fail(CQ_ERR_INVALID_ARG,
                   "tokenizer: normalizing %zu bytes of text makes more than %zu (the tokenizer.json's normalizers "
                   "grow text without bound; a Replace whose pattern matches the empty string?)",
                   n, limit);
}

static cq_status replace(const tok_norm *nm, const char *s, size_t n, tok_buf *out, size_t limit, size_t n0) {
    tok_spans sp = {0};
    cq_status st = tok_regex_find_all(nm->re, s, n, &sp);
    size_t prev = 0;
    for (size_t i = 0; st == CQ_OK && i < sp.n; i++) {
        if (out->n + (sp.v[i].start - prev) + nm->text_len > limit) {
            st = too_long(n0, limit);
            break;
        }
        st = tok_buf_append(out, s + prev, sp.v[i].start - prev);
        if (st == CQ_OK) st = tok_buf_append(out, nm->text, nm->text_len);
        prev = sp.v[i].end;
    }
    if (st == CQ_OK) st = tok_buf_append(out, s + prev, n - prev);
    tok_spans_free(&sp);
    return st;
}

static cq_status apply(const tok_norm *nm, const char *s, size_t n, tok_buf *out, size_t limit, size_t n0) {
    switch (nm->type) {
    case TOK_NORM_NFC: case TOK_NORM_NFD: case TOK_NORM_NFKC: case TOK_NORM_NFKD:
        return unicode_form(nm->type, s, n, out);
    case TOK_NORM_LOWERCASE:
        return lowercase(s, n, out);
    case TOK_NORM_STRIP:
        return strip(nm, s, n, out);
    case TOK_NORM_REPLACE:
        return replace(nm, s, n, out, limit, n0);
    case TOK_NORM_PREPEND:
        if (n) CQ_TRY(tok_buf_append(out, nm->text, nm->text_len));
        return tok_buf_append(out, s, n);
    case TOK_NORM_SEQUENCE: {
        tok_buf a = {0}, b = {0};
        cq_status st = tok_buf_append(&a, s, n);
        for (size_t i = 0; st == CQ_OK && i < nm->n_items; i++) {
            b.n = 0;
            st = apply(&nm->items[i], a.p, a.n, &b, limit, n0);
            if (st == CQ_OK && b.n > limit) st = too_long(n0, limit);
            tok_buf t = a;
            a = b;
            b = t;
        }
        if (st == CQ_OK) st = tok_buf_append(out, a.p, a.n);
        tok_buf_free(&a);
        tok_buf_free(&b);
        return st;
    }
    }
    return cq_fail(CQ_ERR_INTERNAL, "tokenizer: unknown normalizer %d", (int)nm->type);
}

cq_status tok_normalize(const tok_norm *nm, const char *s, size_t n, tok_buf *out) {
    out->n = 0;
    CQ_TRY(tok_buf_reserve(out, n));
    if (!nm) return tok_buf_append(out, s, n);
    const size_t limit = n > (SIZE_MAX - NORM_SLACK) / NORM_GROWTH ? SIZE_MAX : n * NORM_GROWTH + NORM_SLACK;
    CQ_TRY(apply(nm, s, n, out, limit, n));
    return out->n > limit ? too_long(n, limit) : CQ_OK;
}
