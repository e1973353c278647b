/*
 * vae_weights.c — see vae_weights.h.
 */
#include "models/kit/vae_weights.h"

#include <stdarg.h>
#include <stdio.h>

cq_status vw_name(char *dst, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(dst, len, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= len) return cq_fail(CQ_ERR_INVALID_ARG, "tensor name longer than %zu bytes", len - 1);
    return CQ_OK;
}

void vw_store_free(vw_store *s) {
    if (!s) return;
    for (int i = 0; i < s->n_owned; i++) {
        cq_tensor_free(s->owned[i]);
        cq_free(s->owned[i]);
    }
    cq_free(s->owned);
    for (int i = 0; i < s->n_bound; i++) cq_tensor_free(s->bound[i]);
    cq_free(s->bound);
    for (int i = 0; i < s->n_host; i++) cq_free(s->host[i]);
    cq_free(s->host);
    s->owned = s->bound = NULL;
    s->host = NULL;
    s->n_owned = s->cap_owned = s->n_bound = s->cap_bound = s->n_host = s->cap_host = 0;
}

cq_status vw_get(const vw_loader *L, const char *name, const cq_tensor_view **out) {
    return cq_tt_get(L->who, L->table, L->cmf, out, "%s%s", L->prefix, name);
}

const cq_tensor_view *vw_find(const vw_loader *L, const char *name) {
    char full[512];
    if (vw_name(full, sizeof full, "%s%s", L->prefix, name) != CQ_OK) return NULL;
    return cq_cmf_find(L->cmf, full);
}

/* The array a of n pointers (capacity *cap) with room for one more: a
 * itself, or a grown copy (NULL when out of memory; a stays valid). */
static void *room(void *a, int n, int *cap, int first, size_t size) {
    if (n < *cap) return a;
    int c = *cap ? 2 * *cap : first;
    void *g = cq_reallocn(a, (size_t)c, size);
    if (g) *cap = c;
    return g;
}

static cq_status own(vw_store *s, cq_tensor *t) {
    cq_tensor **o = room(s->owned, s->n_owned, &s->cap_owned, 128, sizeof *o);
    if (!o) return CQ_ERR_NOMEM;
    s->owned = o;
    s->owned[s->n_owned++] = t;
    return CQ_OK;
}

/* Bound weights are released with the store (a device backend frees its copies). */
static cq_status own_bound(vw_store *s, cq_tensor *t) {
    cq_tensor **o = room(s->bound, s->n_bound, &s->cap_bound, 256, sizeof *o);
    if (!o) {
        cq_tensor_free(t);
        return CQ_ERR_NOMEM;
    }
    s->bound = o;
    s->bound[s->n_bound++] = t;
    return CQ_OK;
}

static cq_status own_host(vw_store *s, float *p) {
    float **o = room(s->host, s->n_host, &s->cap_host, 64, sizeof *o);
    if (!o) {
        cq_free(p);
        return CQ_ERR_NOMEM;
    }
    s->host = o;
    s->host[s->n_host++] = p;
    return CQ_OK;
}

cq_status vw_upload_f32(vw_store *s, const float *host, int64_t rows, int64_t cols, cq_tensor **out) {
    cq_tensor *t = cq_calloc(1, sizeof *t);
    if (!t) return CQ_ERR_NOMEM;
    cq_status st = own(s, t);
    if (st != CQ_OK) {
        cq_free(t);
        return st;
    }
    CQ_TRY(rows == 1 ? cq_tensor_alloc(s->be, CQ_DTYPE_F32, 1, &cols, t)
                     : cq_tensor_alloc_2d(s->be, CQ_DTYPE_F32, rows, cols, t));
    CQ_TRY(cq_tensor_upload(t, host, (size_t)(rows * cols) * sizeof(float)));
    *out = t;
    return CQ_OK;
}

cq_status vw_read_host(const vw_loader *L, const char *name, int64_t n, float **out) {
    const cq_tensor_view *t;
    CQ_TRY(vw_get(L, name, &t));
    if ((int64_t)t->nelem != n) /* the table and the loader disagree */
        return cq_fail(CQ_ERR_INTERNAL, "%s: tensor '%s' has %llu elements, the loader expects %lld", L->who, t->name,
                       (unsigned long long)t->nelem, (long long)n);
    float *h = cq_mallocn((size_t)n, sizeof(float));
    if (!h) return CQ_ERR_NOMEM;
    cq_status s = cq_cmf_dequantize(t, h, (size_t)n);
    if (s != CQ_OK) {
        cq_free(h);
        return cq_fail_prefix(s, "%s: tensor '%s': ", L->who, t->name);
    }
    *out = h;
    return CQ_OK;
}

cq_status vw_read_kept(const vw_loader *L, const char *name, int64_t n, float **out) {
    float *h;
    CQ_TRY(vw_read_host(L, name, n, &h));
    CQ_TRY(own_host(L->st, h));
    *out = h;
    return CQ_OK;
}

cq_status vw_load_vec(const vw_loader *L, const char *name, int64_t n, cq_tensor **out) {
    float *h;
    CQ_TRY(vw_read_host(L, name, n, &h));
    cq_status s = vw_upload_f32(L->st, h, 1, n, out);
    cq_free(h);
    return s;
}

cq_status vw_load_conv(const vw_loader *L, const char *name, int cin, int cout, int k, vw_conv *c) {
    char wname[400];
    CQ_TRY(vw_name(wname, sizeof wname, "%s.weight", name));
    const cq_tensor_view *t;
    CQ_TRY(vw_get(L, wname, &t));
    if (t->nelem != (uint64_t)cout * cin * k * k) /* the table and the loader disagree */
        return cq_fail(CQ_ERR_INTERNAL, "%s: tensor '%s' is not the [%d, %d, %d, %d] kernel the loader expects",
                       L->who, t->name, cout, cin, k, k);
    if (!cq_backend_runs(L->st->be, CQ_OP_CONV2D, t->dtype, CQ_DTYPE_F32))
        return cq_fail(CQ_ERR_UNSUPPORTED, "%s: tensor '%s' is %s, which backend %s does not convolve with", L->who,
                       t->name, cq_dtype_name(t->dtype), cq_backend_name(L->st->be));
    CQ_TRY(cq_tensor_bind_weight(L->st->be, t, &c->w));
    CQ_TRY(own_bound(L->st, &c->w));
    c->cin = cin;
    c->cout = cout;
    c->k = k;
    char bname[400];
    CQ_TRY(vw_name(bname, sizeof bname, "%s.bias", name));
    return vw_load_vec(L, bname, cout, &c->b);
}

cq_status vw_load_shortcut(const vw_loader *L, const char *name, int cin, int cout, bool *has, vw_conv *sc) {
    *has = cin != cout;
    if (!*has) return CQ_OK;
    char n[400];
    CQ_TRY(vw_name(n, sizeof n, "%s.conv_shortcut", name));
    return vw_load_conv(L, n, cin, cout, 1, sc);
}

cq_status vw_has_encoder(const vw_loader *L, bool quant_conv, bool *has) {
    const bool enc_in = vw_find(L, "encoder.conv_in.weight") != NULL;
    if (quant_conv && enc_in != (vw_find(L, "quant_conv.weight") != NULL))
        return cq_fail(CQ_ERR_MISSING, "%s: the file has %s but not %s: the encoder is all or nothing", L->who,
                       enc_in ? "encoder.conv_in" : "quant_conv", enc_in ? "quant_conv" : "encoder.conv_in");
    *has = enc_in;
    return CQ_OK;
}

cq_status vw_load_matrix(const vw_loader *L, const char *name, cq_tensor *out) {
    const cq_tensor_view *t;
    CQ_TRY(vw_get(L, name, &t));
    if (!cq_backend_runs(L->st->be, CQ_OP_MATMUL, t->dtype, CQ_DTYPE_F32))
        return cq_fail(CQ_ERR_UNSUPPORTED, "%s: tensor '%s' is %s, which backend %s does not multiply with", L->who,
                       t->name, cq_dtype_name(t->dtype), cq_backend_name(L->st->be));
    CQ_TRY(cq_tensor_bind_weight(L->st->be, t, out));
    return own_bound(L->st, out);
}
