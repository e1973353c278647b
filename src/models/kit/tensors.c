/*
 * tensors.c — tensor tables (tensors.h): building the concrete list from
 * patterns, checking a pack's views against it, comparing whole packs.
 */
#include "models/kit/tensors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "codec/codec.h"

const char *cq_tt_codec_name(cq_tt_codec c) {
    static const char *const names[] = {"matrix", "vector", "kernel"};
    _Static_assert(sizeof names / sizeof names[0] == CQ_TT_CODEC_COUNT, "one name per codec policy");
    return (unsigned)c < CQ_TT_CODEC_COUNT ? names[c] : "?";
}

void cq_tt_list_free(cq_tt_list *l) {
    if (!l) return;
    cq_free(l->e);
    memset(l, 0, sizeof *l);
}

static cq_status addv(cq_tt_list *l, const char *prefix, const char *pattern, int layer, cq_tt_codec codec,
                      bool required, float base, int ndim, const uint64_t *shape, const char *fmt, va_list ap) {
    if (ndim < 1 || ndim > 4) return cq_fail(CQ_ERR_INTERNAL, "tensor table: %d dimensions", ndim);
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        cq_tt_entry *e = cq_reallocn(l->e, cap, sizeof *e);
        if (!e) return CQ_ERR_NOMEM;
        l->e = e;
        l->cap = cap;
    }
    cq_tt_entry *e = &l->e[l->n];
    memset(e, 0, sizeof *e);
    size_t pl = strlen(prefix);
    if (pl >= sizeof e->name) return cq_fail(CQ_ERR_INVALID_ARG, "tensor table: prefix '%s' is too long", prefix);
    memcpy(e->name, prefix, pl);
    int k = vsnprintf(e->name + pl, sizeof e->name - pl, fmt, ap);
    if (k < 0 || (size_t)k >= sizeof e->name - pl)
        return cq_fail(CQ_ERR_INVALID_ARG, "tensor table: a name under '%s' is longer than %zu bytes", prefix,
                       sizeof e->name - 1);
    e->pattern = pattern ? pattern : fmt;
    e->layer = layer;
    e->ndim = ndim;
    memcpy(e->shape, shape, (size_t)ndim * sizeof *shape);
    e->codec = codec;
    e->required = required;
    e->base = base;
    l->n++;
    return CQ_OK;
}

cq_status cq_tt_add(cq_tt_list *l, const char *prefix, cq_tt_codec codec, bool required, float base, int ndim,
                    const uint64_t *shape, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cq_status s = addv(l, prefix, NULL, -1, codec, required, base, ndim, shape, fmt, ap);
    va_end(ap);
    return s;
}

cq_status cq_tt_add_conv(const cq_tt_sink *t, const char *name, int cin, int cout, int k) {
    uint64_t w[4] = {(uint64_t)cout, (uint64_t)cin, (uint64_t)k, (uint64_t)k}, b[1] = {(uint64_t)cout};
    CQ_TRY(cq_tt_add(t->l, t->prefix, CQ_TT_KERNEL, t->required, 0.0f, 4, w, "%s.weight", name));
    return cq_tt_add(t->l, t->prefix, CQ_TT_VECTOR, t->required, 0.0f, 1, b, "%s.bias", name);
}

cq_status cq_tt_add_subtree(cq_tt_list *l, const char *prefix, const char *fmt, ...) {
    const uint64_t one[1] = {1};
    va_list ap;
    va_start(ap, fmt);
    cq_status s = addv(l, prefix, NULL, -1, CQ_TT_VECTOR, false, 0.0f, 1, one, fmt, ap);
    va_end(ap);
    if (s == CQ_OK) l->e[l->n - 1].subtree = true;
    return s;
}

static cq_status add_layer(cq_tt_list *l, const char *prefix, const cq_tt_pattern *p, int layer, const uint64_t *shape,
                           ...) {
    va_list ap;
    va_start(ap, shape);
    cq_status s = addv(l, prefix, p->name, layer, p->codec, p->required, p->base, p->ndim, shape, p->name, ap);
    va_end(ap);
    return s;
}

const cq_tt_entry *cq_tt_find(const cq_tt_list *l, const char *name) {
    for (size_t i = 0; l && i < l->n; i++)
        if (!l->e[i].subtree && strcmp(l->e[i].name, name) == 0) return &l->e[i];
    return NULL;
}

static cq_status pattern_shape(const cq_tt_pattern *p, const int64_t *sym, uint64_t *shape) {
    for (int d = 0; d < p->ndim; d++) {
        const cq_tt_dim *dd = &p->dims[d];
        if (dd->sym >= CQ_TT_MAX_SYMS || dd->mul <= 0)
            return cq_fail(CQ_ERR_INTERNAL, "tensor table: pattern '%s' dimension %d is malformed", p->name, d);
        int64_t v = dd->sym ? sym[dd->sym] : 1;
        /* config values are bounded well below 2^31 by the config readers */
        if (v <= 0 || v > ((int64_t)1 << 31))
            return cq_fail(CQ_ERR_SHAPE, "tensor table: pattern '%s' dimension %d is %lld", p->name, d, (long long)v);
        shape[d] = (uint64_t)v * (uint64_t)dd->mul;
    }
    return CQ_OK;
}

cq_status cq_tt_expand(cq_tt_list *l, const char *prefix, const cq_tt_pattern *pats, size_t n_pats, int n_layers,
                       const int64_t *sym) {
    uint64_t shape[4];
    for (size_t i = 0; i < n_pats; i++) {
        if (pats[i].per_layer) continue;
        CQ_TRY(pattern_shape(&pats[i], sym, shape));
        CQ_TRY(add_layer(l, prefix, &pats[i], -1, shape));
    }
    for (int layer = 0; layer < n_layers; layer++)
        for (size_t i = 0; i < n_pats; i++) {
            if (!pats[i].per_layer) continue;
            CQ_TRY(pattern_shape(&pats[i], sym, shape));
            CQ_TRY(add_layer(l, prefix, &pats[i], layer, shape, layer));
        }
    return CQ_OK;
}

/* "[a x b x c]" */
static const char *shape_str(char *buf, size_t len, int ndim, const uint64_t *shape) {
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < ndim && k < len; d++) {
        int w = snprintf(buf + k, len - k, "%s%llu", d ? " x " : "[", (unsigned long long)shape[d]);
        if (w < 0) break;
        k += (size_t)w;
    }
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

static bool codec_ok(cq_tt_codec c, cq_dtype dt) {
    switch (c) {
    case CQ_TT_MATRIX: return dt != CQ_DTYPE_U8 && cq_codec_can_decode(dt);
    case CQ_TT_VECTOR: return dt == CQ_DTYPE_F32 || dt == CQ_DTYPE_F16 || dt == CQ_DTYPE_BF16;
    case CQ_TT_KERNEL: return dt == CQ_DTYPE_F32 || dt == CQ_DTYPE_F16 || dt == CQ_DTYPE_BF16;
    default: return false;
    }
}

static bool shape_ok(const cq_tt_entry *e, const cq_tensor_view *v) {
    uint64_t n = 1;
    for (int d = 0; d < e->ndim; d++) n *= e->shape[d];
    switch (e->codec) {
    case CQ_TT_MATRIX:
        return v->ndim == 2 && v->shape[0] == e->shape[0] && v->shape[1] == e->shape[1];
    case CQ_TT_VECTOR: return v->nelem == n;
    case CQ_TT_KERNEL:
        if (v->ndim < 1 || v->shape[0] != e->shape[0] || v->nelem != n) return false;
        if (v->ndim == e->ndim)
            for (int d = 0; d < e->ndim; d++)
                if (v->shape[d] != e->shape[d]) return false;
        return true;
    default: return false;
    }
}

cq_status cq_tt_check(const char *who, const cq_tt_entry *e, const cq_tensor_view *v) {
    char want[96], got[96];
    if (!shape_ok(e, v)) {
        shape_str(want, sizeof want, e->ndim, e->shape);
        shape_str(got, sizeof got, v->ndim, v->shape);
        return cq_fail(CQ_ERR_SHAPE, "%s: tensor '%s' has shape %s, the config implies %s%s", who, e->name, got, want,
                       e->codec == CQ_TT_VECTOR ? " (any shape of that many elements)" : "");
    }
    if (!codec_ok(e->codec, v->dtype))
        return cq_fail(CQ_ERR_DTYPE, "%s: tensor '%s' is stored as %s, but a %s takes %s", who, e->name,
                       cq_dtype_name(v->dtype), cq_tt_codec_name(e->codec),
                       e->codec == CQ_TT_MATRIX ? "a numeric codec (f32, f16, bf16 or a quantized one)"
                                                : "f32, f16 or bf16 (convert the model again with `cortiq convert`)");
    return CQ_OK;
}

cq_status cq_tt_get(const char *who, const cq_tt_list *l, const cq_cmf *cmf, const cq_tensor_view **out,
                    const char *fmt, ...) {
    *out = NULL;
    char name[sizeof l->e[0].name];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof name) return cq_fail(CQ_ERR_INVALID_ARG, "%s: a tensor name is too long", who);
    const cq_tt_entry *e = cq_tt_find(l, name);
    if (!e) return cq_fail(CQ_ERR_INTERNAL, "%s: tensor '%s' is not in the architecture's tensor table", who, name);
    const cq_tensor_view *v = cq_cmf_find(cmf, name);
    if (!v) {
        char want[96];
        return cq_fail(CQ_ERR_MISSING, "%s: tensor '%s' %s is missing", who, name,
                       shape_str(want, sizeof want, e->ndim, e->shape));
    }
    CQ_TRY(cq_tt_check(who, e, v));
    *out = v;
    return CQ_OK;
}

cq_status cq_tt_read_vector(const char *who, const cq_tensor_view *v, float *dst, size_t n) {
    cq_status s = cq_cmf_dequantize(v, dst, n);
    return s == CQ_OK ? s : cq_fail_prefix(s, "%s: tensor '%s': ", who, v->name);
}

static void notef(cq_tt_note_fn note, void *user, const char *fmt, ...) CQ_PRINTF(3, 4);
static void notef(cq_tt_note_fn note, void *user, const char *fmt, ...) {
    if (!note) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    note(user, line);
}

static bool in_subtree(const cq_tt_list *l, const char *name) {
    for (size_t i = 0; i < l->n; i++)
        if (l->e[i].subtree && strncmp(name, l->e[i].name, strlen(l->e[i].name)) == 0) return true;
    return false;
}

static bool is_config(const char *rest) {
    size_t n = strlen(rest), k = strlen("config_json");
    return n >= k && strcmp(rest + n - k, "config_json") == 0;
}

cq_status cq_tt_compare(const char *who, const cq_tt_list *l, const cq_cmf *cmf, const char *prefix,
                        cq_tt_note_fn note, void *user, cq_tt_report *rep) {
    memset(rep, 0, sizeof *rep);
    char want[96];
    for (size_t i = 0; i < l->n; i++) {
        const cq_tt_entry *e = &l->e[i];
        if (e->subtree) continue;
        const cq_tensor_view *v = cq_cmf_find(cmf, e->name);
        if (!v) {
            if (e->required) {
                rep->missing++;
                notef(note, user, "%s: missing tensor '%s' %s", who, e->name,
                      shape_str(want, sizeof want, e->ndim, e->shape));
            }
            continue;
        }
        if (cq_tt_check(who, e, v) != CQ_OK) {
            rep->mismatched++;
            notef(note, user, "%s", cq_last_error());
        }
    }
    size_t pl = strlen(prefix);
    for (size_t i = 0; i < cq_cmf_tensor_count(cmf); i++) {
        const cq_tensor_view *v = cq_cmf_tensor_at(cmf, i);
        if (!v || strncmp(v->name, prefix, pl) != 0 || is_config(v->name + pl)) continue;
        if (cq_tt_find(l, v->name) || in_subtree(l, v->name)) continue;
        rep->unexpected++;
        notef(note, user, "%s: tensor '%s' %s is not one the architecture uses", who, v->name,
              shape_str(want, sizeof want, v->ndim, v->shape));
    }
    return CQ_OK;
}

/* ---- binding ------------------------------------------------------------------------------ */
cq_status cq_tt_held_add(cq_tt_held *h, const cq_tensor *t) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        cq_tensor *o = cq_reallocn(h->t, cap, sizeof *o);
        if (!o) {
            cq_tensor tmp = *t;
            cq_tensor_free(&tmp);
            return CQ_ERR_NOMEM;
        }
        h->t = o;
        h->cap = cap;
    }
    h->t[h->n++] = *t;
    return CQ_OK;
}

void cq_tt_held_free(cq_tt_held *h) {
    if (!h) return;
    for (size_t i = 0; i < h->n; i++) cq_tensor_free(&h->t[i]);
    cq_free(h->t);
    memset(h, 0, sizeof *h);
}

static cq_status bind_get(const cq_tt_binder *b, const cq_tensor_view **v, const char *fmt, va_list ap) {
    char name[sizeof b->table->e[0].name];
    int k = vsnprintf(name, sizeof name, fmt, ap);
    if (k < 0 || (size_t)k >= sizeof name) return cq_fail(CQ_ERR_INVALID_ARG, "%s: a tensor name is too long", b->who);
    return cq_tt_get(b->who, b->table, b->cmf, v, "%s", name);
}

cq_status cq_tt_bind_weight(const cq_tt_binder *b, cq_tensor *out, const char *fmt, ...) {
    memset(out, 0, sizeof *out);
    const cq_tensor_view *v;
    va_list ap;
    va_start(ap, fmt);
    cq_status s = bind_get(b, &v, fmt, ap);
    va_end(ap);
    CQ_TRY(s);
    CQ_TRY(cq_tensor_bind_weight(b->be, v, out));
    s = cq_tt_held_add(b->held, out);
    if (s != CQ_OK) memset(out, 0, sizeof *out);
    return s;
}

/* An F32 tensor of `shape` ([n] or [rows, cols]) holding v, held by the binder; zeroed on failure. */
static cq_status upload_held(const cq_tt_binder *b, const float *v, int ndim, const int64_t *shape, cq_tensor *out) {
    memset(out, 0, sizeof *out);
    const size_t n = ndim == 1 ? (size_t)shape[0] : (size_t)shape[0] * (size_t)shape[1];
    cq_status s = cq_tensor_alloc(b->be, CQ_DTYPE_F32, ndim, shape, out);
    if (s == CQ_OK) {
        s = cq_tensor_upload(out, v, n * sizeof(float));
        if (s == CQ_OK) s = cq_tt_held_add(b->held, out);
        else cq_tensor_free(out);
    }
    if (s != CQ_OK) memset(out, 0, sizeof *out);
    return s;
}

cq_status cq_tt_held_upload(const cq_tt_binder *b, const float *v, int64_t rows, int64_t cols, cq_tensor *out) {
    return upload_held(b, v, 2, (const int64_t[2]){rows, cols}, out);
}

cq_status cq_tt_bind_vector(const cq_tt_binder *b, cq_tensor *out, const char *fmt, ...) {
    memset(out, 0, sizeof *out);
    const cq_tensor_view *v;
    va_list ap;
    va_start(ap, fmt);
    cq_status s = bind_get(b, &v, fmt, ap);
    va_end(ap);
    CQ_TRY(s);
    size_t n = (size_t)v->nelem;
    float *tmp = cq_mallocn(n, sizeof(float));
    if (!tmp) return CQ_ERR_NOMEM;
    s = cq_tt_read_vector(b->who, v, tmp, n);
    if (s == CQ_OK) s = upload_held(b, tmp, 1, (const int64_t[1]){(int64_t)n}, out);
    cq_free(tmp);
    return s;
}
