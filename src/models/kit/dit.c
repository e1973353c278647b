/*
 * dit.c — the shared diffusion-transformer pieces (dit.h).
 */
#include "models/kit/dit.h"

#include <math.h>
#include <string.h>

void cq_dit_timestep_features(const cq_dit_tproj *p, const float *t, int n, float *out) {
    const int half = p->dim / 2;
    const float k = (float)(-log((double)p->max_period));
    const float denom = (float)half - p->downscale_freq_shift;
    for (int r = 0; r < n; r++) {
        const float tt = t[r];
        float *o = out + (size_t)r * p->dim;
        float *c = p->flip_sin_to_cos ? o : o + half, *s = p->flip_sin_to_cos ? o + half : o;
        for (int i = 0; i < half; i++) {
            /* exponent in f32 as the reference: (-log(max_period) * i) / (half - shift), then exp */
            float freq = expf(k * (float)i / denom);
            float a = tt * freq;
            if (p->scale != 1.0f) a *= p->scale;
            c[i] = (float)cos((double)a);
            s[i] = (float)sin((double)a);
        }
    }
}

cq_status cq_dit_rope_init(cq_dit_rope *r, int n_axes, const int *dims, float theta) {
    memset(r, 0, sizeof *r);
    if (n_axes < 1 || n_axes > CQ_DIT_ROPE_MAX_AXES)
        return cq_fail(CQ_ERR_INVALID_ARG, "rope: %d axes (1 .. %d)", n_axes, CQ_DIT_ROPE_MAX_AXES);
    r->n_axes = n_axes;
    for (int a = 0; a < n_axes; a++) {
        if (dims[a] <= 0 || dims[a] % 2 || dims[a] > 2 * CQ_DIT_ROPE_MAX_FREQS)
            return cq_fail(CQ_ERR_INVALID_ARG, "rope: axis %d rotates %d dims (even, 2 .. %d)", a, dims[a],
                           2 * CQ_DIT_ROPE_MAX_FREQS);
        r->dims[a] = dims[a];
        r->half += dims[a] / 2;
        /* 1 / pow(theta, arange(0, dim, 2).float() / dim), in f32 */
        for (int i = 0; i < dims[a] / 2; i++) {
            float e = (float)(2 * i) / (float)dims[a];
            r->freq[a][i] = 1.0f / powf(theta, e);
        }
    }
    return CQ_OK;
}

cq_status cq_dit_rope_init_f64(cq_dit_rope *r, int n_axes, const int *dims, double theta) {
    CQ_TRY(cq_dit_rope_init(r, n_axes, dims, (float)theta));
    r->f64 = true;
    /* 1.0 / theta ** (arange(0, dim, 2, float64) / dim), all in f64 */
    for (int a = 0; a < n_axes; a++)
        for (int i = 0; i < dims[a] / 2; i++) r->freq64[a][i] = 1.0 / pow(theta, (double)(2 * i) / (double)dims[a]);
    return CQ_OK;
}

static void row_table(const cq_dit_rope *r, const float *pos, float *cosv, float *sinv) {
    int col = 0;
    for (int a = 0; a < r->n_axes; a++)
        for (int f = 0; f < r->dims[a] / 2; f++, col++) {
            /* the reference forms the angle in f32 (position * freq), or in f64 rounded to f32, then cos/sin */
            float ang = r->f64 ? (float)((double)pos[a] * r->freq64[a][f]) : pos[a] * r->freq[a][f];
            cosv[col] = (float)cos((double)ang);
            sinv[col] = (float)sin((double)ang);
        }
}

void cq_dit_rope_tables(const cq_dit_rope *r, const int32_t *pos, int n, float *cosv, float *sinv) {
    float p[CQ_DIT_ROPE_MAX_AXES];
    for (int i = 0; i < n; i++) {
        for (int a = 0; a < r->n_axes; a++) p[a] = (float)pos[(size_t)i * r->n_axes + a];
        row_table(r, p, cosv + (size_t)i * r->half, sinv + (size_t)i * r->half);
    }
}

void cq_dit_rope_tables_f32(const cq_dit_rope *r, const float *pos, int n, float *cosv, float *sinv) {
    for (int i = 0; i < n; i++)
        row_table(r, pos + (size_t)i * r->n_axes, cosv + (size_t)i * r->half, sinv + (size_t)i * r->half);
}

cq_status cq_dit_rope_upload(const cq_dit_rope *r, const int32_t *pos, int n, cq_tensor *cos_t, cq_tensor *sin_t) {
    const size_t cells = (size_t)n * (size_t)r->half;
    float *cs = cq_mallocn(2 * cells, sizeof(float));
    if (!cs) return CQ_ERR_NOMEM;
    cq_dit_rope_tables(r, pos, n, cs, cs + cells);
    cq_status s = cq_tensor_upload(cos_t, cs, cells * sizeof(float));
    if (s == CQ_OK) s = cq_tensor_upload(sin_t, cs + cells, cells * sizeof(float));
    cq_free(cs);
    return s;
}

cq_tensor cq_dit_mod_vec(const cq_dit_mod *m, int row, int which) {
    cq_tensor v;
    int64_t shape[1] = {m->dim};
    if (cq_tensor_subview(m->t, ((int64_t)row * m->per_row + which) * m->dim, 1, shape, &v) != CQ_OK)
        memset(&v, 0, sizeof v);
    return v;
}

cq_status cq_dit_modulated_ln(cq_backend *be, const cq_dit_group *g, int n_groups, cq_tensor *y, const cq_tensor *x,
                              const cq_dit_mod *m, int which, int shift, float eps) {
    for (int i = 0; i < n_groups; i++) {
        cq_tensor xv = cq_tensor_rows_view(x, g[i].r0, g[i].n), yv = cq_tensor_rows_view(y, g[i].r0, g[i].n);
        cq_tensor sc = cq_dit_mod_vec(m, g[i].mod_row, which), sh;
        if (shift >= 0) sh = cq_dit_mod_vec(m, g[i].mod_row, shift);
        CQ_TRY(cq_op_layernorm(be, &yv, &xv, &sc, shift >= 0 ? &sh : NULL, eps));
    }
    return CQ_OK;
}

cq_status cq_dit_gated_proj(cq_backend *be, const cq_dit_group *g, int n_groups, cq_tensor *x, const cq_tensor *in,
                            const cq_tensor *w, const cq_tensor *bias, const cq_dit_mod *m, int which) {
    for (int i = 0; i < n_groups; i++) {
        cq_tensor xv = cq_tensor_rows_view(x, g[i].r0, g[i].n), iv = cq_tensor_rows_view(in, g[i].r0, g[i].n);
        cq_tensor gate = cq_dit_mod_vec(m, g[i].mod_row, which);
        cq_matmul_args a = {.y = &xv, .x = &iv, .w = w, .bias = bias, .gate = &gate, .accumulate = true};
        CQ_TRY(cq_op_matmul(be, &a));
    }
    return CQ_OK;
}

cq_status cq_dit_check_finite(const char *who, const char *what, const float *x, size_t rows, size_t cols) {
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < cols; i++)
            if (!isfinite(x[r * cols + i]))
                return cq_fail(CQ_ERR_NUMERIC, "%s: %s row %zu holds a non-finite value (column %zu)", who, what, r, i);
    return CQ_OK;
}

cq_status cq_dit_stepper_run(cq_dit_stepper *s, cq_backend *be, cq_dit_step_ops ops, void *user, const char *who) {
    cq_status st = CQ_OK;
    if (s->rec) {
        st = cq_recording_replay(s->rec);
        if (st == CQ_ERR_AGAIN) { /* the backend replaced a buffer the recording used: direct, record anew */
            cq_recording_free(s->rec);
            s->rec = NULL;
            s->direct_steps = 0;
            st = ops(user);
        }
    } else if (s->direct_steps >= 1 && !s->no_rec && cq_backend_can_record(be)) {
        CQ_TRY(cq_backend_record_begin(be));
        st = ops(user);
        cq_status e = cq_backend_record_end(be, st == CQ_OK, &s->rec);
        if (st == CQ_OK && e == CQ_OK) {
            st = cq_recording_replay(s->rec);
        } else { /* something in the step cannot be recorded: op by op from now on */
            CQ_DEBUG("%s: the step could not be recorded (%s); running it op by op", who, cq_last_error());
            cq_recording_free(s->rec);
            s->rec = NULL;
            s->no_rec = true;
            st = ops(user);
        }
    } else {
        st = ops(user);
        if (st == CQ_OK) s->direct_steps++;
    }
    return st;
}

void cq_dit_stepper_free(cq_dit_stepper *s) {
    if (!s) return;
    cq_recording_free(s->rec);
    memset(s, 0, sizeof *s);
}
