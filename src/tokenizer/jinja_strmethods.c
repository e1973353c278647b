/*
 * jinja_strmethods.c — the Python str methods templates call
 * (startswith/endswith with tuples and ranges, find/index/count, split and
 * rsplit with Python's whitespace rules, strip family, case methods, join,
 * replace, partition, zfill/center/ljust/rjust, is* predicates, format...).
 * Positions are code points. On Markup the methods markupsafe wraps escape
 * their string arguments and return Markup.
 */
#include <stdio.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

/* ---- small helpers ---------------------------------------------------------------------- */
static cq_status str_out(cq_jrender *r, const char *s, size_t n, cq_jv *out) {
    const cq_jstr *x = cq_jstr_new(&r->arena, s, n);
    if (!x) return CQ_ERR_NOMEM;
    *out = cq_jv_strv(x);
    return CQ_OK;
}

static cq_status buf_out(cq_jrender *r, cq_jbuf *b, cq_status s, cq_jv *out) {
    const cq_jstr *x = NULL;
    if (s == CQ_OK) s = cq_jbuf_to_str(r, b, &x);
    cq_jbuf_free(b);
    CQ_TRY(s);
    *out = cq_jv_strv(x);
    return CQ_OK;
}

static cq_status need_str(cq_jv v, const char *what, uint32_t line, const cq_jstr **out) {
    if (v.kind == CQ_JV_STR) {
        *out = v.u.s;
        return CQ_OK;
    }
    if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
    return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s must be str, not %s", what, cq_jv_type_name(v));
}

static cq_status need_int(cq_jv v, const char *what, uint32_t line, int64_t *out) {
    if (v.kind == CQ_JV_INT) *out = v.u.i;
    else if (v.kind == CQ_JV_BOOL) *out = v.u.b;
    else if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
    else
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s must be an integer, not %s", what,
                            cq_jv_type_name(v));
    return CQ_OK;
}

/* Optional positional argument i (methods take no keywords except split's). */
static bool opt(const cq_jargs *a, size_t i, cq_jv *out) {
    if (i < a->npos && a->pos[i].kind != CQ_JV_NONE) {
        *out = a->pos[i];
        return true;
    }
    return false;
}

/* Byte range of s[start:end] in code point indices (Python find/startswith). */
static void cp_range(const cq_jstr *s, const cq_jargs *a, size_t first, uint32_t line, size_t *b0,
                     size_t *b1, cq_status *st) {
    int64_t n = (int64_t)cq_utf8_count(s->s, s->len), lo = 0, hi = n;
    cq_jv v;
    *st = CQ_OK;
    if (opt(a, first, &v)) {
        *st = need_int(v, "start", line, &lo);
        if (lo < 0) lo = lo + n < 0 ? 0 : lo + n;
    }
    if (*st == CQ_OK && opt(a, first + 1, &v)) {
        *st = need_int(v, "end", line, &hi);
        if (hi < 0) hi = hi + n < 0 ? 0 : hi + n;
    }
    if (lo > n) lo = n + 1; /* empty range that still lets "" match only if lo <= n */
    if (hi > n) hi = n;
    if (lo > n) {
        *b0 = s->len + 1;
        *b1 = s->len;
        return;
    }
    *b0 = cq_utf8_offset(s->s, s->len, (size_t)lo);
    *b1 = hi < lo ? *b0 : cq_utf8_offset(s->s, s->len, (size_t)hi);
}

static bool has_at(const cq_jstr *s, size_t pos, const cq_jstr *sub) {
    return pos <= s->len && s->len - pos >= sub->len && memcmp(s->s + pos, sub->s, sub->len) == 0;
}

static cq_status starts_ends(cq_jrender *r, const cq_jstr *s, const cq_jargs *a, bool ends,
                             uint32_t line, cq_jv *out) {
    if (a->npos < 1) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "startswith/endswith need an argument");
    size_t b0, b1;
    cq_status st;
    cp_range(s, a, 1, line, &b0, &b1, &st);
    CQ_TRY(st);
    const cq_jv *cands = &a->pos[0];
    size_t nc = 1;
    if (a->pos[0].kind == CQ_JV_LIST && a->pos[0].u.list->tuple) {
        cands = a->pos[0].u.list->v;
        nc = a->pos[0].u.list->n;
    }
    bool res = false;
    for (size_t i = 0; i < nc && !res; i++) {
        const cq_jstr *sub = NULL;
        CQ_TRY(need_str(cands[i], ends ? "endswith arg" : "startswith arg", line, &sub));
        if (b0 > s->len || b1 < b0 || b1 - b0 < sub->len) continue;
        res = ends ? memcmp(s->s + b1 - sub->len, sub->s, sub->len) == 0
                   : memcmp(s->s + b0, sub->s, sub->len) == 0;
    }
    (void)r;
    *out = cq_jv_bool(res);
    return CQ_OK;
}

static cq_status find(cq_jrender *r, const cq_jstr *s, const cq_jargs *a, bool rev, bool raise,
                      uint32_t line, cq_jv *out) {
    if (a->npos < 1) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "find needs an argument");
    const cq_jstr *sub = NULL;
    CQ_TRY(need_str(a->pos[0], "substring", line, &sub));
    size_t b0, b1;
    cq_status st;
    cp_range(s, a, 1, line, &b0, &b1, &st);
    CQ_TRY(st);
    CQ_TRY(cq_jinja_charge(r, s->len / 16, line));
    int64_t res = -1;
    if (b0 <= s->len && b1 >= b0 && b1 - b0 >= sub->len) {
        if (!rev) {
            for (size_t i = b0; i + sub->len <= b1; i++)
                if (has_at(s, i, sub)) {
                    res = (int64_t)cq_utf8_count(s->s, i);
                    break;
                }
        } else {
            for (size_t i = b1 - sub->len + 1; i-- > b0;)
                if (has_at(s, i, sub)) {
                    res = (int64_t)cq_utf8_count(s->s, i);
                    break;
                }
        }
    }
    if (res < 0 && raise) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "substring not found");
    *out = cq_jv_int(res);
    return CQ_OK;
}

/* str.split / str.rsplit */
static cq_status split(cq_jrender *r, const cq_jstr *s, const cq_jargs *a, bool rev, uint32_t line,
                       cq_jv *out) {
    static const char *const names[] = {"sep", "maxsplit", NULL};
    CQ_TRY(cq_jargs_check(a, 2, names, "split()", line));
    cq_jv sv, mv;
    bool has_sep, has_max;
    CQ_TRY(cq_jargs_get(a, 0, "sep", line, &sv, &has_sep));
    CQ_TRY(cq_jargs_get(a, 1, "maxsplit", line, &mv, &has_max));
    int64_t maxsplit = -1;
    if (has_max) CQ_TRY(need_int(mv, "maxsplit", line, &maxsplit));
    const cq_jstr *sep = NULL;
    if (has_sep && sv.kind != CQ_JV_NONE) CQ_TRY(need_str(sv, "sep", line, &sep));
    if (sep && sep->len == 0) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "empty separator");
    CQ_TRY(cq_jinja_charge(r, s->len / 16, line));
    cq_jlist *l = cq_jlist_new(&r->arena, 0);
    if (!l) return CQ_ERR_NOMEM;
    /* Collect pieces as byte ranges, then build (reverse for rsplit). */
    size_t cap = 16, np = 0;
    size_t *st = cq_jarena_alloc(&r->arena, cap * sizeof *st), *en = cq_jarena_alloc(&r->arena, cap * sizeof *en);
    if (!st || !en) return CQ_ERR_NOMEM;
#define ADD_PIECE(a0, a1)                                                                   \
    do {                                                                                    \
        if (np == cap) {                                                                    \
            size_t *ns = cq_jarena_alloc(&r->arena, 2 * cap * sizeof *ns);                  \
            size_t *ne = cq_jarena_alloc(&r->arena, 2 * cap * sizeof *ne);                  \
            if (!ns || !ne) return CQ_ERR_NOMEM;                                            \
            memcpy(ns, st, cap * sizeof *ns);                                               \
            memcpy(ne, en, cap * sizeof *ne);                                               \
            st = ns;                                                                        \
            en = ne;                                                                        \
            cap *= 2;                                                                       \
        }                                                                                   \
        st[np] = (a0);                                                                      \
        en[np] = (a1);                                                                      \
        np++;                                                                               \
    } while (0)
    int64_t splits = 0;
    if (!sep) {
        /* whitespace runs; leading/trailing whitespace produces no pieces */
        size_t n = s->len;
        /* Decode positions of whitespace code points once. */
        if (!rev) {
            size_t i = 0;
            for (;;) {
                while (i < n) {
                    size_t p = i;
                    uint32_t cp = cq_utf8_next(s->s, n, &i);
                    if (!cq_py_isspace(cp)) {
                        i = p;
                        break;
                    }
                }
                if (i >= n) break;
                if (maxsplit >= 0 && splits >= maxsplit) {
                    /* rest (Python keeps trailing whitespace of the rest stripped? no: kept) */
                    size_t e = n, k = i, last = i;
                    while (k < n) {
                        uint32_t cp = cq_utf8_next(s->s, n, &k);
                        if (!cq_py_isspace(cp)) last = k;
                    }
                    e = last;
                    ADD_PIECE(i, e);
                    break;
                }
                size_t ws = i, j = i;
                while (j < n) {
                    size_t p = j;
                    uint32_t cp = cq_utf8_next(s->s, n, &j);
                    if (cq_py_isspace(cp)) {
                        j = p;
                        break;
                    }
                }
                ADD_PIECE(ws, j);
                splits++;
                i = j;
            }
        } else {
            /* rsplit on whitespace: scan code point boundaries backwards */
            size_t *b = cq_jarena_alloc(&r->arena, (n + 1) * sizeof *b);
            if (!b) return CQ_ERR_NOMEM;
            size_t nb = 0, i = 0;
            while (i < n) {
                b[nb++] = i;
                cq_utf8_next(s->s, n, &i);
            }
            b[nb] = n;
            size_t k = nb; /* index into code points, exclusive end */
            for (;;) {
                while (k > 0) {
                    size_t q = b[k - 1];
                    if (!cq_py_isspace(cq_utf8_next(s->s, n, &q))) break;
                    k--;
                }
                if (k == 0) break;
                if (maxsplit >= 0 && splits >= maxsplit) {
                    size_t f = 0;
                    while (f < k) {
                        size_t q = b[f];
                        if (!cq_py_isspace(cq_utf8_next(s->s, n, &q))) break;
                        f++;
                    }
                    ADD_PIECE(b[f], b[k]);
                    break;
                }
                size_t e = k;
                while (k > 0) {
                    size_t q = b[k - 1];
                    if (cq_py_isspace(cq_utf8_next(s->s, n, &q))) break;
                    k--;
                }
                ADD_PIECE(b[k], b[e]);
                splits++;
            }
        }
    } else if (!rev) {
        size_t i = 0, pst = 0;
        while (i + sep->len <= s->len && (maxsplit < 0 || splits < maxsplit)) {
            if (has_at(s, i, sep)) {
                ADD_PIECE(pst, i);
                i += sep->len;
                pst = i;
                splits++;
            } else {
                i++;
            }
        }
        ADD_PIECE(pst, s->len);
    } else {
        size_t pend = s->len, i = s->len;
        while (i >= sep->len && (maxsplit < 0 || splits < maxsplit)) {
            if (has_at(s, i - sep->len, sep)) {
                ADD_PIECE(i, pend);
                i -= sep->len;
                pend = i;
                splits++;
            } else {
                i--;
            }
        }
        ADD_PIECE(0, pend);
    }
#undef ADD_PIECE
    for (size_t k = 0; k < np; k++) {
        size_t idx = rev ? np - 1 - k : k;
        cq_jv v;
        CQ_TRY(str_out(r, s->s + st[idx], en[idx] - st[idx], &v));
        CQ_TRY(cq_jlist_push(&r->arena, l, v));
    }
    *out = cq_jv_list(l);
    return CQ_OK;
}

static bool all_cp(const cq_jstr *s, bool (*pred)(uint32_t)) {
    if (s->len == 0) return false;
    size_t i = 0;
    while (i < s->len)
        if (!pred(cq_utf8_next(s->s, s->len, &i))) return false;
    return true;
}

static bool is_alnum_cp(uint32_t c) { return cq_py_isalpha(c) || cq_py_isdigit(c); }
static bool is_cased(uint32_t c) { return cq_py_upper(c) != cq_py_lower(c); }

static cq_status pad(cq_jrender *r, const cq_jstr *s, int64_t width, const cq_jstr *fill, int mode,
                     uint32_t line, cq_jv *out) {
    /* mode: 0 ljust, 1 rjust, 2 center (CPython's split of the margin) */
    int64_t len = (int64_t)cq_utf8_count(s->s, s->len);
    if (width <= len) {
        *out = cq_jv_strv(s);
        return CQ_OK;
    }
    if (width > (1 << 20)) return cq_jinja_err(CQ_ERR_BOUNDS, line, "width too large");
    int64_t marg = width - len, left = mode == 0 ? 0 : mode == 1 ? marg : marg / 2 + (marg & width & 1);
    cq_jbuf b = {0};
    cq_status st = CQ_OK;
    for (int64_t k = 0; k < left && st == CQ_OK; k++) st = cq_jbuf_append(r, &b, fill->s, fill->len);
    if (st == CQ_OK) st = cq_jbuf_append(r, &b, s->s, s->len);
    for (int64_t k = 0; k < marg - left && st == CQ_OK; k++) st = cq_jbuf_append(r, &b, fill->s, fill->len);
    return buf_out(r, &b, st, out);
}


static cq_status str_method_plain(cq_jrender *r, const cq_jfunc *fn, const cq_jargs *a, uint32_t line,
                                  cq_jv *out);

/* Markup's methods that markupsafe wraps: string arguments are escaped and
 * string results are Markup again. */
static bool markup_wrapped(int id) {
    switch (id) {
    case CQ_JF_S_CAPITALIZE: case CQ_JF_S_TITLE: case CQ_JF_S_LOWER: case CQ_JF_S_UPPER:
    case CQ_JF_S_REPLACE: case CQ_JF_S_LJUST: case CQ_JF_S_RJUST: case CQ_JF_S_LSTRIP:
    case CQ_JF_S_RSTRIP: case CQ_JF_S_CENTER: case CQ_JF_S_STRIP: case CQ_JF_S_EXPANDTABS:
    case CQ_JF_S_SWAPCASE: case CQ_JF_S_ZFILL: case CQ_JF_S_PARTITION: case CQ_JF_S_RPARTITION:
    case CQ_JF_S_JOIN: case CQ_JF_S_SPLIT: case CQ_JF_S_RSPLIT: case CQ_JF_S_SPLITLINES:
        return true;
    default: return false;
    }
}

static void mark_result(cq_jv *v) {
    if (v->kind == CQ_JV_STR) v->markup = 1;
    else if (v->kind == CQ_JV_LIST)
        for (size_t i = 0; i < v->u.list->n; i++)
            if (v->u.list->v[i].kind == CQ_JV_STR) v->u.list->v[i].markup = 1;
}

cq_status cq_jinja_str_method(cq_jrender *r, const cq_jfunc *fn, const cq_jargs *a, uint32_t line,
                              cq_jv *out) {
    if (!fn->self.markup) return str_method_plain(r, fn, a, line, out);
    if (fn->id == CQ_JF_S_FORMAT) return cq_jinja_str_format(r, fn->self.u.s, a, line, out, true);
    if (!markup_wrapped(fn->id)) return str_method_plain(r, fn, a, line, out);
    if (fn->id == CQ_JF_S_SPLIT || fn->id == CQ_JF_S_RSPLIT || fn->id == CQ_JF_S_SPLITLINES) {
        /* split & co. keep their separator as given, only wrap the pieces */
        CQ_TRY(str_method_plain(r, fn, a, line, out));
        mark_result(out);
        return CQ_OK;
    }
    cq_jv *pos = cq_jarena_alloc(&r->arena, (a->npos + 1) * sizeof(cq_jv));
    cq_jv *kw = cq_jarena_alloc(&r->arena, (a->nkw + 1) * sizeof(cq_jv));
    if (!pos || !kw) return CQ_ERR_NOMEM;
    for (size_t i = 0; i < a->npos; i++) {
        pos[i] = a->pos[i];
        if (pos[i].kind == CQ_JV_STR) CQ_TRY(cq_jinja_escape(r, pos[i], false, line, &pos[i]));
    }
    for (size_t i = 0; i < a->nkw; i++) {
        kw[i] = a->kwvals[i];
        if (kw[i].kind == CQ_JV_STR) CQ_TRY(cq_jinja_escape(r, kw[i], false, line, &kw[i]));
    }
    if (fn->id == CQ_JF_S_JOIN && a->npos == 1) {
        /* join escapes every item */
        const cq_jlist *items;
        CQ_TRY(cq_jv_iterate(r, a->pos[0], line, &items));
        cq_jlist *esc = cq_jlist_new(&r->arena, items->n);
        if (!esc) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < items->n; i++) {
            cq_jv it = items->v[i];
            if (it.kind == CQ_JV_STR) CQ_TRY(cq_jinja_escape(r, it, false, line, &it));
            esc->v[esc->n++] = it;
        }
        pos[0] = cq_jv_list(esc);
    }
    cq_jargs ea = {.pos = pos, .npos = a->npos, .kwnames = a->kwnames, .kwvals = kw, .nkw = a->nkw};
    CQ_TRY(str_method_plain(r, fn, &ea, line, out));
    mark_result(out);
    return CQ_OK;
}

static cq_status str_method_plain(cq_jrender *r, const cq_jfunc *fn, const cq_jargs *a, uint32_t line,
                                  cq_jv *out) {
    const cq_jstr *s = fn->self.u.s;
    int id = fn->id;
    if (id != CQ_JF_S_SPLIT && id != CQ_JF_S_RSPLIT && id != CQ_JF_S_FORMAT && id != CQ_JF_S_SPLITLINES &&
        a->nkw)
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "str.%s() takes no keyword arguments", fn->name->s);
    cq_jv v;
    switch (id) {
    case CQ_JF_S_STARTSWITH: return starts_ends(r, s, a, false, line, out);
    case CQ_JF_S_ENDSWITH: return starts_ends(r, s, a, true, line, out);
    case CQ_JF_S_STRIP:
    case CQ_JF_S_LSTRIP:
    case CQ_JF_S_RSTRIP: {
        const cq_jstr *chars = NULL;
        if (opt(a, 0, &v)) CQ_TRY(need_str(v, "strip arg", line, &chars));
        return cq_jinja_strip(r, s, chars, id != CQ_JF_S_RSTRIP, id != CQ_JF_S_LSTRIP, out);
    }
    case CQ_JF_S_SPLIT: return split(r, s, a, false, line, out);
    case CQ_JF_S_RSPLIT: return split(r, s, a, true, line, out);
    case CQ_JF_S_SPLITLINES: {
        bool keep = false;
        for (size_t k = 0; k < a->nkw; k++)
            if (cq_jstr_eq(a->kwnames[k], "keepends")) keep = cq_jv_truthy(a->kwvals[k]);
        if (a->npos) keep = cq_jv_truthy(a->pos[0]);
        cq_jlist *l;
        CQ_TRY(cq_jinja_splitlines(r, s, keep, &l));
        *out = cq_jv_list(l);
        return CQ_OK;
    }
    case CQ_JF_S_UPPER:
    case CQ_JF_S_LOWER:
    case CQ_JF_S_CASEFOLD:
    case CQ_JF_S_SWAPCASE:
    case CQ_JF_S_CAPITALIZE:
    case CQ_JF_S_TITLE: {
        cq_jbuf b = {0};
        cq_status st = CQ_OK;
        size_t i = 0;
        bool prev_cased = false, first = true;
        while (i < s->len && st == CQ_OK) {
            uint32_t cp = cq_utf8_next(s->s, s->len, &i), o = cp;
            uint32_t full[3];
            size_t nfull = 0;
            switch (id) {
            case CQ_JF_S_UPPER: nfull = cq_py_case_full(cp, true, full); o = full[0]; break;
            case CQ_JF_S_LOWER:
            case CQ_JF_S_CASEFOLD: nfull = cq_py_case_full(cp, false, full); o = full[0]; break;
            case CQ_JF_S_SWAPCASE: o = cq_py_upper(cp) == cp ? cq_py_lower(cp) : cq_py_upper(cp); break;
            case CQ_JF_S_CAPITALIZE: o = first ? cq_py_upper(cp) : cq_py_lower(cp); break;
            default:
                o = prev_cased ? cq_py_lower(cp) : cq_py_upper(cp);
                prev_cased = is_cased(cp);
                break;
            }
            first = false;
            char u[4];
            if (nfull > 1)
                for (size_t k = 0; k < nfull && st == CQ_OK; k++) st = cq_jbuf_append(r, &b, u, cq_utf8_put(full[k], u));
            else st = cq_jbuf_append(r, &b, u, cq_utf8_put(o, u));
        }
        if (s->len == 0) return str_out(r, "", 0, out);
        return buf_out(r, &b, st, out);
    }
    case CQ_JF_S_REPLACE: {
        if (a->npos < 2) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "replace() needs old and new");
        const cq_jstr *o = NULL, *n = NULL;
        CQ_TRY(need_str(a->pos[0], "replace arg", line, &o));
        CQ_TRY(need_str(a->pos[1], "replace arg", line, &n));
        int64_t count = -1;
        if (a->npos > 2) CQ_TRY(need_int(a->pos[2], "count", line, &count));
        return cq_jinja_replace(r, s, o, n, count, line, out);
    }
    case CQ_JF_S_FIND: return find(r, s, a, false, false, line, out);
    case CQ_JF_S_RFIND: return find(r, s, a, true, false, line, out);
    case CQ_JF_S_INDEX: return find(r, s, a, false, true, line, out);
    case CQ_JF_S_RINDEX: return find(r, s, a, true, true, line, out);
    case CQ_JF_S_COUNT: {
        if (a->npos < 1) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "count() needs an argument");
        const cq_jstr *sub = NULL;
        CQ_TRY(need_str(a->pos[0], "count arg", line, &sub));
        size_t b0, b1;
        cq_status st;
        cp_range(s, a, 1, line, &b0, &b1, &st);
        CQ_TRY(st);
        CQ_TRY(cq_jinja_charge(r, s->len / 16, line));
        int64_t c = 0;
        if (b0 <= s->len && b1 >= b0) {
            if (sub->len == 0) c = (int64_t)cq_utf8_count(s->s + b0, b1 - b0) + 1;
            else
                for (size_t i = b0; i + sub->len <= b1;) {
                    if (has_at(s, i, sub)) {
                        c++;
                        i += sub->len;
                    } else i++;
                }
        }
        *out = cq_jv_int(c);
        return CQ_OK;
    }
    case CQ_JF_S_JOIN: {
        if (a->npos != 1) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "join() takes exactly one argument");
        const cq_jlist *items;
        CQ_TRY(cq_jv_iterate(r, a->pos[0], line, &items));
        cq_jbuf b = {0};
        cq_status st = CQ_OK;
        for (size_t i = 0; i < items->n && st == CQ_OK; i++) {
            if (items->v[i].kind != CQ_JV_STR) {
                cq_jbuf_free(&b);
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line,
                                    "sequence item %zu: expected str instance, %s found", i,
                                    cq_jv_type_name(items->v[i]));
            }
            if (i) st = cq_jbuf_append(r, &b, s->s, s->len);
            if (st == CQ_OK) st = cq_jbuf_append(r, &b, items->v[i].u.s->s, items->v[i].u.s->len);
        }
        if (items->n == 0) {
            cq_jbuf_free(&b);
            return str_out(r, "", 0, out);
        }
        return buf_out(r, &b, st, out);
    }
    case CQ_JF_S_FORMAT: return cq_jinja_str_format(r, s, a, line, out, false);
    case CQ_JF_S_ISDIGIT:
    case CQ_JF_S_ISNUMERIC:
    case CQ_JF_S_ISDECIMAL: *out = cq_jv_bool(all_cp(s, cq_py_isdigit)); return CQ_OK;
    case CQ_JF_S_ISALPHA: *out = cq_jv_bool(all_cp(s, cq_py_isalpha)); return CQ_OK;
    case CQ_JF_S_ISALNUM: *out = cq_jv_bool(all_cp(s, is_alnum_cp)); return CQ_OK;
    case CQ_JF_S_ISSPACE: *out = cq_jv_bool(all_cp(s, cq_py_isspace)); return CQ_OK;
    case CQ_JF_S_ISLOWER:
    case CQ_JF_S_ISUPPER: {
        bool cased = false, ok = true;
        size_t i = 0;
        while (i < s->len && ok) {
            uint32_t cp = cq_utf8_next(s->s, s->len, &i);
            if (!is_cased(cp)) continue;
            cased = true;
            ok = id == CQ_JF_S_ISLOWER ? cq_py_lower(cp) == cp : cq_py_upper(cp) == cp;
        }
        *out = cq_jv_bool(cased && ok);
        return CQ_OK;
    }
    case CQ_JF_S_ISTITLE: {
        bool prev_cased = false, any = false, ok = true;
        size_t i = 0;
        while (i < s->len && ok) {
            uint32_t cp = cq_utf8_next(s->s, s->len, &i);
            bool up = is_cased(cp) && cq_py_upper(cp) == cp, lo = is_cased(cp) && cq_py_lower(cp) == cp;
            if (up) {
                ok = !prev_cased;
                prev_cased = any = true;
            } else if (lo) {
                ok = prev_cased;
                prev_cased = any = true;
            } else prev_cased = false;
        }
        *out = cq_jv_bool(any && ok);
        return CQ_OK;
    }
    case CQ_JF_S_ZFILL: {
        int64_t w;
        if (a->npos != 1) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "zfill() takes one argument");
        CQ_TRY(need_int(a->pos[0], "width", line, &w));
        int64_t len = (int64_t)cq_utf8_count(s->s, s->len);
        if (w <= len) {
            *out = cq_jv_strv(s);
            return CQ_OK;
        }
        if (w > (1 << 20)) return cq_jinja_err(CQ_ERR_BOUNDS, line, "width too large");
        cq_jbuf b = {0};
        cq_status st = CQ_OK;
        size_t sign = s->len && (s->s[0] == '+' || s->s[0] == '-') ? 1 : 0;
        st = cq_jbuf_append(r, &b, s->s, sign);
        for (int64_t k = 0; k < w - len && st == CQ_OK; k++) st = cq_jbuf_append(r, &b, "0", 1);
        if (st == CQ_OK) st = cq_jbuf_append(r, &b, s->s + sign, s->len - sign);
        return buf_out(r, &b, st, out);
    }
    case CQ_JF_S_CENTER:
    case CQ_JF_S_LJUST:
    case CQ_JF_S_RJUST: {
        int64_t w;
        if (a->npos < 1) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "missing width");
        CQ_TRY(need_int(a->pos[0], "width", line, &w));
        const cq_jstr *fill = NULL;
        if (a->npos > 1) {
            CQ_TRY(need_str(a->pos[1], "fillchar", line, &fill));
            if (cq_utf8_count(fill->s, fill->len) != 1)
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "The fill character must be exactly one character long");
        } else {
            fill = cq_jstr_new(&r->arena, " ", 1);
            if (!fill) return CQ_ERR_NOMEM;
        }
        return pad(r, s, w, fill, id == CQ_JF_S_LJUST ? 0 : id == CQ_JF_S_RJUST ? 1 : 2, line, out);
    }
    case CQ_JF_S_PARTITION:
    case CQ_JF_S_RPARTITION: {
        if (a->npos != 1) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "partition() takes one argument");
        const cq_jstr *sep = NULL;
        CQ_TRY(need_str(a->pos[0], "sep", line, &sep));
        if (sep->len == 0) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "empty separator");
        cq_jlist *t = cq_jlist_new(&r->arena, 3);
        if (!t) return CQ_ERR_NOMEM;
        t->tuple = true;
        t->n = 3;
        size_t at = SIZE_MAX;
        if (s->len >= sep->len) {
            if (id == CQ_JF_S_PARTITION) {
                for (size_t i = 0; i + sep->len <= s->len; i++)
                    if (has_at(s, i, sep)) {
                        at = i;
                        break;
                    }
            } else {
                for (size_t i = s->len - sep->len + 1; i-- > 0;)
                    if (has_at(s, i, sep)) {
                        at = i;
                        break;
                    }
            }
        }
        if (at == SIZE_MAX) {
            cq_jv e;
            CQ_TRY(str_out(r, "", 0, &e));
            t->v[0] = id == CQ_JF_S_PARTITION ? cq_jv_strv(s) : e;
            t->v[1] = e;
            t->v[2] = id == CQ_JF_S_PARTITION ? e : cq_jv_strv(s);
        } else {
            CQ_TRY(str_out(r, s->s, at, &t->v[0]));
            t->v[1] = cq_jv_strv(sep);
            CQ_TRY(str_out(r, s->s + at + sep->len, s->len - at - sep->len, &t->v[2]));
        }
        *out = cq_jv_list(t);
        return CQ_OK;
    }
    case CQ_JF_S_REMOVEPREFIX:
    case CQ_JF_S_REMOVESUFFIX: {
        if (a->npos != 1) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "takes exactly one argument");
        const cq_jstr *x = NULL;
        CQ_TRY(need_str(a->pos[0], "affix", line, &x));
        if (x->len == 0 || x->len > s->len) {
            *out = cq_jv_strv(s);
            return CQ_OK;
        }
        if (id == CQ_JF_S_REMOVEPREFIX)
            return has_at(s, 0, x) ? str_out(r, s->s + x->len, s->len - x->len, out)
                                   : (*out = cq_jv_strv(s), CQ_OK);
        return has_at(s, s->len - x->len, x) ? str_out(r, s->s, s->len - x->len, out)
                                             : (*out = cq_jv_strv(s), CQ_OK);
    }
    case CQ_JF_S_EXPANDTABS: {
        int64_t tab = 8;
        if (opt(a, 0, &v)) CQ_TRY(need_int(v, "tabsize", line, &tab));
        if (tab > 1024) return cq_jinja_err(CQ_ERR_BOUNDS, line, "tabsize too large");
        cq_jbuf b = {0};
        cq_status st = CQ_OK;
        int64_t col = 0;
        size_t i = 0;
        while (i < s->len && st == CQ_OK) {
            size_t p = i;
            uint32_t cp = cq_utf8_next(s->s, s->len, &i);
            if (cp == '\t') {
                if (tab > 0) {
                    int64_t nsp = tab - col % tab;
                    for (int64_t k = 0; k < nsp && st == CQ_OK; k++) st = cq_jbuf_append(r, &b, " ", 1);
                    col += nsp;
                }
            } else {
                st = cq_jbuf_append(r, &b, s->s + p, i - p);
                col = (cp == '\n' || cp == '\r') ? 0 : col + 1;
            }
        }
        if (s->len == 0) return str_out(r, "", 0, out);
        return buf_out(r, &b, st, out);
    }
    default: break;
    }
    return cq_jinja_err(CQ_ERR_INTERNAL, line, "unknown str method %d", id);
}

