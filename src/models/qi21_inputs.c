/*
 * qi21_inputs.c — reading the `cortiq forward` inputs of the Qwen-Image-2.1
 * denoiser from safetensors (the contract is in qi21_inputs.h). Everything
 * is validated before use: presence, dtype, rank (an optional leading batch
 * dimension of 1), sizes against the model config and the layout, integer
 * values that must be exact, and finiteness of the float inputs.
 */
#include "models/qi21_inputs.h"

#include <math.h>
#include <string.h>

#include "models/kit/inputs.h"

/* Largest vision-language sequence accepted (keeps every row count an int). */
#define QI21_MAX_VLM (1 << 22)

/* `name` of logical rank `rank` (plus an optional leading 1), required (models/kit/inputs.h). */
static cq_status get(const cq_st *st, const char *name, int rank, uint64_t *dims, const cq_st_tensor **out) {
    return cq_in_tensor(st, name, rank, true, dims, out);
}

static cq_status need_f32(const cq_st_tensor *t) {
    if (t->dtype != CQ_ST_F32)
        return cq_fail(CQ_ERR_DTYPE, "input tensor '%s' is %s, expected F32", t->name, cq_st_dtype_name(t->dtype));
    return CQ_OK;
}

/* Finiteness of the latents and text rows is the model's check (placeholder
 * rows may hold anything); the timestep is checked here. */
static cq_status read_floats(const cq_st_tensor *t, float **out) {
    CQ_TRY(need_f32(t));
    return cq_st_read_all_f32(t, out);
}

cq_status cq_qi21_inputs_read(const cq_st *st, const cq_qi21_config *cfg, cq_qi21_inputs *out) {
    memset(out, 0, sizeof *out);
    const cq_st_tensor *tm, *ts, *tt, *tc, *th;
    uint64_t dm[1], ds[2], dc[2], dh[2];

    /* img_mask: the layout's backbone */
    CQ_TRY(get(st, "img_mask", 1, dm, &tm));
    if (tm->dtype != CQ_ST_U8 && tm->dtype != CQ_ST_BOOL && tm->dtype != CQ_ST_I32 && tm->dtype != CQ_ST_I64)
        return cq_fail(CQ_ERR_DTYPE, "input tensor 'img_mask' is %s, expected U8 (BOOL, I32, I64 accepted)",
                       cq_st_dtype_name(tm->dtype));
    if (dm[0] == 0 || dm[0] > QI21_MAX_VLM)
        return cq_fail(CQ_ERR_SHAPE, "input tensor 'img_mask' has %llu positions, expected 1 .. %d",
                       (unsigned long long)dm[0], QI21_MAX_VLM);
    cq_status s = CQ_OK;
    out->img_mask = cq_malloc((size_t)dm[0]);
    if (!out->img_mask) return CQ_ERR_NOMEM;
    for (uint64_t i = 0; i < dm[0]; i++) {
        int64_t v = cq_in_int_at(tm, i);
        if (v != 0 && v != 1) {
            s = cq_fail(CQ_ERR_INVALID_ARG, "input tensor 'img_mask': element %llu is %lld, expected 0 or 1",
                        (unsigned long long)i, (long long)v);
            goto fail;
        }
        out->img_mask[i] = (uint8_t)v;
    }

    /* img_shapes [k, 3] */
    if ((s = get(st, "img_shapes", 2, ds, &ts)) != CQ_OK) goto fail;
    if (ts->dtype != CQ_ST_I32 && ts->dtype != CQ_ST_I64) {
        s = cq_fail(CQ_ERR_DTYPE, "input tensor 'img_shapes' is %s, expected I32 (I64 accepted)",
                    cq_st_dtype_name(ts->dtype));
        goto fail;
    }
    if (ds[1] != 3 || ds[0] == 0 || ds[0] > 4096) {
        s = cq_fail(CQ_ERR_SHAPE, "input tensor 'img_shapes' is [%llu, %llu], expected [k, 3] with 1 <= k <= 4096",
                    (unsigned long long)ds[0], (unsigned long long)ds[1]);
        goto fail;
    }
    out->img_shapes = cq_mallocn((size_t)ds[0], sizeof *out->img_shapes);
    if (!out->img_shapes) {
        s = CQ_ERR_NOMEM;
        goto fail;
    }
    for (uint64_t i = 0; i < 3 * ds[0]; i++) {
        int64_t v = cq_in_int_at(ts, i);
        if (v < 0 || v > 1 << 20) {
            s = cq_fail(CQ_ERR_INVALID_ARG, "input tensor 'img_shapes': row %llu holds %lld, outside [0, %d]",
                        (unsigned long long)(i / 3), (long long)v, 1 << 20);
            goto fail;
        }
        out->img_shapes[i / 3][i % 3] = (int32_t)v;
    }
    out->layout = (cq_qi21_layout){.vlm_len = (int)dm[0], .img_mask = out->img_mask, .n_images = (int)ds[0],
                                   .img_shapes = (const int32_t(*)[3])out->img_shapes};
    if ((s = cq_qi21_layout_sizes(&out->layout, &out->n_ctx, &out->n_target, &out->n_cond)) != CQ_OK) {
        s = cq_fail_prefix(s, "inputs 'img_mask'/'img_shapes': ");
        goto fail;
    }

    /* timestep */
    tt = cq_st_find(st, "timestep");
    if (!tt) {
        s = cq_fail(CQ_ERR_MISSING, "input tensor 'timestep' is missing");
        goto fail;
    }
    if (tt->nelem != 1 || tt->ndim > 2) {
        s = cq_fail(CQ_ERR_SHAPE, "input tensor 'timestep' must hold one value ([1]), it has %llu in %d dimensions",
                    (unsigned long long)tt->nelem, tt->ndim);
        goto fail;
    }
    float *tv = NULL;
    if ((s = read_floats(tt, &tv)) != CQ_OK) goto fail;
    out->t = tv[0];
    cq_free(tv);
    if (!isfinite(out->t)) {
        s = cq_fail(CQ_ERR_NUMERIC, "input tensor 'timestep' holds a non-finite value");
        goto fail;
    }
    if (!(out->t >= 0.0f && out->t <= 1.0f)) {
        s = cq_fail(CQ_ERR_INVALID_ARG, "input tensor 'timestep' is %g; the model takes t in [0, 1]", (double)out->t);
        goto fail;
    }

    /* encoder_hidden_states [n_ctx, context_in_dim] */
    if ((s = get(st, "encoder_hidden_states", 2, dc, &tc)) != CQ_OK || (s = need_f32(tc)) != CQ_OK) goto fail;
    if (dc[0] != (uint64_t)out->n_ctx || dc[1] != (uint64_t)cfg->context_in_dim) {
        s = cq_fail(CQ_ERR_SHAPE,
                    "input tensor 'encoder_hidden_states' is [%llu, %llu], expected [%d, %d] (img_mask has %d positions "
                    "before the target's %d slots; the model's context_in_dim is %d)",
                    (unsigned long long)dc[0], (unsigned long long)dc[1], out->n_ctx, cfg->context_in_dim, out->n_ctx,
                    out->n_target / 4, cfg->context_in_dim);
        goto fail;
    }
    if ((s = read_floats(tc, &out->ctx)) != CQ_OK) goto fail;

    /* hidden_states [n_cond + n_target, in_channels] */
    if ((s = get(st, "hidden_states", 2, dh, &th)) != CQ_OK || (s = need_f32(th)) != CQ_OK) goto fail;
    uint64_t ntok = (uint64_t)out->n_cond + (uint64_t)out->n_target;
    if (dh[0] != ntok || dh[1] != (uint64_t)cfg->in_channels) {
        s = cq_fail(CQ_ERR_SHAPE,
                    "input tensor 'hidden_states' is [%llu, %llu], expected [%llu, %d] (%d condition-image + %d target "
                    "tokens from img_shapes; the model's in_channels is %d)",
                    (unsigned long long)dh[0], (unsigned long long)dh[1], (unsigned long long)ntok, cfg->in_channels,
                    out->n_cond, out->n_target, cfg->in_channels);
        goto fail;
    }
    if ((s = read_floats(th, &out->hidden)) != CQ_OK) goto fail;
    out->cond = out->n_cond ? out->hidden : NULL;
    out->target = out->hidden + (size_t)out->n_cond * (size_t)cfg->in_channels;
    return CQ_OK;
fail:
    cq_qi21_inputs_free(out);
    return s;
}

void cq_qi21_inputs_free(cq_qi21_inputs *in) {
    if (!in) return;
    cq_free(in->img_mask);
    cq_free(in->img_shapes);
    cq_free(in->ctx);
    cq_free(in->hidden);
    memset(in, 0, sizeof *in);
}
