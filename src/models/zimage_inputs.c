/*
 * zimage_inputs.c — reading the `cortiq forward` inputs of the Z-Image
 * denoiser from safetensors (the contract is in zimage_inputs.h): presence,
 * dtype, rank and sizes against the config before anything is read;
 * finiteness of the latent and the caption is the model's own check.
 */
#include "models/zimage_inputs.h"

#include <math.h>
#include <string.h>

static cq_status find(const cq_st *st, const char *name, const cq_st_tensor **out) {
    const cq_st_tensor *t = cq_st_find(st, name);
    if (!t) return cq_fail(CQ_ERR_MISSING, "input tensor '%s' is missing", name);
    if (t->dtype != CQ_ST_F32)
        return cq_fail(CQ_ERR_DTYPE, "input tensor '%s' is %s, expected F32", name, cq_st_dtype_name(t->dtype));
    *out = t;
    return CQ_OK;
}

static cq_status read_x(const cq_st *st, const cq_zimage_config *cfg, cq_zimage_inputs *in) {
    const cq_st_tensor *t;
    CQ_TRY(find(st, "x", &t));
    if (t->ndim != 3 && t->ndim != 4)
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'x' has %d dimensions, expected [C, 1, H, W] or [C, H, W]", t->ndim);
    if (t->ndim == 4 && t->shape[1] != 1)
        return cq_fail(CQ_ERR_UNSUPPORTED, "input tensor 'x' has %llu frames; Z-Image takes one ([C, 1, H, W])",
                       (unsigned long long)t->shape[1]);
    const uint64_t C = t->shape[0], H = t->shape[t->ndim - 2], W = t->shape[t->ndim - 1];
    if (C != (uint64_t)cfg->in_channels)
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'x' has %llu channels; the model takes %d", (unsigned long long)C,
                       cfg->in_channels);
    if (H == 0 || W == 0 || H > (1u << 16) || W > (1u << 16) || H % 2 || W % 2)
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'x' is a %llux%llu latent; both sides must be even (2x2 patches) "
                       "and at most 65536", (unsigned long long)H, (unsigned long long)W);
    in->lat_h = (int)H;
    in->lat_w = (int)W;
    in->x_ndim = t->ndim;
    memcpy(in->x_shape, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
    return cq_st_read_all_f32(t, &in->latent);
}

static cq_status read_cap(const cq_st *st, const cq_zimage_config *cfg, cq_zimage_inputs *in) {
    const cq_st_tensor *t;
    CQ_TRY(find(st, "cap_feats", &t));
    int off = t->ndim - 2;
    if ((off != 0 && off != 1) || (off == 1 && t->shape[0] != 1))
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'cap_feats' must be [L, %d] (or [1, L, %d])", cfg->cap_feat_dim,
                       cfg->cap_feat_dim);
    const uint64_t L = t->shape[off], K = t->shape[off + 1];
    if (K != (uint64_t)cfg->cap_feat_dim || L == 0 || L > (1u << 20))
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'cap_feats' is [%llu, %llu]; the model takes [L, %d] with L in "
                       "[1, 2^20]", (unsigned long long)L, (unsigned long long)K, cfg->cap_feat_dim);
    in->n_cap = (int)L;
    return cq_st_read_all_f32(t, &in->cap);
}

static cq_status read_t(const cq_st *st, cq_zimage_inputs *in) {
    const cq_st_tensor *t;
    CQ_TRY(find(st, "t", &t));
    if (t->nelem != 1 || t->ndim > 1)
        return cq_fail(CQ_ERR_SHAPE, "input tensor 't' must hold one value ([1]), it has %llu in %d dimensions",
                       (unsigned long long)t->nelem, t->ndim);
    CQ_TRY(cq_st_read_f32(t, 0, 1, &in->t));
    if (!isfinite(in->t)) return cq_fail(CQ_ERR_NUMERIC, "input tensor 't' holds a non-finite value");
    if (!(in->t >= 0.0f && in->t <= 1.0f))
        return cq_fail(CQ_ERR_INVALID_ARG, "input tensor 't' is %g; the model takes t in [0, 1] (1 - sigma)",
                       (double)in->t);
    return CQ_OK;
}

cq_status cq_zimage_inputs_read(const cq_st *st, const cq_zimage_config *cfg, cq_zimage_inputs *out) {
    memset(out, 0, sizeof *out);
    cq_status s = read_x(st, cfg, out);
    if (s == CQ_OK) s = read_cap(st, cfg, out);
    if (s == CQ_OK) s = read_t(st, out);
    if (s == CQ_OK) {
        cq_zimage_layout lay; /* sizes against the model's tables, before anything runs */
        s = cq_zimage_layout_for(cfg, out->n_cap, out->lat_h, out->lat_w, &lay);
    }
    if (s != CQ_OK) cq_zimage_inputs_free(out);
    return s;
}

void cq_zimage_inputs_free(cq_zimage_inputs *in) {
    if (!in) return;
    cq_free(in->latent);
    cq_free(in->cap);
    memset(in, 0, sizeof *in);
}
