/*
 * jinja_value.c — the value type of the template engine: the render arena,
 * strings/lists/dicts, and the Python semantics templates observe
 * (truthiness, ==, <, iteration, len()), plus context values from cJSON.
 *
 * Strings are byte strings holding UTF-8; operations that Python defines on
 * code points (len, indexing, slicing) decode on the fly.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tokenizer/jinja_impl.h"

/* ---- arena --------------------------------------------------------------- */
struct cq_jchunk {
    cq_jchunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

#define CQ_JCHUNK_MIN (64u * 1024u)

void *cq_jarena_alloc(cq_jarena *a, size_t n) {
    size_t need;
    if (!cq_add_size(n, 15, &need)) {
        cq_fail(CQ_ERR_NOMEM, "template value of %zu bytes is too large", n);
        return NULL;
    }
    need &= ~(size_t)15;
    if (need == 0) need = 16;
    cq_jchunk *c = a->head;
    if (!c || c->size - c->used < need) {
        size_t size = need > CQ_JCHUNK_MIN ? need : CQ_JCHUNK_MIN;
        if (a->limit && (a->used > a->limit || size > a->limit - a->used)) {
            cq_fail(CQ_ERR_NOMEM, "chat template exceeded its memory limit (%zu bytes)",
                    a->limit);
            return NULL;
        }
        size_t total;
        if (!cq_add_size(sizeof(cq_jchunk), size, &total)) {
            cq_fail(CQ_ERR_NOMEM, "template value of %zu bytes is too large", n);
            return NULL;
        }
        cq_jchunk *nc = cq_malloc(total);
        if (!nc) return NULL;
        nc->size = size;
        nc->used = 0;
        a->used += size;
        if (c && size > CQ_JCHUNK_MIN) {
            /* A big one-off block goes behind the head so the head's free
             * space stays usable. */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            a->head = nc;
        }
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += need;
    memset(p, 0, n);
    return p;
}

void cq_jarena_free(cq_jarena *a) {
    if (!a) return;
    cq_jchunk *c = a->head;
    while (c) {
        cq_jchunk *n = c->next;
        cq_free(c);
        c = n;
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- errors and steps -------------------------------------------------------- */
cq_status cq_jinja_err(cq_status s, uint32_t line, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cq_fail(s, "chat template line %u: %s", (unsigned)line, msg);
}

cq_status cq_jinja_step(cq_jrender *r, uint32_t line) {
    if (++r->steps > r->lim.max_steps)
        return cq_jinja_err(CQ_ERR_BOUNDS, line, "template exceeded %llu steps",
                            (unsigned long long)r->lim.max_steps);
    return CQ_OK;
}

cq_status cq_jinja_charge(cq_jrender *r, size_t units, uint32_t line) {
    r->scan += units;
    if (r->scan < 16) return CQ_OK;
    r->steps += r->scan / 16 - 1;
    r->scan %= 16;
    return cq_jinja_step(r, line);
}

/* ---- strings --------------------------------------------------------------- */
static const struct {
    size_t len;
    char s[1];
} g_empty = {0, {0}};

const cq_jstr *cq_jstr_empty(void) { return (const cq_jstr *)&g_empty; }

const cq_jstr *cq_jstr_new(cq_jarena *a, const char *s, size_t n) {
    if (n == 0) return cq_jstr_empty();
    size_t sz;
    if (!cq_add_size(sizeof(cq_jstr) + 1, n, &sz)) {
        cq_fail(CQ_ERR_NOMEM, "string of %zu bytes is too large", n);
        return NULL;
    }
    cq_jstr *r = cq_jarena_alloc(a, sz);
    if (!r) return NULL;
    r->len = n;
    memcpy(r->s, s, n);
    r->s[n] = 0;
    return r;
}

const cq_jstr *cq_jstr_cat(cq_jarena *a, const cq_jstr *x, const cq_jstr *y) {
    if (x->len == 0) return y;
    if (y->len == 0) return x;
    size_t n, sz;
    if (!cq_add_size(x->len, y->len, &n) || !cq_add_size(sizeof(cq_jstr) + 1, n, &sz)) {
        cq_fail(CQ_ERR_NOMEM, "string too large");
        return NULL;
    }
    cq_jstr *r = cq_jarena_alloc(a, sz);
    if (!r) return NULL;
    r->len = n;
    memcpy(r->s, x->s, x->len);
    memcpy(r->s + x->len, y->s, y->len);
    r->s[n] = 0;
    return r;
}

bool cq_jstr_eq(const cq_jstr *s, const char *lit) {
    size_t n = strlen(lit);
    return s->len == n && memcmp(s->s, lit, n) == 0;
}

/* ---- lists and dicts -------------------------------------------------------- */
cq_jlist *cq_jlist_new(cq_jarena *a, size_t cap) {
    cq_jlist *l = cq_jarena_alloc(a, sizeof *l);
    if (!l) return NULL;
    if (cap) {
        size_t sz;
        if (!cq_mul_size(cap, sizeof(cq_jv), &sz)) {
            cq_fail(CQ_ERR_NOMEM, "list of %zu items is too large", cap);
            return NULL;
        }
        l->v = cq_jarena_alloc(a, sz);
        if (!l->v) return NULL;
        l->cap = cap;
    }
    return l;
}

cq_status cq_jlist_push(cq_jarena *a, cq_jlist *l, cq_jv v) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 4, sz;
        if (nc < l->cap || !cq_mul_size(nc, sizeof(cq_jv), &sz))
            return cq_fail(CQ_ERR_NOMEM, "list too large");
        cq_jv *nv = cq_jarena_alloc(a, sz);
        if (!nv) return CQ_ERR_NOMEM;
        if (l->n) memcpy(nv, l->v, l->n * sizeof(cq_jv));
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = v;
    return CQ_OK;
}

cq_jdict *cq_jdict_new(cq_jarena *a, size_t cap) {
    cq_jdict *d = cq_jarena_alloc(a, sizeof *d);
    if (!d) return NULL;
    if (cap) {
        size_t sz;
        if (!cq_mul_size(cap, sizeof(cq_jv), &sz)) {
            cq_fail(CQ_ERR_NOMEM, "dict of %zu items is too large", cap);
            return NULL;
        }
        d->k = cq_jarena_alloc(a, sz);
        d->v = cq_jarena_alloc(a, sz);
        if (!d->k || !d->v) return NULL;
        d->cap = cap;
    }
    return d;
}

cq_jv *cq_jdict_get(const cq_jdict *d, cq_jv k) {
    for (size_t i = 0; i < d->n; i++)
        if (cq_jv_equal(d->k[i], k)) return &d->v[i];
    return NULL;
}

cq_jv *cq_jdict_get_str(const cq_jdict *d, const char *k, size_t klen) {
    for (size_t i = 0; i < d->n; i++) {
        const cq_jv *key = &d->k[i];
        if (key->kind == CQ_JV_STR && key->u.s->len == klen && memcmp(key->u.s->s, k, klen) == 0)
            return &d->v[i];
    }
    return NULL;
}

cq_status cq_jdict_set(cq_jarena *a, cq_jdict *d, cq_jv k, cq_jv v) {
    cq_jv *slot = cq_jdict_get(d, k);
    if (slot) {
        *slot = v;
        return CQ_OK;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 4, sz;
        if (nc < d->cap || !cq_mul_size(nc, sizeof(cq_jv), &sz))
            return cq_fail(CQ_ERR_NOMEM, "dict too large");
        cq_jv *nk = cq_jarena_alloc(a, sz), *nv = cq_jarena_alloc(a, sz);
        if (!nk || !nv) return CQ_ERR_NOMEM;
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof(cq_jv));
            memcpy(nv, d->v, d->n * sizeof(cq_jv));
        }
        d->k = nk;
        d->v = nv;
        d->cap = nc;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
    return CQ_OK;
}

cq_jv cq_jv_list(cq_jlist *l) {
    cq_jv v = {.kind = CQ_JV_LIST};
    v.u.list = l;
    return v;
}

cq_jv cq_jv_dict(cq_jdict *d) {
    cq_jv v = {.kind = CQ_JV_DICT};
    v.u.dict = d;
    return v;
}

/* ---- truthiness, equality, ordering -------------------------------------------- */
bool cq_jv_truthy(cq_jv v) {
    switch (v.kind) {
    case CQ_JV_UNDEF:
    case CQ_JV_NONE: return false;
    case CQ_JV_BOOL: return v.u.b;
    case CQ_JV_INT: return v.u.i != 0;
    case CQ_JV_FLOAT: return v.u.f != 0.0;
    case CQ_JV_STR: return v.u.s->len != 0;
    case CQ_JV_LIST: return v.u.list->gen || v.u.list->n != 0;
    case CQ_JV_DICT: return v.u.dict->n != 0;
    default: return true;
    }
}

static int64_t num_as_int(cq_jv v) { return v.kind == CQ_JV_BOOL ? (int64_t)v.u.b : v.u.i; }

/* Exact int-vs-float comparison (Python compares the true values). */
static int cmp_int_float(int64_t i, double f) {
    if (isnan(f)) return 2; /* unordered */
    if (f >= 9223372036854775808.0) return -1;
    if (f < -9223372036854775808.0) return 1;
    double fl = floor(f);
    int64_t fi = (int64_t)fl;
    if (i < fi) return -1;
    if (i > fi) return 1;
    return fl < f ? -1 : 0;
}

static int num_cmp(cq_jv a, cq_jv b) {
    bool af = a.kind == CQ_JV_FLOAT, bf = b.kind == CQ_JV_FLOAT;
    if (!af && !bf) {
        int64_t x = num_as_int(a), y = num_as_int(b);
        return x < y ? -1 : x > y;
    }
    if (af && bf) {
        if (isnan(a.u.f) || isnan(b.u.f)) return 2;
        return a.u.f < b.u.f ? -1 : a.u.f > b.u.f;
    }
    if (af) {
        int c = cmp_int_float(num_as_int(b), a.u.f);
        return c == 2 ? 2 : -c;
    }
    return cmp_int_float(num_as_int(a), b.u.f);
}

static int str_cmp(const cq_jstr *a, const cq_jstr *b) {
    /* Byte order of UTF-8 is code point order, which is Python's order. */
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, n);
    if (c) return c < 0 ? -1 : 1;
    return a->len < b->len ? -1 : a->len > b->len;
}

bool cq_jv_equal(cq_jv a, cq_jv b) {
    if (cq_jv_is_num(a) && cq_jv_is_num(b)) return num_cmp(a, b) == 0;
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case CQ_JV_UNDEF:
    case CQ_JV_NONE: return true;
    case CQ_JV_STR: return a.u.s->len == b.u.s->len && memcmp(a.u.s->s, b.u.s->s, a.u.s->len) == 0;
    case CQ_JV_LIST:
        if (a.u.list == b.u.list) return true;
        if (a.u.list->gen || b.u.list->gen) return false;
        if (a.u.list->tuple != b.u.list->tuple || a.u.list->n != b.u.list->n) return false;
        for (size_t i = 0; i < a.u.list->n; i++)
            if (!cq_jv_equal(a.u.list->v[i], b.u.list->v[i])) return false;
        return true;
    case CQ_JV_DICT:
        if (a.u.dict == b.u.dict) return true;
        if (a.u.dict->n != b.u.dict->n) return false;
        for (size_t i = 0; i < a.u.dict->n; i++) {
            cq_jv *o = cq_jdict_get(b.u.dict, a.u.dict->k[i]);
            if (!o || !cq_jv_equal(a.u.dict->v[i], *o)) return false;
        }
        return true;
    case CQ_JV_NS: return a.u.dict == b.u.dict;
    case CQ_JV_LOOP: return a.u.loop == b.u.loop;
    case CQ_JV_MACRO: return a.u.macro == b.u.macro;
    case CQ_JV_FUNC:
        return a.u.func->id == b.u.func->id && cq_jv_equal(a.u.func->self, b.u.func->self);
    default: return false;
    }
}

cq_status cq_jv_compare(cq_jv a, cq_jv b, uint32_t line, int *out) {
    if (a.kind == CQ_JV_UNDEF) return cq_jv_undef_error(a, line);
    if (b.kind == CQ_JV_UNDEF) return cq_jv_undef_error(b, line);
    if (cq_jv_is_num(a) && cq_jv_is_num(b)) {
        int c = num_cmp(a, b);
        /* NaN: every ordering is false; report "not less, not equal". */
        *out = c == 2 ? 2 : c;
        return CQ_OK;
    }
    if (a.kind == CQ_JV_STR && b.kind == CQ_JV_STR) {
        *out = str_cmp(a.u.s, b.u.s);
        return CQ_OK;
    }
    if (a.kind == CQ_JV_LIST && b.kind == CQ_JV_LIST && a.u.list->tuple == b.u.list->tuple &&
        !a.u.list->gen && !b.u.list->gen) {
        const cq_jlist *x = a.u.list, *y = b.u.list;
        size_t n = x->n < y->n ? x->n : y->n;
        for (size_t i = 0; i < n; i++) {
            if (cq_jv_equal(x->v[i], y->v[i])) continue;
            return cq_jv_compare(x->v[i], y->v[i], line, out);
        }
        *out = x->n < y->n ? -1 : x->n > y->n;
        return CQ_OK;
    }
    return cq_jinja_err(CQ_ERR_INVALID_ARG, line,
                        "'<' not supported between instances of '%s' and '%s'",
                        cq_jv_type_name(a), cq_jv_type_name(b));
}

const char *cq_jv_type_name(cq_jv v) {
    switch (v.kind) {
    case CQ_JV_UNDEF: return "Undefined";
    case CQ_JV_NONE: return "NoneType";
    case CQ_JV_BOOL: return "bool";
    case CQ_JV_INT: return "int";
    case CQ_JV_FLOAT: return "float";
    case CQ_JV_STR: return "str";
    case CQ_JV_LIST: return v.u.list->gen ? "generator" : v.u.list->tuple ? "tuple" : "list";
    case CQ_JV_DICT: return "dict";
    case CQ_JV_NS: return "Namespace";
    case CQ_JV_LOOP: return "LoopContext";
    case CQ_JV_MACRO: return "Macro";
    case CQ_JV_FUNC: return "builtin_function_or_method";
    default: return "object";
    }
}

cq_status cq_jv_undef_error(cq_jv v, uint32_t line) {
    if (v.unsafe)
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s",
                            v.u.undef ? v.u.undef : "access to an unsafe attribute");
    if (v.u.undef) return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "%s", v.u.undef);
    return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "value is undefined");
}

/* ---- output buffers -------------------------------------------------------------- */
cq_status cq_jbuf_append(cq_jrender *r, cq_jbuf *b, const char *s, size_t n) {
    if (n == 0) return CQ_OK;
    if (r->out_total > r->lim.max_output || n > r->lim.max_output - r->out_total)
        return cq_fail(CQ_ERR_BOUNDS, "chat template output exceeds the limit of %zu bytes",
                       r->lim.max_output);
    r->out_total += n;
    if (b->cap - b->len <= n) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc - b->len <= n) {
            if (nc > SIZE_MAX / 2) return cq_fail(CQ_ERR_NOMEM, "output buffer too large");
            nc *= 2;
        }
        char *np = cq_realloc(b->p, nc);
        if (!np) return CQ_ERR_NOMEM;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return CQ_OK;
}

void cq_jbuf_free(cq_jbuf *b) {
    if (!b) return;
    cq_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

cq_status cq_jbuf_to_str(cq_jrender *r, const cq_jbuf *b, const cq_jstr **out) {
    *out = cq_jstr_new(&r->arena, b->p ? b->p : "", b->len);
    return *out ? CQ_OK : CQ_ERR_NOMEM;
}

/* ---- iteration and length ---------------------------------------------------------- */
cq_status cq_jv_iterate(cq_jrender *r, cq_jv v, uint32_t line, const cq_jlist **out) {
    switch (v.kind) {
    case CQ_JV_LIST: {
        cq_jlist *l = v.u.list;
        if (!l->gen) {
            *out = l;
            return CQ_OK;
        }
        if (l->gen_err) return cq_fail(CQ_ERR_INVALID_ARG, "%s", l->gen_err);
        /* a generator yields what is left of it, once */
        cq_jlist *rest = cq_jlist_new(&r->arena, 0);
        if (!rest) return CQ_ERR_NOMEM;
        if (l->gen_pos < l->n) {
            rest->v = l->v + l->gen_pos;
            rest->n = rest->cap = l->n - l->gen_pos;
        }
        l->gen_pos = l->n;
        *out = rest;
        return CQ_OK;
    }
    case CQ_JV_UNDEF: {
        if (v.unsafe) return cq_jv_undef_error(v, line);
        cq_jlist *l = cq_jlist_new(&r->arena, 0);
        if (!l) return CQ_ERR_NOMEM;
        *out = l;
        return CQ_OK;
    }
    case CQ_JV_DICT: {
        cq_jlist *l = cq_jlist_new(&r->arena, v.u.dict->n);
        if (!l) return CQ_ERR_NOMEM;
        for (size_t i = 0; i < v.u.dict->n; i++) l->v[i] = v.u.dict->k[i];
        l->n = v.u.dict->n;
        *out = l;
        return CQ_OK;
    }
    case CQ_JV_STR: {
        const cq_jstr *s = v.u.s;
        cq_jlist *l = cq_jlist_new(&r->arena, cq_utf8_count(s->s, s->len));
        if (!l) return CQ_ERR_NOMEM;
        size_t i = 0;
        while (i < s->len) {
            size_t st = i;
            cq_utf8_next(s->s, s->len, &i);
            const cq_jstr *c = cq_jstr_new(&r->arena, s->s + st, i - st);
            if (!c) return CQ_ERR_NOMEM;
            l->v[l->n++] = cq_jv_strv(c);
        }
        *out = l;
        return CQ_OK;
    }
    default:
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "'%s' object is not iterable",
                            cq_jv_type_name(v));
    }
}

cq_status cq_jv_length(cq_jv v, uint32_t line, int64_t *out) {
    switch (v.kind) {
    case CQ_JV_STR: *out = (int64_t)cq_utf8_count(v.u.s->s, v.u.s->len); return CQ_OK;
    case CQ_JV_LIST:
        if (v.u.list->gen)
            return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "object of type 'generator' has no len()");
        *out = (int64_t)v.u.list->n;
        return CQ_OK;
    case CQ_JV_DICT: *out = (int64_t)v.u.dict->n; return CQ_OK;
    case CQ_JV_UNDEF:
        if (v.unsafe) return cq_jv_undef_error(v, line);
        *out = 0;
        return CQ_OK;
    default:
        return cq_jinja_err(CQ_ERR_INVALID_ARG, line, "object of type '%s' has no len()",
                            cq_jv_type_name(v));
    }
}

/* ---- cJSON ------------------------------------------------------------------------ */
cq_status cq_jv_from_cjson(cq_jarena *a, const void *item_, int depth, cq_jv *out) {
    const cJSON *it = item_;
    if (depth > 512) return cq_fail(CQ_ERR_INVALID_ARG, "template context nested too deeply");
    if (cJSON_IsNull(it)) *out = cq_jv_none();
    else if (cJSON_IsTrue(it)) *out = cq_jv_bool(true);
    else if (cJSON_IsFalse(it)) *out = cq_jv_bool(false);
    else if (cJSON_IsNumber(it)) {
        double d = it->valuedouble;
        if (isfinite(d) && d == floor(d) && fabs(d) <= 9007199254740992.0)
            *out = cq_jv_int((int64_t)d);
        else *out = cq_jv_float(d);
    } else if (cJSON_IsString(it)) {
        const char *s = it->valuestring ? it->valuestring : "";
        const cq_jstr *js = cq_jstr_new(a, s, strlen(s));
        if (!js) return CQ_ERR_NOMEM;
        *out = cq_jv_strv(js);
    } else if (cJSON_IsArray(it)) {
        cq_jlist *l = cq_jlist_new(a, (size_t)cJSON_GetArraySize(it));
        if (!l) return CQ_ERR_NOMEM;
        for (const cJSON *c = it->child; c; c = c->next) {
            cq_jv v;
            CQ_TRY(cq_jv_from_cjson(a, c, depth + 1, &v));
            CQ_TRY(cq_jlist_push(a, l, v));
        }
        *out = cq_jv_list(l);
    } else if (cJSON_IsObject(it)) {
        cq_jdict *d = cq_jdict_new(a, (size_t)cJSON_GetArraySize(it));
        if (!d) return CQ_ERR_NOMEM;
        for (const cJSON *c = it->child; c; c = c->next) {
            cq_jv v;
            CQ_TRY(cq_jv_from_cjson(a, c, depth + 1, &v));
            const char *k = c->string ? c->string : "";
            const cq_jstr *ks = cq_jstr_new(a, k, strlen(k));
            if (!ks) return CQ_ERR_NOMEM;
            CQ_TRY(cq_jdict_set(a, d, cq_jv_strv(ks), v));
        }
        *out = cq_jv_dict(d);
    } else {
        return cq_fail(CQ_ERR_INVALID_ARG, "template context holds an invalid JSON item");
    }
    return CQ_OK;
}

