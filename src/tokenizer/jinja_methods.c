/*
 * jinja_methods.c — the Python methods templates call on values
 * (str.startswith/split/strip/format..., dict.items/get..., list.index...),
 * loop.cycle/changed, the globals transformers provides (range, namespace,
 * dict, raise_exception, strftime_now) and printf-style `str % args`.
 *
 * The immutable sandbox blocks mutating list/dict methods: they resolve to
 * an "unsafe" Undefined that fails when used, as in jinja2. Python methods
 * this engine does not implement resolve to a function that fails with
 * CQ_ERR_UNSUPPORTED when called.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tokenizer/jinja_impl.h"

typedef struct method_entry {
    const char *name;
    int id; /* -1: blocked (mutating), -2: exists but unsupported */
} method_entry;

static const method_entry g_str_methods[] = {
    {"startswith", CQ_JF_S_STARTSWITH}, {"endswith", CQ_JF_S_ENDSWITH}, {"strip", CQ_JF_S_STRIP},
    {"lstrip", CQ_JF_S_LSTRIP}, {"rstrip", CQ_JF_S_RSTRIP}, {"split", CQ_JF_S_SPLIT},
    {"rsplit", CQ_JF_S_RSPLIT}, {"splitlines", CQ_JF_S_SPLITLINES}, {"upper", CQ_JF_S_UPPER},
    {"lower", CQ_JF_S_LOWER}, {"title", CQ_JF_S_TITLE}, {"capitalize", CQ_JF_S_CAPITALIZE},
    {"replace", CQ_JF_S_REPLACE}, {"find", CQ_JF_S_FIND}, {"rfind", CQ_JF_S_RFIND},
    {"index", CQ_JF_S_INDEX}, {"rindex", CQ_JF_S_RINDEX}, {"count", CQ_JF_S_COUNT},
    {"join", CQ_JF_S_JOIN}, {"format", CQ_JF_S_FORMAT}, {"isdigit", CQ_JF_S_ISDIGIT},
    {"isalpha", CQ_JF_S_ISALPHA}, {"isalnum", CQ_JF_S_ISALNUM}, {"isspace", CQ_JF_S_ISSPACE},
    {"islower", CQ_JF_S_ISLOWER}, {"isupper", CQ_JF_S_ISUPPER}, {"zfill", CQ_JF_S_ZFILL},
    {"center", CQ_JF_S_CENTER}, {"ljust", CQ_JF_S_LJUST}, {"rjust", CQ_JF_S_RJUST},
    {"partition", CQ_JF_S_PARTITION}, {"rpartition", CQ_JF_S_RPARTITION},
    {"removeprefix", CQ_JF_S_REMOVEPREFIX}, {"removesuffix", CQ_JF_S_REMOVESUFFIX},
    {"swapcase", CQ_JF_S_SWAPCASE}, {"casefold", CQ_JF_S_CASEFOLD},
    {"isnumeric", CQ_JF_S_ISNUMERIC}, {"isdecimal", CQ_JF_S_ISDECIMAL},
    {"istitle", CQ_JF_S_ISTITLE}, {"expandtabs", CQ_JF_S_EXPANDTABS},
    {"encode", -2}, {"format_map", -2}, {"isascii", -2}, {"isidentifier", -2},
    {"isprintable", -2}, {"maketrans", -2}, {"translate", -2}, {NULL, 0}};

static const method_entry g_dict_methods[] = {
    {"items", CQ_JF_D_ITEMS}, {"keys", CQ_JF_D_KEYS}, {"values", CQ_JF_D_VALUES},
    {"get", CQ_JF_D_GET}, {"copy", CQ_JF_D_COPY}, {"fromkeys", -2},
    {"pop", -1}, {"popitem", -1}, {"setdefault", -1}, {"update", -1}, {"clear", -1},
    {NULL, 0}};

static const method_entry g_list_methods[] = {
    {"index", CQ_JF_L_INDEX}, {"count", CQ_JF_L_COUNT}, {"copy", CQ_JF_L_COPY},
    {"append", -1}, {"extend", -1}, {"insert", -1}, {"pop", -1}, {"remove", -1},
    {"reverse", -1}, {"sort", -1}, {"clear", -1}, {NULL, 0}};

static cq_status make_func(cq_jrender *r, int id, cq_jv self, const cq_jstr *name, cq_jv *out) {
    cq_jfunc *fn = cq_jarena_alloc(&r->arena, sizeof *fn);
    if (!fn) return CQ_ERR_NOMEM;
    fn->id = (uint16_t)id;
    fn->self = self;
    fn->name = name;
    *out = (cq_jv){.kind = CQ_JV_FUNC};
    out->u.func = fn;
    return CQ_OK;
}

cq_status cq_jinja_method_lookup(cq_jrender *r, cq_jv self, const cq_jstr *name, cq_jv *out,
                                 bool *found, bool *unsafe) {
    const method_entry *tab = self.kind == CQ_JV_STR                         ? g_str_methods
                              : self.kind == CQ_JV_DICT                      ? g_dict_methods
                              : self.kind == CQ_JV_LIST && !self.u.list->gen ? g_list_methods
                                                                             : NULL;
    *found = false;
    *unsafe = false;
    if (!tab) return CQ_OK;
    for (; tab->name; tab++) {
        if (!cq_jstr_eq(name, tab->name)) continue;
        *found = true;
        if (tab->id == -1) {
            *unsafe = true;
            return CQ_OK;
        }
        return make_func(r, tab->id >= 0 ? tab->id : CQ_JF_UNSUPPORTED, self, name, out);
    }
    return CQ_OK;
}

cq_status cq_jinja_global(cq_jrender *r, const cq_jstr *name, cq_jv *out, bool *found) {
    static const struct {
        const char *name;
        int id;
    } g[] = {{"range", CQ_JF_RANGE},
             {"namespace", CQ_JF_NAMESPACE},
             {"dict", CQ_JF_DICT},
             {"raise_exception", CQ_JF_RAISE},
             {"strftime_now", CQ_JF_STRFTIME_NOW},
             {"cycler", CQ_JF_CYCLER},
             {"joiner", CQ_JF_JOINER},
             {"lipsum", CQ_JF_LIPSUM}};
    *found = false;
    for (size_t i = 0; i < CQ_ARRAY_LEN(g); i++)
        if (cq_jstr_eq(name, g[i].name)) {
            *found = true;
            return make_func(r, g[i].id, cq_jv_none(), name, out);
        }
    return CQ_OK;
}

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

static cq_status str_format(cq_jrender *r, const cq_jstr *fmt, const cq_jargs *a, uint32_t line,
                            cq_jv *out, bool markup);

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

static cq_status str_method(cq_jrender *r, const cq_jfunc *fn, const cq_jargs *a, uint32_t line,
                            cq_jv *out) {
    if (!fn->self.markup) return str_method_plain(r, fn, a, line, out);
    if (fn->id == CQ_JF_S_FORMAT) return str_format(r, fn->self.u.s, a, line, out, true);
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
    case CQ_JF_S_FORMAT: return str_format(r, s, a, line, out, false);
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

/* ---- printf-style % formatting ----------------------------------------------------------- */
static cq_status pct_arg(const cq_jlist *tuple, cq_jv single, bool is_tuple, size_t *next, uint32_t line,
                         cq_jv *out) {
    if (is_tuple) {
        if (*next >= tuple->n)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "not enough arguments for format string");
        *out = tuple->v[(*next)++];
        return CQ_OK;
    }
    if (*next >= 1) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "not enough arguments for format string");
    (*next)++;
    *out = single;
    return CQ_OK;
}

static cq_status pad_field(cq_jrender *r, cq_jbuf *b, const char *s, size_t n, int64_t width,
                           bool left) {
    int64_t len = (int64_t)cq_utf8_count(s, n);
    if (!left)
        for (int64_t k = len; k < width; k++) CQ_TRY(cq_jbuf_append(r, b, " ", 1));
    CQ_TRY(cq_jbuf_append(r, b, s, n));
    if (left)
        for (int64_t k = len; k < width; k++) CQ_TRY(cq_jbuf_append(r, b, " ", 1));
    return CQ_OK;
}

cq_status cq_jinja_str_mod(cq_jrender *r, const cq_jstr *fmt, cq_jv args, uint32_t line, cq_jv *out,
                           bool markup) {
    bool is_tuple = args.kind == CQ_JV_LIST && args.u.list->tuple;
    bool is_map = args.kind == CQ_JV_DICT;
    /* Python treats any argument with __getitem__ (but a tuple or str) as a
     * mapping: it never complains about unused arguments then. */
    bool mapping_like = is_map || args.kind == CQ_JV_UNDEF ||
                        (args.kind == CQ_JV_LIST && !args.u.list->tuple && !args.u.list->gen);
    const cq_jlist *tuple = is_tuple ? args.u.list : NULL;
    size_t next = 0;
    bool used_map = false;
    cq_jbuf b = {0};
    cq_status st = CQ_OK;
    const char *s = fmt->s;
    size_t n = fmt->len, i = 0;
    while (i < n && st == CQ_OK) {
        if (s[i] != '%') {
            size_t j = i;
            while (j < n && s[j] != '%') j++;
            st = cq_jbuf_append(r, &b, s + i, j - i);
            i = j;
            continue;
        }
        i++;
        if (i >= n) {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "incomplete format");
            break;
        }
        cq_jv val;
        bool have_val = false;
        if (s[i] == '(') {
            size_t k = i + 1;
            int depth = 1;
            while (k < n && depth) {
                if (s[k] == '(') depth++;
                else if (s[k] == ')') depth--;
                k++;
            }
            if (depth) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "incomplete format key");
                break;
            }
            if (!is_map) {
                st = args.kind == CQ_JV_UNDEF ? cq_jv_undef_error(args, line)
                                              : cq_jinja_err(CQ_ERR_INVALID_ARG, line, "format requires a mapping");
                break;
            }
            cq_jv *x = cq_jdict_get_str(args.u.dict, s + i + 1, k - i - 2);
            if (!x) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "missing format key");
                break;
            }
            val = *x;
            have_val = true;
            used_map = true;
            i = k;
        }
        bool left = false, plus = false, space = false, zero = false, alt = false;
        for (; i < n && strchr("-+ 0#", s[i]) && s[i]; i++) {
            if (s[i] == '-') left = true;
            else if (s[i] == '+') plus = true;
            else if (s[i] == ' ') space = true;
            else if (s[i] == '0') zero = true;
            else alt = true;
        }
        int64_t width = -1, prec = -1;
        if (i < n && s[i] == '*') {
            st = cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "'*' width in %% formatting is not supported");
            break;
        }
        while (i < n && s[i] >= '0' && s[i] <= '9' && width < 100000) width = (width < 0 ? 0 : width) * 10 + (s[i++] - '0');
        if (i < n && s[i] == '.') {
            i++;
            prec = 0;
            while (i < n && s[i] >= '0' && s[i] <= '9' && prec < 100000) prec = prec * 10 + (s[i++] - '0');
        }
        while (i < n && (s[i] == 'l' || s[i] == 'h' || s[i] == 'L')) i++;
        if (i >= n) {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "incomplete format");
            break;
        }
        char type = s[i++];
        if (type == '%') {
            st = cq_jbuf_append(r, &b, "%", 1);
            continue;
        }
        if (width > 100000 || prec > 1000) {
            st = cq_jinja_err(CQ_ERR_BOUNDS, line, "format width or precision too large");
            break;
        }
        if (!have_val) {
            if (is_map) val = args; /* "%s" % {...} prints the dict */
            else {
                st = pct_arg(tuple, args, is_tuple, &next, line, &val);
                if (st != CQ_OK) break;
            }
        }
        if (type == 's' || type == 'r' || type == 'a') {
            cq_jbuf t = {0};
            if (markup && type == 's') {
                /* Markup % args escapes the arguments */
                cq_jv ev;
                st = cq_jinja_escape(r, val, false, line, &ev);
                if (st == CQ_OK) st = cq_jbuf_append(r, &t, ev.u.s->s, ev.u.s->len);
            } else {
                st = type == 's' ? cq_jv_str_append(r, &t, val, line) : cq_jv_repr_append(r, &t, val, line);
                if (st == CQ_OK && markup) {
                    const cq_jstr *rs = NULL;
                    cq_jv ev;
                    st = cq_jbuf_to_str(r, &t, &rs);
                    if (st == CQ_OK) st = cq_jinja_escape(r, cq_jv_strv(rs), false, line, &ev);
                    if (st == CQ_OK) {
                        t.len = 0;
                        st = cq_jbuf_append(r, &t, ev.u.s->s, ev.u.s->len);
                    }
                }
            }
            if (st == CQ_OK) {
                size_t len = t.len;
                if (prec >= 0) len = cq_utf8_offset(t.p ? t.p : "", t.len, (size_t)prec);
                st = pad_field(r, &b, t.p ? t.p : "", len, width, left);
            }
            cq_jbuf_free(&t);
            continue;
        }
        char spec[32], tmp[1536];
        size_t o = 0;
        spec[o++] = '%';
        if (left) spec[o++] = '-';
        if (plus) spec[o++] = '+';
        if (space) spec[o++] = ' ';
        if (zero) spec[o++] = '0';
        if (alt) spec[o++] = '#';
        spec[o++] = '*';
        spec[o++] = '.';
        spec[o++] = '*';
        if (strchr("diuoxX", type)) {
            int64_t iv;
            if (val.kind == CQ_JV_FLOAT && strchr("diu", type)) {
                if (!isfinite(val.u.f) || fabs(val.u.f) >= 9.2e18) {
                    st = cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "cannot format this float as an integer");
                    break;
                }
                iv = (int64_t)val.u.f;
            } else if (val.kind == CQ_JV_INT || val.kind == CQ_JV_BOOL) {
                iv = val.kind == CQ_JV_BOOL ? val.u.b : val.u.i;
            } else {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%%%c format: a real number is required, not %s",
                                  type, cq_jv_type_name(val));
                break;
            }
            spec[o++] = 'l';
            spec[o++] = 'l';
            spec[o++] = type == 'i' || type == 'u' ? 'd' : type;
            spec[o] = 0;
            /* Python's alternate octal prefix is 0o, not 0. */
            if (alt && type == 'o') {
                st = cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "%%#o is not supported");
                break;
            }
            snprintf(tmp, sizeof tmp, spec, (int)(width < 0 ? 0 : width), (int)(prec < 0 ? 1 : prec), (long long)iv);
            st = cq_jbuf_puts(r, &b, tmp);
        } else if (strchr("eEfFgG", type)) {
            double fv;
            if (val.kind == CQ_JV_FLOAT) fv = val.u.f;
            else if (val.kind == CQ_JV_INT || val.kind == CQ_JV_BOOL) fv = (double)(val.kind == CQ_JV_BOOL ? val.u.b : val.u.i);
            else {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "must be real number, not %s", cq_jv_type_name(val));
                break;
            }
            spec[o++] = type;
            spec[o] = 0;
            snprintf(tmp, sizeof tmp, spec, (int)(width < 0 ? 0 : width), (int)(prec < 0 ? 6 : prec), fv);
            st = cq_jbuf_puts(r, &b, tmp);
        } else if (type == 'c') {
            char u[4];
            size_t m;
            if (val.kind == CQ_JV_INT && val.u.i >= 0 && val.u.i <= 0x10ffff) m = cq_utf8_put((uint32_t)val.u.i, u);
            else if (val.kind == CQ_JV_STR && cq_utf8_count(val.u.s->s, val.u.s->len) == 1) {
                m = val.u.s->len;
                memcpy(u, val.u.s->s, m);
            } else {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%%c requires int or char");
                break;
            }
            st = pad_field(r, &b, u, m, width, left);
        } else {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "unsupported format character '%c'", type);
        }
    }
    if (st == CQ_OK && !mapping_like && !used_map) {
        size_t total = is_tuple ? tuple->n : 1;
        if (next < total)
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "not all arguments converted during string formatting");
    }
    if (st == CQ_OK && n == 0) {
        cq_jbuf_free(&b);
        CQ_TRY(str_out(r, "", 0, out));
    } else {
        CQ_TRY(buf_out(r, &b, st, out));
    }
    out->markup = markup;
    return CQ_OK;
}

/* ---- str.format ------------------------------------------------------------------------------ */
static cq_status format_spec(cq_jrender *r, cq_jbuf *b, cq_jv v, const char *spec, size_t n,
                             uint32_t line) {
    if (n == 0) return cq_jv_str_append(r, b, v, line);
    size_t i = 0;
    char fill = ' ', align = 0, sign = 0;
    bool zero = false;
    int64_t width = -1, prec = -1;
    if (n >= 2 && strchr("<>^=", spec[1]) && spec[1]) {
        fill = spec[0];
        align = spec[1];
        i = 2;
    } else if (strchr("<>^=", spec[0]) && spec[0]) {
        align = spec[0];
        i = 1;
    }
    if (i < n && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
    if (i < n && spec[i] == '0') {
        zero = true;
        i++;
    }
    while (i < n && spec[i] >= '0' && spec[i] <= '9' && width < 100000) width = (width < 0 ? 0 : width) * 10 + (spec[i++] - '0');
    char group = 0;
    if (i < n && (spec[i] == ',' || spec[i] == '_')) group = spec[i++];
    if (i < n && spec[i] == '.') {
        i++;
        prec = 0;
        while (i < n && spec[i] >= '0' && spec[i] <= '9' && prec < 1000) prec = prec * 10 + (spec[i++] - '0');
    }
    char type = 0;
    if (i < n) type = spec[i++];
    if (group && (type == 'x' || type == 'X' || type == 'o' || type == 'b' || type == 'e' || type == 'E' ||
                  type == 'g' || type == 'G'))
        return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "digit grouping with '%c' is not supported", type);
    if (i != n || (type && !strchr("sdfFeEgGxXob%", type)) || (unsigned char)fill >= 0x80)
        return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "format spec '%.*s' is not supported", (int)n, spec);
    if (width > 100000) return cq_jinja_err(CQ_ERR_BOUNDS, line, "format width too large");
    char tmp[1536];
    const char *body;
    size_t blen;
    cq_jbuf t = {0};
    bool numeric = false;
    if (v.kind == CQ_JV_STR || (!cq_jv_is_num(v))) {
        if (type && type != 's')
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Unknown format code '%c' for object of type '%s'",
                                type, cq_jv_type_name(v));
        CQ_TRY(cq_jv_str_append(r, &t, v, line));
        body = t.p ? t.p : "";
        blen = t.len;
        if (prec >= 0) blen = cq_utf8_offset(body, blen, (size_t)prec);
        if (!align) align = '<';
    } else {
        numeric = true;
        bool is_float = v.kind == CQ_JV_FLOAT || (type && strchr("fFeEgG%", type));
        double fv = v.kind == CQ_JV_FLOAT ? v.u.f : (double)(v.kind == CQ_JV_BOOL ? v.u.b : v.u.i);
        char sg[2] = {sign == '+' || sign == ' ' ? sign : 0, 0};
        if (type == 's')
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Unknown format code 's' for a number");
        if (!is_float) {
            if (v.kind == CQ_JV_FLOAT) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Unknown format code for float");
            long long iv = v.kind == CQ_JV_BOOL ? v.u.b : v.u.i;
            char ty = type ? type : 'd';
            if (ty == 'b') {
                char bits[80];
                int k = 0;
                unsigned long long u = iv < 0 ? 0ULL - (unsigned long long)iv : (unsigned long long)iv;
                do {
                    bits[k++] = (char)('0' + (u & 1));
                    u >>= 1;
                } while (u);
                size_t o = 0;
                if (iv < 0) tmp[o++] = '-';
                else if (sg[0]) tmp[o++] = sg[0];
                while (k) tmp[o++] = bits[--k];
                tmp[o] = 0;
            } else {
                char f[8] = {'%', 0};
                size_t o = 1;
                if (sg[0]) f[o++] = sg[0];
                f[o++] = 'l';
                f[o++] = 'l';
                f[o++] = ty;
                f[o] = 0;
                snprintf(tmp, sizeof tmp, f, iv);
            }
        } else {
            char ty = type ? type : 'g';
            bool pct = ty == '%';
            if (pct) {
                fv *= 100;
                ty = 'f';
            }
            if (!type && prec < 0) {
                cq_py_float_repr(fv, tmp, sizeof tmp);
                if (sg[0] && fv >= 0) {
                    memmove(tmp + 1, tmp, strlen(tmp) + 1);
                    tmp[0] = sg[0];
                }
            } else {
                char f[12] = {'%', 0};
                size_t o = 1;
                if (sg[0]) f[o++] = sg[0];
                f[o++] = '.';
                f[o++] = '*';
                f[o++] = ty;
                f[o] = 0;
                snprintf(tmp, sizeof tmp, f, (int)(prec < 0 ? 6 : prec), fv);
                if (pct) strncat(tmp, "%", sizeof tmp - strlen(tmp) - 1);
            }
        }
        if (group) {
            /* insert the separator every three digits of the integer part */
            char g[sizeof tmp];
            size_t tl = strlen(tmp), st0 = (tmp[0] == '-' || tmp[0] == '+' || tmp[0] == ' ') ? 1 : 0, ie = st0;
            while (ie < tl && tmp[ie] >= '0' && tmp[ie] <= '9') ie++;
            size_t o = 0, nd = ie - st0;
            memcpy(g, tmp, st0);
            o = st0;
            for (size_t k = 0; k < nd; k++) {
                if (k && (nd - k) % 3 == 0) g[o++] = group;
                g[o++] = tmp[st0 + k];
            }
            if (o + (tl - ie) + 1 > sizeof g)
                return cq_jinja_err(CQ_ERR_BOUNDS, line, "formatted number too long");
            memcpy(g + o, tmp + ie, tl - ie + 1);
            memcpy(tmp, g, o + (tl - ie) + 1);
        }
        body = tmp;
        blen = strlen(tmp);
        if (!align) align = zero ? '=' : '>';
        if (zero && fill == ' ' && !(n >= 2 && strchr("<>^=", spec[1]) && spec[1])) fill = '0';
    }
    int64_t len = (int64_t)cq_utf8_count(body, blen);
    int64_t padn = width > len ? width - len : 0;
    cq_status st = CQ_OK;
    size_t signlen = numeric && align == '=' && blen && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
    int64_t left = align == '<' ? 0 : align == '^' ? padn / 2 : padn;
    if (align == '=') {
        st = cq_jbuf_append(r, b, body, signlen);
        for (int64_t k = 0; k < padn && st == CQ_OK; k++) st = cq_jbuf_append(r, b, &fill, 1);
        if (st == CQ_OK) st = cq_jbuf_append(r, b, body + signlen, blen - signlen);
    } else {
        for (int64_t k = 0; k < left && st == CQ_OK; k++) st = cq_jbuf_append(r, b, &fill, 1);
        if (st == CQ_OK) st = cq_jbuf_append(r, b, body, blen);
        for (int64_t k = 0; k < padn - left && st == CQ_OK; k++) st = cq_jbuf_append(r, b, &fill, 1);
    }
    cq_jbuf_free(&t);
    return st;
}

static cq_status str_format(cq_jrender *r, const cq_jstr *fmt, const cq_jargs *a, uint32_t line,
                            cq_jv *out, bool markup) {
    cq_jbuf b = {0};
    cq_status st = CQ_OK;
    const char *s = fmt->s;
    size_t n = fmt->len, i = 0, auto_idx = 0;
    bool used_auto = false, used_manual = false;
    while (i < n && st == CQ_OK) {
        char c = s[i];
        if (c == '{' && i + 1 < n && s[i + 1] == '{') {
            st = cq_jbuf_append(r, &b, "{", 1);
            i += 2;
            continue;
        }
        if (c == '}' && i + 1 < n && s[i + 1] == '}') {
            st = cq_jbuf_append(r, &b, "}", 1);
            i += 2;
            continue;
        }
        if (c == '}') {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Single '}' encountered in format string");
            break;
        }
        if (c != '{') {
            size_t j = i;
            while (j < n && s[j] != '{' && s[j] != '}') j++;
            st = cq_jbuf_append(r, &b, s + i, j - i);
            i = j;
            continue;
        }
        size_t j = i + 1;
        int depth = 1;
        while (j < n && depth) {
            if (s[j] == '{') depth++;
            else if (s[j] == '}') depth--;
            if (depth) j++;
        }
        if (j >= n) {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Single '{' encountered in format string");
            break;
        }
        const char *field = s + i + 1;
        size_t flen = j - i - 1;
        i = j + 1;
        /* split field into name[!conv][:spec] */
        size_t k = 0;
        while (k < flen && field[k] != '!' && field[k] != ':') k++;
        size_t name_len = k;
        char conv = 0;
        if (k < flen && field[k] == '!') {
            if (k + 1 < flen) conv = field[k + 1];
            k += 2;
        }
        const char *spec = "";
        size_t slen = 0;
        if (k < flen && field[k] == ':') {
            spec = field + k + 1;
            slen = flen - k - 1;
        }
        if (memchr(spec, '{', slen)) {
            st = cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "nested format fields are not supported");
            break;
        }
        /* first part of the name: index, keyword or empty */
        size_t p = 0;
        while (p < name_len && field[p] != '.' && field[p] != '[') p++;
        cq_jv v;
        if (p == 0) {
            if (used_manual) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "cannot switch from manual field specification to automatic field numbering");
                break;
            }
            used_auto = true;
            if (auto_idx >= a->npos) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Replacement index %zu out of range", auto_idx);
                break;
            }
            v = a->pos[auto_idx++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            if (used_auto) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "cannot switch from automatic field numbering to manual field specification");
                break;
            }
            used_manual = true;
            size_t idx = 0;
            for (size_t q = 0; q < p && idx < 100000; q++) idx = idx * 10 + (size_t)(field[q] - '0');
            if (idx >= a->npos) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Replacement index %zu out of range", idx);
                break;
            }
            v = a->pos[idx];
        } else {
            bool found = false;
            for (size_t q = 0; q < a->nkw; q++)
                if (a->kwnames[q]->len == p && memcmp(a->kwnames[q]->s, field, p) == 0) {
                    v = a->kwvals[q];
                    found = true;
                }
            if (!found) {
                st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "format key '%.*s' not given", (int)p, field);
                break;
            }
        }
        /* .attr and [key] chains, through the sandboxed accessors */
        while (st == CQ_OK && p < name_len) {
            if (field[p] == '.') {
                size_t q = p + 1;
                while (q < name_len && field[q] != '.' && field[q] != '[') q++;
                const cq_jstr *an = cq_jstr_new(&r->arena, field + p + 1, q - p - 1);
                if (!an) st = CQ_ERR_NOMEM;
                else st = cq_jinja_getattr(r, v, an, line, &v);
                p = q;
            } else {
                size_t q = p + 1;
                while (q < name_len && field[q] != ']') q++;
                const char *key = field + p + 1;
                size_t kl = q - p - 1;
                bool digits = kl > 0 && kl < 18;
                int64_t num = 0;
                for (size_t z = 0; z < kl && digits; z++) {
                    if (key[z] < '0' || key[z] > '9') digits = false;
                    else num = num * 10 + (key[z] - '0');
                }
                cq_jv kv;
                if (digits) kv = cq_jv_int(num);
                else {
                    const cq_jstr *ks = cq_jstr_new(&r->arena, key, kl);
                    if (!ks) {
                        st = CQ_ERR_NOMEM;
                        break;
                    }
                    kv = cq_jv_strv(ks);
                }
                st = cq_jinja_getitem(r, v, kv, line, &v);
                p = q + 1;
            }
        }
        if (st != CQ_OK) break;
        if (conv == 'r' || conv == 'a') {
            cq_jbuf t = {0};
            st = cq_jv_repr_append(r, &t, v, line);
            const cq_jstr *x = NULL;
            if (st == CQ_OK) st = cq_jbuf_to_str(r, &t, &x);
            cq_jbuf_free(&t);
            if (st != CQ_OK) break;
            v = cq_jv_strv(x);
        } else if (conv == 's') {
            const cq_jstr *x = NULL;
            st = cq_jv_to_str(r, v, line, &x);
            if (st != CQ_OK) break;
            v = cq_jv_strv(x);
        } else if (conv) {
            st = cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Unknown conversion specifier %c", conv);
            break;
        }
        if (v.kind == CQ_JV_UNDEF && slen) {
            st = cq_jv_undef_error(v, line);
            break;
        }
        if (!markup) {
            st = format_spec(r, &b, v, spec, slen, line);
        } else if (v.kind == CQ_JV_STR && v.markup && !slen) {
            st = cq_jbuf_append(r, &b, v.u.s->s, v.u.s->len);
        } else {
            /* Markup.format escapes every formatted field */
            cq_jbuf fb = {0};
            const cq_jstr *fs = NULL;
            cq_jv ev;
            st = format_spec(r, &fb, v, spec, slen, line);
            if (st == CQ_OK) st = cq_jbuf_to_str(r, &fb, &fs);
            cq_jbuf_free(&fb);
            if (st == CQ_OK) st = cq_jinja_escape(r, cq_jv_strv(fs), false, line, &ev);
            if (st == CQ_OK) st = cq_jbuf_append(r, &b, ev.u.s->s, ev.u.s->len);
        }
    }
    if (st == CQ_OK && n == 0) {
        cq_jbuf_free(&b);
        CQ_TRY(str_out(r, "", 0, out));
    } else {
        CQ_TRY(buf_out(r, &b, st, out));
    }
    out->markup = markup;
    return CQ_OK;
}

/* ---- globals and other builtins ---------------------------------------------------------- */
static cq_status dict_from(cq_jrender *r, const cq_jargs *a, uint32_t line, cq_jdict **out) {
    cq_jdict *d = cq_jdict_new(&r->arena, a->nkw);
    if (!d) return CQ_ERR_NOMEM;
    if (a->npos > 1) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "expected at most 1 positional argument");
    if (a->npos == 1) {
        cq_jv src = a->pos[0];
        if (src.kind == CQ_JV_DICT || src.kind == CQ_JV_NS) {
            for (size_t i = 0; i < src.u.dict->n; i++)
                CQ_TRY(cq_jdict_set(&r->arena, d, src.u.dict->k[i], src.u.dict->v[i]));
        } else {
            const cq_jlist *items;
            CQ_TRY(cq_jv_iterate(r, src, line, &items));
            for (size_t i = 0; i < items->n; i++) {
                const cq_jlist *pair;
                CQ_TRY(cq_jv_iterate(r, items->v[i], line, &pair));
                if (pair->n != 2)
                    return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "dictionary update sequence element has wrong length");
                CQ_TRY(cq_jdict_set(&r->arena, d, pair->v[0], pair->v[1]));
            }
        }
    }
    for (size_t k = 0; k < a->nkw; k++) CQ_TRY(cq_jdict_set(&r->arena, d, cq_jv_strv(a->kwnames[k]), a->kwvals[k]));
    *out = d;
    return CQ_OK;
}

static cq_status do_range(cq_jrender *r, const cq_jargs *a, uint32_t line, cq_jv *out) {
    if (a->nkw) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "range() takes no keyword arguments");
    if (a->npos < 1 || a->npos > 3)
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "range expected 1 to 3 arguments, got %zu", a->npos);
    int64_t v[3];
    for (size_t i = 0; i < a->npos; i++) CQ_TRY(need_int(a->pos[i], "range() argument", line, &v[i]));
    int64_t start = 0, stop, step = 1;
    if (a->npos == 1) stop = v[0];
    else {
        start = v[0];
        stop = v[1];
        if (a->npos == 3) step = v[2];
    }
    if (step == 0) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "range() arg 3 must not be zero");
    /* length without overflow, in the wide type */
    __int128 len = 0;
    if (step > 0 && start < stop) len = ((__int128)stop - start - 1) / step + 1;
    else if (step < 0 && start > stop) len = ((__int128)start - stop - 1) / (-(__int128)step) + 1;
    if (len > 100000)
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line,
                            "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    cq_jlist *l = cq_jlist_new(&r->arena, (size_t)len);
    if (!l) return CQ_ERR_NOMEM;
    for (int64_t i = 0; i < (int64_t)len; i++) l->v[i] = cq_jv_int(start + i * step);
    l->n = (size_t)len;
    *out = cq_jv_list(l);
    return CQ_OK;
}

cq_status cq_jinja_builtin_call(cq_jrender *r, const cq_jfunc *fn, const cq_jargs *a, uint32_t line,
                                cq_jv *out) {
    switch (fn->id) {
    case CQ_JF_RANGE: return do_range(r, a, line, out);
    case CQ_JF_NAMESPACE:
    case CQ_JF_DICT: {
        cq_jdict *d = NULL;
        CQ_TRY(dict_from(r, a, line, &d));
        *out = cq_jv_dict(d);
        if (fn->id == CQ_JF_NAMESPACE) out->kind = CQ_JV_NS;
        return CQ_OK;
    }
    case CQ_JF_RAISE: {
        cq_jv msg = a->npos ? a->pos[0] : cq_jv_undef(NULL);
        const cq_jstr *s;
        CQ_TRY(cq_jv_to_str(r, msg, line, &s));
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s", s->s);
    }
    case CQ_JF_STRFTIME_NOW: {
        if (a->npos != 1 || a->pos[0].kind != CQ_JV_STR)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "strftime_now() needs a format string");
        time_t now = time(NULL);
        struct tm tmv;
        if (!localtime_r(&now, &tmv)) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "no local time");
        char buf[512];
        size_t m = a->pos[0].u.s->len ? strftime(buf, sizeof buf, a->pos[0].u.s->s, &tmv) : 0;
        return str_out(r, buf, m, out);
    }
    case CQ_JF_LOOP_CYCLE: {
        if (a->npos == 0) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "no items for cycling given");
        *out = a->pos[fn->self.u.loop->index0 % a->npos];
        return CQ_OK;
    }
    case CQ_JF_LOOP_CHANGED: {
        cq_jloop *L = fn->self.u.loop;
        cq_jlist *t = cq_jlist_new(&r->arena, a->npos);
        if (!t) return CQ_ERR_NOMEM;
        t->tuple = true;
        if (a->npos) memcpy(t->v, a->pos, a->npos * sizeof(cq_jv));
        t->n = a->npos;
        cq_jv tv = cq_jv_list(t);
        bool changed = !L->changed_set || !cq_jv_equal(L->last_changed, tv);
        if (changed) {
            L->last_changed = tv;
            L->changed_set = true;
        }
        *out = cq_jv_bool(changed);
        return CQ_OK;
    }
    case CQ_JF_D_ITEMS:
    case CQ_JF_D_KEYS:
    case CQ_JF_D_VALUES:
    case CQ_JF_D_COPY: {
        if (a->npos || a->nkw) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s() takes no arguments", fn->name->s);
        const cq_jdict *d = fn->self.u.dict;
        if (fn->id == CQ_JF_D_COPY) {
            cq_jdict *c = cq_jdict_new(&r->arena, d->n);
            if (!c) return CQ_ERR_NOMEM;
            for (size_t i = 0; i < d->n; i++) CQ_TRY(cq_jdict_set(&r->arena, c, d->k[i], d->v[i]));
            *out = cq_jv_dict(c);
            return CQ_OK;
        }
        cq_jlist *l = cq_jlist_new(&r->arena, d->n);
        if (!l) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < d->n; i++) {
            if (fn->id == CQ_JF_D_ITEMS) {
                cq_jlist *pair = cq_jlist_new(&r->arena, 2);
                if (!pair) return CQ_ERR_NOMEM;
                pair->tuple = true;
                pair->v[0] = d->k[i];
                pair->v[1] = d->v[i];
                pair->n = 2;
                l->v[i] = cq_jv_list(pair);
            } else {
                l->v[i] = fn->id == CQ_JF_D_KEYS ? d->k[i] : d->v[i];
            }
        }
        l->n = d->n;
        *out = cq_jv_list(l);
        return CQ_OK;
    }
    case CQ_JF_D_GET: {
        if (a->nkw || a->npos < 1 || a->npos > 2)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "get expected 1 or 2 arguments");
        cq_jv *v = cq_jdict_get(fn->self.u.dict, a->pos[0]);
        *out = v ? *v : (a->npos > 1 ? a->pos[1] : cq_jv_none());
        return CQ_OK;
    }
    case CQ_JF_L_INDEX:
    case CQ_JF_L_COUNT: {
        if (a->nkw || a->npos < 1)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s() needs an argument", fn->name->s);
        const cq_jlist *l = fn->self.u.list;
        CQ_TRY(cq_jinja_charge(r, l->n, line));
        int64_t c = 0;
        for (size_t i = 0; i < l->n; i++) {
            if (!cq_jv_equal(l->v[i], a->pos[0])) continue;
            if (fn->id == CQ_JF_L_INDEX) {
                *out = cq_jv_int((int64_t)i);
                return CQ_OK;
            }
            c++;
        }
        if (fn->id == CQ_JF_L_INDEX) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "value is not in list");
        *out = cq_jv_int(c);
        return CQ_OK;
    }
    case CQ_JF_L_COPY: {
        const cq_jlist *l = fn->self.u.list;
        cq_jlist *c = cq_jlist_new(&r->arena, l->n);
        if (!c) return CQ_ERR_NOMEM;
        if (l->n) memcpy(c->v, l->v, l->n * sizeof(cq_jv));
        c->n = l->n;
        c->tuple = l->tuple;
        *out = cq_jv_list(c);
        return CQ_OK;
    }
    case CQ_JF_CYCLER:
    case CQ_JF_JOINER:
    case CQ_JF_LIPSUM:
    case CQ_JF_UNSUPPORTED:
        return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "'%s' is not supported", fn->name ? fn->name->s : "?");
    default:
        if (fn->id >= CQ_JF_S_STARTSWITH && fn->id <= CQ_JF_S_EXPANDTABS) return str_method(r, fn, a, line, out);
        return cq_jinja_err(CQ_ERR_INTERNAL, line, "unknown builtin %d", fn->id);
    }
}
