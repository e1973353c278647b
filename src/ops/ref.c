/*
 * ref.c — reference matmul, attention and the normalisations (see ref.h for
 * the contract). Simple loops, double accumulation, one rounding per output.
 */
#include <math.h>
#include <string.h>

#include "codec/codec.h"
#include "ops/ref.h"

/* ---- element access ------------------------------------------------------------ */
float cq_ref_load(const cq_tensor *t, int64_t i) {
    const uint8_t *p = cq_host_ptr(t);
    switch ((int)t->dtype) {
    case CQ_DTYPE_F32: {
        float v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case CQ_DTYPE_F16: return cq_f16_to_f32(cq_rd16(p + 2 * i));
    case CQ_DTYPE_BF16: return cq_bf16_to_f32(cq_rd16(p + 2 * i));
    case CQ_DTYPE_I32: {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        return (float)v;
    }
    default: return NAN;
    }
}

void cq_ref_store(cq_tensor *t, int64_t i, float v) {
    uint8_t *p = cq_host_ptr(t);
    switch ((int)t->dtype) {
    case CQ_DTYPE_F32: memcpy(p + 4 * i, &v, 4); break;
    case CQ_DTYPE_F16: cq_wr16(p + 2 * i, cq_f32_to_f16(v)); break;
    case CQ_DTYPE_BF16: cq_wr16(p + 2 * i, cq_f32_to_bf16(v)); break;
    default: break;
    }
}

static float *load_all(const cq_tensor *t) {
    int64_t n = cq_tensor_nelem(t);
    float *v = cq_mallocn((size_t)n, sizeof(float));
    if (v)
        for (int64_t i = 0; i < n; i++) v[i] = cq_ref_load(t, i);
    return v;
}

static float vec_or(const cq_tensor *t, int64_t i, float dflt) { return t ? cq_ref_load(t, i) : dflt; }

cq_status cq_ref_matrix_rows(const cq_tensor *w, int64_t r0, int64_t n, float *out) {
    int64_t K = cq_tensor_nelem(w) / w->shape[0];
    if (!(w->flags & CQ_TENSOR_WEIGHT)) {
        for (int64_t i = 0; i < n * K; i++) out[i] = cq_ref_load(w, r0 * K + i);
        return CQ_OK;
    }
    /* The codec decodes rows of its own shape (the last dim); a matrix row of
     * an N-D weight is a whole number of those. */
    uint64_t shape[CQ_MAX_DIMS];
    for (int i = 0; i < w->ndim; i++) shape[i] = (uint64_t)w->shape[i];
    int64_t per = w->ndim >= 2 ? K / w->shape[w->ndim - 1] : 1;
    return cq_codec_dequant_rows(w->dtype, w->ndim, shape, cq_host_ptr(w), w->nbytes, (uint64_t)(r0 * per),
                                 (uint64_t)(n * per), out);
}

double cq_ref_gelu_tanh(double x) {
    const double k = 0.7978845608028654; /* sqrt(2/pi) */
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

double cq_ref_silu(double x) { return x / (1.0 + exp(-x)); }

/* ---- matmul ---------------------------------------------------------------------- */
cq_status cq_ref_matmul(const cq_matmul_args *a) {
    int64_t M = cq_tensor_rows(a->x), K = cq_tensor_cols(a->x), N = cq_tensor_cols(a->y);
    bool swiglu = a->act == CQ_ACT_SWIGLU, fused = swiglu && !a->w2;
    double s = a->scale != 0.0f ? a->scale : 1.0;
    cq_status st = CQ_OK;
    float *x = load_all(a->x);
    float *w1 = cq_mallocn((size_t)K, sizeof(float));
    float *w2 = cq_mallocn((size_t)K, sizeof(float));
    if (!x || !w1 || !w2) {
        st = CQ_ERR_NOMEM;
        goto done;
    }
    for (int64_t n = 0; n < N; n++) {
        st = cq_ref_matrix_rows(a->w, n, 1, w1);
        if (st == CQ_OK && swiglu) st = fused ? cq_ref_matrix_rows(a->w, N + n, 1, w2) : cq_ref_matrix_rows(a->w2, n, 1, w2);
        if (st != CQ_OK) goto done;
        double b1 = vec_or(a->bias, n, 0.0f);
        double b2 = fused ? vec_or(a->bias, N + n, 0.0f) : vec_or(a->bias2, n, 0.0f);
        double g = vec_or(a->gate, n, 1.0f);
        for (int64_t m = 0; m < M; m++) {
            const float *xr = x + m * K;
            double acc1 = 0.0, acc2 = 0.0;
            for (int64_t k = 0; k < K; k++) acc1 += (double)xr[k] * w1[k];
            if (swiglu)
                for (int64_t k = 0; k < K; k++) acc2 += (double)xr[k] * w2[k];
            double v = s * acc1 + b1;
            switch (a->act) {
            case CQ_ACT_GELU_TANH: v = cq_ref_gelu_tanh(v); break;
            case CQ_ACT_SILU: v = cq_ref_silu(v); break;
            case CQ_ACT_SWIGLU: v = cq_ref_silu(v) * (s * acc2 + b2); break;
            default: break;
            }
            int64_t o = m * N + n;
            if (a->accumulate) v = cq_ref_load(a->y, o) + g * v;
            cq_ref_store(a->y, o, (float)v);
        }
    }
done:
    cq_free(x);
    cq_free(w1);
    cq_free(w2);
    return st;
}

/* ---- attention ------------------------------------------------------------------- */
cq_status cq_ref_attention(const cq_attn_args *a) {
    int64_t Nq = cq_tensor_rows(a->q), D = a->head_dim, Hq = a->n_heads, Hkv = a->n_kv_heads;
    int64_t P = a->k_prefix ? cq_tensor_rows(a->k_prefix) : 0, Nk = a->k ? cq_tensor_rows(a->k) : 0, T = P + Nk;
    int64_t kvw = Hkv * D, group = Hq / Hkv;
    double scale = a->scale != 0.0f ? a->scale : 1.0 / sqrt((double)D);
    cq_status st = CQ_OK;
    /* Keys and values as one f32 table [T, Hkv*D]: prefix rows, then own rows. */
    float *kt = cq_mallocn((size_t)(T * kvw), sizeof(float));
    float *vt = cq_mallocn((size_t)(T * kvw), sizeof(float));
    double *acc = cq_mallocn((size_t)D, sizeof(double));
    if (!kt || !vt || !acc) {
        st = CQ_ERR_NOMEM;
        goto done;
    }
    for (int64_t i = 0; i < P * kvw; i++) {
        kt[i] = cq_ref_load(a->k_prefix, i);
        vt[i] = cq_ref_load(a->v_prefix, i);
    }
    for (int64_t i = 0; i < Nk * kvw; i++) {
        kt[P * kvw + i] = cq_ref_load(a->k, i);
        vt[P * kvw + i] = cq_ref_load(a->v, i);
    }
    for (int64_t i = 0; i < Nq; i++) {
        int64_t lim = T;
        if (a->vis) {
            int32_t vi;
            memcpy(&vi, (const char *)cq_host_ptr(a->vis) + 4 * i, 4);
            lim = vi < 0 ? 0 : (vi > T ? T : vi);
        } else if (a->causal) {
            lim = CQ_MIN(P + i + 1, T);
        }
        int64_t lo = 0;
        if (a->vis_lo) {
            int32_t vi;
            memcpy(&vi, (const char *)cq_host_ptr(a->vis_lo) + 4 * i, 4);
            lo = vi < 0 ? 0 : (vi > T ? T : vi);
        }
        for (int64_t h = 0; h < Hq; h++) {
            int64_t kh = h / group;
            const int64_t qo = i * Hq * D + h * D;
            /* Online softmax in double: running max m, running sum l. */
            double m = -INFINITY, l = 0.0;
            for (int64_t d = 0; d < D; d++) acc[d] = 0.0;
            for (int64_t j = lo; j < lim; j++) {
                const float *kr = kt + j * kvw + kh * D, *vr = vt + j * kvw + kh * D;
                double sc = 0.0;
                for (int64_t d = 0; d < D; d++) sc += (double)cq_ref_load(a->q, qo + d) * kr[d];
                sc *= scale;
                double mn = sc > m ? sc : m;
                double corr = exp(m - mn), p = exp(sc - mn);
                l = l * corr + p;
                for (int64_t d = 0; d < D; d++) acc[d] = acc[d] * corr + p * vr[d];
                m = mn;
            }
            for (int64_t d = 0; d < D; d++) cq_ref_store(a->o, qo + d, lim > lo ? (float)(acc[d] / l) : 0.0f);
        }
    }
done:
    cq_free(kt);
    cq_free(vt);
    cq_free(acc);
    return st;
}

/* ---- normalisations ------------------------------------------------------------ */
cq_status cq_ref_layernorm(cq_tensor *y, const cq_tensor *x, const cq_tensor *scale, const cq_tensor *shift, float eps) {
    int64_t R = cq_tensor_rows(x), C = cq_tensor_cols(x);
    float *row = cq_mallocn((size_t)C, sizeof(float));
    if (!row) return CQ_ERR_NOMEM;
    for (int64_t r = 0; r < R; r++) {
        double sum = 0.0, var = 0.0;
        for (int64_t c = 0; c < C; c++) sum += row[c] = cq_ref_load(x, r * C + c);
        double mean = sum / (double)C;
        for (int64_t c = 0; c < C; c++) var += (row[c] - mean) * (row[c] - mean);
        double inv = 1.0 / sqrt(var / (double)C + eps); /* biased variance, eps inside the root */
        for (int64_t c = 0; c < C; c++) {
            double v = (row[c] - mean) * inv * (1.0 + vec_or(scale, c, 0.0f)) + vec_or(shift, c, 0.0f);
            cq_ref_store(y, r * C + c, (float)v);
        }
    }
    cq_free(row);
    return CQ_OK;
}

cq_status cq_ref_rmsnorm(cq_tensor *y, const cq_tensor *x, const cq_tensor *w, const cq_tensor *bias,
                         bool zero_centered, float eps) {
    int64_t R = cq_tensor_rows(x), C = cq_tensor_cols(x);
    float *row = cq_mallocn((size_t)C, sizeof(float));
    if (!row) return CQ_ERR_NOMEM;
    for (int64_t r = 0; r < R; r++) {
        double ss = 0.0;
        for (int64_t c = 0; c < C; c++) {
            row[c] = cq_ref_load(x, r * C + c);
            ss += (double)row[c] * row[c];
        }
        double inv = 1.0 / sqrt(ss / (double)C + eps);
        for (int64_t c = 0; c < C; c++) {
            double wc = 1.0; /* no weight: plain normalisation */
            if (w) wc = zero_centered ? 1.0 + cq_ref_load(w, c) : cq_ref_load(w, c);
            double v = row[c] * inv * wc + vec_or(bias, c, 0.0f);
            cq_ref_store(y, r * C + c, (float)v);
        }
    }
    cq_free(row);
    return CQ_OK;
}

cq_status cq_ref_groupnorm(cq_tensor *y, const cq_tensor *x, int groups, const cq_tensor *gamma, const cq_tensor *beta,
                           float eps) {
    int64_t R = cq_tensor_rows(x), C = cq_tensor_cols(x), cg = C / groups;
    for (int64_t g = 0; g < groups; g++) {
        double sum = 0.0, var = 0.0, n = (double)(R * cg);
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = g * cg; c < (g + 1) * cg; c++) sum += cq_ref_load(x, r * C + c);
        double mean = sum / n;
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = g * cg; c < (g + 1) * cg; c++) {
                double d = cq_ref_load(x, r * C + c) - mean;
                var += d * d;
            }
        double inv = 1.0 / sqrt(var / n + eps);
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = g * cg; c < (g + 1) * cg; c++) {
                double v = (cq_ref_load(x, r * C + c) - mean) * inv * vec_or(gamma, c, 1.0f) + vec_or(beta, c, 0.0f);
                cq_ref_store(y, r * C + c, (float)v);
            }
    }
    return CQ_OK;
}

cq_status cq_ref_group_moments(cq_tensor *m, const cq_tensor *x, int groups, int block) {
    const int64_t R = cq_tensor_rows(x), C = cq_tensor_cols(x), cg = C / groups, nb = R / block;
    const double n = (double)(block * cg);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t g = 0; g < groups; g++) {
            double sum = 0.0, m2 = 0.0;
            for (int64_t r = b * block; r < (b + 1) * block; r++)
                for (int64_t c = g * cg; c < (g + 1) * cg; c++) sum += cq_ref_load(x, r * C + c);
            const double mean = sum / n;
            for (int64_t r = b * block; r < (b + 1) * block; r++)
                for (int64_t c = g * cg; c < (g + 1) * cg; c++) {
                    double d = cq_ref_load(x, r * C + c) - mean;
                    m2 += d * d;
                }
            cq_ref_store(m, b * 2 * groups + 2 * g, (float)mean);
            cq_ref_store(m, b * 2 * groups + 2 * g + 1, (float)m2);
        }
    return CQ_OK;
}

cq_status cq_ref_qk_norm_rope(cq_tensor *t, int n_heads, int head_dim, const cq_tensor *w, float eps,
                              const cq_tensor *cos_t, const cq_tensor *sin_t, cq_rope_mode mode, int rope_dim) {
    int64_t N = cq_tensor_rows(t), D = head_dim, rd = rope_dim ? rope_dim : head_dim, half = rd / 2;
    double *x = cq_mallocn((size_t)D, sizeof(double));
    if (!x) return CQ_ERR_NOMEM;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t h = 0; h < n_heads; h++) {
            int64_t o = (n * n_heads + h) * D;
            for (int64_t d = 0; d < D; d++) x[d] = cq_ref_load(t, o + d);
            if (w) {
                double ss = 0.0;
                for (int64_t d = 0; d < D; d++) ss += x[d] * x[d];
                double inv = 1.0 / sqrt(ss / (double)D + eps);
                /* Round the normed value to f32 as the model does before RoPE. */
                for (int64_t d = 0; d < D; d++) x[d] = (float)(x[d] * inv * cq_ref_load(w, d));
            }
            if (mode != CQ_ROPE_NONE) {
                for (int64_t i = 0; i < half; i++) {
                    double c = cq_ref_load(cos_t, n * half + i), s = cq_ref_load(sin_t, n * half + i);
                    int64_t i0 = mode == CQ_ROPE_INTERLEAVED ? 2 * i : i;
                    int64_t i1 = mode == CQ_ROPE_INTERLEAVED ? 2 * i + 1 : i + half;
                    double x0 = x[i0], x1 = x[i1];
                    x[i0] = x0 * c - x1 * s;
                    x[i1] = x0 * s + x1 * c;
                }
            }
            for (int64_t d = 0; d < D; d++) cq_ref_store(t, o + d, (float)x[d]);
        }
    }
    cq_free(x);
    return CQ_OK;
}

cq_status cq_ref_softmax(cq_tensor *y, const cq_tensor *x, float scale) {
    int64_t R = cq_tensor_rows(x), C = cq_tensor_cols(x);
    double s = scale != 0.0f ? scale : 1.0;
    double *row = cq_mallocn((size_t)C, sizeof(double));
    if (!row) return CQ_ERR_NOMEM;
    for (int64_t r = 0; r < R; r++) {
        double mx = -INFINITY, sum = 0.0;
        for (int64_t c = 0; c < C; c++) {
            row[c] = s * cq_ref_load(x, r * C + c);
            if (row[c] > mx) mx = row[c];
        }
        for (int64_t c = 0; c < C; c++) sum += row[c] = exp(row[c] - mx);
        for (int64_t c = 0; c < C; c++) cq_ref_store(y, r * C + c, (float)(row[c] / sum));
    }
    cq_free(row);
    return CQ_OK;
}
