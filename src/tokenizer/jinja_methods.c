/*
 * jinja_methods.c — method lookup on values (str methods are implemented in
 * jinja_strmethods.c), dict.items/keys/values/get, list.index/count,
 * loop.cycle/changed, and the globals transformers provides (range,
 * namespace, dict, raise_exception, strftime_now).
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
    for (size_t i = 0; i < a->npos; i++) CQ_TRY(cq_jv_want_int(a->pos[i], "range() argument", line, &v[i]));
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
        return cq_jv_new_str(r, buf, m, out);
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
        if (fn->id >= CQ_JF_S_STARTSWITH && fn->id <= CQ_JF_S_EXPANDTABS) return cq_jinja_str_method(r, fn, a, line, out);
        return cq_jinja_err(CQ_ERR_INTERNAL, line, "unknown builtin %d", fn->id);
    }
}
