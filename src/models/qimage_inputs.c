/*
 * qimage_inputs.c — reading the `cortiq forward` inputs of the Qwen-Image
 * (v1) denoiser from safetensors (the contract is in qimage_inputs.h):
 * presence, dtype, rank (an optional leading batch of 1) and sizes against
 * the config and the layout before anything is read; integer values must be
 * in range; the timestep finite and in [0, 1].
 */
#include "models/qimage_inputs.h"

#include <math.h>
#include <string.h>

#include "models/kit/inputs.h"

static cq_status floats(const cq_st_tensor *t, float **out) {
    if (t->dtype != CQ_ST_F32)
        return cq_fail(CQ_ERR_DTYPE, "input tensor '%s' is %s, expected F32", t->name, cq_st_dtype_name(t->dtype));
    return cq_st_read_all_f32(t, out);
}

static cq_status read_shapes(const cq_st *st, cq_qimage_inputs *in) {
    const cq_st_tensor *t;
    uint64_t d[2];
    CQ_TRY(cq_in_tensor(st, "img_shapes", 2, true, d, &t));
    if (t->dtype != CQ_ST_I32 && t->dtype != CQ_ST_I64)
        return cq_fail(CQ_ERR_DTYPE, "input tensor 'img_shapes' is %s, expected I32 (I64 accepted)",
                       cq_st_dtype_name(t->dtype));
    if (d[1] != 3 || d[0] < 1 || d[0] > CQ_QIMAGE_MAX_IMAGES)
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'img_shapes' is [%llu, %llu], expected [k, 3] with 1 <= k <= %d",
                       (unsigned long long)d[0], (unsigned long long)d[1], CQ_QIMAGE_MAX_IMAGES);
    for (uint64_t i = 0; i < 3 * d[0]; i++) {
        const int64_t v = cq_in_int_at(t, i);
        if (v < 0 || v > 1 << 20)
            return cq_fail(CQ_ERR_INVALID_ARG, "input tensor 'img_shapes': row %llu holds %lld, outside [0, %d]",
                           (unsigned long long)(i / 3), (long long)v, 1 << 20);
        in->shapes[i / 3][i % 3] = (int32_t)v;
    }
    in->layout.n_images = (int)d[0];
    in->layout.img_shapes = (const int32_t(*)[3])in->shapes;
    return CQ_OK;
}

static cq_status read_text(const cq_st *st, const cq_qimage_config *cfg, cq_qimage_inputs *in) {
    const cq_st_tensor *t, *tm;
    uint64_t d[2], dm[1];
    CQ_TRY(cq_in_tensor(st, "encoder_hidden_states", 2, true, d, &t));
    if (d[1] != (uint64_t)cfg->joint_dim || d[0] < 1 || d[0] > 1u << 16)
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'encoder_hidden_states' is [%llu, %llu]; the model takes [L, %d] "
                       "with L in [1, 65536]", (unsigned long long)d[0], (unsigned long long)d[1], cfg->joint_dim);
    in->layout.n_txt = (int)d[0];
    CQ_TRY(cq_in_tensor(st, "encoder_hidden_states_mask", 1, false, dm, &tm));
    if (tm) {
        if (dm[0] != d[0])
            return cq_fail(CQ_ERR_SHAPE, "input tensor 'encoder_hidden_states_mask' has %llu rows, the text %llu",
                           (unsigned long long)dm[0], (unsigned long long)d[0]);
        if (!(in->mask = cq_malloc((size_t)d[0]))) return CQ_ERR_NOMEM;
        if (tm->dtype == CQ_ST_F32) {
            float *f;
            CQ_TRY(cq_st_read_all_f32(tm, &f));
            for (uint64_t j = 0; j < d[0]; j++) in->mask[j] = f[j] != 0.0f;
            cq_free(f);
        } else if (tm->dtype == CQ_ST_U8 || tm->dtype == CQ_ST_BOOL || tm->dtype == CQ_ST_I32 ||
                   tm->dtype == CQ_ST_I64) {
            for (uint64_t j = 0; j < d[0]; j++) in->mask[j] = cq_in_int_at(tm, j) != 0;
        } else {
            return cq_fail(CQ_ERR_DTYPE, "input tensor 'encoder_hidden_states_mask' is %s, expected F32, U8, BOOL, I32 "
                           "or I64", cq_st_dtype_name(tm->dtype));
        }
        in->layout.txt_mask = in->mask;
    }
    return floats(t, &in->txt);
}

static cq_status read_image(const cq_st *st, const cq_qimage_config *cfg, cq_qimage_inputs *in) {
    const cq_st_tensor *t;
    uint64_t d[2];
    CQ_TRY(cq_in_tensor(st, "hidden_states", 2, true, d, &t));
    if (d[0] != (uint64_t)in->n_img || d[1] != (uint64_t)cfg->in_channels)
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'hidden_states' is [%llu, %llu], expected [%d, %d] (img_shapes lists "
                       "%d tokens; the model's in_channels is %d)", (unsigned long long)d[0], (unsigned long long)d[1],
                       in->n_img, cfg->in_channels, in->n_img, cfg->in_channels);
    return floats(t, &in->img);
}

static cq_status read_t(const cq_st *st, cq_qimage_inputs *in) {
    const cq_st_tensor *t = cq_st_find(st, "timestep");
    if (!t) return cq_fail(CQ_ERR_MISSING, "input tensor 'timestep' is missing");
    if (t->nelem != 1 || t->ndim > 1)
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'timestep' must hold one value ([1]), it has %llu in %d dimensions",
                       (unsigned long long)t->nelem, t->ndim);
    if (t->dtype != CQ_ST_F32)
        return cq_fail(CQ_ERR_DTYPE, "input tensor 'timestep' is %s, expected F32", cq_st_dtype_name(t->dtype));
    CQ_TRY(cq_st_read_f32(t, 0, 1, &in->t));
    if (!isfinite(in->t)) return cq_fail(CQ_ERR_NUMERIC, "input tensor 'timestep' holds a non-finite value");
    if (!(in->t >= 0.0f && in->t <= 1.0f))
        return cq_fail(CQ_ERR_INVALID_ARG, "input tensor 'timestep' is %g; the model takes sigma in [0, 1]",
                       (double)in->t);
    return CQ_OK;
}

cq_status cq_qimage_inputs_read(const cq_st *st, const cq_qimage_config *cfg, cq_qimage_inputs *out) {
    memset(out, 0, sizeof *out);
    cq_status s = read_shapes(st, out);
    if (s == CQ_OK) s = read_text(st, cfg, out);
    if (s == CQ_OK) {
        s = cq_qimage_layout_sizes(&out->layout, &out->n_img, NULL);
        if (s != CQ_OK) s = cq_fail_prefix(s, "inputs 'img_shapes'/'encoder_hidden_states': ");
    }
    if (s == CQ_OK) s = read_image(st, cfg, out);
    if (s == CQ_OK) s = read_t(st, out);
    if (s != CQ_OK) cq_qimage_inputs_free(out);
    return s;
}

void cq_qimage_inputs_free(cq_qimage_inputs *in) {
    if (!in) return;
    cq_free(in->mask);
    cq_free(in->img);
    cq_free(in->txt);
    memset(in, 0, sizeof *in);
}
