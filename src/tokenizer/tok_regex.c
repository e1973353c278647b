/*
 * tok_regex.c — the split/replace patterns of a tokenizer.json. Regex
 * patterns run on PCRE2 (UTF + Unicode properties, JIT when available);
 * String patterns are plain substring searches and need no regex engine.
 *
 * Hugging Face compiles these patterns with Oniguruma, so two things are
 * adjusted to give identical matches:
 *  - escapes whose class differs are rewritten to explicit classes (outside
 *    and inside brackets): `\s` is Unicode White_Space in Oniguruma, but
 *    PCRE2 in UCP mode also counts U+180E; `\w` is L|M|N|Pc in Oniguruma;
 *    `\h` is a hex digit in Oniguruma's Ruby syntax. Negated forms inside a
 *    bracket stay as they are (they differ only on those few characters).
 *  - Matches are enumerated like the onig crate's find_iter: after an empty
 *    match, an empty match at the same end is skipped by advancing one
 *    character.
 */
#include <string.h>

#ifdef CQ_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

#include "tokenizer/tokenizer-impl.h"

struct tok_regex {
    bool literal;
    char *lit;
    size_t lit_len;
#ifdef CQ_HAVE_PCRE2
    pcre2_code *code;
#endif
};

void tok_spans_free(tok_spans *s) {
#ifdef CQ_HAVE_PCRE2
    pcre2_match_data_free(s->md);
#endif
    cq_free(s->v);
    memset(s, 0, sizeof *s);
}

static cq_status spans_push(tok_spans *s, size_t a, size_t b) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        tok_span *v = cq_reallocn(s->v, cap, sizeof *v);
        if (!v) return CQ_ERR_NOMEM;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].start = a;
    s->v[s->n].end = b;
    s->n++;
    return CQ_OK;
}

void tok_regex_free(tok_regex *re) {
    if (!re) return;
#ifdef CQ_HAVE_PCRE2
    pcre2_code_free(re->code);
#endif
    cq_free(re->lit);
    cq_free(re);
}

#ifdef CQ_HAVE_PCRE2
/* Unicode White_Space, the set Oniguruma and Rust call \s. */
static const char k_ws_class[] =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

/* Oniguruma's \w is L|M|N|Pc (PCRE2 10.42 in UCP mode: L|N and '_');
 * its \h (Ruby syntax) is a hex digit, not horizontal space. */
static const char k_word_class[] = "\\p{L}\\p{M}\\p{N}\\p{Pc}";
static const char k_hex_class[] = "0-9a-fA-F";

/* The replacement class body for an escape letter, or NULL to keep it. */
static const char *class_body(char e) {
    switch (e) {
    case 's': case 'S': return k_ws_class;
    case 'w': case 'W': return k_word_class;
    case 'h': case 'H': return k_hex_class;
    default: return NULL;
    }
}

static cq_status rewrite_pattern(const char *p, size_t n, tok_buf *out) {
    bool in_class = false;
    size_t class_start = 0; /* index just past '[' or '[^' */
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char e = p[i + 1];
            const char *body = class_body(e);
            bool negated = e == 'S' || e == 'W' || e == 'H';
            if (body && in_class && !negated) {
                CQ_TRY(tok_buf_append(out, body, strlen(body)));
            } else if (body && !in_class) {
                CQ_TRY(tok_buf_append(out, negated ? "[^" : "[", negated ? 2 : 1));
                CQ_TRY(tok_buf_append(out, body, strlen(body)));
                CQ_TRY(tok_buf_append(out, "]", 1));
            } else { /* other escapes, and negated ones inside a class, stay */
                CQ_TRY(tok_buf_append(out, p + i, 2));
            }
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            CQ_TRY(tok_buf_append(out, "[", 1));
            if (i + 1 < n && p[i + 1] == '^') {
                CQ_TRY(tok_buf_append(out, "^", 1));
                i++;
            }
            class_start = i + 1;
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && p[i + 1] == ':') { /* [:alpha:] */
            const char *end = NULL;
            for (size_t j = i + 2; j + 1 < n; j++)
                if (p[j] == ':' && p[j + 1] == ']') {
                    end = p + j + 2;
                    break;
                }
            if (end) {
                size_t k = (size_t)(end - (p + i));
                CQ_TRY(tok_buf_append(out, p + i, k));
                i += k - 1;
                continue;
            }
        }
        if (in_class && c == ']' && i != class_start) in_class = false;
        CQ_TRY(tok_buf_append(out, &c, 1));
    }
    return CQ_OK;
}
#endif

cq_status tok_regex_compile(const char *pat, size_t len, bool literal, const char *field,
                            tok_regex **out) {
    *out = NULL;
    tok_regex *re = cq_calloc(1, sizeof *re);
    if (!re) return CQ_ERR_NOMEM;
    if (literal) {
        re->literal = true;
        re->lit = cq_strndup(pat, len);
        re->lit_len = len;
        if (!re->lit) {
            tok_regex_free(re);
            return CQ_ERR_NOMEM;
        }
        *out = re;
        return CQ_OK;
    }
#ifdef CQ_HAVE_PCRE2
    tok_buf rp = {0};
    cq_status st = rewrite_pattern(pat, len, &rp);
    if (st != CQ_OK) {
        tok_buf_free(&rp);
        tok_regex_free(re);
        return st;
    }
    int err = 0;
    PCRE2_SIZE erroff = 0;
    re->code = pcre2_compile((PCRE2_SPTR)(rp.p ? rp.p : ""), rp.n, PCRE2_UTF | PCRE2_UCP, &err,
                             &erroff, NULL);
    tok_buf_free(&rp);
    if (!re->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        tok_regex_free(re);
        return cq_fail(CQ_ERR_PARSE, "tokenizer.json: %s: regex does not compile: %s", field,
                       (const char *)msg);
    }
    /* JIT is an optimisation only: without it pcre2_match interprets. */
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    *out = re;
    return CQ_OK;
#else
    tok_regex_free(re);
    return cq_fail(CQ_ERR_UNSUPPORTED,
                   "tokenizer.json: %s: regex patterns need PCRE2, which this build lacks", field);
#endif
}

static size_t char_len_at(const char *s, size_t n, size_t i) {
    if (i >= n) return 1;
    unsigned char c = (unsigned char)s[i];
    size_t k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    return k;
}

static cq_status find_literal(const tok_regex *re, const char *s, size_t n, tok_spans *out) {
    if (re->lit_len == 0) { /* empty pattern: an empty match at every character boundary */
        for (size_t i = 0; i <= n; i += char_len_at(s, n, i)) CQ_TRY(spans_push(out, i, i));
        return CQ_OK;
    }
    size_t i = 0;
    while (i + re->lit_len <= n) {
        const char *hit = memmem(s + i, n - i, re->lit, re->lit_len);
        if (!hit) break;
        size_t a = (size_t)(hit - s);
        CQ_TRY(spans_push(out, a, a + re->lit_len));
        i = a + re->lit_len;
    }
    return CQ_OK;
}

cq_status tok_regex_find_all(const tok_regex *re, const char *s, size_t n, tok_spans *out) {
    out->n = 0;
    if (re->literal) return find_literal(re, s, n, out);
#ifdef CQ_HAVE_PCRE2
    /* one ovector pair (the whole match) serves every pattern */
    if (!out->md) out->md = pcre2_match_data_create(1, NULL);
    pcre2_match_data *md = out->md;
    if (!md) return cq_fail(CQ_ERR_NOMEM, "tokenizer: out of memory for regex match data");
    cq_status st = CQ_OK;
    size_t last_end = 0;
    bool have_last = false;
    size_t last_match_end = 0;
    const PCRE2_SPTR subj = (PCRE2_SPTR)(s ? s : "");
    while (last_end <= n) {
        int rc = pcre2_match(re->code, subj, n, last_end, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* deep backtracking: the interpreter uses the heap */
            rc = pcre2_match(re->code, subj, n, last_end, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                             NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            st = cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer: regex match failed on this input: %s",
                         (const char *)msg);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], b = ov[1];
        if (a > b || b > n) { /* \K tricks; never in tokenizer patterns */
            st = cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer: regex produced an inverted match");
            break;
        }
        if (a == b && have_last && last_match_end == b) {
            last_end += char_len_at(s, n, last_end);
            continue;
        }
        last_end = b;
        last_match_end = b;
        have_last = true;
        st = spans_push(out, a, b);
        if (st != CQ_OK) break;
    }
    return st;
#else
    return cq_fail(CQ_ERR_UNSUPPORTED, "tokenizer: regex support (PCRE2) missing");
#endif
}
