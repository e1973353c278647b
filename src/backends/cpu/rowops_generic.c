/*
 * rowops_generic.c — normalisations, q/k norm + RoPE and softmax on the CPU
 * (f32 activations), threaded over rows. Row statistics accumulate in
 * double: it costs little next to the memory traffic and keeps long rows
 * (3072+ channels, or whole images for group norm) exact to f32.
 */
#include "backends/cpu/cpu_impl.h"

typedef struct row_ctx {
    float *y;
    const float *x;
    const float *p1, *p2; /* scale/shift, w/bias, gamma/beta */
    int64_t C;
    float eps, scale;
    bool flag;
} row_ctx;

static void ln_rows(void *vc, int slot, int64_t r0, int64_t r1) {
    (void)slot;
    const row_ctx *c = vc;
    int64_t C = c->C;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = c->x + r * C;
        float *y = c->y + r * C;
        double sum = 0.0, var = 0.0;
        for (int64_t i = 0; i < C; i++) sum += x[i];
        double mean = sum / (double)C;
        for (int64_t i = 0; i < C; i++) var += ((double)x[i] - mean) * ((double)x[i] - mean);
        float inv = (float)(1.0 / sqrt(var / (double)C + c->eps)), mf = (float)mean;
        for (int64_t i = 0; i < C; i++) {
            float v = (x[i] - mf) * inv;
            if (c->p1) v *= 1.0f + c->p1[i];
            if (c->p2) v += c->p2[i];
            y[i] = v;
        }
    }
}

cq_status cq_cpu_layernorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *scale,
                           const cq_tensor *shift, float eps) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    row_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .C = cq_tensor_cols(x), .eps = eps};
    c.p1 = scale ? cq_host_ptr(scale) : NULL;
    c.p2 = shift ? cq_host_ptr(shift) : NULL;
    int64_t R = cq_tensor_rows(x);
    cq_cpu_parallel(cb, R, cq_cpu_grain(cb, R, 4 * c.C), ln_rows, &c);
    return CQ_OK;
}

static void rms_rows(void *vc, int slot, int64_t r0, int64_t r1) {
    (void)slot;
    const row_ctx *c = vc;
    int64_t C = c->C;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = c->x + r * C;
        float *y = c->y + r * C;
        double ss = 0.0;
        for (int64_t i = 0; i < C; i++) ss += (double)x[i] * x[i];
        float inv = (float)(1.0 / sqrt(ss / (double)C + c->eps));
        for (int64_t i = 0; i < C; i++) {
            float v = x[i] * inv;
            if (c->p1) v *= c->flag ? 1.0f + c->p1[i] : c->p1[i];
            if (c->p2) v += c->p2[i];
            y[i] = v;
        }
    }
}

cq_status cq_cpu_rmsnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias,
                         bool zero_centered, float eps) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    row_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .C = cq_tensor_cols(x), .eps = eps, .flag = zero_centered};
    c.p1 = w ? cq_host_ptr(w) : NULL;
    c.p2 = bias ? cq_host_ptr(bias) : NULL;
    int64_t R = cq_tensor_rows(x);
    cq_cpu_parallel(cb, R, cq_cpu_grain(cb, R, 3 * c.C), rms_rows, &c);
    return CQ_OK;
}

static void softmax_rows(void *vc, int slot, int64_t r0, int64_t r1) {
    (void)slot;
    const row_ctx *c = vc;
    int64_t C = c->C;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = c->x + r * C;
        float *y = c->y + r * C;
        float mx = -INFINITY;
        for (int64_t i = 0; i < C; i++) mx = fmaxf(mx, c->scale * x[i]);
        double sum = 0.0;
        for (int64_t i = 0; i < C; i++) {
            float e = expf(c->scale * x[i] - mx);
            y[i] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < C; i++) y[i] *= inv;
    }
}

cq_status cq_cpu_softmax(cq_backend *be, cq_tensor *y, const cq_tensor *x, float scale) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    row_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .C = cq_tensor_cols(x), .scale = scale != 0.0f ? scale : 1.0f};
    int64_t R = cq_tensor_rows(x);
    cq_cpu_parallel(cb, R, cq_cpu_grain(cb, R, 8 * c.C), softmax_rows, &c);
    return CQ_OK;
}

/* ---- group norm: statistics over all rows of each channel group -------------------- */
enum { GN_CHUNKS = 64 }; /* fixed partial-sum split: the result does not depend on the thread count */

typedef struct gn_ctx {
    float *y;
    const float *x, *gamma, *beta;
    int64_t R, C, G, cg, rows_per_chunk;
    double *part; /* [GN_CHUNKS][G] */
    const double *mean, *inv;
    int pass; /* 0: sums, 1: squared deviations */
} gn_ctx;

static void gn_stats(void *vc, int slot, int64_t k0, int64_t k1) {
    (void)slot;
    const gn_ctx *c = vc;
    for (int64_t k = k0; k < k1; k++) {
        double *p = c->part + k * c->G;
        for (int64_t g = 0; g < c->G; g++) p[g] = 0.0;
        int64_t r1 = CQ_MIN(c->R, (k + 1) * c->rows_per_chunk);
        for (int64_t r = k * c->rows_per_chunk; r < r1; r++) {
            const float *x = c->x + r * c->C;
            for (int64_t g = 0; g < c->G; g++) {
                double s = 0.0;
                const float *xg = x + g * c->cg;
                if (c->pass == 0) {
                    for (int64_t i = 0; i < c->cg; i++) s += xg[i];
                } else {
                    for (int64_t i = 0; i < c->cg; i++) s += ((double)xg[i] - c->mean[g]) * ((double)xg[i] - c->mean[g]);
                }
                p[g] += s;
            }
        }
    }
}

static void gn_apply(void *vc, int slot, int64_t r0, int64_t r1) {
    (void)slot;
    const gn_ctx *c = vc;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = c->x + r * c->C;
        float *y = c->y + r * c->C;
        for (int64_t i = 0; i < c->C; i++) {
            int64_t g = i / c->cg;
            float v = (float)((x[i] - c->mean[g]) * c->inv[g]);
            if (c->gamma) v *= c->gamma[i];
            if (c->beta) v += c->beta[i];
            y[i] = v;
        }
    }
}

cq_status cq_cpu_groupnorm(cq_backend *be, cq_tensor *y, const cq_tensor *x, int groups, const cq_tensor *gamma,
                           const cq_tensor *beta, float eps) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    gn_ctx c = {.y = cq_host_ptr(y), .x = cq_host_ptr(x), .R = cq_tensor_rows(x), .C = cq_tensor_cols(x), .G = groups};
    c.cg = c.C / groups;
    c.gamma = gamma ? cq_host_ptr(gamma) : NULL;
    c.beta = beta ? cq_host_ptr(beta) : NULL;
    c.rows_per_chunk = (c.R + GN_CHUNKS - 1) / GN_CHUNKS;
    int64_t chunks = (c.R + c.rows_per_chunk - 1) / c.rows_per_chunk;
    double *part = cq_cpu_scratch_get(cb, CQ_CPU_SCRATCH_WORK, (size_t)(GN_CHUNKS + 2) * (size_t)groups * sizeof(double));
    if (!part) return CQ_ERR_NOMEM;
    double *mean = part + GN_CHUNKS * groups, *inv = mean + groups;
    c.part = part;
    c.mean = mean;
    c.inv = inv;
    double n = (double)(c.R * c.cg);
    for (c.pass = 0; c.pass < 2; c.pass++) {
        cq_cpu_parallel(cb, chunks, 1, gn_stats, &c);
        for (int64_t g = 0; g < groups; g++) {
            double s = 0.0;
            for (int64_t k = 0; k < chunks; k++) s += part[k * groups + g];
            if (c.pass == 0) mean[g] = s / n;
            else inv[g] = 1.0 / sqrt(s / n + eps);
        }
    }
    cq_cpu_parallel(cb, c.R, cq_cpu_grain(cb, c.R, 3 * c.C), gn_apply, &c);
    cq_cpu_scratch_put(cb, CQ_CPU_SCRATCH_WORK, part);
    return CQ_OK;
}

/* ---- group moments per block of rows (banded group norms) ----------------------------- */
typedef struct gm_ctx {
    float *m;
    const float *x;
    int64_t C, G, cg, block;
} gm_ctx;

/* Blocks [b0, b1): per group a sum, then the squared deviations, each in
 * f64 in row-major order (rows outer, a group's channels inner), as the
 * reference does. */
static void gm_blocks(void *vc, int slot, int64_t b0, int64_t b1) {
    (void)slot;
    const gm_ctx *c = vc;
    double acc[64];
    for (int64_t b = b0; b < b1; b++) {
        const float *xb = c->x + b * c->block * c->C;
        float *mb = c->m + b * 2 * c->G;
        for (int64_t g0 = 0; g0 < c->G; g0 += 64) {
            const int64_t gn = CQ_MIN((int64_t)64, c->G - g0);
            for (int64_t g = 0; g < gn; g++) acc[g] = 0.0;
            for (int64_t r = 0; r < c->block; r++)
                for (int64_t g = 0; g < gn; g++) {
                    const float *xg = xb + r * c->C + (g0 + g) * c->cg;
                    double s = acc[g];
                    for (int64_t i = 0; i < c->cg; i++) s += xg[i];
                    acc[g] = s;
                }
            const double n = (double)(c->block * c->cg);
            for (int64_t g = 0; g < gn; g++) {
                double mean = acc[g] / n;
                mb[2 * (g0 + g)] = (float)mean;
                acc[g] = mean;
            }
            double m2[64];
            for (int64_t g = 0; g < gn; g++) m2[g] = 0.0;
            for (int64_t r = 0; r < c->block; r++)
                for (int64_t g = 0; g < gn; g++) {
                    const float *xg = xb + r * c->C + (g0 + g) * c->cg;
                    const double mean = acc[g];
                    double s = m2[g];
                    for (int64_t i = 0; i < c->cg; i++) {
                        double d = (double)xg[i] - mean;
                        s += d * d;
                    }
                    m2[g] = s;
                }
            for (int64_t g = 0; g < gn; g++) mb[2 * (g0 + g) + 1] = (float)m2[g];
        }
    }
}

cq_status cq_cpu_group_moments(cq_backend *be, cq_tensor *m, const cq_tensor *x, int groups, int block) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    gm_ctx c = {.m = cq_host_ptr(m), .x = cq_host_ptr(x), .C = cq_tensor_cols(x), .G = groups, .block = block};
    c.cg = c.C / groups;
    const int64_t nb = cq_tensor_rows(x) / block;
    cq_cpu_parallel(cb, nb, cq_cpu_grain(cb, nb, 2 * block * c.C), gm_blocks, &c);
    return CQ_OK;
}

/* ---- per-head RMSNorm + RoPE, in place ----------------------------------------------- */
typedef struct rope_ctx {
    float *t;
    const float *w, *cs, *sn;
    int64_t H, D, half;
    float eps;
    cq_rope_mode mode;
} rope_ctx;

static void rope_rows(void *vc, int slot, int64_t n0, int64_t n1) {
    (void)slot;
    const rope_ctx *c = vc;
    for (int64_t n = n0; n < n1; n++) {
        const float *cs = c->cs ? c->cs + n * c->half : NULL, *sn = c->sn ? c->sn + n * c->half : NULL;
        for (int64_t h = 0; h < c->H; h++) {
            float *x = c->t + (n * c->H + h) * c->D;
            if (c->w) {
                double ss = 0.0;
                for (int64_t d = 0; d < c->D; d++) ss += (double)x[d] * x[d];
                float inv = (float)(1.0 / sqrt(ss / (double)c->D + c->eps));
                for (int64_t d = 0; d < c->D; d++) x[d] = x[d] * inv * c->w[d];
            }
            if (c->mode == CQ_ROPE_INTERLEAVED) {
                for (int64_t i = 0; i < c->half; i++) {
                    float x0 = x[2 * i], x1 = x[2 * i + 1];
                    x[2 * i] = x0 * cs[i] - x1 * sn[i];
                    x[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
                }
            } else if (c->mode == CQ_ROPE_HALF) {
                for (int64_t i = 0; i < c->half; i++) {
                    float x0 = x[i], x1 = x[i + c->half];
                    x[i] = x0 * cs[i] - x1 * sn[i];
                    x[i + c->half] = x0 * sn[i] + x1 * cs[i];
                }
            }
        }
    }
}

cq_status cq_cpu_qk_norm_rope(cq_backend *be, cq_tensor *t, int n_heads, int head_dim, const cq_tensor *w, float eps,
                              const cq_tensor *cos_t, const cq_tensor *sin_t, cq_rope_mode mode, int rope_dim) {
    cq_cpu_backend *cb = cq_cpu_of(be);
    rope_ctx c = {.t = cq_host_ptr(t), .H = n_heads, .D = head_dim, .eps = eps, .mode = mode};
    c.half = (rope_dim ? rope_dim : head_dim) / 2;
    c.w = w ? cq_host_ptr(w) : NULL;
    c.cs = cos_t ? cq_host_ptr(cos_t) : NULL;
    c.sn = sin_t ? cq_host_ptr(sin_t) : NULL;
    int64_t N = cq_tensor_rows(t);
    cq_cpu_parallel(cb, N, cq_cpu_grain(cb, N, 4 * c.H * c.D), rope_rows, &c);
    return CQ_OK;
}
