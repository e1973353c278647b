/*
 * jinja_filters.c — the filter table and dispatch, argument helpers, and the
 * filters on single values (default, tojson as transformers defines it --
 * json.dumps with ensure_ascii=False, indent, separators, sort_keys --,
 * int, float, abs, round, attr). String filters live in jinja_filters_str.c,
 * sequence filters in jinja_filters_seq.c, tests in jinja_tests.c.
 *
 * Filters that chat templates do not use (urlize, wordwrap, groupby, ...)
 * fail with CQ_ERR_UNSUPPORTED when a render reaches them, so a template
 * mentioning one in an unused branch still renders.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

#define IS(x) (strcmp(n, x) == 0)

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

cq_status cq_jargs_opt(const cq_jargs *a, size_t idx, const char *name, cq_jv def, uint32_t line,
                     cq_jv *out) {
    bool present;
    CQ_TRY(cq_jargs_get(a, idx, name, line, out, &present));
    if (!present) *out = def;
    return CQ_OK;
}

cq_status cq_jv_want_int(cq_jv v, const char *what, uint32_t line, int64_t *out) {
    if (v.kind == CQ_JV_INT) *out = v.u.i;
    else if (v.kind == CQ_JV_BOOL) *out = v.u.b;
    else if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
    else
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s must be an integer, not %s", what,
                            cq_jv_type_name(v));
    return CQ_OK;
}

cq_status cq_jv_new_str(cq_jrender *r, const char *s, size_t n, cq_jv *out) {
    const cq_jstr *x = cq_jstr_new(&r->arena, s, n);
    if (!x) return CQ_ERR_NOMEM;
    *out = cq_jv_strv(x);
    return CQ_OK;
}

cq_status cq_jv_from_buf(cq_jrender *r, cq_jbuf *b, cq_status s, cq_jv *out) {
    const cq_jstr *x = NULL;
    if (s == CQ_OK) s = cq_jbuf_to_str(r, b, &x);
    cq_jbuf_free(b);
    CQ_TRY(s);
    *out = cq_jv_strv(x);
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

/* ---- tojson ----------------------------------------------------------------------------------- */
static cq_status do_tojson(cq_jrender *r, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    static const char *const names[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    CQ_TRY(cq_jargs_check(a, 4, names, "tojson()", line));
    cq_jv ea, ind, sep, sk;
    CQ_TRY(cq_jargs_opt(a, 0, "ensure_ascii", cq_jv_bool(false), line, &ea));
    CQ_TRY(cq_jargs_opt(a, 1, "indent", cq_jv_none(), line, &ind));
    CQ_TRY(cq_jargs_opt(a, 2, "separators", cq_jv_none(), line, &sep));
    CQ_TRY(cq_jargs_opt(a, 3, "sort_keys", cq_jv_bool(false), line, &sk));
    cq_json_opts o = {.ensure_ascii = cq_jv_truthy(ea), .sort_keys = cq_jv_truthy(sk),
                      .html_safe = r->lim.html_safe_json, .indent = -1};
    if (ind.kind == CQ_JV_STR) o.indent_str = ind.u.s;
    else if (ind.kind != CQ_JV_NONE) {
        int64_t w;
        CQ_TRY(cq_jv_want_int(ind, "indent", line, &w));
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
    return cq_jv_from_buf(r, &b, s, out);
}


/* ---- filters ---- */
cq_status cq_jfilter_tojson(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)n;
    return do_tojson(r, v, a, line, out);
}

cq_status cq_jfilter_default(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)r;
    (void)n;
    static const char *const names[] = {"default_value", "boolean", NULL};
    CQ_TRY(cq_jargs_check(a, 2, names, "default()", line));
    cq_jv dv, bo;
    CQ_TRY(cq_jargs_opt(a, 0, "default_value", cq_jv_strv(cq_jstr_empty()), line, &dv));
    CQ_TRY(cq_jargs_opt(a, 1, "boolean", cq_jv_bool(false), line, &bo));
    if (v.kind == CQ_JV_UNDEF || (cq_jv_truthy(bo) && !cq_jv_truthy(v))) *out = dv;
    else *out = v;
    return CQ_OK;
}

cq_status cq_jfilter_int(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)r;
    (void)n;
    static const char *const names[] = {"default", "base", NULL};
    CQ_TRY(cq_jargs_check(a, 2, names, "int()", line));
    cq_jv dv, bv;
    CQ_TRY(cq_jargs_opt(a, 0, "default", cq_jv_int(0), line, &dv));
    CQ_TRY(cq_jargs_opt(a, 1, "base", cq_jv_int(10), line, &bv));
    int64_t base;
    CQ_TRY(cq_jv_want_int(bv, "base", line, &base));
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

cq_status cq_jfilter_float(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)r;
    (void)n;
    static const char *const names[] = {"default", NULL};
    CQ_TRY(cq_jargs_check(a, 1, names, "float()", line));
    cq_jv dv;
    CQ_TRY(cq_jargs_opt(a, 0, "default", cq_jv_float(0.0), line, &dv));
    double fv;
    if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line); /* float(Undefined) raises */
    if (v.kind == CQ_JV_FLOAT) *out = v;
    else if (v.kind == CQ_JV_INT) *out = cq_jv_float((double)v.u.i);
    else if (v.kind == CQ_JV_BOOL) *out = cq_jv_float(v.u.b);
    else if (v.kind == CQ_JV_STR && parse_py_float(v.u.s, &fv)) *out = cq_jv_float(fv);
    else *out = dv;
    return CQ_OK;
}

cq_status cq_jfilter_abs(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)r;
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

cq_status cq_jfilter_round(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)r;
    (void)n;
    static const char *const names[] = {"precision", "method", NULL};
    CQ_TRY(cq_jargs_check(a, 2, names, "round()", line));
    cq_jv pv, mv;
    CQ_TRY(cq_jargs_opt(a, 0, "precision", cq_jv_int(0), line, &pv));
    CQ_TRY(cq_jargs_opt(a, 1, "method", cq_jv_none(), line, &mv));
    int64_t prec;
    CQ_TRY(cq_jv_want_int(pv, "precision", line, &prec));
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

cq_status cq_jfilter_attr(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
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

/* ---- the filter table ---- */
static const char *const g_unsupported_filters[] = {
    "filesizeformat", "groupby", "pprint", "random", "slice", "striptags",
    "urlencode", "urlize", "wordwrap", "xmlattr", NULL};

static const struct {
    const char *name;
    cq_jfilter_fn fn;
} g_filter_table[] = {
    {"abs", cq_jfilter_abs},
    {"attr", cq_jfilter_attr},
    {"batch", cq_jfilter_batch},
    {"capitalize", cq_jfilter_upper},
    {"center", cq_jfilter_center},
    {"count", cq_jfilter_length},
    {"d", cq_jfilter_default},
    {"default", cq_jfilter_default},
    {"dictsort", cq_jfilter_dictsort},
    {"e", cq_jfilter_escape},
    {"escape", cq_jfilter_escape},
    {"first", cq_jfilter_first},
    {"float", cq_jfilter_float},
    {"forceescape", cq_jfilter_escape},
    {"format", cq_jfilter_format},
    {"indent", cq_jfilter_indent},
    {"int", cq_jfilter_int},
    {"items", cq_jfilter_items},
    {"join", cq_jfilter_join},
    {"last", cq_jfilter_last},
    {"length", cq_jfilter_length},
    {"list", cq_jfilter_list},
    {"lower", cq_jfilter_upper},
    {"map", cq_jfilter_map},
    {"max", cq_jfilter_max},
    {"min", cq_jfilter_max},
    {"reject", cq_jfilter_reject},
    {"rejectattr", cq_jfilter_rejectattr},
    {"replace", cq_jfilter_replace},
    {"reverse", cq_jfilter_reverse},
    {"round", cq_jfilter_round},
    {"safe", cq_jfilter_string},
    {"select", cq_jfilter_select},
    {"selectattr", cq_jfilter_selectattr},
    {"sort", cq_jfilter_sort},
    {"string", cq_jfilter_string},
    {"sum", cq_jfilter_sum},
    {"title", cq_jfilter_upper},
    {"tojson", cq_jfilter_tojson},
    {"trim", cq_jfilter_trim},
    {"truncate", cq_jfilter_truncate},
    {"unique", cq_jfilter_unique},
    {"upper", cq_jfilter_upper},
    {"wordcount", cq_jfilter_wordcount},
};

bool cq_jinja_has_filter(const char *name, size_t n) {
    for (size_t i = 0; i < CQ_ARRAY_LEN(g_filter_table); i++)
        if (strlen(g_filter_table[i].name) == n && memcmp(g_filter_table[i].name, name, n) == 0) return true;
    for (const char *const *f = g_unsupported_filters; *f; f++)
        if (strlen(*f) == n && memcmp(*f, name, n) == 0) return true;
    return false;
}

cq_status cq_jinja_filter(cq_jrender *r, const cq_jstr *name, cq_jv v, const cq_jargs *a,
                          uint32_t line, cq_jv *out) {
    for (size_t i = 0; i < CQ_ARRAY_LEN(g_filter_table); i++)
        if (cq_jstr_eq(name, g_filter_table[i].name)) return g_filter_table[i].fn(r, name->s, v, a, line, out);
    for (const char *const *u = g_unsupported_filters; *u; u++)
        if (cq_jstr_eq(name, *u)) return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "the '%s' filter is not supported", *u);
    return cq_jinja_err(CQ_ERR_UNSUPPORTED, line, "no filter named '%s'", name->s);
}
