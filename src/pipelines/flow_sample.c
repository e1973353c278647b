/*
 * flow_sample.c — the flow-matching sampler loop and its data-driven
 * variants (see flow_sample.h). Each float operation is a statement of its
 * own so no contraction changes a bit (schedule.c says why).
 */
#include "pipelines/flow_sample.h"

#include <float.h>
#include <math.h>

#include "base/base.h"
#include "pipelines/torch_rng.h"

_Static_assert(FLT_EVAL_METHOD == 0, "flow_sample needs FLT_EVAL_METHOD == 0");

float cq_flow_timestep_apply(const cq_flow_timestep *ts, float t, int num_train_timesteps) {
    const float T = (float)num_train_timesteps;
    const float recip = 1.0f / T;
    if (ts->bf16) t = cq_torch_bf16_to_f32(cq_torch_f32_to_bf16(t));
    float r;
    switch (ts->kind) {
    case CQ_FLOW_T_ONE_MINUS: {
        const float d = T - t;
        r = ts->cuda_style ? d * recip : d / T;
        break;
    }
    case CQ_FLOW_T_RAW: r = t; break;
    default: r = ts->cuda_style ? t * recip : t / T; break;
    }
    if (ts->bf16) r = cq_torch_bf16_to_f32(cq_torch_f32_to_bf16(r));
    return r;
}

bool cq_guidance_active(const cq_guidance *g, const cq_flow_schedule *sch, int num_train_timesteps, int i) {
    if (g->kind == CQ_GUIDANCE_NONE) return false;
    if (g->truncate) {
        /* the reference: t_norm = (T - t) / T in float32, guidance off when t_norm > the fraction */
        const float T = (float)num_train_timesteps;
        const float d = T - sch->timesteps[i];
        const float progress = d / T;
        if ((double)progress > g->truncate_after) return false;
    }
    return true;
}

static double norm_of(const float *v, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)v[i] * (double)v[i];
    return sqrt(s);
}

static void scale_by(float *v, size_t n, float k) {
    for (size_t i = 0; i < n; i++) v[i] = v[i] * k;
}

/* the combination of g->kind on n values (out may alias pos or neg) */
static void combine_values(const cq_guidance *g, float *out, const float *pos, const float *neg, size_t n) {
    if (g->kind == CQ_GUIDANCE_CFG_POS) {
        const float k = (float)g->scale;
        for (size_t i = 0; i < n; i++) {
            const float d = pos[i] - neg[i];
            const float s = k * d;
            out[i] = pos[i] + s;
        }
    } else {
        cq_flow_cfg_combine(out, pos, neg, n, g->scale);
    }
}

void cq_guidance_combine(const cq_guidance *g, float *out, const float *pos, const float *neg, size_t rows,
                         size_t cols) {
    const size_t n = rows * cols;
    if (g->norm == CQ_GUIDANCE_NORM_ROWS) {
        /* row by row, so the positive's norm is read before `out` (which may be pos) is written */
        for (size_t r = 0; r < rows; r++) {
            float *o = out + r * cols;
            const double want = norm_of(pos + r * cols, cols);
            combine_values(g, o, pos + r * cols, neg + r * cols, cols);
            const double have = norm_of(o, cols);
            if (have > 0.0) scale_by(o, cols, (float)want / (float)have);
        }
    } else if (g->norm == CQ_GUIDANCE_NORM_CAP) {
        const double cap = norm_of(pos, n) * g->norm_cap;
        combine_values(g, out, pos, neg, n);
        const double have = norm_of(out, n);
        if (have > cap && have > 0.0) scale_by(out, n, (float)cap / (float)have);
    } else {
        combine_values(g, out, pos, neg, n);
    }
}

static cq_status check_opts(const cq_flow_sample_opts *o) {
    if (!o || !o->sch || !o->dn || !o->dn->step || o->tokens < 1 || o->dn->channels < 1 || o->num_train_timesteps < 1)
        return cq_fail(CQ_ERR_INVALID_ARG, "flow sampler: no schedule, denoiser or tokens");
    const cq_guidance *g = &o->guidance;
    if ((unsigned)o->timestep.kind >= CQ_FLOW_T_KIND_COUNT || (unsigned)g->kind >= CQ_GUIDANCE_KIND_COUNT ||
        (unsigned)g->norm >= CQ_GUIDANCE_NORM_COUNT)
        return cq_fail(CQ_ERR_INVALID_ARG, "flow sampler: unknown timestep, guidance or norm kind");
    if (g->kind != CQ_GUIDANCE_NONE && !o->neg)
        return cq_fail(CQ_ERR_INVALID_ARG, "flow sampler: guidance needs the negative conditioning");
    if (!isfinite(g->scale) || (g->truncate && !isfinite(g->truncate_after)) ||
        (g->norm == CQ_GUIDANCE_NORM_CAP && !(g->norm_cap > 0.0 && isfinite(g->norm_cap))))
        return cq_fail(CQ_ERR_INVALID_ARG, "flow sampler: guidance scale %g, truncation %g or norm cap %g out of range",
                       g->scale, g->truncate_after, g->norm_cap);
    return CQ_OK;
}

cq_status cq_flow_sample(const cq_flow_sample_opts *o, float *x) {
    CQ_TRY(check_opts(o));
    const cq_denoiser *dn = o->dn;
    const cq_flow_schedule *sch = o->sch;
    const size_t cols = (size_t)dn->channels, n = (size_t)o->tokens * cols;
    const bool any_guidance = o->guidance.kind != CQ_GUIDANCE_NONE;
    float *v = cq_mallocn(n, sizeof(float));
    float *vn = any_guidance ? cq_mallocn(n, sizeof(float)) : NULL;
    cq_status s = v && (vn || !any_guidance) ? CQ_OK : CQ_ERR_NOMEM;
    for (int i = 0; s == CQ_OK && i < sch->steps; i++) {
        const float tm = cq_flow_timestep_apply(&o->timestep, sch->timesteps[i], o->num_train_timesteps);
        s = dn->step(dn->self, o->pos, x, tm, v);
        if (s == CQ_OK && cq_guidance_active(&o->guidance, sch, o->num_train_timesteps, i)) {
            s = dn->step(dn->self, o->neg, x, tm, vn);
            if (s == CQ_OK) cq_guidance_combine(&o->guidance, v, v, vn, (size_t)o->tokens, cols);
        }
        if (s == CQ_OK) {
            for (size_t k = 0; k < n; k++)
                if (!isfinite(v[k])) {
                    s = cq_fail(CQ_ERR_NUMERIC, "the denoiser produced a non-finite value at step %d", i + 1);
                    break;
                }
        }
        if (s == CQ_OK && o->negate)
            for (size_t k = 0; k < n; k++) v[k] = -v[k]; /* exact, so the step is the reference's bit for bit */
        if (s == CQ_OK) cq_flow_euler_step(x, v, n, sch->sigmas[i], sch->sigmas[i + 1]);
        if (s == CQ_OK && o->on_latents) o->on_latents(i + 1, x, o->tokens, o->user);
        if (s == CQ_OK && o->on_step && o->on_step(i + 1, sch->steps, o->user))
            s = cq_fail(CQ_ERR_INTERRUPTED, "cancelled after step %d", i + 1);
        if (s == CQ_OK && cq_cancel_requested())
            s = cq_fail(CQ_ERR_INTERRUPTED, "interrupted after step %d of %d", i + 1, sch->steps);
    }
    cq_free(v);
    cq_free(vn);
    return s;
}
