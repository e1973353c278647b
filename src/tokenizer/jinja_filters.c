/*
 * jinja_filters.c — jinja2's builtin filters and tests that chat templates
 * use, with jinja2's argument names and defaults, plus transformers' tojson
 * (json.dumps with ensure_ascii=False) in place of jinja2's HTML-safe one.
 *
 * Filters that real chat templates do not use (urlize, wordwrap, groupby,
 * ...) fail with CQ_ERR_UNSUPPORTED when a render reaches them, so a
 * template mentioning one in an unused branch still renders.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

/* ---- arguments ---------------------------------------------------------------------- */
cq_status cq_jargs_get(const cq_jargs *a, size_t idx, const char *name, uint32_t line, cq_jv *out,
                       bool *present) {
    bool got = false;
    if (idx < a->npos) {
        *out = a->pos[idx];
        got = true;
    }
    if (name)
        for (size_t k = 0; k < a->nkw; k++)
            if (cq_jstr_eq(a->kwnames[k], name)) {
                if (got)
                    return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "got multiple values for argument '%s'",
                                        name);
                *out = a->kwvals[k];
                got = true;
            }
    *present = got;
    return CQ_OK;
}

cq_status cq_jargs_check(const cq_jargs *a, size_t max_pos, const char *const *names,
                         const char *fn, uint32_t line) {
    if (a->npos > max_pos)
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s takes at most %zu positional arguments (%zu given)",
                            fn, max_pos, a->npos);
    for (size_t k = 0; k < a->nkw; k++) {
        bool ok = false;
        for (const char *const *n = names; n && *n; n++)
            if (cq_jstr_eq(a->kwnames[k], *n)) ok = true;
        if (!ok)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s got an unexpected keyword argument '%s'",
                                fn, a->kwnames[k]->s);
    }
    return CQ_OK;
}

static cq_status arg(const cq_jargs *a, size_t idx, const char *name, cq_jv def, uint32_t line,
                     cq_jv *out) {
    bool present;
    CQ_TRY(cq_jargs_get(a, idx, name, line, out, &present));
    if (!present) *out = def;
    return CQ_OK;
}

static cq_status want_int(cq_jv v, const char *what, uint32_t line, int64_t *out) {
    if (v.kind == CQ_JV_INT) *out = v.u.i;
    else if (v.kind == CQ_JV_BOOL) *out = v.u.b;
    else if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
    else
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s must be an integer, not %s", what,
                            cq_jv_type_name(v));
    return CQ_OK;
}

static cq_status str_value(cq_jrender *r, const char *s, size_t n, cq_jv *out) {
    const cq_jstr *x = cq_jstr_new(&r->arena, s, n);
    if (!x) return CQ_ERR_NOMEM;
    *out = cq_jv_strv(x);
    return CQ_OK;
}

static cq_status buf_value(cq_jrender *r, cq_jbuf *b, cq_status s, cq_jv *out) {
    const cq_jstr *x = NULL;
    if (s == CQ_OK) s = cq_jbuf_to_str(r, b, &x);
    cq_jbuf_free(b);
    CQ_TRY(s);
    *out = cq_jv_strv(x);
    return CQ_OK;
}

/* ---- case mapping ------------------------------------------------------------------------ */
typedef enum { CASE_UPPER, CASE_LOWER, CASE_CAPITALIZE, CASE_TITLE_JINJA } case_mode;

static bool title_sep(uint32_t cp) {
    return cq_py_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
}

static cq_status map_case(cq_jrender *r, const cq_jstr *s, case_mode m, cq_jv *out) {
    cq_jbuf b = {0};
    cq_status st = CQ_OK;
    size_t i = 0;
    bool word_start = true, first = true;
    while (i < s->len && st == CQ_OK) {
        uint32_t cp = cq_utf8_next(s->s, s->len, &i), o;
        uint32_t full[3];
        size_t nfull = 0;
        switch (m) {
        case CASE_UPPER: nfull = cq_py_case_full(cp, true, full); o = full[0]; break;
        case CASE_LOWER: nfull = cq_py_case_full(cp, false, full); o = full[0]; break;
        case CASE_CAPITALIZE: o = first ? cq_py_upper(cp) : cq_py_lower(cp); break;
        default:
            /* jinja2's title: split on runs of [-\s({[<]; each piece gets its
             * first character upper-cased and the rest lower-cased. */
            if (title_sep(cp)) {
                o = cp;
                word_start = true;
            } else {
                o = word_start ? cq_py_upper(cp) : cq_py_lower(cp);
                word_start = false;
            }
            break;
        }
        first = false;
        char u[4];
        if (nfull > 1)
            for (size_t k = 0; k < nfull && st == CQ_OK; k++) st = cq_jbuf_append(r, &b, u, cq_utf8_put(full[k], u));
        else st = cq_jbuf_append(r, &b, u, cq_utf8_put(o, u));
    }
    return buf_value(r, &b, st, out);
}

/* ---- strip / split helpers ------------------------------------------------------------------- */
static bool in_chars(uint32_t cp, const cq_jstr *chars) {
    if (!chars) return cq_py_isspace(cp);
    size_t i = 0;
    while (i < chars->len)
        if (cq_utf8_next(chars->s, chars->len, &i) == cp) return true;
    return false;
}

cq_status cq_jinja_strip(cq_jrender *r, const cq_jstr *s, const cq_jstr *chars, bool left,
                         bool right, cq_jv *out) {
    size_t st = 0, en = s->len;
    if (left) {
        size_t i = 0;
        while (i < s->len) {
            size_t p = i;
            uint32_t cp = cq_utf8_next(s->s, s->len, &i);
            if (!in_chars(cp, chars)) {
                st = p;
                break;
            }
            st = i;
        }
    }
    if (right) {
        size_t i = st, last = st;
        while (i < s->len) {
            uint32_t cp = cq_utf8_next(s->s, s->len, &i);
            if (!in_chars(cp, chars)) last = i;
        }
        en = last;
    }
    if (st == 0 && en == s->len) {
        *out = cq_jv_strv(s);
        return CQ_OK;
    }
    return str_value(r, s->s + st, en - st, out);
}

static cq_status chars_arg(cq_jv v, uint32_t line, const cq_jstr **out) {
    if (v.kind == CQ_JV_NONE || v.kind == CQ_JV_UNDEF) *out = NULL;
    else if (v.kind == CQ_JV_STR) *out = v.u.s;
    else
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "strip arg must be None or str, not %s",
                            cq_jv_type_name(v));
    return CQ_OK;
}

/* str.replace semantics, including the empty `old` case. */
cq_status cq_jinja_replace(cq_jrender *r, const cq_jstr *s, const cq_jstr *old, const cq_jstr *new_,
                           int64_t count, uint32_t line, cq_jv *out) {
    CQ_TRY(cq_jinja_charge(r, s->len / 16, line));
    cq_jbuf b = {0};
    cq_status st = CQ_OK;
    if (old->len == 0) {
        size_t i = 0;
        int64_t done = 0;
        while (st == CQ_OK) {
            if (count < 0 || done < count) {
                st = cq_jbuf_append(r, &b, new_->s, new_->len);
                done++;
            }
            if (i >= s->len) break;
            size_t p = i;
            cq_utf8_next(s->s, s->len, &i);
            if (st == CQ_OK) st = cq_jbuf_append(r, &b, s->s + p, i - p);
        }
        return buf_value(r, &b, st, out);
    }
    size_t i = 0;
    int64_t done = 0;
    while (i < s->len && st == CQ_OK) {
        if ((count < 0 || done < count) && s->len - i >= old->len &&
            memcmp(s->s + i, old->s, old->len) == 0) {
            st = cq_jbuf_append(r, &b, new_->s, new_->len);
            i += old->len;
            done++;
        } else {
            size_t j = i + 1;
            /* copy up to the next possible match start in one go */
            while (j < s->len && s->s[j] != old->s[0]) j++;
            st = cq_jbuf_append(r, &b, s->s + i, j - i);
            i = j;
        }
    }
    if (s->len == 0) return str_value(r, "", 0, out);
    return buf_value(r, &b, st, out);
}

/* ---- attribute getter (jinja2's make_attrgetter: dotted, via getitem) ------------------ */
static cq_status get_attr_path(cq_jrender *r, cq_jv item, const cq_jv *attr, uint32_t line,
                               cq_jv *out) {
    if (attr->kind == CQ_JV_INT) return cq_jinja_getitem(r, item, *attr, line, out);
    if (attr->kind != CQ_JV_STR)
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "attribute must be a string or an integer");
    const cq_jstr *a = attr->u.s;
    size_t st = 0;
    cq_jv cur = item;
    for (size_t i = 0; i <= a->len; i++) {
        if (i < a->len && a->s[i] != '.') continue;
        const char *part = a->s + st;
        size_t plen = i - st;
        cq_jv key;
        bool digits = plen > 0;
        int64_t num = 0;
        for (size_t k = 0; k < plen; k++) {
            if (part[k] < '0' || part[k] > '9' || num > INT64_MAX / 10 - 10) {
                digits = false;
                break;
            }
            num = num * 10 + (part[k] - '0');
        }
        if (digits) key = cq_jv_int(num);
        else CQ_TRY(str_value(r, part, plen, &key));
        CQ_TRY(cq_jinja_getitem(r, cur, key, line, &cur));
        st = i + 1;
    }
    *out = cur;
    return CQ_OK;
}

/* ---- sorting (stable merge sort whose comparator may fail) ------------------------------- */
typedef struct sort_ctx {
    cq_jrender *r;
    const cq_jv *keys;
    bool reverse;
    uint32_t line;
} sort_ctx;

static cq_status sort_less(sort_ctx *c, size_t a, size_t b, bool *less) {
    int cmp;
    CQ_TRY(cq_jinja_charge(c->r, 1, c->line));
    if (c->reverse) CQ_TRY(cq_jv_compare(c->keys[b], c->keys[a], c->line, &cmp));
    else CQ_TRY(cq_jv_compare(c->keys[a], c->keys[b], c->line, &cmp));
    *less = cmp < 0;
    return CQ_OK;
}

static cq_status merge_sort(sort_ctx *c, size_t *idx, size_t *tmp, size_t n) {
    if (n < 2) return CQ_OK;
    size_t h = n / 2;
    CQ_TRY(merge_sort(c, idx, tmp, h));
    CQ_TRY(merge_sort(c, idx + h, tmp, n - h));
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        bool less;
        CQ_TRY(sort_less(c, idx[j], idx[i], &less));
        tmp[k++] = less ? idx[j++] : idx[i++];
    }
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
    return CQ_OK;
}

/* Key for sorting/unique/min/max: attribute lookup, then lower-casing. */
static cq_status sort_key(cq_jrender *r, cq_jv item, const cq_jv *attr, bool case_sensitive,
                          uint32_t line, cq_jv *out) {
    cq_jv k = item;
    if (attr) CQ_TRY(get_attr_path(r, item, attr, line, &k));
    if (!case_sensitive && k.kind == CQ_JV_STR) CQ_TRY(map_case(r, k.u.s, CASE_LOWER, &k));
    *out = k;
    return CQ_OK;
}

static cq_status sorted_list(cq_jrender *r, const cq_jlist *in, const cq_jv *attr, bool cs,
                             bool reverse, uint32_t line, cq_jlist **out) {
    size_t n = in->n;
    cq_jv *keys = cq_jarena_alloc(&r->arena, (n + 1) * sizeof *keys);
    size_t *idx = cq_jarena_alloc(&r->arena, (n + 1) * sizeof *idx);
    size_t *tmp = cq_jarena_alloc(&r->arena, (n + 1) * sizeof *tmp);
    cq_jlist *res = cq_jlist_new(&r->arena, n);
    if (!keys || !idx || !tmp || !res) return CQ_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        CQ_TRY(sort_key(r, in->v[i], attr, cs, line, &keys[i]));
        idx[i] = i;
    }
    sort_ctx c = {r, keys, reverse, line};
    CQ_TRY(merge_sort(&c, idx, tmp, n));
    for (size_t i = 0; i < n; i++) res->v[i] = in->v[idx[i]];
    res->n = n;
    *out = res;
    return CQ_OK;
}

/* Input of a filter that jinja2 implements as a generator. When the input
 * cannot be iterated jinja2 only fails once the generator is consumed, so
 * *deferred is set to such a generator instead of failing now. */
static cq_status gen_input(cq_jrender *r, cq_jv v, uint32_t line, const cq_jlist **items,
                           cq_jv *deferred, bool *is_deferred) {
    *is_deferred = false;
    cq_status s = cq_jv_iterate(r, v, line, items);
    if (s != CQ_ERR_INVALID_ARG) return s;
    cq_jlist *g = cq_jlist_new(&r->arena, 0);
    const cq_jstr *msg = cq_jstr_new(&r->arena, cq_last_error(), strlen(cq_last_error()));
    if (!g || !msg) return CQ_ERR_NOMEM;
    g->gen = true;
    g->gen_err = msg->s;
    *deferred = cq_jv_list(g);
    *is_deferred = true;
    return CQ_OK;
}

/* An element of a generator filter failed with `s`: jinja2 would only fail
 * when the generator is consumed up to that element, so keep what came
 * before and remember the error. Other failures (limits) stop the render. */
static cq_status defer_element_error(cq_jrender *r, cq_status s, cq_jlist *res) {
    if (s != CQ_ERR_INVALID_ARG) return s;
    const cq_jstr *msg = cq_jstr_new(&r->arena, cq_last_error(), strlen(cq_last_error()));
    if (!msg) return CQ_ERR_NOMEM;
    res->gen_err = msg->s;
    return CQ_OK;
}

/* ---- select / reject ------------------------------------------------------------------ */
/* jinja2's map/select/... start with `if value:` -- a false input (None,
 * False, 0, "") gives an empty generator without complaint. */
static cq_status empty_gen(cq_jrender *r, cq_jv *out) {
    cq_jlist *g = cq_jlist_new(&r->arena, 0);
    if (!g) return CQ_ERR_NOMEM;
    g->gen = true;
    *out = cq_jv_list(g);
    return CQ_OK;
}

static cq_status select_reject(cq_jrender *r, cq_jv seq, const cq_jargs *a, bool use_attr,
                               bool select, uint32_t line, cq_jv *out) {
    if (!cq_jv_truthy(seq) && !seq.unsafe) return empty_gen(r, out);
    const cq_jlist *items;
    bool deferred;
    CQ_TRY(gen_input(r, seq, line, &items, out, &deferred));
    if (deferred) return CQ_OK;
    size_t p = 0;
    const cq_jv *attr = NULL;
    if (use_attr) {
        if (a->npos < 1)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "missing parameter for attribute name");
        attr = &a->pos[0];
        p = 1;
    }
    const cq_jstr *test = NULL;
    if (p < a->npos) {
        if (a->pos[p].kind != CQ_JV_STR)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "test name must be a string");
        test = a->pos[p].u.s;
        p++;
    }
    cq_jargs targs = {.pos = a->pos + p, .npos = a->npos - p, .kwnames = a->kwnames,
                      .kwvals = a->kwvals, .nkw = a->nkw};
    cq_jlist *res = cq_jlist_new(&r->arena, items->n);
    if (!res) return CQ_ERR_NOMEM;
    for (size_t i = 0; i < items->n; i++) {
        CQ_TRY(cq_jinja_charge(r, 1, line));
        cq_jv v = items->v[i];
        cq_status s = CQ_OK;
        if (attr) s = get_attr_path(r, v, attr, line, &v);
        bool ok = false;
        if (s == CQ_OK) {
            if (test) s = cq_jinja_test(r, test, v, &targs, line, &ok);
            else if (v.kind == CQ_JV_UNDEF && v.unsafe) s = cq_jv_undef_error(v, line);
            else ok = cq_jv_truthy(v);
        }
        if (s != CQ_OK) {
            CQ_TRY(defer_element_error(r, s, res));
            break;
        }
        if (ok == select) res->v[res->n++] = items->v[i];
    }
    res->gen = true;
    *out = cq_jv_list(res);
    return CQ_OK;
}

/* ---- Python number parsing for int()/float() ---------------------------------------------- */
static bool parse_py_int(const cq_jstr *s, int64_t base, int64_t *out) {
    size_t i = 0, n = s->len;
    while (i < n && ((unsigned char)s->s[i] < 0x80) && cq_py_isspace((unsigned char)s->s[i])) i++;
    while (n > i && ((unsigned char)s->s[n - 1] < 0x80) && cq_py_isspace((unsigned char)s->s[n - 1])) n--;
    bool neg = false;
    if (i < n && (s->s[i] == '+' || s->s[i] == '-')) neg = s->s[i++] == '-';
    if (base == 0) {
        base = 10;
        if (n - i >= 2 && s->s[i] == '0') {
            char k = (char)(s->s[i + 1] | 32);
            if (k == 'x') base = 16;
            else if (k == 'o') base = 8;
            else if (k == 'b') base = 2;
            if (base != 10) i += 2;
        }
    } else if (n - i >= 2 && s->s[i] == '0') {
        char k = (char)(s->s[i + 1] | 32);
        if ((base == 16 && k == 'x') || (base == 8 && k == 'o') || (base == 2 && k == 'b')) i += 2;
    }
    if (base < 2 || base > 36 || i >= n) return false;
    uint64_t v = 0;
    bool prev_us = true;
    for (; i < n; i++) {
        char c = s->s[i];
        if (c == '_') {
            if (prev_us) return false;
            prev_us = true;
            continue;
        }
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if ((c | 32) >= 'a' && (c | 32) <= 'z') d = (c | 32) - 'a' + 10;
        else return false;
        if (d >= base) return false;
        if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return false;
        v = v * (uint64_t)base + (uint64_t)d;
        prev_us = false;
    }
    if (prev_us) return false;
    if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool parse_py_float(const cq_jstr *s, double *out) {
    char buf[128];
    size_t i = 0, n = s->len, o = 0;
    while (i < n && (unsigned char)s->s[i] < 0x80 && cq_py_isspace((unsigned char)s->s[i])) i++;
    while (n > i && (unsigned char)s->s[n - 1] < 0x80 && cq_py_isspace((unsigned char)s->s[n - 1])) n--;
    if (i >= n || n - i >= sizeof buf) return false;
    for (; i < n; i++) {
        char c = s->s[i];
        if (c == '_') {
            /* underscores only between digits */
            if (o == 0 || i + 1 >= n || buf[o - 1] < '0' || buf[o - 1] > '9' || s->s[i + 1] < '0' ||
                s->s[i + 1] > '9')
                return false;
            continue;
        }
        if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' ||
              (c | 32) == 'i' || (c | 32) == 'n' || (c | 32) == 'f' || (c | 32) == 't' ||
              (c | 32) == 'y' || (c | 32) == 'a'))
            return false;
        buf[o++] = c;
    }
    buf[o] = 0;
    /* C strtod accepts hex floats; Python's float() does not. */
    for (size_t k = 0; k < o; k++)
        if ((buf[k] | 32) == 'x') return false;
    char *end;
    double d = strtod(buf, &end);
    if (*end) return false;
    *out = d;
    return true;
}

/* ---- round() -------------------------------------------------------------------------------- */
static double py_round(double x, int64_t nd) {
    if (!isfinite(x)) return x;
    if (nd > 300) return x;
    if (nd < -300) return copysign(0.0, x);
    if (nd == 0) return nearbyint(x);
    if (nd > 0) {
        /* printf rounds the exact binary value half-to-even, like CPython's
         * correctly rounded round(). */
        char buf[512];
        snprintf(buf, sizeof buf, "%.*f", (int)nd, x);
        return strtod(buf, NULL);
    }
    double p = pow(10.0, (double)-nd);
    double y = nearbyint(x / p) * p;
    return y;
}

/* ---- indent --------------------------------------------------------------------------------- */
static bool is_line_break(uint32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d ||
           cp == 0x1e || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

/* str.splitlines() into a list of strings. */
cq_status cq_jinja_splitlines(cq_jrender *r, const cq_jstr *s, bool keepends, cq_jlist **out) {
    cq_jlist *l = cq_jlist_new(&r->arena, 0);
    if (!l) return CQ_ERR_NOMEM;
    size_t i = 0, st = 0;
    while (i < s->len) {
        size_t p = i;
        uint32_t cp = cq_utf8_next(s->s, s->len, &i);
        if (!is_line_break(cp)) continue;
        size_t end_nl = i;
        if (cp == '\r' && i < s->len && s->s[i] == '\n') end_nl = ++i;
        cq_jv v;
        CQ_TRY(str_value(r, s->s + st, (keepends ? end_nl : p) - st, &v));
        CQ_TRY(cq_jlist_push(&r->arena, l, v));
        st = i;
    }
    if (st < s->len) {
        cq_jv v;
        CQ_TRY(str_value(r, s->s + st, s->len - st, &v));
        CQ_TRY(cq_jlist_push(&r->arena, l, v));
    }
    *out = l;
    return CQ_OK;
}

static cq_status do_indent(cq_jrender *r, const cq_jstr *s, cq_jv width, bool first, bool blank,
                           uint32_t line, cq_jv *out) {
    const cq_jstr *ind;
    if (width.kind == CQ_JV_STR) ind = width.u.s;
    else {
        int64_t w;
        CQ_TRY(want_int(width, "width", line, &w));
        if (w < 0) w = 0;
        if (w > 4096) return cq_jinja_err(CQ_ERR_BOUNDS, line, "indent width too large");
        char sp[4096];
        memset(sp, ' ', (size_t)w);
        const cq_jstr *x = cq_jstr_new(&r->arena, sp, (size_t)w);
        if (!x) return CQ_ERR_NOMEM;
        ind = x;
    }
    const cq_jstr *nl = cq_jstr_new(&r->arena, "\n", 1);
    if (!nl) return CQ_ERR_NOMEM;
    const cq_jstr *s2 = cq_jstr_cat(&r->arena, s, nl);
    if (!s2) return CQ_ERR_NOMEM;
    cq_jlist *lines;
    CQ_TRY(cq_jinja_splitlines(r, s2, false, &lines));
    cq_jbuf b = {0};
    cq_status st = CQ_OK;
    if (first) st = cq_jbuf_append(r, &b, ind->s, ind->len);
    for (size_t i = 0; i < lines->n && st == CQ_OK; i++) {
        const cq_jstr *ln = lines->v[i].u.s;
        if (i > 0) {
            st = cq_jbuf_append(r, &b, "\n", 1);
            if (st == CQ_OK && (blank || ln->len)) st = cq_jbuf_append(r, &b, ind->s, ind->len);
        }
        if (st == CQ_OK) st = cq_jbuf_append(r, &b, ln->s, ln->len);
    }
    return buf_value(r, &b, st, out);
}

/* ---- tojson ----------------------------------------------------------------------------------- */
static cq_status do_tojson(cq_jrender *r, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    CQ_TRY(cq_jargs_check(a, 4, names, "tojson()", line));
    cq_jv ea, ind, sep, sk;
    CQ_TRY(arg(a, 0, "ensure_ascii", cq_jv_bool(false), line, &ea));
    CQ_TRY(arg(a, 1, "indent", cq_jv_none(), line, &ind));
    CQ_TRY(arg(a, 2, "separators", cq_jv_none(), line, &sep));
    CQ_TRY(arg(a, 3, "sort_keys", cq_jv_bool(false), line, &sk));
    cq_json_opts o = {.ensure_ascii = cq_jv_truthy(ea), .sort_keys = cq_jv_truthy(sk),
                      .html_safe = r->lim.html_safe_json, .indent = -1};
    if (ind.kind == CQ_JV_STR) o.indent_str = ind.u.s;
    else if (ind.kind != CQ_JV_NONE) {
        int64_t w;
        CQ_TRY(want_int(ind, "indent", line, &w));
        if (w > 1024) return cq_jinja_err(CQ_ERR_BOUNDS, line, "indent too large");
        o.indent = w < 0 ? 0 : (int)w;
    }
    if (sep.kind == CQ_JV_LIST) {
        if (sep.u.list->n != 2 || sep.u.list->v[0].kind != CQ_JV_STR || sep.u.list->v[1].kind != CQ_JV_STR)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "separators must be a pair of strings");
        o.item_sep = sep.u.list->v[0].u.s;
        o.key_sep = sep.u.list->v[1].u.s;
    } else if (sep.kind != CQ_JV_NONE) {
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "separators must be a pair of strings");
    }
    cq_jbuf b = {0};
    cq_status s = cq_jv_json_append(r, &b, v, &o, line);
    return buf_value(r, &b, s, out);
}

/* ---- the filter table ------------------------------------------------------------------------ */
static const char *const g_unsupported_filters[] = {
    "filesizeformat", "groupby", "pprint", "random", "slice", "striptags",
    "urlencode", "urlize", "wordwrap", "xmlattr", NULL};

static const char *const g_filters[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "first", "float", "forceescape", "format", "indent", "int", "items", "join", "last",
    "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace",
    "reverse", "round", "safe", "select", "selectattr", "sort", "string", "sum", "title",
    "tojson", "trim", "truncate", "unique", "upper", "wordcount", NULL};

bool cq_jinja_has_filter(const char *name, size_t n) {
    for (const char *const *f = g_filters; *f; f++)
        if (strlen(*f) == n && memcmp(*f, name, n) == 0) return true;
    for (const char *const *f = g_unsupported_filters; *f; f++)
        if (strlen(*f) == n && memcmp(*f, name, n) == 0) return true;
    return false;
}

static cq_status center(cq_jrender *r, const cq_jstr *s, int64_t width, uint32_t line, cq_jv *out) {
    int64_t len = (int64_t)cq_utf8_count(s->s, s->len);
    if (width <= len) {
        *out = cq_jv_strv(s);
        return CQ_OK;
    }
    if (width > 1 << 20) return cq_jinja_err(CQ_ERR_BOUNDS, line, "width too large");
    int64_t marg = width - len;
    /* CPython: left = marg / 2 + (marg & width & 1) */
    int64_t left = marg / 2 + (marg & width & 1);
    cq_jbuf b = {0};
    cq_status st = CQ_OK;
    for (int64_t k = 0; k < left && st == CQ_OK; k++) st = cq_jbuf_append(r, &b, " ", 1);
    if (st == CQ_OK) st = cq_jbuf_append(r, &b, s->s, s->len);
    for (int64_t k = 0; k < marg - left && st == CQ_OK; k++) st = cq_jbuf_append(r, &b, " ", 1);
    return buf_value(r, &b, st, out);
}

static cq_status do_minmax(cq_jrender *r, cq_jv v, const cq_jargs *a, bool is_max, uint32_t line,
                           cq_jv *out) {
    static const char *const names[] = {"case_sensitive", "attribute", NULL};
    CQ_TRY(cq_jargs_check(a, 2, names, is_max ? "max()" : "min()", line));
    cq_jv cs, at;
    CQ_TRY(arg(a, 0, "case_sensitive", cq_jv_bool(false), line, &cs));
    CQ_TRY(arg(a, 1, "attribute", cq_jv_none(), line, &at));
    const cq_jlist *items;
    CQ_TRY(cq_jv_iterate(r, v, line, &items));
    if (items->n == 0) {
        *out = cq_jv_undef("No aggregated item, sequence was empty.");
        return CQ_OK;
    }
    const cq_jv *attr = at.kind == CQ_JV_NONE ? NULL : &at;
    size_t best = 0;
    cq_jv bk;
    CQ_TRY(sort_key(r, items->v[0], attr, cq_jv_truthy(cs), line, &bk));
    for (size_t i = 1; i < items->n; i++) {
        cq_jv k;
        int c;
        CQ_TRY(sort_key(r, items->v[i], attr, cq_jv_truthy(cs), line, &k));
        CQ_TRY(cq_jv_compare(k, bk, line, &c));
        if (c != 2 && (is_max ? c > 0 : c < 0)) {
            best = i;
            bk = k;
        }
    }
    *out = items->v[best];
    return CQ_OK;
}

cq_status cq_jinja_filter(cq_jrender *r, const cq_jstr *name, cq_jv v, const cq_jargs *a,
                          uint32_t line, cq_jv *out) {
    const char *n = name->s;
#define IS(x) (strcmp(n, x) == 0)
    if (IS("trim")) {
        static const char *const names[] = {"chars", NULL};
        CQ_TRY(cq_jargs_check(a, 1, names, "trim()", line));
        cq_jv c;
        CQ_TRY(arg(a, 0, "chars", cq_jv_none(), line, &c));
        const cq_jstr *s, *chars = NULL;
        CQ_TRY(chars_arg(c, line, &chars));
        CQ_TRY(cq_jv_to_str(r, v, line, &s));
        bool mk = v.kind == CQ_JV_STR && v.markup;
        if (mk && chars) {
            /* Markup.strip escapes its argument */
            cq_jv ec;
            CQ_TRY(cq_jinja_escape(r, cq_jv_strv(chars), false, line, &ec));
            chars = ec.u.s;
        }
        CQ_TRY(cq_jinja_strip(r, s, chars, true, true, out));
        out->markup = mk;
        return CQ_OK;
    }
    if (IS("length") || IS("count")) {
        CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
        int64_t len;
        CQ_TRY(cq_jv_length(v, line, &len));
        *out = cq_jv_int(len);
        return CQ_OK;
    }
    if (IS("tojson")) return do_tojson(r, v, a, line, out);
    if (IS("upper") || IS("lower") || IS("capitalize") || IS("title")) {
        CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
        const cq_jstr *s;
        CQ_TRY(cq_jv_to_str(r, v, line, &s));
        CQ_TRY(map_case(r, s, IS("upper") ? CASE_UPPER : IS("lower") ? CASE_LOWER
                                                 : IS("capitalize") ? CASE_CAPITALIZE
                                                                    : CASE_TITLE_JINJA,
                         out));
        /* Markup's own methods keep it Markup; jinja's title joins plain pieces */
        out->markup = v.kind == CQ_JV_STR && v.markup && !IS("title");
        return CQ_OK;
    }
    if (IS("default") || IS("d")) {
        static const char *const names[] = {"default_value", "boolean", NULL};
        CQ_TRY(cq_jargs_check(a, 2, names, "default()", line));
        cq_jv dv, bo;
        CQ_TRY(arg(a, 0, "default_value", cq_jv_strv(cq_jstr_empty()), line, &dv));
        CQ_TRY(arg(a, 1, "boolean", cq_jv_bool(false), line, &bo));
        if (v.kind == CQ_JV_UNDEF || (cq_jv_truthy(bo) && !cq_jv_truthy(v))) *out = dv;
        else *out = v;
        return CQ_OK;
    }
    if (IS("replace")) {
        static const char *const names[] = {"old", "new", "count", NULL};
        CQ_TRY(cq_jargs_check(a, 3, names, "replace()", line));
        cq_jv o, nw, cnt;
        bool p1, p2;
        CQ_TRY(cq_jargs_get(a, 0, "old", line, &o, &p1));
        CQ_TRY(cq_jargs_get(a, 1, "new", line, &nw, &p2));
        if (!p1 || !p2) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "replace() needs old and new");
        CQ_TRY(arg(a, 2, "count", cq_jv_none(), line, &cnt));
        const cq_jstr *s, *os, *ns;
        CQ_TRY(cq_jv_to_str(r, v, line, &s));
        CQ_TRY(cq_jv_to_str(r, o, line, &os));
        CQ_TRY(cq_jv_to_str(r, nw, line, &ns));
        int64_t c = -1;
        if (cnt.kind != CQ_JV_NONE) CQ_TRY(want_int(cnt, "count", line, &c));
        return cq_jinja_replace(r, s, os, ns, c, line, out);
    }
    if (IS("join")) {
        static const char *const names[] = {"d", "attribute", NULL};
        CQ_TRY(cq_jargs_check(a, 2, names, "join()", line));
        cq_jv d, at;
        CQ_TRY(arg(a, 0, "d", cq_jv_strv(cq_jstr_empty()), line, &d));
        CQ_TRY(arg(a, 1, "attribute", cq_jv_none(), line, &at));
        const cq_jlist *items;
        CQ_TRY(cq_jv_iterate(r, v, line, &items));
        const cq_jstr *sep;
        CQ_TRY(cq_jv_to_str(r, d, line, &sep));
        cq_jbuf b = {0};
        cq_status st = CQ_OK;
        for (size_t i = 0; i < items->n && st == CQ_OK; i++) {
            cq_jv it = items->v[i];
            if (at.kind != CQ_JV_NONE) st = get_attr_path(r, it, &at, line, &it);
            if (st == CQ_OK && i) st = cq_jbuf_append(r, &b, sep->s, sep->len);
            if (st == CQ_OK) st = cq_jv_str_append(r, &b, it, line);
        }
        if (items->n == 0) {
            cq_jbuf_free(&b);
            return str_value(r, "", 0, out);
        }
        return buf_value(r, &b, st, out);
    }
    if (IS("first")) {
        CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
        if (v.kind == CQ_JV_LIST && v.u.list->gen) {
            /* next(iter(gen)) takes one item */
            cq_jlist *g = v.u.list;
            if (g->gen_pos >= g->n && g->gen_err) return cq_fail(CQ_ERR_INVALID_ARG, "%s", g->gen_err);
            *out = g->gen_pos < g->n ? g->v[g->gen_pos++] : cq_jv_undef("No first item, sequence was empty.");
            return CQ_OK;
        }
        const cq_jlist *items;
        CQ_TRY(cq_jv_iterate(r, v, line, &items));
        *out = items->n ? items->v[0] : cq_jv_undef("No first item, sequence was empty.");
        return CQ_OK;
    }
    if (IS("last")) {
        CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
        if (v.kind == CQ_JV_UNDEF && !v.unsafe) {
            /* reversed(Undefined) is empty */
            *out = cq_jv_undef("No last item, sequence was empty.");
            return CQ_OK;
        }
        if ((v.kind != CQ_JV_LIST && v.kind != CQ_JV_STR && v.kind != CQ_JV_DICT) ||
            (v.kind == CQ_JV_LIST && v.u.list->gen)) {
            if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "'%s' object is not reversible",
                                cq_jv_type_name(v));
        }
        const cq_jlist *items;
        CQ_TRY(cq_jv_iterate(r, v, line, &items));
        *out = items->n ? items->v[items->n - 1] : cq_jv_undef("No last item, sequence was empty.");
        return CQ_OK;
    }
    if (IS("list")) {
        CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
        const cq_jlist *items;
        CQ_TRY(cq_jv_iterate(r, v, line, &items));
        cq_jlist *l = cq_jlist_new(&r->arena, items->n);
        if (!l) return CQ_ERR_NOMEM;
        if (items->n) memcpy(l->v, items->v, items->n * sizeof(cq_jv));
        l->n = items->n;
        *out = cq_jv_list(l);
        return CQ_OK;
    }
    if (IS("items")) {
        CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
        cq_jlist *l;
        if (v.kind == CQ_JV_UNDEF) {
            l = cq_jlist_new(&r->arena, 0);
            if (!l) return CQ_ERR_NOMEM;
        } else if (v.kind == CQ_JV_DICT) {
            l = cq_jlist_new(&r->arena, v.u.dict->n);
            if (!l) return CQ_ERR_NOMEM;
            for (size_t i = 0; i < v.u.dict->n; i++) {
                cq_jlist *pair = cq_jlist_new(&r->arena, 2);
                if (!pair) return CQ_ERR_NOMEM;
                pair->tuple = true;
                pair->v[0] = v.u.dict->k[i];
                pair->v[1] = v.u.dict->v[i];
                pair->n = 2;
                l->v[l->n++] = cq_jv_list(pair);
            }
        } else {
            l = cq_jlist_new(&r->arena, 0);
            const cq_jstr *msg = cq_jstr_new(&r->arena, "Can only get item pairs from a mapping.", 39);
            if (!l || !msg) return CQ_ERR_NOMEM;
            l->gen_err = msg->s;
        }
        l->gen = true;
        *out = cq_jv_list(l);
        return CQ_OK;
    }
    if (IS("string") || IS("safe")) {
        CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
        const cq_jstr *s;
        CQ_TRY(cq_jv_to_str(r, v, line, &s));
        /* soft_str keeps Markup; safe makes it */
        bool mk = (v.kind == CQ_JV_STR && v.markup) || IS("safe");
        *out = mk ? cq_jv_markup(s) : cq_jv_strv(s);
        return CQ_OK;
    }
    if (IS("escape") || IS("e") || IS("forceescape")) {
        CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
        return cq_jinja_escape(r, v, IS("forceescape"), line, out);
    }
    if (IS("int")) {
        static const char *const names[] = {"default", "base", NULL};
        CQ_TRY(cq_jargs_check(a, 2, names, "int()", line));
        cq_jv dv, bv;
        CQ_TRY(arg(a, 0, "default", cq_jv_int(0), line, &dv));
        CQ_TRY(arg(a, 1, "base", cq_jv_int(10), line, &bv));
        int64_t base;
        CQ_TRY(want_int(bv, "base", line, &base));
        int64_t iv;
        double fv;
        if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line); /* int(Undefined) raises */
        if (v.kind == CQ_JV_INT) *out = v;
        else if (v.kind == CQ_JV_BOOL) *out = cq_jv_int(v.u.b);
        else if (v.kind == CQ_JV_FLOAT) {
            if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18) *out = dv;
            else *out = cq_jv_int((int64_t)v.u.f);
        } else if (v.kind == CQ_JV_STR && parse_py_int(v.u.s, base, &iv)) *out = cq_jv_int(iv);
        else if (v.kind == CQ_JV_STR && parse_py_float(v.u.s, &fv) && isfinite(fv) && fabs(fv) < 9.2e18)
            *out = cq_jv_int((int64_t)fv);
        else *out = dv;
        return CQ_OK;
    }
    if (IS("float")) {
        static const char *const names[] = {"default", NULL};
        CQ_TRY(cq_jargs_check(a, 1, names, "float()", line));
        cq_jv dv;
        CQ_TRY(arg(a, 0, "default", cq_jv_float(0.0), line, &dv));
        double fv;
        if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line); /* float(Undefined) raises */
        if (v.kind == CQ_JV_FLOAT) *out = v;
        else if (v.kind == CQ_JV_INT) *out = cq_jv_float((double)v.u.i);
        else if (v.kind == CQ_JV_BOOL) *out = cq_jv_float(v.u.b);
        else if (v.kind == CQ_JV_STR && parse_py_float(v.u.s, &fv)) *out = cq_jv_float(fv);
        else *out = dv;
        return CQ_OK;
    }
    if (IS("abs")) {
        CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
        if (v.kind == CQ_JV_INT) {
            if (v.u.i == INT64_MIN) return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "integer overflow");
            *out = cq_jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        } else if (v.kind == CQ_JV_BOOL) *out = cq_jv_int(v.u.b);
        else if (v.kind == CQ_JV_FLOAT) *out = cq_jv_float(fabs(v.u.f));
        else if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
        else
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "bad operand type for abs(): '%s'",
                                cq_jv_type_name(v));
        return CQ_OK;
    }
    if (IS("round")) {
        static const char *const names[] = {"precision", "method", NULL};
        CQ_TRY(cq_jargs_check(a, 2, names, "round()", line));
        cq_jv pv, mv;
        CQ_TRY(arg(a, 0, "precision", cq_jv_int(0), line, &pv));
        CQ_TRY(arg(a, 1, "method", cq_jv_none(), line, &mv));
        int64_t prec;
        CQ_TRY(want_int(pv, "precision", line, &prec));
        if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
        if (!cq_jv_is_num(v))
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "round() needs a number, not %s",
                                cq_jv_type_name(v));
        double x = v.kind == CQ_JV_FLOAT ? v.u.f : (double)(v.kind == CQ_JV_BOOL ? v.u.b : v.u.i);
        if (mv.kind == CQ_JV_NONE || (mv.kind == CQ_JV_STR && cq_jstr_eq(mv.u.s, "common"))) {
            if (v.kind != CQ_JV_FLOAT) {
                int64_t iv = v.kind == CQ_JV_BOOL ? v.u.b : v.u.i;
                if (prec < 0) {
                    /* round half to even at 10^-prec, like Python's int.__round__ */
                    if (prec < -18) {
                        *out = cq_jv_int(0);
                        return CQ_OK;
                    }
                    int64_t pw = 1;
                    for (int64_t k = 0; k < -prec; k++) pw *= 10;
                    int64_t q = iv / pw, rem = iv % pw;
                    if (rem < 0) {
                        q -= 1;
                        rem += pw;
                    }
                    if (rem > pw - rem || (rem == pw - rem && (q & 1))) q += 1;
                    if (__builtin_mul_overflow(q, pw, &iv))
                        return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "integer overflow");
                }
                *out = cq_jv_int(iv);
                return CQ_OK;
            }
            *out = cq_jv_float(py_round(x, prec));
        } else if (mv.kind == CQ_JV_STR && (cq_jstr_eq(mv.u.s, "ceil") || cq_jstr_eq(mv.u.s, "floor"))) {
            if (prec > 300 || prec < -300) return cq_jinja_err(CQ_ERR_BOUNDS, line, "precision out of range");
            double p = pow(10.0, (double)prec);
            *out = cq_jv_float((cq_jstr_eq(mv.u.s, "ceil") ? ceil(x * p) : floor(x * p)) / p);
        } else {
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "method must be common, ceil or floor");
        }
        return CQ_OK;
    }
    if (IS("map")) {
        if (!cq_jv_truthy(v) && !v.unsafe) return empty_gen(r, out);
        const cq_jlist *items;
        bool deferred;
        CQ_TRY(gen_input(r, v, line, &items, out, &deferred));
        if (deferred) return CQ_OK;
        cq_jlist *res = cq_jlist_new(&r->arena, items->n);
        if (!res) return CQ_ERR_NOMEM;
        cq_jv at, dflt;
        bool has_attr = false, has_def = false;
        for (size_t k = 0; k < a->nkw; k++) {
            if (cq_jstr_eq(a->kwnames[k], "attribute")) {
                at = a->kwvals[k];
                has_attr = true;
            } else if (cq_jstr_eq(a->kwnames[k], "default")) {
                dflt = a->kwvals[k];
                has_def = true;
            }
        }
        if (has_attr) {
            if (a->npos || a->nkw != 1u + (has_def ? 1u : 0u))
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "Unexpected keyword argument for map()");
            for (size_t i = 0; i < items->n; i++) {
                cq_jv x;
                cq_status s = get_attr_path(r, items->v[i], &at, line, &x);
                if (s != CQ_OK) {
                    CQ_TRY(defer_element_error(r, s, res));
                    break;
                }
                if (has_def && x.kind == CQ_JV_UNDEF) x = dflt;
                res->v[res->n++] = x;
            }
        } else {
            if (a->npos < 1 || a->pos[0].kind != CQ_JV_STR)
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "map requires a filter argument");
            cq_jargs fa = {.pos = a->pos + 1, .npos = a->npos - 1, .kwnames = a->kwnames,
                           .kwvals = a->kwvals, .nkw = a->nkw};
            for (size_t i = 0; i < items->n; i++) {
                CQ_TRY(cq_jinja_step(r, line));
                cq_status s = cq_jinja_filter(r, a->pos[0].u.s, items->v[i], &fa, line, &res->v[res->n]);
                if (s != CQ_OK) {
                    CQ_TRY(defer_element_error(r, s, res));
                    break;
                }
                res->n++;
            }
        }
        res->gen = true;
        *out = cq_jv_list(res);
        return CQ_OK;
    }
    if (IS("select")) return select_reject(r, v, a, false, true, line, out);
    if (IS("reject")) return select_reject(r, v, a, false, false, line, out);
    if (IS("selectattr")) return select_reject(r, v, a, true, true, line, out);
    if (IS("rejectattr")) return select_reject(r, v, a, true, false, line, out);
    if (IS("sort")) {
        static const char *const names[] = {"reverse", "case_sensitive", "attribute", NULL};
        CQ_TRY(cq_jargs_check(a, 3, names, "sort()", line));
        cq_jv rv, cs, at;
        CQ_TRY(arg(a, 0, "reverse", cq_jv_bool(false), line, &rv));
        CQ_TRY(arg(a, 1, "case_sensitive", cq_jv_bool(false), line, &cs));
        CQ_TRY(arg(a, 2, "attribute", cq_jv_none(), line, &at));
        const cq_jlist *items;
        CQ_TRY(cq_jv_iterate(r, v, line, &items));
        cq_jlist *res;
        CQ_TRY(sorted_list(r, items, at.kind == CQ_JV_NONE ? NULL : &at, cq_jv_truthy(cs),
                           cq_jv_truthy(rv), line, &res));
        *out = cq_jv_list(res);
        return CQ_OK;
    }
    if (IS("dictsort")) {
        static const char *const names[] = {"case_sensitive", "by", "reverse", NULL};
        CQ_TRY(cq_jargs_check(a, 3, names, "dictsort()", line));
        cq_jv cs, by, rv;
        CQ_TRY(arg(a, 0, "case_sensitive", cq_jv_bool(false), line, &cs));
        CQ_TRY(arg(a, 1, "by", cq_jv_none(), line, &by));
        CQ_TRY(arg(a, 2, "reverse", cq_jv_bool(false), line, &rv));
        if (v.kind != CQ_JV_DICT)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "dictsort needs a mapping");
        int pos = 0;
        if (by.kind == CQ_JV_STR && cq_jstr_eq(by.u.s, "value")) pos = 1;
        else if (!(by.kind == CQ_JV_NONE || (by.kind == CQ_JV_STR && cq_jstr_eq(by.u.s, "key"))))
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "You can only sort by either \"key\" or \"value\"");
        cq_jv items;
        cq_jargs none = {0};
        const cq_jstr *itn = cq_jstr_new(&r->arena, "items", 5);
        if (!itn) return CQ_ERR_NOMEM;
        CQ_TRY(cq_jinja_filter(r, itn, v, &none, line, &items));
        cq_jv key = cq_jv_int(pos);
        cq_jlist *res;
        CQ_TRY(sorted_list(r, items.u.list, &key, cq_jv_truthy(cs), cq_jv_truthy(rv), line, &res));
        *out = cq_jv_list(res);
        return CQ_OK;
    }
    if (IS("unique")) {
        static const char *const names[] = {"case_sensitive", "attribute", NULL};
        CQ_TRY(cq_jargs_check(a, 2, names, "unique()", line));
        cq_jv cs, at;
        CQ_TRY(arg(a, 0, "case_sensitive", cq_jv_bool(false), line, &cs));
        CQ_TRY(arg(a, 1, "attribute", cq_jv_none(), line, &at));
        const cq_jlist *items;
        bool deferred;
        CQ_TRY(gen_input(r, v, line, &items, out, &deferred));
        if (deferred) return CQ_OK;
        cq_jlist *res = cq_jlist_new(&r->arena, items->n);
        cq_jv *seen = cq_jarena_alloc(&r->arena, (items->n + 1) * sizeof(cq_jv));
        if (!res || !seen) return CQ_ERR_NOMEM;
        size_t nseen = 0;
        for (size_t i = 0; i < items->n; i++) {
            cq_jv k;
            CQ_TRY(sort_key(r, items->v[i], at.kind == CQ_JV_NONE ? NULL : &at, cq_jv_truthy(cs), line, &k));
            CQ_TRY(cq_jinja_charge(r, nseen, line));
            bool dup = false;
            for (size_t j = 0; j < nseen && !dup; j++) dup = cq_jv_equal(seen[j], k);
            if (dup) continue;
            seen[nseen++] = k;
            res->v[res->n++] = items->v[i];
        }
        res->gen = true;
        *out = cq_jv_list(res);
        return CQ_OK;
    }
    if (IS("reverse")) {
        CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
        if (v.kind == CQ_JV_STR) {
            const cq_jlist *chars;
            CQ_TRY(cq_jv_iterate(r, v, line, &chars));
            cq_jbuf b = {0};
            cq_status st = CQ_OK;
            for (size_t i = chars->n; i > 0 && st == CQ_OK; i--)
                st = cq_jbuf_append(r, &b, chars->v[i - 1].u.s->s, chars->v[i - 1].u.s->len);
            if (chars->n == 0) {
                cq_jbuf_free(&b);
                CQ_TRY(str_value(r, "", 0, out));
            } else {
                CQ_TRY(buf_value(r, &b, st, out));
            }
            out->markup = v.markup;
            return CQ_OK;
        }
        /* reversed(list) is an iterator; a generator is listed, then reversed */
        bool was_gen = v.kind == CQ_JV_LIST && v.u.list->gen;
        const cq_jlist *items;
        CQ_TRY(cq_jv_iterate(r, v, line, &items));
        cq_jlist *res = cq_jlist_new(&r->arena, items->n);
        if (!res) return CQ_ERR_NOMEM;
        for (size_t i = items->n; i > 0; i--) res->v[res->n++] = items->v[i - 1];
        res->gen = !was_gen;
        *out = cq_jv_list(res);
        return CQ_OK;
    }
    if (IS("sum")) {
        static const char *const names[] = {"attribute", "start", NULL};
        CQ_TRY(cq_jargs_check(a, 2, names, "sum()", line));
        cq_jv at, acc;
        CQ_TRY(arg(a, 0, "attribute", cq_jv_none(), line, &at));
        CQ_TRY(arg(a, 1, "start", cq_jv_int(0), line, &acc));
        const cq_jlist *items;
        CQ_TRY(cq_jv_iterate(r, v, line, &items));
        for (size_t i = 0; i < items->n; i++) {
            cq_jv x = items->v[i];
            if (at.kind != CQ_JV_NONE) CQ_TRY(get_attr_path(r, x, &at, line, &x));
            if (!cq_jv_is_num(x) || !cq_jv_is_num(acc)) {
                if (x.kind == CQ_JV_UNDEF) return cq_jv_undef_error(x, line);
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "unsupported operand type(s) for +: '%s' and '%s'",
                                    cq_jv_type_name(acc), cq_jv_type_name(x));
            }
            if (acc.kind == CQ_JV_FLOAT || x.kind == CQ_JV_FLOAT) {
                double p = acc.kind == CQ_JV_FLOAT ? acc.u.f : (double)(acc.kind == CQ_JV_BOOL ? acc.u.b : acc.u.i);
                double q = x.kind == CQ_JV_FLOAT ? x.u.f : (double)(x.kind == CQ_JV_BOOL ? x.u.b : x.u.i);
                acc = cq_jv_float(p + q);
            } else {
                int64_t p = acc.kind == CQ_JV_BOOL ? acc.u.b : acc.u.i, q = x.kind == CQ_JV_BOOL ? x.u.b : x.u.i, z;
                if (__builtin_add_overflow(p, q, &z))
                    return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "integer overflow");
                acc = cq_jv_int(z);
            }
        }
        *out = acc;
        return CQ_OK;
    }
    if (IS("max") || IS("min")) return do_minmax(r, v, a, IS("max"), line, out);
    if (IS("attr")) {
        CQ_TRY(cq_jargs_check(a, 1, NULL, n, line));
        if (a->npos != 1 || a->pos[0].kind != CQ_JV_STR)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "attr() needs an attribute name");
        if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
        /* getattr only: jinja2's attr filter does not fall back to items. */
        cq_jv m;
        bool found = false, unsafe = false;
        const cq_jstr *nm = a->pos[0].u.s;
        if (v.kind == CQ_JV_NS) {
            cq_jv *x = cq_jdict_get_str(v.u.dict, nm->s, nm->len);
            if (x) {
                *out = *x;
                return CQ_OK;
            }
        } else if (v.kind == CQ_JV_LOOP || ((v.kind == CQ_JV_STR || v.kind == CQ_JV_DICT ||
                                             v.kind == CQ_JV_LIST) && nm->len && nm->s[0] != '_')) {
            if (v.kind == CQ_JV_LOOP) return cq_jinja_getattr(r, v, nm, line, out);
            CQ_TRY(cq_jinja_method_lookup(r, v, nm, &m, &found, &unsafe));
            if (found && !unsafe) {
                *out = m;
                return CQ_OK;
            }
        }
        *out = cq_jv_undef("no such attribute");
        out->unsafe = unsafe;
        return CQ_OK;
    }
    if (IS("batch")) {
        static const char *const names[] = {"linecount", "fill_with", NULL};
        CQ_TRY(cq_jargs_check(a, 2, names, "batch()", line));
        cq_jv lc, fw;
        bool has_lc, has_fill;
        CQ_TRY(cq_jargs_get(a, 0, "linecount", line, &lc, &has_lc));
        CQ_TRY(cq_jargs_get(a, 1, "fill_with", line, &fw, &has_fill));
        if (!has_lc) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "batch() needs linecount");
        int64_t cnt;
        CQ_TRY(want_int(lc, "linecount", line, &cnt));
        if (cnt <= 0) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "batch() linecount must be positive");
        if (has_fill && fw.kind == CQ_JV_NONE) has_fill = false;
        const cq_jlist *items;
        bool deferred;
        CQ_TRY(gen_input(r, v, line, &items, out, &deferred));
        if (deferred) return CQ_OK;
        cq_jlist *res = cq_jlist_new(&r->arena, 0), *cur = NULL;
        if (!res) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < items->n; i++) {
            if (!cur || (int64_t)cur->n == cnt) {
                cur = cq_jlist_new(&r->arena, 0);
                if (!cur) return CQ_ERR_NOMEM;
                CQ_TRY(cq_jlist_push(&r->arena, res, cq_jv_list(cur)));
            }
            CQ_TRY(cq_jlist_push(&r->arena, cur, items->v[i]));
        }
        if (cur && has_fill)
            while ((int64_t)cur->n < cnt) CQ_TRY(cq_jlist_push(&r->arena, cur, fw));
        res->gen = true;
        *out = cq_jv_list(res);
        return CQ_OK;
    }
    if (IS("center")) {
        static const char *const names[] = {"width", NULL};
        CQ_TRY(cq_jargs_check(a, 1, names, "center()", line));
        cq_jv w;
        CQ_TRY(arg(a, 0, "width", cq_jv_int(80), line, &w));
        int64_t wi;
        CQ_TRY(want_int(w, "width", line, &wi));
        const cq_jstr *s;
        CQ_TRY(cq_jv_to_str(r, v, line, &s));
        CQ_TRY(center(r, s, wi, line, out));
        out->markup = v.kind == CQ_JV_STR && v.markup;
        return CQ_OK;
    }
    if (IS("indent")) {
        static const char *const names[] = {"width", "first", "blank", NULL};
        CQ_TRY(cq_jargs_check(a, 3, names, "indent()", line));
        cq_jv w, fi, bl;
        CQ_TRY(arg(a, 0, "width", cq_jv_int(4), line, &w));
        CQ_TRY(arg(a, 1, "first", cq_jv_bool(false), line, &fi));
        CQ_TRY(arg(a, 2, "blank", cq_jv_bool(false), line, &bl));
        /* jinja2's indent appends "\n" to its input without converting it */
        if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
        if (v.kind != CQ_JV_STR)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "indent needs a string, not %s", cq_jv_type_name(v));
        CQ_TRY(do_indent(r, v.u.s, w, cq_jv_truthy(fi), cq_jv_truthy(bl), line, out));
        out->markup = v.markup;
        return CQ_OK;
    }
    if (IS("format")) {
        const cq_jstr *s;
        CQ_TRY(cq_jv_to_str(r, v, line, &s));
        if (a->npos && a->nkw)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "can't handle positional and keyword arguments at the same time");
        cq_jv args;
        if (a->nkw) {
            cq_jdict *d = cq_jdict_new(&r->arena, a->nkw);
            if (!d) return CQ_ERR_NOMEM;
            for (size_t k = 0; k < a->nkw; k++)
                CQ_TRY(cq_jdict_set(&r->arena, d, cq_jv_strv(a->kwnames[k]), a->kwvals[k]));
            args = cq_jv_dict(d);
        } else {
            cq_jlist *t = cq_jlist_new(&r->arena, a->npos);
            if (!t) return CQ_ERR_NOMEM;
            t->tuple = true;
            if (a->npos) memcpy(t->v, a->pos, a->npos * sizeof(cq_jv));
            t->n = a->npos;
            args = cq_jv_list(t);
        }
        return cq_jinja_str_mod(r, s, args, line, out, v.kind == CQ_JV_STR && v.markup);
    }
    if (IS("truncate")) {
        static const char *const names[] = {"length", "killwords", "end", "leeway", NULL};
        CQ_TRY(cq_jargs_check(a, 4, names, "truncate()", line));
        cq_jv lv, kw, ev, lw;
        CQ_TRY(arg(a, 0, "length", cq_jv_int(255), line, &lv));
        CQ_TRY(arg(a, 1, "killwords", cq_jv_bool(false), line, &kw));
        CQ_TRY(arg(a, 2, "end", cq_jv_none(), line, &ev));
        CQ_TRY(arg(a, 3, "leeway", cq_jv_int(5), line, &lw));
        int64_t length, leeway;
        CQ_TRY(want_int(lv, "length", line, &length));
        CQ_TRY(want_int(lw, "leeway", line, &leeway));
        const cq_jstr *s, *end;
        if (v.kind != CQ_JV_STR) {
            /* jinja2 returns short non-strings untouched (len() only) */
            int64_t vl;
            CQ_TRY(cq_jv_length(v, line, &vl));
            if (vl <= length + leeway) {
                *out = v;
                return CQ_OK;
            }
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "truncate needs a string, not %s", cq_jv_type_name(v));
        }
        s = v.u.s;
        if (ev.kind == CQ_JV_NONE) {
            end = cq_jstr_new(&r->arena, "...", 3);
            if (!end) return CQ_ERR_NOMEM;
        } else CQ_TRY(cq_jv_to_str(r, ev, line, &end));
        int64_t slen = (int64_t)cq_utf8_count(s->s, s->len), elen = (int64_t)cq_utf8_count(end->s, end->len);
        if (length < elen || leeway < 0)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "expected length >= %lld, got %lld",
                                (long long)elen, (long long)length);
        if (slen <= length + leeway) {
            *out = cq_jv_strv(s);
            return CQ_OK;
        }
        size_t cut = cq_utf8_offset(s->s, s->len, (size_t)(length - elen));
        if (!cq_jv_truthy(kw)) {
            /* rsplit(" ", 1)[0] */
            for (size_t k = cut; k > 0; k--)
                if (s->s[k - 1] == ' ') {
                    cut = k - 1;
                    break;
                }
        }
        cq_jv head;
        CQ_TRY(str_value(r, s->s, cut, &head));
        cq_jv ev2 = cq_jv_strv(end);
        if (v.markup) CQ_TRY(cq_jinja_escape(r, ev2, false, line, &ev2)); /* Markup + end */
        const cq_jstr *res = cq_jstr_cat(&r->arena, head.u.s, ev2.u.s);
        if (!res) return CQ_ERR_NOMEM;
        *out = v.markup ? cq_jv_markup(res) : cq_jv_strv(res);
        return CQ_OK;
    }
    if (IS("wordcount")) {
        CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
        const cq_jstr *s;
        CQ_TRY(cq_jv_to_str(r, v, line, &s));
        int64_t count = 0;
        bool in_word = false;
        size_t i = 0;
        while (i < s->len) {
            uint32_t cp = cq_utf8_next(s->s, s->len, &i);
            bool w = cp == '_' || cq_py_isalpha(cp) || cq_py_isdigit(cp);
            if (w && !in_word) count++;
            in_word = w;
        }
        *out = cq_jv_int(count);
        return CQ_OK;
    }
    for (const char *const *u = g_unsupported_filters; *u; u++)
        if (IS(*u)) return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "the '%s' filter is not supported", n);
    return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "no filter named '%s'", n);
#undef IS
}

/* ---- tests ------------------------------------------------------------------------------ */
static const char *const g_tests[] = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number",
    "string", "mapping", "iterable", "sequence", "callable", "sameas", "escaped", "in", "eq",
    "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">",
    "ge", ">=", "odd", "even", "divisibleby", "lower", "upper", "filter", "test", NULL};

bool cq_jinja_has_test(const char *name, size_t n) {
    for (const char *const *t = g_tests; *t; t++)
        if (strlen(*t) == n && memcmp(*t, name, n) == 0) return true;
    return false;
}

static bool str_is_case(const cq_jstr *s, bool lower) {
    bool cased = false;
    size_t i = 0;
    while (i < s->len) {
        uint32_t cp = cq_utf8_next(s->s, s->len, &i);
        uint32_t up = cq_py_upper(cp), lo = cq_py_lower(cp);
        if (up == lo) continue; /* uncased */
        if (lower ? cp != lo : cp != up) return false;
        cased = true;
    }
    return cased;
}

cq_status cq_jinja_test(cq_jrender *r, const cq_jstr *name, cq_jv v, const cq_jargs *a,
                        uint32_t line, bool *out) {
    const char *n = name->s;
#define IS(x) (strcmp(n, x) == 0)
    cq_jv other = cq_jv_undef(NULL);
    bool has_other = a->npos > 0;
    if (has_other) other = a->pos[0];
    if (IS("defined")) *out = v.kind != CQ_JV_UNDEF;
    else if (IS("undefined")) *out = v.kind == CQ_JV_UNDEF;
    else if (IS("none")) *out = v.kind == CQ_JV_NONE;
    else if (IS("boolean")) *out = v.kind == CQ_JV_BOOL;
    else if (IS("false")) *out = v.kind == CQ_JV_BOOL && !v.u.b;
    else if (IS("true")) *out = v.kind == CQ_JV_BOOL && v.u.b;
    else if (IS("integer")) *out = v.kind == CQ_JV_INT;
    else if (IS("float")) *out = v.kind == CQ_JV_FLOAT;
    else if (IS("number")) *out = cq_jv_is_num(v);
    else if (IS("string")) *out = v.kind == CQ_JV_STR;
    else if (IS("mapping")) *out = v.kind == CQ_JV_DICT;
    else if (IS("iterable"))
        *out = v.kind == CQ_JV_STR || v.kind == CQ_JV_LIST || v.kind == CQ_JV_DICT ||
               v.kind == CQ_JV_UNDEF || v.kind == CQ_JV_LOOP;
    else if (IS("sequence"))
        *out = v.kind == CQ_JV_STR || (v.kind == CQ_JV_LIST && !v.u.list->gen) || v.kind == CQ_JV_DICT || v.kind == CQ_JV_UNDEF;
    else if (IS("callable"))
        *out = v.kind == CQ_JV_MACRO || v.kind == CQ_JV_FUNC || v.kind == CQ_JV_UNDEF;
    else if (IS("escaped")) *out = v.kind == CQ_JV_STR && v.markup;
    else if (IS("sameas")) {
        if (!has_other) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "sameas needs an argument");
        if (v.kind != other.kind) *out = false;
        else if (v.kind == CQ_JV_NONE || v.kind == CQ_JV_UNDEF) *out = v.kind == CQ_JV_NONE;
        else if (v.kind == CQ_JV_BOOL) *out = v.u.b == other.u.b;
        else if (v.kind == CQ_JV_INT) *out = v.u.i == other.u.i && v.u.i >= -5 && v.u.i <= 256;
        else if (v.kind == CQ_JV_STR) *out = v.u.s == other.u.s;
        else if (v.kind == CQ_JV_LIST) *out = v.u.list == other.u.list;
        else if (v.kind == CQ_JV_DICT || v.kind == CQ_JV_NS) *out = v.u.dict == other.u.dict;
        else *out = cq_jv_equal(v, other);
    } else if (IS("in")) {
        if (!has_other) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "in needs an argument");
        if (other.kind == CQ_JV_STR) {
            if (v.kind != CQ_JV_STR)
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "'in <string>' requires string as left operand");
            *out = false;
            if (v.u.s->len == 0) *out = true;
            for (size_t i = 0; !*out && i + v.u.s->len <= other.u.s->len; i++)
                *out = memcmp(other.u.s->s + i, v.u.s->s, v.u.s->len) == 0;
        } else if (other.kind == CQ_JV_LIST) {
            *out = false;
            for (size_t i = 0; i < other.u.list->n && !*out; i++) *out = cq_jv_equal(other.u.list->v[i], v);
        } else if (other.kind == CQ_JV_DICT) *out = cq_jdict_get(other.u.dict, v) != NULL;
        else if (other.kind == CQ_JV_UNDEF) *out = false;
        else return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "argument of type '%s' is not iterable",
                                 cq_jv_type_name(other));
    } else if (IS("eq") || IS("equalto") || IS("==")) {
        if (!has_other) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s needs an argument", n);
        *out = cq_jv_equal(v, other);
    } else if (IS("ne") || IS("!=")) {
        if (!has_other) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s needs an argument", n);
        *out = !cq_jv_equal(v, other);
    } else if (IS("lt") || IS("lessthan") || IS("<") || IS("le") || IS("<=") || IS("gt") ||
               IS("greaterthan") || IS(">") || IS("ge") || IS(">=")) {
        if (!has_other) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s needs an argument", n);
        int c;
        CQ_TRY(cq_jv_compare(v, other, line, &c));
        if (c == 2) *out = false;
        else if (IS("lt") || IS("lessthan") || IS("<")) *out = c < 0;
        else if (IS("le") || IS("<=")) *out = c <= 0;
        else if (IS("gt") || IS("greaterthan") || IS(">")) *out = c > 0;
        else *out = c >= 0;
    } else if (IS("odd") || IS("even") || IS("divisibleby")) {
        /* value % 2 == 1, value % 2 == 0, value % num == 0 in Python terms */
        if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
        if (!cq_jv_is_num(v)) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s needs a number", n);
        cq_jv d = cq_jv_int(2);
        if (IS("divisibleby")) {
            if (!has_other || !cq_jv_is_num(other))
                return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "divisibleby needs a number");
            d = other;
        }
        bool fl = v.kind == CQ_JV_FLOAT || d.kind == CQ_JV_FLOAT;
        double x = v.kind == CQ_JV_FLOAT ? v.u.f : (double)(v.kind == CQ_JV_BOOL ? v.u.b : v.u.i);
        double y = d.kind == CQ_JV_FLOAT ? d.u.f : (double)(d.kind == CQ_JV_BOOL ? d.u.b : d.u.i);
        if (y == 0) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "integer division or modulo by zero");
        double m;
        if (fl) {
            m = fmod(x, y);
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
        } else {
            int64_t xi = v.kind == CQ_JV_BOOL ? v.u.b : v.u.i, yi = d.kind == CQ_JV_BOOL ? d.u.b : d.u.i;
            int64_t mi = yi == -1 ? 0 : xi % yi;
            if (mi != 0 && ((mi < 0) != (yi < 0))) mi += yi;
            m = (double)mi;
        }
        *out = IS("odd") ? m == 1 : m == 0;
    } else if (IS("lower") || IS("upper")) {
        const cq_jstr *s;
        CQ_TRY(cq_jv_to_str(r, v, line, &s));
        *out = str_is_case(s, IS("lower"));
    } else if (IS("filter")) {
        if (v.kind != CQ_JV_STR) *out = false;
        else *out = cq_jinja_has_filter(v.u.s->s, v.u.s->len);
    } else if (IS("test")) {
        if (v.kind != CQ_JV_STR) *out = false;
        else *out = cq_jinja_has_test(v.u.s->s, v.u.s->len);
    } else {
        return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "no test named '%s'", n);
    }
    return CQ_OK;
#undef IS
}
