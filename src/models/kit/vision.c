/*
 * vision.c — the pieces the Qwen vision towers share (vision.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/vision.h"

cq_status cq_vision_rows(const char *who, int merge, const int32_t (*grid)[3], int n_images, int max_images,
                         int64_t max_rows, int64_t *n_rows) {
    *n_rows = 0;
    if (!grid || n_images < 1 || n_images > max_images)
        return cq_fail(CQ_ERR_INVALID_ARG, "%s: %d images (1 .. %d per call)", who, n_images, max_images);
    int64_t n = 0;
    for (int i = 0; i < n_images; i++) {
        const int32_t t = grid[i][0], h = grid[i][1], w = grid[i][2];
        if (t < 1 || h < 1 || w < 1 || t > CQ_VISION_MAX_FRAMES || h > CQ_VISION_MAX_SIDE || w > CQ_VISION_MAX_SIDE ||
            h % merge || w % merge)
            return cq_fail(CQ_ERR_SHAPE, "%s: image %d has grid (%d, %d, %d); t, h, w must be >= 1, h and w "
                           "multiples of %d", who, i, (int)t, (int)h, (int)w, merge);
        n += (int64_t)t * h * w;
        if (n > max_rows) return cq_fail(CQ_ERR_BOUNDS, "%s: more than %lld patch rows in one call", who,
                                         (long long)max_rows);
    }
    *n_rows = n;
    return CQ_OK;
}

cq_status cq_vision_check_pixels(const char *who, const float *pixels, int64_t n, int64_t K) {
    for (int64_t i = 0; i < n * K; i++)
        if (!isfinite(pixels[i]))
            return cq_fail(CQ_ERR_INVALID_ARG, "%s: pixel row %lld holds a non-finite value", who,
                           (long long)(i / K));
    return CQ_OK;
}

cq_status cq_vision_rope_theta(const cq_cfg *g, double *theta) {
    *theta = 10000.0;
    const cJSON *rp = cq_cfg_get(g, "rope_parameters");
    if (!rp) return CQ_OK;
    if (!cJSON_IsObject(rp))
        return cq_fail(CQ_ERR_PARSE, "%s: config %srope_parameters must be an object", g->who, g->where);
    char where[96];
    snprintf(where, sizeof where, "%srope_parameters.", g->where);
    const cq_cfg r = {rp, g->who, where};
    const cJSON *ty = cq_cfg_get(&r, "rope_type");
    if (ty && (!cJSON_IsString(ty) ||
               (strcmp(ty->valuestring, "axial") != 0 && strcmp(ty->valuestring, "default") != 0)))
        return cq_fail(CQ_ERR_UNSUPPORTED, "%s: vision rope_type '%s' is not supported (axial)", g->who,
                       cJSON_IsString(ty) ? ty->valuestring : "?");
    return cq_cfg_num(&r, "rope_theta", 10000.0, 1.0, false, 1e12, theta);
}

void cq_vision_rope_inv_freq(double theta, int head_dim, float *inv) {
    /* 1 / theta^(2j / (D/2)) over the D/2 channels of one axis pair ladder */
    const int dim = head_dim / 2;
    for (int j = 0; j < dim / 2; j++) inv[j] = 1.0f / powf((float)theta, (float)(2 * j) / (float)dim);
}

void cq_vision_rope_row(const float *inv, int head_dim, int64_t hp, int64_t wp, float *cs, float *sn) {
    const int q4 = head_dim / 4;
    const float h = (float)hp, w = (float)wp;
    for (int j = 0; j < q4; j++) {
        const float ah = h * inv[j], aw = w * inv[j];
        cs[j] = (float)cos((double)ah);
        sn[j] = (float)sin((double)ah);
        cs[q4 + j] = (float)cos((double)aw);
        sn[q4 + j] = (float)sin((double)aw);
    }
}

const char *cq_vision_stem(const cq_cmf *cmf, const char *prefix) {
    static const char *const stems[] = {"model.visual.", "visual."};
    for (size_t i = 0; i < CQ_ARRAY_LEN(stems); i++) {
        char name[320];
        snprintf(name, sizeof name, "%s%spatch_embed.proj.weight", prefix, stems[i]);
        if (cq_cmf_find(cmf, name)) return stems[i];
    }
    return NULL;
}

cq_status cq_vision_acts_alloc(cq_backend *be, const cq_vision_dims *d, cq_vision_acts *a) {
    const int64_t n = d->n, D = d->hidden, units = d->n / d->unit;
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, d->patch_dim, &a->pix));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, d->head_dim / 2, &a->cos_t));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, d->head_dim / 2, &a->sin_t));
    cq_tensor *rows[] = {&a->x, &a->h, &a->q, &a->k, &a->v, &a->att};
    for (size_t i = 0; i < CQ_ARRAY_LEN(rows); i++) CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, D, rows[i]));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, 3 * D, &a->qkv));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, n, d->intermediate, &a->mlp));
    CQ_TRY(cq_tensor_alloc_2d(be, CQ_DTYPE_F32, units, D * d->unit, &a->m1));
    return cq_tensor_alloc_2d(be, CQ_DTYPE_F32, units, d->out_hidden, &a->out);
}

void cq_vision_acts_free(cq_vision_acts *a) {
    cq_tensor *t[] = {&a->pix, &a->cos_t, &a->sin_t, &a->x, &a->h, &a->qkv, &a->q, &a->k, &a->v,
                      &a->att, &a->mlp, &a->m1, &a->out};
    for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
}

cq_status cq_vision_bind_patch(const cq_tt_binder *b, const char *p, cq_tensor *out) {
    const cq_tensor_view *v;
    CQ_TRY(cq_tt_get(b->who, b->table, b->cmf, &v, "%spatch_embed.proj.weight", p));
    cq_tensor_view flat = *v;
    flat.ndim = 2;
    flat.shape[1] = v->nelem / v->shape[0];
    for (int d = 2; d < CQ_MAX_DIMS; d++) flat.shape[d] = 0;
    CQ_TRY(cq_tensor_bind_weight(b->be, &flat, out));
    cq_status s = cq_tt_held_add(b->held, out);
    if (s != CQ_OK) memset(out, 0, sizeof *out);
    return s;
}

cq_status cq_vision_qkv_cols(cq_backend *be, int hidden, cq_tt_held *held, cq_tensor cols[3]) {
    int32_t *col = cq_mallocn((size_t)hidden, sizeof(int32_t));
    if (!col) return CQ_ERR_NOMEM;
    cq_status s = CQ_OK;
    for (int part = 0; s == CQ_OK && part < 3; part++) {
        for (int j = 0; j < hidden; j++) col[j] = part * hidden + j;
        const int64_t shape[1] = {hidden};
        s = cq_tensor_alloc(be, CQ_DTYPE_I32, 1, shape, &cols[part]);
        if (s == CQ_OK) {
            s = cq_tensor_upload(&cols[part], col, (size_t)hidden * sizeof(int32_t));
            if (s == CQ_OK) s = cq_tt_held_add(held, &cols[part]);
            else cq_tensor_free(&cols[part]);
        }
        if (s != CQ_OK) memset(&cols[part], 0, sizeof cols[part]);
    }
    cq_free(col);
    return s;
}

cq_status cq_vision_qkv(cq_backend *be, const cq_vision_qkv_args *a) {
    CQ_TRY(cq_op_linear(be, a->qkv, a->h, a->w, a->b));
    CQ_TRY(cq_op_gather_cols(be, a->q, a->qkv, &a->cols[0], 1, 1.0f));
    CQ_TRY(cq_op_gather_cols(be, a->k, a->qkv, &a->cols[1], 1, 1.0f));
    CQ_TRY(cq_op_gather_cols(be, a->v, a->qkv, &a->cols[2], 1, 1.0f));
    CQ_TRY(cq_op_qk_norm_rope(be, a->q, a->n_heads, a->head_dim, NULL, 1e-6f, a->cos_t, a->sin_t, CQ_ROPE_HALF, 0));
    return cq_op_qk_norm_rope(be, a->k, a->n_heads, a->head_dim, NULL, 1e-6f, a->cos_t, a->sin_t, CQ_ROPE_HALF, 0);
}

cq_status cq_vision_segs_make(cq_backend *be, const char *who, const int32_t *cu, int n_seg, int64_t n,
                              cq_vision_segs *s) {
    memset(s, 0, sizeof *s);
    if (!be || !cu || n_seg < 1 || n < 1 || n > INT32_MAX)
        return cq_fail(CQ_ERR_INVALID_ARG, "%s: %d attention segments over %lld rows", who, n_seg, (long long)n);
    if (cu[0] != 0 || cu[n_seg] != n)
        return cq_fail(CQ_ERR_INVALID_ARG, "%s: attention segments span rows [%d, %d), not [0, %lld)", who,
                       (int)cu[0], (int)cu[n_seg], (long long)n);
    for (int i = 0; i < n_seg; i++)
        if (cu[i + 1] <= cu[i])
            return cq_fail(CQ_ERR_INVALID_ARG, "%s: attention segment %d is [%d, %d)", who, i, (int)cu[i],
                           (int)cu[i + 1]);
    s->n = n;
    if (n_seg == 1) return CQ_OK; /* every row sees every key: no bounds */
    int32_t *t = cq_mallocn((size_t)n, sizeof(int32_t));
    if (!t) return cq_fail(CQ_ERR_NOMEM, "%s: no host memory for the attention bounds", who);
    const int64_t shape[1] = {n};
    cq_status st = cq_tensor_alloc(be, CQ_DTYPE_I32, 1, shape, &s->lo);
    if (st == CQ_OK) st = cq_tensor_alloc(be, CQ_DTYPE_I32, 1, shape, &s->hi);
    for (int pass = 0; st == CQ_OK && pass < 2; pass++) {
        for (int i = 0; i < n_seg; i++)
            for (int32_t r = cu[i]; r < cu[i + 1]; r++) t[r] = pass ? cu[i + 1] : cu[i];
        st = cq_tensor_upload(pass ? &s->hi : &s->lo, t, (size_t)n * sizeof(int32_t));
    }
    cq_free(t);
    if (st != CQ_OK) cq_vision_segs_free(s);
    return st;
}

void cq_vision_segs_free(cq_vision_segs *s) {
    cq_tensor_free(&s->lo);
    cq_tensor_free(&s->hi);
    s->n = 0;
}

cq_status cq_vision_attend(cq_backend *be, const cq_tensor *q, const cq_tensor *k, const cq_tensor *v, cq_tensor *o,
                           const cq_vision_segs *s, int n_heads, int head_dim) {
    if (cq_tensor_rows(q) != s->n)
        return cq_fail(CQ_ERR_SHAPE, "vision attention: %lld query rows, the segments hold %lld",
                       (long long)cq_tensor_rows(q), (long long)s->n);
    const bool bounded = s->lo.be != NULL;
    cq_attn_args a = {.o = o, .q = q, .k = k, .v = v, .vis = bounded ? &s->hi : NULL,
                      .vis_lo = bounded ? &s->lo : NULL, .n_heads = n_heads, .n_kv_heads = n_heads,
                      .head_dim = head_dim};
    return cq_op_attention(be, &a);
}

cq_status cq_vision_merger_mlp(cq_backend *be, const cq_vision_merger_w *w, const cq_tensor *x, cq_tensor *mid,
                               cq_tensor *out) {
    CQ_TRY(cq_op_linear(be, mid, x, &w->fc1, &w->fc1_b));
    CQ_TRY(cq_op_unary(be, mid, mid, CQ_UNARY_GELU_ERF, 0.0f, 0.0f));
    return cq_op_linear(be, out, mid, &w->fc2, &w->fc2_b);
}
