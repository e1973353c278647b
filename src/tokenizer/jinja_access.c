/*
 * jinja_access.c — obj.attr, obj[key] and obj[a:b:c] with the rules of
 * jinja2's immutable sandbox: obj.name tries the Python attribute first
 * (str/dict/list methods, loop fields, namespace attributes) and then
 * obj["name"]; obj[key] tries the item and then, for a string key, the
 * attribute; private names are hidden and mutating methods come back as an
 * unsafe Undefined. Missing things are Undefined; touching Undefined further
 * fails. Slices follow Python's index adjustment on code points and lists.
 */
#include <stdio.h>
#include <string.h>

#include "tokenizer/jinja_impl.h"

cq_jv cq_jv_undef_fmt(cq_jrender *r, const char *fmt, const cq_jstr *name) {
    char msg[160];
    snprintf(msg, sizeof msg, fmt, name->len > 80 ? 80 : (int)name->len, name->s);
    const cq_jstr *m = cq_jstr_new(&r->arena, msg, strlen(msg));
    return cq_jv_undef(m ? m->s : NULL);
}

/* ---- attribute and item access ----------------------------------------------------- */
static cq_status loop_attr(cq_jrender *r, cq_jloop *L, const cq_jstr *name, cq_jv *out,
                           bool *found) {
    size_t n = L->items->n, i = L->index0;
    *found = true;
    if (cq_jstr_eq(name, "index")) *out = cq_jv_int((int64_t)i + 1);
    else if (cq_jstr_eq(name, "index0")) *out = cq_jv_int((int64_t)i);
    else if (cq_jstr_eq(name, "revindex")) *out = cq_jv_int((int64_t)(n - i));
    else if (cq_jstr_eq(name, "revindex0")) *out = cq_jv_int((int64_t)(n - i - 1));
    else if (cq_jstr_eq(name, "first")) *out = cq_jv_bool(i == 0);
    else if (cq_jstr_eq(name, "last")) *out = cq_jv_bool(i + 1 == n);
    else if (cq_jstr_eq(name, "length")) *out = cq_jv_int((int64_t)n);
    else if (cq_jstr_eq(name, "depth")) *out = cq_jv_int(L->depth);
    else if (cq_jstr_eq(name, "depth0")) *out = cq_jv_int(L->depth - 1);
    else if (cq_jstr_eq(name, "previtem"))
        *out = i > 0 ? L->items->v[i - 1] : cq_jv_undef("there is no previous item");
    else if (cq_jstr_eq(name, "nextitem"))
        *out = i + 1 < n ? L->items->v[i + 1] : cq_jv_undef("there is no next item");
    else if (cq_jstr_eq(name, "cycle") || cq_jstr_eq(name, "changed")) {
        cq_jfunc *fn = cq_jarena_alloc(&r->arena, sizeof *fn);
        if (!fn) return CQ_ERR_NOMEM;
        fn->id = cq_jstr_eq(name, "cycle") ? CQ_JF_LOOP_CYCLE : CQ_JF_LOOP_CHANGED;
        fn->self.kind = CQ_JV_LOOP;
        fn->self.u.loop = L;
        out->kind = CQ_JV_FUNC;
        out->unsafe = 0;
        out->u.func = fn;
    } else *found = false;
    return CQ_OK;
}

static cq_status attr_lookup(cq_jrender *r, cq_jv obj, const cq_jstr *name, uint32_t line,
                             cq_jv *out, bool *found) {
    *found = false;
    if (name->len >= 1 && name->s[0] == '_') return CQ_OK; /* sandbox: private attributes */
    if (obj.kind == CQ_JV_NS) {
        cq_jv *v = cq_jdict_get_str(obj.u.dict, name->s, name->len);
        if (v) {
            *out = *v;
            *found = true;
        }
        return CQ_OK;
    }
    if (obj.kind == CQ_JV_LOOP) return loop_attr(r, obj.u.loop, name, out, found);
    if (obj.kind == CQ_JV_STR || obj.kind == CQ_JV_DICT || obj.kind == CQ_JV_LIST) {
        bool unsafe = false;
        CQ_TRY(cq_jinja_method_lookup(r, obj, name, out, found, &unsafe));
        if (*found && unsafe) {
            char msg[160];
            snprintf(msg, sizeof msg, "access to attribute '%.*s' of '%s' object is unsafe.",
                     name->len > 60 ? 60 : (int)name->len, name->s, cq_jv_type_name(obj));
            const cq_jstr *m = cq_jstr_new(&r->arena, msg, strlen(msg));
            *out = cq_jv_undef(m ? m->s : NULL);
            out->unsafe = 1;
        }
    }
    (void)line;
    return CQ_OK;
}

static cq_jv no_attr(cq_jrender *r, cq_jv obj, const cq_jstr *name) {
    char fmt[96];
    snprintf(fmt, sizeof fmt, "'%s object' has no attribute '%%.*s'", cq_jv_type_name(obj));
    return cq_jv_undef_fmt(r, fmt, name);
}

static cq_status item_lookup(cq_jrender *r, cq_jv obj, cq_jv key, cq_jv *out, bool *found) {
    *found = false;
    if (obj.kind == CQ_JV_DICT) {
        cq_jv *v = cq_jdict_get(obj.u.dict, key);
        if (v) {
            *out = *v;
            *found = true;
        }
    } else if (((obj.kind == CQ_JV_LIST && !obj.u.list->gen) || obj.kind == CQ_JV_STR) &&
               (key.kind == CQ_JV_INT || key.kind == CQ_JV_BOOL)) {
        int64_t i = key.kind == CQ_JV_BOOL ? key.u.b : key.u.i;
        if (obj.kind == CQ_JV_LIST) {
            int64_t n = (int64_t)obj.u.list->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                *out = obj.u.list->v[i];
                *found = true;
            }
        } else {
            const cq_jstr *s = obj.u.s;
            int64_t n = (int64_t)cq_utf8_count(s->s, s->len);
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                size_t st = cq_utf8_offset(s->s, s->len, (size_t)i), e = st;
                cq_utf8_next(s->s, s->len, &e);
                const cq_jstr *c = cq_jstr_new(&r->arena, s->s + st, e - st);
                if (!c) return CQ_ERR_NOMEM;
                *out = obj.markup ? cq_jv_markup(c) : cq_jv_strv(c);
                *found = true;
            }
        }
    }
    return CQ_OK;
}

cq_status cq_jinja_getattr(cq_jrender *r, cq_jv obj, const cq_jstr *name, uint32_t line,
                           cq_jv *out) {
    if (obj.kind == CQ_JV_UNDEF) return cq_jv_undef_error(obj, line);
    bool found;
    CQ_TRY(attr_lookup(r, obj, name, line, out, &found));
    if (found) return CQ_OK;
    CQ_TRY(item_lookup(r, obj, cq_jv_strv(name), out, &found));
    if (found) return CQ_OK;
    *out = no_attr(r, obj, name);
    return CQ_OK;
}

cq_status cq_jinja_getitem(cq_jrender *r, cq_jv obj, cq_jv key, uint32_t line, cq_jv *out) {
    if (obj.kind == CQ_JV_UNDEF) return cq_jv_undef_error(obj, line);
    bool found;
    CQ_TRY(item_lookup(r, obj, key, out, &found));
    if (found) return CQ_OK;
    if (key.kind == CQ_JV_STR) {
        CQ_TRY(attr_lookup(r, obj, key.u.s, line, out, &found));
        if (found) return CQ_OK;
        *out = no_attr(r, obj, key.u.s);
        return CQ_OK;
    }
    *out = cq_jv_undef("no such element");
    return CQ_OK;
}

/* Python slice index adjustment (PySlice_AdjustIndices). */
static size_t slice_indices(int64_t len, bool has_start, int64_t start, bool has_stop, int64_t stop,
                            int64_t step, int64_t *ostart) {
    if (!has_start) start = step < 0 ? INT64_MAX : 0;
    if (!has_stop) stop = step < 0 ? INT64_MIN : INT64_MAX;
    if (start < 0) {
        start = start < -len ? (step < 0 ? -1 : 0) : start + len;
    } else if (start >= len) {
        start = step < 0 ? len - 1 : len;
    }
    if (stop < 0) {
        stop = stop < -len ? (step < 0 ? -1 : 0) : stop + len;
    } else if (stop >= len) {
        stop = step < 0 ? len - 1 : len;
    }
    *ostart = start;
    if (step < 0) return stop < start ? (size_t)((start - stop - 1) / (-step) + 1) : 0;
    return start < stop ? (size_t)((stop - start - 1) / step + 1) : 0;
}

static cq_status slice_part(cq_jrender *r, const cq_jnode *e, cq_jframe *f, bool *has, int64_t *v) {
    *has = false;
    if (!e) return CQ_OK;
    cq_jv x;
    CQ_TRY(cq_jinja_eval(r, e, f, &x));
    if (x.kind == CQ_JV_NONE) return CQ_OK;
    if (x.kind == CQ_JV_INT || x.kind == CQ_JV_BOOL) {
        *has = true;
        *v = x.kind == CQ_JV_BOOL ? x.u.b : x.u.i;
        return CQ_OK;
    }
    if (x.kind == CQ_JV_UNDEF) return cq_jv_undef_error(x, e->line);
    return cq_jinja_err(CQ_ERR_INVALID_ARG, e->line,
                        "slice indices must be integers or None or have an __index__ method");
}

cq_status cq_jinja_eval_slice(cq_jrender *r, cq_jv obj, const cq_jnode *sl, cq_jframe *f, cq_jv *out) {
    bool hs, he, hp;
    int64_t s = 0, e = 0, step = 1;
    CQ_TRY(slice_part(r, sl->a, f, &hs, &s));
    CQ_TRY(slice_part(r, sl->b, f, &he, &e));
    CQ_TRY(slice_part(r, sl->c, f, &hp, &step));
    if (obj.kind == CQ_JV_UNDEF) return cq_jv_undef_error(obj, sl->line);
    /* jinja2 compiles slices to a plain Python subscript: no Undefined
     * fallback, unsliceable values raise -- except when the whole subscript
     * is constant, which jinja2 folds at compile time through its getitem
     * (and so gets Undefined). */
    if ((obj.kind != CQ_JV_LIST && obj.kind != CQ_JV_STR) || (obj.kind == CQ_JV_LIST && obj.u.list->gen)) {
        if (r->const_mode) {
            *out = cq_jv_undef("object is not subscriptable");
            return CQ_OK;
        }
        return cq_jinja_err(CQ_ERR_INVALID_ARG, sl->line, "'%s' object is not subscriptable",
                            cq_jv_type_name(obj));
    }
    if (!hp) step = 1;
    if (step == 0) return cq_jinja_err(CQ_ERR_INVALID_ARG, sl->line, "slice step cannot be zero");
    if (step == INT64_MIN) step = INT64_MIN + 1;
    if (obj.kind == CQ_JV_LIST) {
        const cq_jlist *l = obj.u.list;
        int64_t st;
        size_t cnt = slice_indices((int64_t)l->n, hs, s, he, e, step, &st);
        cq_jlist *res = cq_jlist_new(&r->arena, cnt);
        if (!res) return CQ_ERR_NOMEM;
        res->tuple = l->tuple;
        for (size_t k = 0; k < cnt; k++) res->v[k] = l->v[st + (int64_t)k * step];
        res->n = cnt;
        *out = cq_jv_list(res);
        return CQ_OK;
    }
    /* strings: slice code points */
    const cq_jstr *str = obj.u.s;
    size_t ncp = cq_utf8_count(str->s, str->len);
    size_t *offs = cq_jarena_alloc(&r->arena, (ncp + 1) * sizeof(size_t));
    if (!offs) return CQ_ERR_NOMEM;
    size_t i = 0, k = 0;
    while (i < str->len) {
        offs[k++] = i;
        cq_utf8_next(str->s, str->len, &i);
    }
    offs[k] = str->len;
    int64_t st;
    size_t cnt = slice_indices((int64_t)ncp, hs, s, he, e, step, &st);
    if (step == 1) {
        const cq_jstr *res = cq_jstr_new(&r->arena, str->s + offs[st], offs[st + (int64_t)cnt] - offs[st]);
        if (!res) return CQ_ERR_NOMEM;
        *out = obj.markup ? cq_jv_markup(res) : cq_jv_strv(res);
        return CQ_OK;
    }
    cq_jbuf b = {0};
    cq_status rc = CQ_OK;
    for (size_t j = 0; j < cnt && rc == CQ_OK; j++) {
        int64_t c = st + (int64_t)j * step;
        rc = cq_jbuf_append(r, &b, str->s + offs[c], offs[c + 1] - offs[c]);
    }
    const cq_jstr *res = NULL;
    if (rc == CQ_OK) rc = cq_jbuf_to_str(r, &b, &res);
    cq_jbuf_free(&b);
    CQ_TRY(rc);
    *out = obj.markup ? cq_jv_markup(res) : cq_jv_strv(res);
    return CQ_OK;
}

