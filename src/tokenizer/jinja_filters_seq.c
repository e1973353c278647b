/*
 * jinja_filters_seq.c — jinja2's sequence filters: length, first/last, list,
 * items, join, map, select/reject(attr), sort, dictsort, unique, reverse,
 * sum, min/max, batch. map/select/reject/items/unique/batch/reverse give
 * generators as in jinja2: always true, no len(), consumed once, and an
 * element that fails only fails when the generator gets that far.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

#define IS(x) (strcmp(n, x) == 0)

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
        else CQ_TRY(cq_jv_new_str(r, part, plen, &key));
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
    if (!case_sensitive && k.kind == CQ_JV_STR) CQ_TRY(cq_jinja_map_case(r, k.u.s, CQ_JCASE_LOWER, &k));
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
    cq_jargs targs = {.pos = p < a->npos ? a->pos + p : NULL, .npos = a->npos - p, .kwnames = a->kwnames,
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

static cq_status do_minmax(cq_jrender *r, cq_jv v, const cq_jargs *a, bool is_max, uint32_t line,
                           cq_jv *out) {
    static const char *const names[] = {"case_sensitive", "attribute", NULL};
    CQ_TRY(cq_jargs_check(a, 2, names, is_max ? "max()" : "min()", line));
    cq_jv cs, at;
    CQ_TRY(cq_jargs_opt(a, 0, "case_sensitive", cq_jv_bool(false), line, &cs));
    CQ_TRY(cq_jargs_opt(a, 1, "attribute", cq_jv_none(), line, &at));
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


/* ---- filters ---- */
cq_status cq_jfilter_length(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)r;
    CQ_TRY(cq_jargs_check(a, 0, NULL, n, line));
    int64_t len;
    CQ_TRY(cq_jv_length(v, line, &len));
    *out = cq_jv_int(len);
    return CQ_OK;
}

cq_status cq_jfilter_join(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    static const char *const names[] = {"d", "attribute", NULL};
    CQ_TRY(cq_jargs_check(a, 2, names, "join()", line));
    cq_jv d, at;
    CQ_TRY(cq_jargs_opt(a, 0, "d", cq_jv_strv(cq_jstr_empty()), line, &d));
    CQ_TRY(cq_jargs_opt(a, 1, "attribute", cq_jv_none(), line, &at));
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
        return cq_jv_new_str(r, "", 0, out);
    }
    return cq_jv_from_buf(r, &b, st, out);
}

cq_status cq_jfilter_first(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
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

cq_status cq_jfilter_last(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
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

cq_status cq_jfilter_list(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
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

cq_status cq_jfilter_items(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
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

cq_status cq_jfilter_map(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
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

cq_status cq_jfilter_select(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)n;
    return select_reject(r, v, a, false, true, line, out);
}

cq_status cq_jfilter_reject(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)n;
    return select_reject(r, v, a, false, false, line, out);
}

cq_status cq_jfilter_selectattr(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)n;
    return select_reject(r, v, a, true, true, line, out);
}

cq_status cq_jfilter_rejectattr(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)n;
    return select_reject(r, v, a, true, false, line, out);
}

cq_status cq_jfilter_sort(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)n;
    static const char *const names[] = {"reverse", "case_sensitive", "attribute", NULL};
    CQ_TRY(cq_jargs_check(a, 3, names, "sort()", line));
    cq_jv rv, cs, at;
    CQ_TRY(cq_jargs_opt(a, 0, "reverse", cq_jv_bool(false), line, &rv));
    CQ_TRY(cq_jargs_opt(a, 1, "case_sensitive", cq_jv_bool(false), line, &cs));
    CQ_TRY(cq_jargs_opt(a, 2, "attribute", cq_jv_none(), line, &at));
    const cq_jlist *items;
    CQ_TRY(cq_jv_iterate(r, v, line, &items));
    cq_jlist *res;
    CQ_TRY(sorted_list(r, items, at.kind == CQ_JV_NONE ? NULL : &at, cq_jv_truthy(cs),
                       cq_jv_truthy(rv), line, &res));
    *out = cq_jv_list(res);
    return CQ_OK;
}

cq_status cq_jfilter_dictsort(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    (void)n;
    static const char *const names[] = {"case_sensitive", "by", "reverse", NULL};
    CQ_TRY(cq_jargs_check(a, 3, names, "dictsort()", line));
    cq_jv cs, by, rv;
    CQ_TRY(cq_jargs_opt(a, 0, "case_sensitive", cq_jv_bool(false), line, &cs));
    CQ_TRY(cq_jargs_opt(a, 1, "by", cq_jv_none(), line, &by));
    CQ_TRY(cq_jargs_opt(a, 2, "reverse", cq_jv_bool(false), line, &rv));
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

cq_status cq_jfilter_unique(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    static const char *const names[] = {"case_sensitive", "attribute", NULL};
    CQ_TRY(cq_jargs_check(a, 2, names, "unique()", line));
    cq_jv cs, at;
    CQ_TRY(cq_jargs_opt(a, 0, "case_sensitive", cq_jv_bool(false), line, &cs));
    CQ_TRY(cq_jargs_opt(a, 1, "attribute", cq_jv_none(), line, &at));
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

cq_status cq_jfilter_reverse(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
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
            CQ_TRY(cq_jv_new_str(r, "", 0, out));
        } else {
            CQ_TRY(cq_jv_from_buf(r, &b, st, out));
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

cq_status cq_jfilter_sum(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    static const char *const names[] = {"attribute", "start", NULL};
    CQ_TRY(cq_jargs_check(a, 2, names, "sum()", line));
    cq_jv at, acc;
    CQ_TRY(cq_jargs_opt(a, 0, "attribute", cq_jv_none(), line, &at));
    CQ_TRY(cq_jargs_opt(a, 1, "start", cq_jv_int(0), line, &acc));
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

cq_status cq_jfilter_max(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    return do_minmax(r, v, a, IS("max"), line, out);
}

cq_status cq_jfilter_batch(cq_jrender *r, const char *n, cq_jv v, const cq_jargs *a, uint32_t line, cq_jv *out) {
    static const char *const names[] = {"linecount", "fill_with", NULL};
    CQ_TRY(cq_jargs_check(a, 2, names, "batch()", line));
    cq_jv lc, fw;
    bool has_lc, has_fill;
    CQ_TRY(cq_jargs_get(a, 0, "linecount", line, &lc, &has_lc));
    CQ_TRY(cq_jargs_get(a, 1, "fill_with", line, &fw, &has_fill));
    if (!has_lc) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "batch() needs linecount");
    int64_t cnt;
    CQ_TRY(cq_jv_want_int(lc, "linecount", line, &cnt));
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
