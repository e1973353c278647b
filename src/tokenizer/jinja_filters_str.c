/*
 * jinja_filters_str.c — jinja2's string filters (trim, upper/lower/title/
 * capitalize, replace, center, indent, truncate, format, wordcount, string,
 * safe, escape) and the Python str algorithms they share with the str
 * methods (strip, replace, splitlines, case mapping). Markup input stays
 * Markup where markupsafe keeps it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

#define IS(x) (strcmp(n, x) == 0)

/* ---- case mapping ------------------------------------------------------------------------ */

static bool title_sep(uint32_t cp) {
    return cq_py_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
}

cq_status cq_jinja_map_case(cq_jrender *r, const cq_jstr *s, cq_jcase m, cq_jv *out) {
    cq_jbuf b = {0};
    cq_status st = CQ_OK;
    size_t i = 0;
    bool word_start = true, first = true;
    while (i < s->len && st == CQ_OK) {
        uint32_t cp = cq_utf8_next(s->s, s->len, &i), o;
        uint32_t full[3];
        size_t nfull = 0;
        switch (m) {
        case CQ_JCASE_UPPER: nfull = cq_py_case_full(cp, true, full); o = full[0]; break;
        case CQ_JCASE_LOWER: nfull = cq_py_case_full(cp, false, full); o = full[0]; break;
        case CQ_JCASE_CAPITALIZE: o = first ? cq_py_upper(cp) : cq_py_lower(cp); break;
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
    return cq_jv_from_buf(r, &b, st, out);
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
    return cq_jv_new_str(r, s->s + st, en - st, out);
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
        return cq_jv_from_buf(r, &b, st, out);
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
    if (s->len == 0) return cq_jv_new_str(r, "", 0, out);
    return cq_jv_from_buf(r, &b, st, out);
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
        CQ_TRY(cq_jv_new_str(r, s->s + st, (keepends ? end_nl : p) - st, &v));
        CQ_TRY(cq_jlist_push(&r->arena, l, v));
        st = i;
    }
    if (st < s->len) {
        cq_jv v;
        CQ_TRY(cq_jv_new_str(r, s->s + st, s->len - st, &v));
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
        CQ_TRY(cq_jv_want_int(width, "width", line, &w));
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
    return cq_jv_from_buf(r, &b, st, out);
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
    return cq_jv_from_buf(r, &b, st, out);
}


/* ---- filters ---- */
cq_status cq_jfilter_trim(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)n;
    static const char *const names[] = {"chars", NULL};
    CQ_TRY(cq_jargs_check(a, 1, names, "trim()", line));
    cq_jv c;
    CQ_TRY(cq_jargs_opt(a, 0, "chars", cq_jv_none(), line, &c));
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

cq_status cq_jfilter_upper(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
    const cq_jstr *s;
    CQ_TRY(cq_jv_to_str(r, v, line, &s));
    CQ_TRY(cq_jinja_map_case(r, s, IS("upper") ? CQ_JCASE_UPPER : IS("lower") ? CQ_JCASE_LOWER
                                             : IS("capitalize") ? CQ_JCASE_CAPITALIZE
                                                                : CQ_JCASE_TITLE,
                     out));
    /* Markup's own methods keep it Markup; jinja's title joins plain pieces */
    out->markup = v.kind == CQ_JV_STR && v.markup && !IS("title");
    return CQ_OK;
}

cq_status cq_jfilter_replace(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)n;
    static const char *const names[] = {"old", "new", "count", NULL};
    CQ_TRY(cq_jargs_check(a, 3, names, "replace()", line));
    cq_jv o, nw, cnt;
    bool p1, p2;
    CQ_TRY(cq_jargs_get(a, 0, "old", line, &o, &p1));
    CQ_TRY(cq_jargs_get(a, 1, "new", line, &nw, &p2));
    if (!p1 || !p2) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "replace() needs old and new");
    CQ_TRY(cq_jargs_opt(a, 2, "count", cq_jv_none(), line, &cnt));
    const cq_jstr *s, *os, *ns;
    CQ_TRY(cq_jv_to_str(r, v, line, &s));
    CQ_TRY(cq_jv_to_str(r, o, line, &os));
    CQ_TRY(cq_jv_to_str(r, nw, line, &ns));
    int64_t c = -1;
    if (cnt.kind != CQ_JV_NONE) CQ_TRY(cq_jv_want_int(cnt, "count", line, &c));
    return cq_jinja_replace(r, s, os, ns, c, line, out);
}

cq_status cq_jfilter_string(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
    const cq_jstr *s;
    CQ_TRY(cq_jv_to_str(r, v, line, &s));
    /* soft_str keeps Markup; safe makes it */
    bool mk = (v.kind == CQ_JV_STR && v.markup) || IS("safe");
    *out = mk ? cq_jv_markup(s) : cq_jv_strv(s);
    return CQ_OK;
}

cq_status cq_jfilter_escape(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
    return cq_jinja_escape(r, v, IS("forceescape"), line, out);
}

cq_status cq_jfilter_center(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)n;
    static const char *const names[] = {"width", NULL};
    CQ_TRY(cq_jargs_check(a, 1, names, "center()", line));
    cq_jv w;
    CQ_TRY(cq_jargs_opt(a, 0, "width", cq_jv_int(80), line, &w));
    int64_t wi;
    CQ_TRY(cq_jv_want_int(w, "width", line, &wi));
    const cq_jstr *s;
    CQ_TRY(cq_jv_to_str(r, v, line, &s));
    CQ_TRY(center(r, s, wi, line, out));
    out->markup = v.kind == CQ_JV_STR && v.markup;
    return CQ_OK;
}

cq_status cq_jfilter_indent(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    static const char *const names[] = {"width", "first", "blank", NULL};
    CQ_TRY(cq_jargs_check(a, 3, names, "indent()", line));
    cq_jv w, fi, bl;
    CQ_TRY(cq_jargs_opt(a, 0, "width", cq_jv_int(4), line, &w));
    CQ_TRY(cq_jargs_opt(a, 1, "first", cq_jv_bool(false), line, &fi));
    CQ_TRY(cq_jargs_opt(a, 2, "blank", cq_jv_bool(false), line, &bl));
    /* jinja2's indent appends "\n" to its input without converting it */
    if (v.kind == CQ_JV_UNDEF) return cq_jv_undef_error(v, line);
    if (v.kind != CQ_JV_STR)
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "indent needs a string, not %s", cq_jv_type_name(v));
    CQ_TRY(do_indent(r, v.u.s, w, cq_jv_truthy(fi), cq_jv_truthy(bl), line, out));
    out->markup = v.markup;
    return CQ_OK;
}

cq_status cq_jfilter_format(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
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

cq_status cq_jfilter_truncate(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)n;
    static const char *const names[] = {"length", "killwords", "end", "leeway", NULL};
    CQ_TRY(cq_jargs_check(a, 4, names, "truncate()", line));
    cq_jv lv, kw, ev, lw;
    CQ_TRY(cq_jargs_opt(a, 0, "length", cq_jv_int(255), line, &lv));
    CQ_TRY(cq_jargs_opt(a, 1, "killwords", cq_jv_bool(false), line, &kw));
    CQ_TRY(cq_jargs_opt(a, 2, "end", cq_jv_none(), line, &ev));
    CQ_TRY(cq_jargs_opt(a, 3, "leeway", cq_jv_int(5), line, &lw));
    int64_t length, leeway;
    CQ_TRY(cq_jv_want_int(lv, "length", line, &length));
    CQ_TRY(cq_jv_want_int(lw, "leeway", line, &leeway));
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
    CQ_TRY(cq_jv_new_str(r, s->s, cut, &head));
    cq_jv ev2 = cq_jv_strv(end);
    if (v.markup) CQ_TRY(cq_jinja_escape(r, ev2, false, line, &ev2)); /* Markup + end */
    const cq_jstr *res = cq_jstr_cat(&r->arena, head.u.s, ev2.u.s);
    if (!res) return CQ_ERR_NOMEM;
    *out = v.markup ? cq_jv_markup(res) : cq_jv_strv(res);
    return CQ_OK;
}

cq_status cq_jfilter_wordcount(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
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
